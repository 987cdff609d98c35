"""`eval robustness`: perturbations keep the gold answer valid (checked by the official scorer and by
answer oracles written here), change what a tokenizer sees, and the report measures relative drops."""
import json
import re
import unicodedata
from collections import Counter

import pytest
from conftest import FIXTURES

from eval.__main__ import main
from eval.perturb import KINDS, perturb
from eval.robustness import DATA, make_data, report
from eval.runner import score_predictions
from rewards import score
from synth.gold import GoldError, gold_completion
from synth.readers import load_official

ZW = "\u200b\u200c\u200d\u2060"


@pytest.fixture(scope="module")
def official():
    return list(load_official(FIXTURES))


@pytest.fixture(scope="module")
def perturbed(official):
    return {k: [(r, p) for r in official if (p := perturb(r, k, seed=3)) is not None] for k in KINDS}


def test_cli_help_lists_every_kind(capsys):
    with pytest.raises(SystemExit):
        main(["robustness", "make", "--help"])
    help_text = " ".join(capsys.readouterr().out.split())  # argparse wraps lines
    assert all(kind in help_text for kind in KINDS) and len(KINDS) >= 5, help_text


def test_every_kind_applies_and_changes_the_prompt(perturbed):
    for kind, pairs in perturbed.items():
        assert len(pairs) >= 10, kind
        for r, p in pairs:
            assert p["prompt"] != r["prompt"] and p["id"] == r["id"] and p["answer"] == r["answer"]
            assert p["meta"]["perturbation"] == kind and p["meta"]["canonical_prompt"] == r["prompt"]


def test_gold_completion_still_scores_under_the_official_scorer(perturbed):
    """The canonical row's correct completion stays correct on every perturbed row (REORD and LENOP
    generate read the prompt: their scorers re-parse the perturbed one)."""
    checked = 0
    for pairs in perturbed.values():
        for r, p in pairs:
            try:
                g = gold_completion(r)
            except GoldError:
                continue
            assert score(r, g).coarse == 1.0
            assert score(p, g).coarse == 1.0, (p["id"], p["prompt"][:120])
            checked += 1
    assert checked > 1000


# ---- answer oracles, recomputed from the (perturbed) prompt text ------------------------------------
def seen(s: str) -> str:
    """What a reader sees: compatibility forms folded (full-width, math styles, conjoining jamo), no
    zero-width characters."""
    return "".join(c for c in unicodedata.normalize("NFKC", s) if c not in ZW)


def units(text: str, lang: str) -> int:
    t = seen(text)
    if lang == "en":
        return len(t.split())
    return len(re.findall(r"[\u4e00-\u9fff]" if lang == "zh" else r"[\uac00-\ud7a3]", t))


def oracle(rec: dict) -> str | None:
    """The answer as recomputed from the prompt alone, for the tasks whose payload may be perturbed."""
    p, lang, task = rec["prompt"], rec["lang"], rec["task"]
    if task == "freq_count":
        m = re.fullmatch({  # the instruction may be perturbed: only the kept markers are matched
            "en": r'.*?"(.+?)".*?Text: (.*)',
            "zh": r".*?，(\S+) .*?文本：(.*)",
            "ko": r'.*?"(.+?)".*?문장: (.*)',
        }[lang], p, re.S)
        target, text = m.group(1), seen(m.group(2))
        return str(text.split().count(target) if lang == "en" else text.count(target))
    if task == "sentence_length" and rec["subtask"] == "count":
        body = re.search(r"[:：]\s*['‘](.*)['’]$", p, re.S).group(1)
        return str(units(body, lang))
    if task == "sort_lengths":
        lines = dict(re.findall(r"^([ABC]): (.*)$", p, re.M))
        return "".join(sorted("ABC", key=lambda k: -units(lines[k], lang)))
    if task == "component_count" and lang == "en":
        m = re.fullmatch(r'.*?"(.)"\s+\S+\s+\S+\s+(.*)\?', p)  # ... letter "i" appear in <payload>?
        return str(seen(m.group(2)).lower().count(m.group(1).lower()))
    if task == "diff_tokens":
        s1, s2 = re.findall(r"^seq[12]: (.*)$", p, re.M)
        split = str.split if lang == "en" else (lambda s: [c for c in s if not c.isspace()])
        return json.dumps([sorted(split(seen(s1))), sorted(split(seen(s2)))], ensure_ascii=False)
    return None


def test_payload_perturbations_keep_the_recomputed_answer(perturbed):
    """Where a kind may touch the payload, the oracle gives the same answer on the perturbed prompt as on
    the canonical one, and for the counting and sorting tasks that value is the official label."""
    compared = Counter()
    for kind, pairs in perturbed.items():
        for r, p in pairs:
            want = oracle(r)
            if want is None:
                continue
            if r["task"] != "diff_tokens":  # the oracle reproduces the official label on these rows
                assert want == r["answer"].strip(), r["id"]
            assert oracle(p) == want, (kind, p["prompt"][:160])
            compared[r["task"]] += p["prompt"] != r["prompt"]
    assert set(compared) >= {"freq_count", "sentence_length", "sort_lengths", "component_count", "diff_tokens"}


def test_instruction_only_tasks_keep_their_payload_verbatim(perturbed):
    """DOT bitmaps, riddle hints, homoglyph-restoration inputs, split/combine operands: untouched."""
    for pairs in perturbed.values():
        for r, p in pairs:
            if r["task"] == "dot_matrix":
                assert p["prompt"].endswith(r["prompt"].split("following", 1)[1])
            elif r["task"] == "variant_normalize":
                tail = r["prompt"].rsplit("\n", 1)[1] if "\n" in r["prompt"] else r["prompt"].split("：", 1)[1]
                assert p["prompt"].endswith(tail)
            elif r["task"] == "component_split":
                for q in re.findall(r"\{.*?\}|“.*?”|'.'|: .*", r["prompt"]):
                    assert q in p["prompt"]


def test_visual_kinds_look_the_same(perturbed):
    """Zero-width, full-width, math styles and NFD jamo fold back to the canonical prompt; Traditional
    converts back with OpenCC t2s; spacing only adds spaces; typos and case change letters only."""
    import opencc

    t2s = opencc.OpenCC("t2s")
    for kind in ("zero_width", "fullwidth", "math_style", "jamo"):
        for r, p in perturbed[kind]:
            assert seen(p["prompt"]) == seen(r["prompt"]) and p["prompt"] != r["prompt"]
    for r, p in perturbed["traditional"]:
        assert t2s.convert(p["prompt"]) == t2s.convert(r["prompt"]) and len(p["prompt"]) == len(r["prompt"])
    for r, p in perturbed["spacing"]:
        assert p["prompt"].replace(" ", "") == r["prompt"].replace(" ", "")
    for r, p in perturbed["case"]:
        assert p["prompt"].lower() == r["prompt"].lower()
    for r, p in perturbed["homoglyph"]:
        extra = [c for c in p["prompt"] if c not in r["prompt"]]
        assert extra and all(unicodedata.name(c).startswith(("CYRILLIC", "GREEK")) for c in extra)
    for r, p in perturbed["keyboard_typo"]:
        if r["lang"] == "en":
            assert (len(p["prompt"]) == len(r["prompt"])
                    and sum(a != b for a, b in zip(p["prompt"], r["prompt"], strict=False)) >= 1)


def test_deterministic_per_seed(official):
    r = next(x for x in official if x["task"] == "freq_count" and x["lang"] == "en")
    assert perturb(r, "homoglyph", 1) == perturb(r, "homoglyph", 1)
    assert any(perturb(r, "homoglyph", s)["prompt"] != perturb(r, "homoglyph", 1)["prompt"] for s in range(2, 6))


def test_counted_target_is_never_touched(perturbed):
    for pairs in perturbed.values():
        for r, p in pairs:
            if r["task"] == "freq_count" and r["lang"] == "en":
                t = re.search(r'"(.+?)"', r["prompt"]).group(1)
                assert p["prompt"].split().count(t) == r["prompt"].split().count(t)


def _predictions(tmp_path, rows, wrong_kind):
    """Gold completions, except rows of `wrong_kind`, which get a wrong answer."""
    path = tmp_path / f"preds_{wrong_kind}.jsonl"
    with path.open("w", encoding="utf-8") as f:
        for r in rows:
            try:
                g = gold_completion(r)
            except GoldError:
                continue
            if r["id"].endswith("@" + wrong_kind):
                g = "<answer>wrong</answer>"
            f.write(json.dumps({"id": r["id"], "completion": g}, ensure_ascii=False) + "\n")
    return path


def test_report_measures_drops_end_to_end(tmp_path):
    """make -> score (real scorer) -> report: a model wrong only on `case` rows drops 100% there and 0%
    elsewhere; a second model wrong on `homoglyph` differs from the first by the right signs."""
    man = make_data(f"official:{FIXTURES}", tmp_path / "d", ["case", "homoglyph", "spacing"], seed=0)
    assert man["kinds"]["case"]["n"] > 0 and man["n_canonical"] == 216
    rows = [json.loads(x) for x in (tmp_path / "d" / DATA).read_text(encoding="utf-8").splitlines()]
    assert len(rows) == man["n_canonical"] + sum(v["n"] for v in man["kinds"].values())
    runs = {}
    for name, wrong in (("base", "case"), ("tuned", "homoglyph")):
        score_predictions(str(tmp_path / "d" / DATA), _predictions(tmp_path, rows, wrong), tmp_path / name)
        runs[name] = [json.loads(x) for x in (tmp_path / name / "samples.jsonl").read_text().splitlines()]
    rep = report(runs, n_boot=200)
    k = rep["kinds"]
    assert k["case"]["base"]["drop_pct"] == 100.0 and k["case"]["tuned"]["drop_pct"] == 0.0
    assert k["spacing"]["base"]["drop_pct"] == 0.0 == k["spacing"]["tuned"]["drop_pct"]
    assert k["case"]["tuned"]["vs_base"]["delta_drop"] == -100.0
    assert k["homoglyph"]["tuned"]["vs_base"]["delta_drop"] == 100.0
    lo, hi = k["homoglyph"]["tuned"]["ci95"]
    assert lo == hi == 100.0


def test_report_interval_covers_a_partial_drop():
    samples = [{"id": f"r{i}", "task": "t", "coarse": 1.0, "valid": True} for i in range(40)]
    samples += [{"id": f"r{i}@case", "task": "t", "coarse": float(i % 4 != 0), "valid": True} for i in range(40)]
    rep = report({"m": samples}, n_boot=500)["kinds"]["case"]["m"]
    assert rep["drop_pct"] == 25.0 and rep["ci95"][0] < 25.0 < rep["ci95"][1] and rep["ci95"][0] > 0


def test_cli(tmp_path, capsys):
    assert main(["robustness", "make", "--data", f"official:{FIXTURES}", "--kinds", "case,jamo",
                 "--out", str(tmp_path / "d")]) == 0
    assert "case" in capsys.readouterr().out
    assert main(["robustness", "make", "--data", f"official:{FIXTURES}", "--kinds", "nope",
                 "--out", str(tmp_path / "e")]) == 2
    assert "unknown perturbation kind" in capsys.readouterr().err
    (tmp_path / "empty").mkdir()
    assert main(["robustness", "report", str(tmp_path / "empty"), "--out", str(tmp_path / "r")]) == 2
    assert capsys.readouterr().err.startswith("error:")


def test_robustness_run_hands_eval_run_its_own_defaults_and_the_generation_options():
    """`robustness run` builds its inner `eval run` from `eval run`'s parser (eval/_cli/robustness.inner_run_args):
    every option `eval run` reads is there with its default (all rows, one greedy sample), the generation and backend
    options are this command's, and the data and output are the made set and OUT/run."""
    import argparse

    from eval._cli import robustness, run

    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="cmd")
    robustness.register(sub, argparse.HelpFormatter)
    args = parser.parse_args(["robustness", "run", "--data", "official:x", "--out", "o", "--limit", "5", "--model",
                              "m", "--backend", "hf", "--max-new-tokens", "7", "--temperature", "0.5", "--seed", "3"])
    inner = robustness.inner_run_args(args, data="o/robustness_data.jsonl", out="o/run")
    own = argparse.ArgumentParser()
    run.register(own.add_subparsers(dest="cmd"), argparse.HelpFormatter)
    want = vars(own.parse_args(["run", "--data", "d", "--out", "r"]))
    assert set(vars(inner)) == set(want)
    assert (inner.data, inner.out, inner.limit, inner.select, inner.tasks, inner.files, inner.num_samples,
            inner.cot) == ("o/robustness_data.jsonl", "o/run", None, None, None, None, 1, False)
    assert (inner.model, inner.backend, inner.max_new_tokens, inner.temperature, inner.seed) == ("m", "hf", 7, 0.5, 3)
    assert inner.execute is run.execute
