"""recipes/select_checkpoint.py: every saved model of a run evaluated on held-out rows, the choice by held-out
accuracy only (issue 41's longer run), with real `eval run` subprocesses on a tiny model."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT, call_main

from common.errors import TaseError
from recipes.select_checkpoint import candidates, choose


def test_committed_selections_in_the_former_file_read_as_the_one_shape(tmp_path, capsys):
    """docs/results keeps copies of select_checkpoint.py's former selection.json (never rewritten): each, read where a
    proof would find it, gives the same choice as best_checkpoint.json's fields (0-1 shares), with one deprecation
    line per file however often it is read."""
    from recipes.shared.best_checkpoint import read

    copies = sorted([*(ROOT / "docs" / "results").glob("*/selection/*.json"),
                     *(ROOT / "docs" / "results").glob("*/select_*.json")])
    assert len(copies) >= 6
    for i, f in enumerate(copies):
        old = json.loads(f.read_text())
        folder = tmp_path / f"select_{i}"
        folder.mkdir()
        shutil.copy(f, folder / "selection.json")
        rec, again = read(folder), read(folder)
        assert rec == again and (rec["step"], rec["path"]) == (old["chosen"]["step"], old["chosen"]["path"]), f
        assert rec["value"] == round(old["chosen"]["heldout"] / 100, 6) and rec["run"] == old["run"]
        assert [(e["step"], e["value"]) for e in rec["evaluations"]] == [
            (c["step"], round(c["heldout"] / 100, 6)) for c in old["candidates"]]
        assert rec["value"] == max(e["value"] for e in rec["evaluations"])
        assert rec["metric"] == "tase/heldout/" + ("strict_acc" if "strict" in old["rule"] else "official_acc")
        assert [line for line in capsys.readouterr().err.splitlines() if "deprecated" in line] == [
            f"{folder / 'selection.json'} is deprecated: select_checkpoint.py writes best_checkpoint.json (a 0-1 share "
            "under `value`) since issue 61 (the old file is read for one more release)"]


def test_choose_takes_the_best_and_the_earlier_of_equals():
    scores = [{"step": 50, "value": 0.3}, {"step": 100, "value": 0.415}, {"step": 150, "value": 0.415},
              {"step": 300, "value": 0.12}]
    assert choose(scores)["step"] == 100
    assert choose(list(reversed(scores)))["step"] == 100
    with pytest.raises(TaseError):
        choose([])


def _run(tmp: Path, model: Path, steps: list[int], final: int | None) -> Path:
    run = tmp / "run"
    for s in steps:
        shutil.copytree(model, run / f"checkpoint-{s}")
    (run / "checkpoint-7").mkdir()  # half-written (no weights): not a candidate
    torn = run / "checkpoint-9"  # a save cut short: the weights file shorter than its header says
    shutil.copytree(model, torn)
    with (torn / "model.safetensors").open("r+b") as f:
        f.truncate((torn / "model.safetensors").stat().st_size - 16)
    if final is not None:
        for f in model.iterdir():
            shutil.copy(f, run / f.name)
        (run / "trainer_state.json").write_text(json.dumps({"global_step": final}))
    return run


def test_candidates_by_step_final_included_once(tmp_path, tiny_model, capsys):
    run = _run(tmp_path, tiny_model, [10, 2], final=10)
    assert [(s, p.name) for s, p in candidates(run)] == [(2, "checkpoint-2"), (10, "checkpoint-10")]
    assert capsys.readouterr().err == "note: checkpoint-9 skipped: model.safetensors incomplete\n"
    (run / "trainer_state.json").write_text(json.dumps({"global_step": 12}))
    assert [s for s, _ in candidates(run)] == [2, 10, 12] and candidates(run)[-1][1] == run
    assert [s for s, _ in candidates(run, include_final=False)] == [2, 10]


def test_bad_input_is_one_line(tmp_path):
    held = tmp_path / "h.jsonl"
    held.write_text("{}\n")
    (tmp_path / "empty").mkdir()
    code, err = call_main(["recipes/select_checkpoint.py", str(tmp_path / "empty"), "--heldout", str(held)])
    assert code == 2 and err.strip().splitlines() == [f"error: {tmp_path / 'empty'}: no checkpoint-N folder with "
                                                      "whole safetensors weights and no final model"]
    (tmp_path / "empty" / "model.safetensors").write_bytes(b"\2" + b"\0" * 7 + b"{}")  # whole (empty); state torn
    (tmp_path / "empty" / "trainer_state.json").write_text("{")
    code, err = call_main(["recipes/select_checkpoint.py", str(tmp_path / "empty"), "--heldout", str(held)])
    assert code == 2 and err.strip() == f"error: {tmp_path / 'empty' / 'trainer_state.json'}: unreadable or without " \
                                        "global_step"
    code, err = call_main(["recipes/select_checkpoint.py", str(tmp_path), "--heldout", str(tmp_path / "nope.jsonl")])
    assert code == 2 and err.strip() == f"error: --heldout {tmp_path / 'nope.jsonl'}: no such file"


@pytest.mark.slow
def test_evaluates_every_checkpoint_and_records_the_choice(tmp_path, tiny_model):
    from synth.core import generate

    held = tmp_path / "heldout.jsonl"
    held.write_text("".join(json.dumps(r) + "\n" for r in generate("component_split", "en", 3, 5, "combine")))
    run = _run(tmp_path, tiny_model, [2], final=4)
    out = tmp_path / "sel"
    p = subprocess.run([sys.executable, "recipes/select_checkpoint.py", str(run), "--heldout", str(held), "--out",
                        str(out), "--backend", "hf", "--max-new-tokens", "4"], cwd=ROOT, capture_output=True,
                       text=True, timeout=600)
    assert p.returncode == 0, p.stderr[-2000:]
    assert not (out / "selection.json").exists()  # the former name (issue 61): one chosen-checkpoint file
    sel = json.loads((out / "best_checkpoint.json").read_text())
    from recipes.shared.best_checkpoint import problem

    assert problem(sel) is None  # the one chosen-checkpoint shape, a training run's too
    evals = sel["evaluations"]
    assert [c["step"] for c in evals] == [2, 4] and evals[1]["path"] == str(run)
    assert sel["metric"] == "tase/heldout/official_acc" and sel["heldout"] == str(held)  # the training log's name
    for c in evals:
        res = json.loads((out / f"step-{c['step']}" / "results.json").read_text())
        assert res["n"] == 3 and c["value"] == round(res["overall"] / 100, 6) and res["data"] == str(held)
        # the numbers evaluation during training logs (eval.headline), from the same samples: the same share
        assert c["headline"]["official_acc"] == c["value"] and c["headline"]["n"] == 3
    best = max(c["value"] for c in evals)
    assert sel["step"] == min(c["step"] for c in evals if c["value"] == best) and sel["value"] == best
    assert sel["path"] == next(c["path"] for c in evals if c["step"] == sel["step"])
    assert p.stdout.strip().splitlines()[-1].startswith(f"chosen: step {sel['step']} ({100 * best:.2f} held-out)")
    assert (out / "selection.md").read_text().count("| chosen |") == 1
    assert [l.split()[1] for l in p.stdout.splitlines() if l.startswith("== ")] == ["1/2", "2/2"]
    assert (out / "heldout_curve.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
