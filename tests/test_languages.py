"""The language catalogue (common/languages/): a language is one module plus one list entry.

A toy language (tests/toy_language.py, one module) is declared at test time, then rows of one task are generated
in it, scored through rewards/ and evaluated by the evaluator, end to end; no other file knows its code.
"""
from __future__ import annotations

import json

import pytest

from common.languages import LANGUAGES, LanguageError, codes, declare_language, language, undeclare_language
from tests import toy_language


@pytest.fixture
def toy():
    """The toy language in the catalogue for one test."""
    entry = declare_language(toy_language.LANGUAGE)
    try:
        yield entry
    finally:
        undeclare_language(entry.code)


def test_the_catalogue_lists_each_language_once_in_table_order():
    from common.record import LANG_OF_STEM, LANGS, YES

    assert codes() == LANGS == ("en", "zh", "ko")
    assert LANG_OF_STEM == {"english": "en", "en": "en", "chinese": "zh", "zh": "zh", "korean": "ko", "kor": "ko"}
    assert YES == {"en": "yes", "zh": "是", "ko": "예"}
    with pytest.raises(LanguageError, match="language 'zh' is already declared"):
        declare_language(language("zh"))
    assert codes() == ("en", "zh", "ko")


def test_every_task_names_its_languages_and_claims_no_new_one(toy):
    """A task offers the languages it names; a new language reaches only the task it brings prompts to."""
    from synth.core import available, combos

    for task, gen in available().items():
        assert gen.__dict__.get("langs") or gen.langs == ("mul",), task  # named in the module (or `mul`)
        assert "tx" not in gen.langs, task
    offered = {(t, s) for t, lang, s in combos("all", "all") if lang == "tx"}
    assert offered == {("sentence_length", "count"), ("sentence_length", "generate")}


def test_a_toy_language_is_generated_scored_and_evaluated(toy, tmp_path):
    import synth
    from eval.perturb import perturb
    from eval.runner import score_predictions
    from rewards import score
    from rewards.length import count_units
    from synth.gold import gold_completion

    assert "tx" in codes() and LANGUAGES["tx"] is toy
    rows = [r for sub in ("count", "generate")
            for r in synth.generate("sentence_length", "tx", 4, seed=5, subtask=sub, max_len=12)]
    assert [r["lang"] for r in rows] == ["tx"] * 8
    count, generate = rows[:4], rows[4:]
    assert all(r["prompt"].startswith("How many toy letters") and r["type"] == "NUMBER" for r in count)
    for r in count:  # the span is n letters of the toy's running text (separators kept, as the official cut)
        span = r["prompt"].split("‘", 1)[1].rsplit("’", 1)[0]
        assert len(toy.char_re.findall(span)) == int(r["answer"]) and 5 <= int(r["answer"]) <= 12
    assert all(r["type"] == "LENGTH" and r["meta"]["topic"] in toy.topics for r in generate)

    # rewards: the gold answer (LENGTH: the toy's filler letter n times) is right, counted by the toy's letters
    for r in rows:
        gold = gold_completion(r)
        assert score(r, gold).coarse == 1.0, (r["prompt"], gold)
    assert count_units("ა ბ,გდ word") == 4  # toy letters, not English words, once any is present
    wrong = {r["id"]: "<answer>999</answer>" for r in rows[::2]}

    # the evaluator, in-process on a JSONL: half right, and the toy language in the language table
    data, preds = tmp_path / "toy.jsonl", tmp_path / "preds.jsonl"
    data.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    preds.write_text("".join(json.dumps({"id": r["id"], "completion": wrong.get(r["id"]) or gold_completion(r)})
                             + "\n" for r in rows), encoding="utf-8")
    res = score_predictions(str(data), preds, tmp_path / "out")
    assert res["n"] == 8 and set(res["by_lang"]) == {"tx"}
    assert res["by_lang"]["tx"] == pytest.approx(50.0)  # percent

    # eval robustness: a kind the toy lists reaches its letters (the topic), one it does not list leaves them
    g = generate[0]
    spaced = perturb(g, "zero_width", seed=1, rate=1.0)
    assert spaced is not None and g["meta"]["topic"] not in spaced["prompt"]
    homo = perturb(g, "homoglyph", seed=1, rate=1.0)  # English words only
    assert homo is not None and g["meta"]["topic"] in homo["prompt"]


def test_no_library_module_keeps_its_own_language_table():
    """A tuple, list, set or dict of every catalogue language (`("en", "zh", "ko")`, `{"en": ..., "zh": ...,
    "ko": ...}`) is a copy of the catalogue: outside common/languages/ only the task modules, which name their
    languages and hold each one's wording (synth/tasks/, synth/structural/), may write one."""
    import ast

    from tests.conftest import ROOT

    every = set(codes())
    bad = []
    for pkg in ("common", "rewards", "synth", "eval", "recipes"):
        for path in sorted((ROOT / pkg).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            if rel.startswith(("common/languages/", "synth/tasks/", "synth/structural/")):
                continue
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                items = (node.keys if isinstance(node, ast.Dict) else node.elts
                         if isinstance(node, (ast.Tuple, ast.List, ast.Set)) else [])
                found = {x.value for x in items if isinstance(x, ast.Constant) and isinstance(x.value, str)}
                if every <= found:
                    bad.append(f"{rel}:{node.lineno}")
    assert not bad, "language tables outside common/languages/: " + ", ".join(bad)
