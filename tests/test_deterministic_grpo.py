"""A seeded GRPO run is deterministic on one machine at a small size (issue 81): the demo's GRPO config (dynamic
sampling with re-draws, the CPU levers) on the 2-layer test model, twice, in two interpreters with different hash
seeds (set and dict orders of strings differ between them), gives byte-identical weights on the float32 path
(`--bf16 false`). At the demo's own size (SmolLM2-135M) float32 weights differ at the 1e-7 level between two runs:
docs/training.md ("Determinism") gives what was measured and what is not yet explained."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest
from conftest import ROOT, tree_env
from test_dynamic_sampling import restricted_vocab


@pytest.mark.slow
def test_two_seeded_grpo_runs_give_identical_weights(tiny_model, tmp_path):
    from safetensors.torch import load_file

    import synth

    rows = [r for r in synth.generate("freq_count", "en", 200, 1234, max_len=6) if r["answer"] in ("1", "2")][:24]
    data = tmp_path / "train.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    cfg = tmp_path / "grpo.yaml"  # the demo's GRPO config; the random model may only write '**', '1' and '2'
    cfg.write_text((ROOT / "recipes" / "configs" / "grpo_proof_cpu.yaml").read_text() + "generation_kwargs: "
                   + json.dumps(restricted_vocab(tiny_model, ["**", "1", "2"])) + "\n")  # JSON text, as TRL takes it
    args = [sys.executable, "recipes/grpo.py", "--config", str(cfg),
            "--model_name_or_path", str(tiny_model), "--train_data", str(data), "--num_train_examples", "24",
            "--max_steps", "2", "--save_strategy", "no", "--dynamic_sampling", "true",
            "--dynamic_sampling_max_rounds", "2", "--report_to", "none", "--learning_rate", "1e-3", "--bf16", "false",
            "--per_device_train_batch_size", "8", "--max_completion_length", "8"]
    outs = []
    # run 1 in a fresh interpreter with hash seed 1; run 2 forked from the suite's warm interpreter
    # (tests/warm_python.py), whose hash seed is random (PYTHONHASHSEED unset): not 1, but for a 1 in 2**32 chance
    for name, env in (("run1", tree_env(PYTHONHASHSEED="1")), ("run2", tree_env())):
        out = tmp_path / name
        res = subprocess.run([*args, "--output_dir", str(out)], cwd=ROOT, capture_output=True, text=True, timeout=900,
                             env=env)
        assert res.returncode == 0, res.stderr[-3000:]
        outs.append(out)
    one, two = ((o / "model.safetensors").read_bytes() for o in outs)
    assert one == two  # byte for byte
    logs = [json.loads(x) for x in (outs[0] / "metrics.jsonl").read_text().splitlines()]
    steps = [m for m in logs if "tase/dynamic/groups_kept" in m]
    assert len(steps) == 2 and sum(m["tase/dynamic/groups_kept"] for m in steps) > 0  # mixed groups trained
    assert sum(m["tase/dynamic/rounds"] for m in steps) > 0  # re-draws happened
    start, end = load_file(tiny_model / "model.safetensors"), load_file(outs[0] / "model.safetensors")
    assert any(not start[k].equal(end[k]) for k in start)  # the weights moved: the comparison can fail
