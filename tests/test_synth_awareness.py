"""Every generated awareness example is checked by an independent oracle written here."""
import json
import re
import types
from collections import Counter
from itertools import islice

import pytest
from conftest import run_module

import common.record
import synth

N_PER_CELL = 60
CJK = re.compile(r"[\u4e00-\u9fff]")
HANGUL = re.compile(r"[\uac00-\ud7a3]")


def tokens_of(text: str, lang: str) -> list[str]:
    if lang == "zh":
        return CJK.findall(text)
    if lang == "ko":
        return HANGUL.findall(text)
    return text.split()


def records(task, lang, subtask=None, paraphrase=False, n=N_PER_CELL, seed=7):
    return list(synth.generate(task, lang, n, seed, subtask, paraphrase=paraphrase))


@pytest.mark.parametrize("paraphrase", [False, True])
@pytest.mark.parametrize("lang", ["en", "zh", "ko"])
def test_freq_count_counts(lang, paraphrase):
    for r in records("freq_count", lang, paraphrase=paraphrase):
        target = r["meta"]["target"]
        text = re.split(r"(?:Text|Passage|文本|文字|문장|글): ?|：", r["prompt"], maxsplit=2)[-1]
        toks = tokens_of(text, lang)
        assert f'{target}' in r["prompt"].split(text)[0]
        assert toks.count(target) == int(r["answer"]), r["id"]
        assert 1 <= int(r["answer"]) <= 10
        c = int(r["answer"])
        assert (c + 10 if lang == "ko" else 10 * c) <= len(toks) <= 500  # the official scripts' ranges
        assert r["type"] == "NUMBER"


def test_freq_count_counts_are_uniform():
    counts = Counter(int(r["answer"]) for r in synth.generate("freq_count", "zh", 2000, 3))
    assert set(counts) == set(range(1, 11))
    assert min(counts.values()) > 140  # 200 expected each


@pytest.mark.parametrize("lang", ["en", "zh", "ko"])
def test_sentence_length_count_and_generate(lang):
    for r in records("sentence_length", lang, "count", paraphrase=True):
        text = r["prompt"].split("'" if lang == "en" else "‘", 1)[1].rsplit("'" if lang == "en" else "’", 1)[0]
        assert len(tokens_of(text, lang)) == int(r["answer"])
        assert 5 <= int(r["answer"]) <= 254
    from synth.tasks.sentence_length import topics

    for r in records("sentence_length", lang, "generate", paraphrase=True):
        first_int = int(re.search(r"\d+", r["prompt"]).group())
        assert first_int == r["meta"]["target"] and 5 <= first_int <= 254
        assert r["meta"]["topic"] in r["prompt"] and r["meta"]["topic"] in topics()[lang]
        assert r["type"] == "LENGTH" and r["answer"] == ""


def test_topic_lists_are_aligned():
    from synth.tasks.sentence_length import topics

    t = topics()
    assert len(t["en"]) == len(t["zh"]) == len(t["ko"]) == 200
    assert t["en"][0] == "mountains" and t["zh"][0] == "山脉" and t["ko"][0] == "산"


@pytest.mark.parametrize("lang", ["en", "zh", "ko"])
def test_diff_tokens_answer_is_the_difference(lang):
    yes = {"en": "yes", "zh": "是", "ko": "예"}[lang]
    seen = Counter()
    for r in records("diff_tokens", lang, n=200, paraphrase=True):
        s1 = re.search(r"^seq1: (.*)$", r["prompt"], re.M).group(1)
        s2 = re.search(r"^seq2: (.*)$", r["prompt"], re.M).group(1)
        a, b = Counter(tokens_of(s1, lang)), Counter(tokens_of(s2, lang))
        extra, missing = b - a, a - b
        v = r["variation"]
        seen[v] += 1
        if v == "unchanged":
            assert a == b and r["answer"] == yes
        elif v == "add":
            assert not missing and list(extra.elements()) == [r["answer"]]
        elif v == "delete":
            assert not extra and list(missing.elements()) == [r["answer"]]
        else:
            assert v == "modify" and list(missing.elements()) == [r["answer"]]
            assert sum(extra.values()) == 1
        assert r["answer"] not in ({"yes", "no"} if lang == "en" else set()) or v == "unchanged"
    assert set(seen) == {"unchanged", "add", "delete", "modify"}
    assert min(seen.values()) > 30


@pytest.mark.parametrize("lang", ["en", "zh", "ko"])
def test_sort_lengths_answer_recomputed(lang):
    for r in records("sort_lengths", lang, paraphrase=True):
        lines = dict(re.findall(r"^([ABC]): (.*)$", r["prompt"], re.M))
        lens = {k: len(tokens_of(v, lang)) for k, v in lines.items()}
        assert len(set(lens.values())) == 3, "no ties"
        assert "".join(sorted(lens, key=lambda k: -lens[k])) == r["answer"]
        # official alternatives: n - d1 (- 1), n + d2 (+ 1) with d <= n // 10 + 1, two of them drawn
        assert max(lens.values()) - min(lens.values()) <= 2 * (max(lens.values()) // 10 + 1) + 2


def _independent_shuffle_ok(orig, shuf):
    if sorted(orig) != sorted(shuf):
        return False
    used, pos = set(), []
    for t in shuf:
        p = next(i for i, o in enumerate(orig) if o == t and i not in used)
        used.add(p)
        pos.append(p)
    return all(abs(x - y) != 1 for x, y in zip(pos, pos[1:], strict=False))


@pytest.mark.parametrize("lang", ["en", "zh", "ko"])
def test_shuffle_tokens_has_valid_solution(lang):
    for r in records("shuffle_tokens", lang, paraphrase=True):
        line = re.search(r"[:：]\s*([^\n\r]*)", r["prompt"]).group(1)  # what the official rule reads
        orig = tokens_of(line.lower(), lang)
        sol = tokens_of(r["meta"]["solution"].lower(), lang)
        assert len(orig) == r["meta"]["length"]
        assert _independent_shuffle_ok(orig, sol), r["id"]
        assert r["answer"] == "" and r["type"] == "SHUFFLE"


def test_record_shape_and_ids_are_unique():
    recs = list(synth.generate("all", "all", 400, 11))
    keys = {"id", "task", "subtask", "lang", "category", "type", "prompt", "answer", "variation", "meta"}
    assert all(set(r) == keys for r in recs)
    assert len({r["id"] for r in recs}) == len(recs)
    assert all(r["type"] in synth.TYPES for r in recs)
    cells = {(r["task"], r["lang"]) for r in recs if r["task"] in common.record.AWARENESS_TASKS}
    assert len(cells) == 15


def test_generate_streams_lazily():
    it = synth.generate("freq_count", "en", 10**6, 0)
    assert isinstance(it, types.GeneratorType)
    assert len(list(islice(it, 5))) == 5


def test_same_seed_same_example_independent_of_n():
    a = list(synth.generate("sort_lengths", "ko", 5, 42))
    b = list(islice(synth.generate("sort_lengths", "ko", 50, 42), 5))
    assert a == b
    c = list(synth.generate("sort_lengths", "ko", 5, 43))
    assert a != c


def test_cli_is_byte_identical_and_covers_all_cells(tmp_path):
    outs = []
    for name in ("a", "b"):
        p = tmp_path / f"{name}.jsonl"
        res = run_module(["synth", "--task", "all", "--lang", "all", "-n", "200", "--seed", "1", "--out", str(p)])
        assert res.returncode == 0, res.stderr
        outs.append(p.read_bytes())
    assert outs[0] == outs[1]
    recs = [json.loads(l) for l in outs[0].decode().splitlines()]
    assert len(recs) == 200
    cells = {(r["task"], r["lang"]) for r in recs}
    for t in common.record.AWARENESS_TASKS:
        for lang in ("en", "zh", "ko"):
            assert (t, lang) in cells


def test_cli_bad_arguments_are_one_line(tmp_path):
    for args in (["--task", "nope"], ["--lang", "fr"], ["--task", "freq_count", "--subtask", "zz"]):
        res = run_module(["synth", *args, "-n", "2", "--out", str(tmp_path / "x.jsonl")])
        assert res.returncode == 2
        assert res.stderr.count("\n") == 1 and res.stderr.startswith("error:"), res.stderr
        assert "Traceback" not in res.stderr


def test_contamination_guard_drops_benchmark_prompts(tmp_path):
    bench = tmp_path / "bench.jsonl"
    recs = list(synth.generate("freq_count", "en", 6, 5))
    # the benchmark copy differs only in spacing/case: normalisation must still catch it
    with bench.open("w") as f:
        for r in recs[:3]:
            r = dict(r, prompt="  " + r["prompt"].upper().replace(" ", "   "))
            f.write(json.dumps(r) + "\n")
    out = tmp_path / "out.jsonl"
    res = run_module(["synth", "--task", "freq_count", "--lang", "en", "-n", "6", "--seed", "5",
                      "--out", str(out), "--exclude", str(bench), "--no-progress"])
    assert res.returncode == 0, res.stderr
    assert "dropped 3 of 9" in res.stderr
    got = [json.loads(l) for l in out.read_text().splitlines()]
    assert len(got) == 6
    assert not {r["prompt"] for r in recs[:3]} & {r["prompt"] for r in got}


def test_mixture_weights(tmp_path):
    mix = tmp_path / "mix.yaml"
    mix.write_text("weights:\n  freq_count: 3\n  sort_lengths: 1\n")
    out = tmp_path / "m.jsonl"
    res = run_module(["synth", "--task", "all", "--lang", "en", "-n", "400", "--mixture", str(mix),
                      "--out", str(out), "--no-progress"])
    assert res.returncode == 0, res.stderr
    c = Counter(json.loads(l)["task"] for l in out.read_text().splitlines())
    assert set(c) == {"freq_count", "sort_lengths"}
    assert 2.2 < c["freq_count"] / c["sort_lengths"] < 4.0


def test_non_adjacent_order_paths_agree_with_oracle():
    """The three implementations of the REORD solver give the same order, every order passes the
    independent oracle, and on short lines the solver finds one whenever one exists (brute force)."""
    import itertools
    import random

    import numpy as np

    from synth.tasks._common import SpanOrders, non_adjacent_order, non_adjacent_order_ids

    rng = random.Random(0)
    found = 0
    for _ in range(400):
        n = rng.randint(0, 40)
        alphabet = "abcdefg"[: rng.randint(1, 7)]
        toks = [rng.choice(alphabet) for _ in range(n)]
        ids = np.array([ord(t) for t in toks], dtype=np.uint32)
        order = non_adjacent_order(toks)
        assert non_adjacent_order_ids(ids) == order
        if n:  # the same line as a whole corpus and as a span of a longer one
            assert _as_list(SpanOrders(ids).order(0, n)) == order
            pad = np.array([1000 + i for i in range(3)], dtype=np.uint32)
            assert _as_list(SpanOrders(np.concatenate([pad, ids, pad])).order(3, n)) == order
        if order is not None:
            found += 1
            assert sorted(order) == list(range(n))
            assert _independent_shuffle_ok(toks, [toks[i] for i in order])
        elif n <= 8:
            assert not any(_independent_shuffle_ok(toks, [toks[i] for i in p])
                           for p in itertools.permutations(range(n))), toks
    assert found > 250  # the constructions succeed on most inputs, not just trivially


def _as_list(order):
    return None if order is None else [int(i) for i in order]


@pytest.mark.parametrize("lang", ["en", "zh", "ko"])
def test_reord_solver_orders_every_corpus_span(lang):
    """No span is rejected (so none is redrawn and the lengths and spans are not biased): every sampled
    span of the corpus gets an order, checked by the independent oracle."""
    import random

    from synth.resources import corpus
    from synth.tasks.shuffle_tokens import spans

    corp, sp = corpus(lang), spans(lang)
    sep = " " if lang == "en" else ""
    rng = random.Random(1)
    for _ in range(300):
        n = rng.randint(5, 254)
        start = rng.randrange(len(corp) - n)
        order = sp.orders.order(start, n)
        assert order is not None, (start, n)
        toks = corp.tokens(start, n)
        assert _independent_shuffle_ok(toks, [toks[i] for i in order])
        assert sp.write(start, n, order) == sep.join(toks[i] for i in order)
        assert sp.line(start, n) == sep.join(toks)
