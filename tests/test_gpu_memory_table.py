"""The CPU side of the GPU memory table (bench/gpu_memory_table.py, issue 52): the plan of the four Qwen2.5 shapes
(parameter counts equal to the models transformers builds, DeepSpeed's estimates as the recipe's dry run prints
them, optimizer offload only where the estimate does not fit), its JSON, bad input in one line, and the CPU
rehearsal: a tiny model made by the same maker, the recipe's 2 steps through bench/grpo_step.py's child, one row
of the table written. The GPU rows wait for a lent GPU (docs/benchmarks.md)."""
from __future__ import annotations

import importlib.util
import json

import pytest
from conftest import ROOT

_spec = importlib.util.spec_from_file_location("gpu_memory_table", ROOT / "bench" / "gpu_memory_table.py")
table = importlib.util.module_from_spec(_spec)  # bench/ is no package: loaded from its file
_spec.loader.exec_module(table)
_gs = importlib.util.spec_from_file_location("gpu_smoke", ROOT / "bench" / "gpu_smoke.py")
gpu_smoke = importlib.util.module_from_spec(_gs)
_gs.loader.exec_module(gpu_smoke)


@pytest.fixture(scope="module")
def prep(tmp_path_factory):
    """A prepared folder as bench/gpu_smoke.sh --prepare --assets-only writes it (tokenizer, data), small."""
    out = tmp_path_factory.mktemp("prep")
    gpu_smoke.make_assets(out, rows=32, tasks=("sort_lengths",), langs=("en",))
    return out


def test_plan_counts_estimates_and_offload(prep, tmp_path, capsys):
    import torch
    from transformers import AutoModelForCausalLM

    assert table.main(["--prep", str(prep), "--dry-run", "--out", str(tmp_path)]) == 0
    doc = json.loads((tmp_path / "gpu_memory_table.json").read_text())
    rows = {r["shape"]: r for r in doc["rows"]}
    assert doc["mode"] == "dry-run" and list(rows) == ["0.5B", "1.5B", "3B", "7B"]
    for shape, r in rows.items():  # the formula = what transformers builds (meta device: no memory)
        with torch.device("meta"):
            m = AutoModelForCausalLM.from_config(table.qwen_config(shape, prep / "model"))
        assert r["params"] == sum(p.numel() for p in m.parameters()), shape
    assert round(rows["0.5B"]["params"] / 1e9, 3) == 0.402 and round(rows["3B"]["params"] / 1e9, 3) == 2.875
    if importlib.util.find_spec("deepspeed"):  # the probe: 6.90 and 48.58 GB with no offload
        assert round(rows["0.5B"]["ds_estimate_gib"], 2) == 6.90 and round(rows["3B"]["ds_estimate_gib"], 2) == 48.58
        assert [r["optimizer_offload"] for r in rows.values()] == [False, False, False, True]  # at 80 GiB
        assert rows["7B"]["ds_estimate_offload_gib"] < 0.85 * 80 < rows["7B"]["ds_estimate_gib"]
    out = capsys.readouterr().out
    assert "optimizer offload" in out
    if not table.gpu_info():  # a CPU-only machine says whose GPU the per-GPU figures are for
        assert ("no CUDA GPU here: the per-GPU figures assume an 80 GiB GPU" in out
                and doc["gpu_memory_gib_assumed"] == 80)
    if importlib.util.find_spec("deepspeed"):  # offload must fit the host: 7B's needs 153.7 GiB, over a 125 GiB host
        planned = {r["shape"]: r for r in table.plan(["3B", "7B"], prep / "model", 80.0, False, "auto", 125.0)}
        assert planned["3B"]["status"] == "planned" and round(planned["7B"]["ds_estimate_offload_host_gib"], 1) == 153.7
        assert (planned["7B"]["status"].startswith("skipped: does not fit")
                and "153.7 GiB of host" in planned["7B"]["status"])
        forced = table.plan(["0.5B"], prep / "model", 140.0, False, "always", 125.0)[0]
        assert forced["optimizer_offload"] and forced["status"] == "planned"
        assert not table.plan(["7B"], prep / "model", 80.0, False, "never", 125.0)[0]["optimizer_offload"]
    acc = table.accelerate_config(tmp_path, offload=True).read_text()
    ds = json.loads((tmp_path / "ds_offload.json").read_text())
    assert "ds_offload.json" in acc and ds["zero_optimization"]["offload_optimizer"]["device"] == "cpu"
    with pytest.raises(SystemExit) as e:  # the help renders (a bare % in an option's help once broke it)
        table.main(["--help"])
    assert e.value.code == 0 and "exceeds 85% of the GPU" in " ".join(capsys.readouterr().out.split())
    with pytest.raises(SystemExit) as e:
        table.main(["--prep", str(prep), "--dry-run", "--shapes", "13B"])
    assert e.value.code == 2 and "unknown 13B" in capsys.readouterr().err
    with pytest.raises(SystemExit) as e:
        table.main(["--prep", str(tmp_path / "none")])
    assert e.value.code == 2 and "no prepared tokenizer" in capsys.readouterr().err


@pytest.mark.slow  # one recipe start (TRL import) and 2 tiny steps: ~30 s on 2 cores
def test_cpu_rehearsal_runs_the_row_and_writes_it(prep, tmp_path):
    code = table.main(["--prep", str(prep), "--cpu-rehearsal", "--out", str(tmp_path), "--work", str(tmp_path / "w")])
    doc = json.loads((tmp_path / "gpu_memory_table.json").read_text())
    (row,) = doc["rows"]
    assert code == 0, row
    assert row["shape"] == "tiny" and row["status"] == "ok" and row["params"] == row["params_built"]
    assert len(row["step_seconds_all"]) == 2 and row["step_s"] > 0 and row["generated_tokens"] > 0
    assert row["generated_tok_per_s"] > 0 and "bench/grpo_step.py --child hf" in row["command"]
    assert "ZeRO-3 estimator" in row["dry_run_estimate"] or "estimate" in row["dry_run_estimate"]
    assert not list((tmp_path / "w" / "model_tiny").glob("*.safetensors"))  # weights removed after the row
