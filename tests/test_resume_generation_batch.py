"""Issue 80: a resume inside a generation batch. TRL 1.16 generates once per `steps_per_generation x num_iterations`
micro-batches and keeps the batch in memory only, so checkpoints fall on generation-batch boundaries
(recipes/grpo_core/generation_batch.py): a `save_steps` inside a batch is refused in one line (the dry run too), a
checkpoint inside one is refused on resume, and a run with `steps_per_generation 2`, `num_iterations 2`, guidance,
dynamic sampling and the curriculum killed with SIGKILL at every step and resumed ends with the uninterrupted run's
weights and guidance and curriculum states."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from killing import kill_when

from tests.conftest import ROOT, call_main, tree_env

STEPS = 4  # a generation batch ends every 2 steps (2 x 2 micro-batches, gradient accumulation 2): two batches


def args(model: Path, out: Path, save_steps: int, max_steps: int = STEPS) -> list[str]:
    return ["recipes/grpo.py", "--model_name_or_path", str(model), "--use_cpu", "true", "--bf16", "false", "--dtype",
            "float32", "--train_data", "synth", "--streaming", "true", "--tasks", "component_split", "--langs", "en",
            "--subtasks", "split", "--max_len", "8", "--curriculum", "true", "--guidance", "gold",
            "--dynamic_sampling", "true", "--dynamic_sampling_max_rounds", "1", "--output_dir", str(out),
            "--max_steps", str(max_steps), "--save_steps", str(save_steps), "--num_generations", "2",
            "--per_device_train_batch_size", "2", "--gradient_accumulation_steps", "2", "--steps_per_generation", "2",
            "--num_iterations", "2", "--max_completion_length", "48", "--logging_steps", "1", "--report_to", "none",
            "--learning_rate", "1e-3", "--seed", "0", "--gradient_checkpointing", "false",
            # a reward that varies within every group (the completions' lengths): each step moves the weights
            "--reward_funcs", "accuracy_fine", "tests.user_rewards:length_spread"]


def weights(out: Path) -> dict:
    from safetensors.torch import load_file

    return load_file(out / "model.safetensors")


def steps_logged(out: Path) -> list[int]:
    try:
        lines = (out / "metrics.jsonl").read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        return []
    return [json.loads(x)["step"] for x in lines if x.strip().endswith("}") and '"loss"' in x]


def test_a_save_steps_inside_a_generation_batch_is_refused_by_the_dry_run(tmp_path):
    code, err = call_main([*args(Path("default"), tmp_path / "o", 1), "--dry-run"])
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1, err[-2000:]
    assert lines[0] == ("error: save_steps 1 saves inside a generation batch: steps_per_generation 2 x num_iterations "
                        "2 (gradient_accumulation_steps 2): a generation batch ends every 2 steps, and a resume inside "
                        "one would train on other completions (docs/training.md); use a multiple of 2")
    code, err = call_main([*args(Path("default"), tmp_path / "o", 2), "--dry-run"])
    assert code == 0, err[-2000:]


def test_the_shipped_proof_configs_save_at_boundaries():
    """recipes/configs/proof_combine_long_cpu.yaml trains num_iterations 2 with checkpoints every 50 steps, and so do
    other proofs' arms: every arm of every shipped proof config (its options over grpo options over its recipe
    config) saves on generation-batch boundaries."""
    from recipes.grpo_core.generation_batch import period
    from recipes.proof_stages.config import arm_specs, load_config
    from recipes.shared.parser import read_yaml

    seen = 0
    for path in sorted((ROOT / "recipes" / "configs").glob("proof_*.yaml")):
        cfg = load_config(str(path))
        recipe = read_yaml(ROOT / cfg.grpo.config)
        for name, arm in arm_specs(cfg).items():
            opts = {**recipe, **arm.grpo_options(cfg)}
            shape = SimpleNamespace(gradient_accumulation_steps=int(opts.get("gradient_accumulation_steps", 1)),
                                    steps_per_generation=opts.get("steps_per_generation"),
                                    num_iterations=int(opts.get("num_iterations", 1)))
            p = period(shape)
            seen += p > 1
            assert int(opts.get("save_steps", 500)) % p == 0, (path.name, name, opts.get("save_steps"), p)
    assert seen  # num_iterations 2 arms were among them
    long = load_config(str(ROOT / "recipes" / "configs" / "proof_combine_long_cpu.yaml"))
    assert long.grpo.options["num_iterations"] == 2 and long.grpo.options["save_steps"] == 50


@pytest.mark.slow
def test_kill_at_every_step_then_resume_gives_the_uninterrupted_weights(tiny_model, tmp_path):
    import torch

    base = tmp_path / "base"
    # the uninterrupted run keeps its checkpoints' optimizer state (a finished run drops it by default), so that
    # one of them can stand for a checkpoint inside a batch below
    res = subprocess.run([sys.executable, *args(tiny_model, base, 2), "--keep_optimizer_state", "true"], cwd=ROOT,
                         env=tree_env(), capture_output=True, text=True, timeout=900)
    assert res.returncode == 0, res.stderr[-3000:]
    assert steps_logged(base) == [1, 2, 3, 4] and {p.name for p in base.glob("checkpoint-*")} == {"checkpoint-2",
                                                                                                "checkpoint-4"}
    want = weights(base)
    assert not torch.equal(want["model.norm.weight"], torch.ones_like(want["model.norm.weight"]))  # it trained
    for k in range(1, STEPS):
        out = tmp_path / f"kill{k}"
        cmd = [sys.executable, *args(tiny_model, out, 2)]
        kill_when(cmd, lambda k=k, out=out: k in steps_logged(out), env=tree_env())
        res = subprocess.run([*cmd, "--resume_from_checkpoint", "true"], cwd=ROOT, env=tree_env(),
                             capture_output=True, text=True, timeout=900)
        assert res.returncode == 0, res.stderr[-3000:]
        got = weights(out)
        assert got.keys() == want.keys()
        differ = [n for n in want if not torch.equal(want[n], got[n])]
        assert not differ, (k, differ, res.stderr[-1500:])
        for name in ("guidance.json", "curriculum.json"):  # the schedules too (guidance.json's step was off by one)
            assert json.loads((out / name).read_text()) == json.loads((base / name).read_text()), (k, name)
        shutil.rmtree(out)

    # a checkpoint inside a batch (a run's final save at an odd max_steps, resumed with more): one line, nothing changed
    odd = tmp_path / "odd"
    shutil.copytree(base / "checkpoint-2", odd / "checkpoint-3")
    state = json.loads((odd / "checkpoint-3" / "trainer_state.json").read_text())
    (odd / "checkpoint-3" / "trainer_state.json").write_text(json.dumps({**state, "global_step": 3}))
    shutil.copy(base / "metrics.jsonl", odd / "metrics.jsonl")
    before = (odd / "metrics.jsonl").read_bytes()
    res = subprocess.run([sys.executable, *args(tiny_model, odd, 2, 6), "--resume_from_checkpoint", "true"], cwd=ROOT,
                         env=tree_env(), capture_output=True, text=True, timeout=600)
    lines = [x for x in res.stderr.splitlines() if x.startswith("error:")]
    assert res.returncode == 2 and len(lines) == 1, res.stderr[-2000:]
    assert ("step 3 is inside a generation batch" in lines[0]
            and "resume from a checkpoint at a multiple of 2" in lines[0])
    assert (odd / "metrics.jsonl").read_bytes() == before
