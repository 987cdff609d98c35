"""bench/strict_passk.py re-scores each stored sample with the strict verdict: pass@k from the unbiased estimator,
official and strict side by side, and one line with exit 2 for a folder that holds no sampled rows."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_strict_pass_at_k_counts_only_strict_samples(tmp_path, fixture_root):
    from rewards import score
    from synth.readers import load_data

    rows = [r for r in load_data(f"official:{fixture_root}") if r["task"] == "freq_count" and r["lang"] == "en"][:2]
    right = [f"<answer>{r['answer']}</answer>" for r in rows]
    wrong = "<answer>no idea</answer>"
    assert all(score(r, c).strict == 1.0 for r, c in zip(rows, right, strict=True))
    assert all(score(r, wrong).coarse == 0.0 for r in rows)
    # row 0: 1 right sample of 4; row 1: none
    lines = []
    for r, samples in ((rows[0], [right[0], wrong, wrong, wrong]), (rows[1], [wrong] * 4)):
        every = [{"completion": c, "coarse": score(r, c).coarse} for c in samples]
        lines.append({"id": r["id"], "valid": True, "samples": every})
    run = tmp_path / "passk" / "m"
    run.mkdir(parents=True)
    (run / "samples.jsonl").write_text("".join(json.dumps(l) + "\n" for l in lines), encoding="utf-8")
    cmd = [sys.executable, "bench/strict_passk.py", "--data", f"official:{fixture_root}"]
    res = subprocess.run([*cmd, str(run), "--out", str(tmp_path / "t.md")], capture_output=True, text=True, cwd=ROOT)
    assert res.returncode == 0, res.stderr
    row = next(l for l in res.stdout.splitlines() if l.startswith("| m |"))
    # strict pass@1 2 4, official pass@1 4: row 0 gives 1/4, 1/2, 1 of a right answer, row 1 gives 0
    assert row == "| m | 2 | 4 | 12.50 | 25.00 | 50.00 | 12.50 | 50.00 |", row
    assert (tmp_path / "t.md").read_text(encoding="utf-8") == res.stdout
    (run / "samples.jsonl").write_text(json.dumps({"id": rows[0]["id"], "valid": True}) + "\n", encoding="utf-8")
    bad = subprocess.run([*cmd, str(run)], capture_output=True, text=True, cwd=ROOT)
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1 and "several samples" in bad.stderr
