"""pass@k in `eval`: the unbiased estimator, its tables in results.json (run and score) and in `eval compare`,
and `eval run --num-samples K` on the real model (hf; vLLM in tests/test_vllm.py)."""
from __future__ import annotations

import itertools
import json
import random
import sys
from math import comb

import pytest
from conftest import ROOT, run_module

from eval.aggregate import pass_at_k_estimate


def brute_pass_at_k(outcomes: list[int], k: int) -> float:
    """pass@k by definition: the share of the k-subsets of the n samples holding at least one correct one."""
    subsets = list(itertools.combinations(outcomes, k))
    return sum(any(s) for s in subsets) / len(subsets)


def test_estimator_matches_its_definition_and_the_closed_form():
    rng = random.Random(0)
    for _ in range(200):
        n = rng.randint(1, 10)
        c = rng.randint(0, n)
        k = rng.randint(1, n)
        outcomes = [1] * c + [0] * (n - c)
        est = pass_at_k_estimate(n, c, k)
        assert est == pytest.approx(brute_pass_at_k(outcomes, k), abs=1e-12)
        assert est == pytest.approx(1 - comb(n - c, k) / comb(n, k), abs=1e-12)
    assert pass_at_k_estimate(8, 1, 1) == 0.125 and pass_at_k_estimate(8, 0, 8) == 0.0
    assert pass_at_k_estimate(8, 1, 8) == 1.0
    assert pass_at_k_estimate(200, 3, 100) == pytest.approx(1 - comb(197, 100) / comb(200, 100))  # no overflow
    with pytest.raises(ValueError):
        pass_at_k_estimate(4, 1, 5)


def test_score_and_compare_report_pass_at_k(fixture_root, tmp_path):
    """`eval score` reads k completions per row (`completions`), keeps them all in samples.jsonl and reports
    pass@1 / pass@k per file, task and language; pass@1 is the mean per-sample accuracy, not the first
    sample's; `eval compare` prints the pass@k table."""
    from synth.readers import load_data

    rows = [r for r in load_data(f"official:{fixture_root}") if r["task"] == "variant_normalize"]
    assert len({r["meta"]["file"] for r in rows}) == 3
    k = 4
    preds, expect_p1, expect_pk = [], {}, {}
    for i, r in enumerate(rows):
        c = i % (k + 1)  # 0..4 correct of 4: every count appears in every file
        # first: wrong unless c = k
        comps = ["<answer>nope</answer>"] * (k - c) + [f"<answer>{r['answer']}</answer>"] * c
        preds.append({"id": r["id"], "completions": comps})
        f = r["meta"]["file"]
        expect_p1.setdefault(f, []).append(c / k)
        expect_pk.setdefault(f, []).append(float(c > 0))
    p = tmp_path / "preds.jsonl"
    p.write_text("".join(json.dumps(x, ensure_ascii=False) + "\n" for x in preds), encoding="utf-8")
    res = run_module(["eval", "score", "--data", f"official:{fixture_root}", "--predictions", str(p),
                      "--out", str(tmp_path / "s")])
    assert res.returncode == 0, res.stderr
    assert "pass@1" in res.stdout and f"pass@{k}" in res.stdout
    out = json.loads((tmp_path / "s" / "results.json").read_text())
    pk = out["pass_at_k"]
    assert pk["k"] == k and pk["ks"] == [1, 2, 4]
    for f, v in expect_p1.items():
        assert pk["by_file"][f]["pass@1"] == pytest.approx(100 * sum(v) / len(v), abs=0.01)
        assert pk["by_file"][f][f"pass@{k}"] == pytest.approx(100 * sum(expect_pk[f]) / len(v), abs=0.01)
        mixed = [0 < x < 1 for x in v]
        assert pk["by_file"][f]["mixed"] == pytest.approx(100 * sum(mixed) / len(mixed), abs=0.01)
    files = list(expect_p1)
    assert pk["pass@1"]["by_task"]["VAR"] == pytest.approx(
        sum(pk["by_file"][f]["pass@1"] for f in files) / 3, abs=0.02)
    assert pk["pass@1"]["overall"] == pk["pass@1"]["by_task"]["VAR"]  # the only task
    assert pk[f"pass@{k}"]["overall"] > pk["pass@2"]["overall"] > pk["pass@1"]["overall"]
    # the plain accuracy is the first sample's (wrong unless all 4 are right): 1 row in 5
    assert out["overall"] < pk["pass@1"]["overall"]
    lines = [json.loads(x) for x in (tmp_path / "s" / "samples.jsonl").read_text().splitlines()]
    assert all(len(s["samples"]) == k and s["completion"] == s["samples"][0]["completion"] for s in lines)
    assert sum(s["n_correct"] for s in lines) == sum(i % (k + 1) for i in range(len(rows)))
    # a plain (one completion) scoring of the same rows has no pass@k; compare shows the table of the sampled run
    p1 = tmp_path / "one.jsonl"
    p1.write_text("".join(json.dumps({"id": x["id"], "completion": x["completions"][0]}) + "\n" for x in preds))
    assert run_module(["eval", "score", "--data", f"official:{fixture_root}", "--predictions", str(p1),
                       "--out", str(tmp_path / "one")]).returncode == 0
    assert "pass_at_k" not in json.loads((tmp_path / "one" / "results.json").read_text())
    cmp = run_module(["eval", "compare", str(tmp_path / "one"), str(tmp_path / "s"), "--out", str(tmp_path / "c"),
                      "--n-boot", "50"])
    assert cmp.returncode == 0, cmp.stderr
    assert "## pass@k" in cmp.stdout
    row = next(x for x in cmp.stdout.splitlines() if x.startswith("| s | overall (macro)"))
    assert f"| {pk['pass@1']['overall']:.2f} | {pk[f'pass@{k}']['overall']:.2f} |" in row
    assert json.loads((tmp_path / "c" / "comparison.json").read_text())["pass_at_k"]["s"]["k"] == k
    # bad `completions`: one line, exit 2
    for value in ([], "abc", [1, 2]):
        p.write_text(json.dumps({"id": rows[0]["id"], "completions": value}) + "\n")
        bad = run_module(["eval", "score", "--data", f"official:{fixture_root}", "--predictions", str(p),
                          "--out", str(tmp_path / "bad")])
        assert bad.returncode == 2 and "non-empty list of strings" in bad.stderr and bad.stderr.count("\n") == 1


def test_num_samples_needs_sampling_and_no_openai(fixture_root, tmp_path):
    base = ["eval", "run", "--model", "default", "--data", f"official:{fixture_root}", "--out", str(tmp_path / "o")]
    greedy = run_module([*base, "--backend", "hf", "--num-samples", "4"])
    assert greedy.returncode == 2 and "needs --temperature > 0" in greedy.stderr
    assert greedy.stderr.count("\n") == 1 and not (tmp_path / "o").exists()
    api = run_module([*base, "--backend", "openai", "--base-url", "http://127.0.0.1:9/v1", "--model-name", "m",
                      "--num-samples", "4", "--temperature", "1"])
    assert api.returncode == 2 and "not supported with --backend openai" in api.stderr
    zero = run_module([*base, "--backend", "hf", "--num-samples", "0"])
    assert zero.returncode == 2 and "--num-samples" in zero.stderr


@pytest.mark.slow
def test_hf_num_samples_real_model_resumes(fixture_root, tmp_path, default_model):
    """Real SmolLM2, hf backend: K samples per row at temperature 1 (num_return_sequences), all kept, pass@k in
    results.json; rerunning resumes without generating; another K into the same folder is refused."""
    import subprocess

    from synth.readers import load_data

    rows = sorted((r for r in load_data(f"official:{fixture_root}") if r["answer"]), key=lambda r: len(r["prompt"]))[:3]
    data = tmp_path / "rows.jsonl"
    data.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    out = tmp_path / "run"
    cmd = [sys.executable, "-m", "eval", "run", "--model", "default", "--data", str(data), "--out", str(out),
           "--backend", "hf", "--batch-size", "2", "--max-new-tokens", "8", "--temperature", "1", "--num-samples", "3",
           "--threads", "1"]
    res = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr
    lines = [json.loads(x) for x in (out / "samples.jsonl").read_text().splitlines()]
    assert len(lines) == 3 and all(len(s["samples"]) == 3 for s in lines)
    assert all(all(isinstance(e["completion"], str) for e in s["samples"]) for s in lines)
    # sampling at T=1: some row's three completions are not all the same text
    assert any(len({e["completion"] for e in s["samples"]}) > 1 for s in lines)
    result = json.loads((out / "results.json").read_text())
    assert result["pass_at_k"]["k"] == 3 and result["generation"]["num_samples"] == 3
    before = (out / "samples.jsonl").read_bytes()
    again = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert again.returncode == 0 and (out / "samples.jsonl").read_bytes() == before
    other = subprocess.run([*cmd[:-4], "--num-samples", "2", "--threads", "1"], cwd=ROOT, capture_output=True,
                           text=True, timeout=600)
    assert other.returncode == 2 and "different num_samples (3 -> 2)" in other.stderr


def test_strict_pass_at_k_leaves_out_loophole_samples(tmp_path):
    """Each of the k samples stores its strict verdict; results.json has pass@k on the official verdict (a loophole
    counts) and strict_pass_at_k without the loopholes; `eval score` prints both and `eval compare` shows both.
    A sampled file written before `strict` was stored per sample gets no strict table (not zeros)."""
    import synth
    from rewards import score

    rows = [r for r in synth.generate("component_split", "en", 40, 5, max_len=6) if r["type"] == "SPLIT"][:4]
    assert len(rows) == 4
    data = tmp_path / "rows.jsonl"
    data.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    right = [f"<answer>{r['answer'].split(';')[0]}</answer>" for r in rows]
    unsplit = [f"<answer>{r['answer'].split(';')[0].replace(',', '').replace(' ', '')}</answer>" for r in rows]
    wrong = "<answer>no idea</answer>"
    for r, ok, hole in zip(rows, right, unsplit, strict=True):  # the unsplit word: an official pass, not a strict one
        assert score(r, ok).strict == 1.0 and (score(r, hole).coarse, score(r, hole).strict) == (1.0, 0.0)
    # row 0: 1 right + 1 loophole of 4; rows 1-3: a loophole and 3 wrong
    comps = [[right[0], unsplit[0], wrong, wrong]] + [[unsplit[i], wrong, wrong, wrong] for i in range(1, 4)]
    preds = tmp_path / "preds.jsonl"
    preds.write_text("".join(json.dumps({"id": r["id"], "completions": c}) + "\n" for r, c in zip(rows, comps,
                                                                                                 strict=True)))
    res = run_module(["eval", "score", "--data", str(data), "--predictions", str(preds), "--out", str(tmp_path / "s")])
    assert res.returncode == 0, res.stderr
    out = json.loads((tmp_path / "s" / "results.json").read_text())
    official, strict = out["pass_at_k"], out["strict_pass_at_k"]
    assert official["pass@1"]["overall"] == pytest.approx(100 * (2 / 4 + 3 * 1 / 4) / 4, abs=0.01)  # 31.25
    assert official["pass@4"]["overall"] == 100.0
    assert strict["pass@1"]["overall"] == pytest.approx(100 * (1 / 4) / 4, abs=0.01)  # 6.25: row 0's one right sample
    assert strict["pass@4"]["overall"] == 25.0
    assert "strict pass@1 6.25 | strict pass@4 25.00" in res.stdout
    lines = [json.loads(x) for x in (tmp_path / "s" / "samples.jsonl").read_text().splitlines()]
    assert [e["strict"] for e in lines[0]["samples"]] == [1.0, 0.0, 0.0, 0.0]
    one = tmp_path / "one.jsonl"  # the first samples, scored alone: no pass@k of its own
    one.write_text("".join(json.dumps({"id": r["id"], "completion": c[0]}) + "\n" for r, c in zip(rows, comps,
                                                                                                  strict=True)))
    assert run_module(["eval", "score", "--data", str(data), "--predictions", str(one), "--out",
                       str(tmp_path / "one")]).returncode == 0
    cmp = run_module(["eval", "compare", str(tmp_path / "one"), str(tmp_path / "s"), "--out", str(tmp_path / "c"),
                      "--n-boot", "20"])
    assert cmp.returncode == 0, cmp.stderr
    row = next(x for x in cmp.stdout.splitlines() if x.startswith("| s | overall (macro)"))
    assert row.endswith("| 31.25 | 100.00 | +68.75 | – | 6.25 | 25.00 |"), row
    # samples written before `strict` was stored per sample: the official table only, no strict zeros
    from eval.aggregate import pass_at

    stale = [{**s, "samples": [{k: v for k, v in e.items() if k != "strict"} for e in s["samples"]]} for s in lines]
    assert pass_at(stale)["pass@1"]["overall"] == official["pass@1"]["overall"] and pass_at(stale, key="strict") is None
