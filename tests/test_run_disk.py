"""Small runs stay small on disk, and resume stays exact (issue 81).

A finished GRPO run removes its checkpoints' optimizer state (marked WEIGHTS_ONLY) and keeps the final weights once
(the newest checkpoint's identical files are hard links to the final model's); a run that has not finished keeps
everything an exact resume needs. Measured on SmolLM2-135M, 2 CPU steps (the size of the docs' run: batch 2,
2 generations of 8 tokens, save_steps 2): BEFORE bytes before this change (final float32 weights, the checkpoint's
copy of them and its optimizer.pt), 541,666,989 now (25.1%).
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT
from killing import checkpoint_whole, kill_when

PY = sys.executable
TINY_ARGS = ["--use_cpu", "true", "--bf16", "false", "--dtype", "float32", "--tasks", "sort_lengths", "freq_count",
             "--langs", "en", "--max_len", "6", "--num_train_examples", "16", "--num_generations", "2",
             "--per_device_train_batch_size", "4", "--max_completion_length", "8", "--logging_steps", "1",
             "--report_to", "none", "--learning_rate", "1e-3", "--seed", "0", "--gradient_checkpointing", "false"]
BEFORE = 2_159_631_362  # bytes (du -sb) the 2-step SmolLM2-135M run below wrote at f1c077f


def run(cmd: list[str], timeout: int = 900) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=timeout)


def tensors(path: Path) -> dict:
    from safetensors.torch import load_file

    return load_file(path)


@pytest.mark.slow
def test_finished_run_drops_optimizer_state_and_a_killed_run_resumes_exactly(tiny_model, tmp_path):
    import torch

    from recipes.shared.run_dir import WEIGHTS_ONLY, checkpoint_problem, disk_bytes

    def cmd(out: Path) -> list[str]:
        return [PY, "recipes/grpo.py", "--model_name_or_path", str(tiny_model), "--output_dir", str(out),
                "--max_steps", "3", "--save_steps", "1", *TINY_ARGS]

    straight = tmp_path / "straight"
    res = run(cmd(straight))
    assert res.returncode == 0, res.stderr[-3000:]
    line = [x for x in res.stdout.splitlines() if x.startswith(f"wrote {straight}: ")]
    assert line and "shared with checkpoint-3 (hard links)" in line[0], res.stdout[-2000:]
    assert "optimizer state removed from checkpoint-1, checkpoint-2, checkpoint-3" in line[0]
    for n in (1, 2, 3):
        ck = straight / f"checkpoint-{n}"
        assert not (ck / "optimizer.pt").exists() and (ck / WEIGHTS_ONLY).is_file()
        assert checkpoint_problem(ck, weights_only_ok=True) is None  # whole: export and select_checkpoint read it
    assert (straight / "checkpoint-3" / "model.safetensors").samefile(straight / "model.safetensors")
    apparent = sum(p.stat().st_size for p in straight.rglob("*") if p.is_file())
    weights = (straight / "model.safetensors").stat().st_size
    assert disk_bytes(straight) <= apparent - weights  # the final weights once

    # the same run killed after its first checkpoint keeps the optimizer state, and resumes to the same weights
    killed = tmp_path / "killed"
    kill_when(cmd(killed), checkpoint_whole(killed / "checkpoint-1"))
    assert not (killed / "trainer_state.json").exists(), "the run finished before the kill"
    assert all((c / "optimizer.pt").is_file() and not (c / WEIGHTS_ONLY).exists()
               for c in killed.glob("checkpoint-*") if checkpoint_problem(c) is None)
    res = run([*cmd(killed), "--resume_from_checkpoint", "true", "--keep_optimizer_state", "true"])
    assert res.returncode == 0, res.stderr[-3000:]
    a, b = tensors(straight / "model.safetensors"), tensors(killed / "model.safetensors")
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a), "resumed weights differ"
    assert all((killed / f"checkpoint-{n}" / "optimizer.pt").is_file() for n in (2, 3))  # --keep_optimizer_state
    assert "optimizer state removed" not in res.stdout

    # training the finished run on is refused in one line; its weights-only checkpoints stay where they are
    res = run([*cmd(straight), "--max_steps", "4", "--resume_from_checkpoint", "true"])  # the later --max_steps wins
    assert res.returncode == 2 and "its checkpoints hold weights only" in res.stderr, res.stderr[-2000:]
    assert "Traceback" not in res.stderr and not list(straight.glob("checkpoint-*.incomplete*"))
    # its final model deleted, the run is not silently trained again from step 0 over its weights-only checkpoints
    (straight / "model.safetensors").unlink()
    res = run([*cmd(straight), "--resume_from_checkpoint", "true"])
    assert res.returncode == 2 and "but its final model is gone" in res.stderr, res.stderr[-2000:]
    assert (straight / "checkpoint-3" / "model.safetensors").is_file()


@pytest.mark.slow
def test_two_step_run_of_the_default_model_writes_a_quarter(tmp_path, default_model):
    """The 2-step CPU GRPO run of SmolLM2-135M (the docs' sizes): its float32 final weights once, one tokenizer, no
    optimizer state: 541.7 MB of 2,159.6 MB before (25.1%). That is the floor while the final model stays float32,
    the dtype it trained in (bf16 weights would round away a 2-step run's updates: docs/training.md, "Resume")."""
    from recipes.shared.run_dir import disk_bytes

    out = tmp_path / "run"
    res = run([PY, "recipes/grpo.py", "--config", "recipes/configs/grpo_smollm2_cpu.yaml", "--output_dir", str(out),
               "--max_steps", "2", "--save_steps", "2", "--per_device_train_batch_size", "2", "--num_generations", "2",
               "--max_completion_length", "8", "--num_train_examples", "8", "--report_to", "none"])
    assert res.returncode == 0, res.stderr[-3000:]
    written = disk_bytes(out)
    weights, tokenizer = (out / "model.safetensors").stat().st_size, (out / "tokenizer.json").stat().st_size
    assert written <= weights + tokenizer + 1_000_000, f"{written} bytes on disk: more than the final model once"
    assert written < 0.26 * BEFORE, f"{written} bytes on disk of {BEFORE} before"
    assert not list(out.rglob("optimizer.pt"))
    assert json.loads((out / "config.json").read_text())["dtype"] == "float32"  # the dtype it trained in
    assert f"wrote {out}: {written / 1e6:.1f} MB on disk; final model" in res.stdout
