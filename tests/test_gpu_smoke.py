"""The CPU side of the GPU smoke test (bench/gpu_smoke.sh, issue 37): the script is shellcheck-clean, refuses a
machine without CUDA in one line at once, its dry run prints every step's command and runs nothing, its wheel
list accounts for every project dependency and resolves against a prepared folder and requirements.lock, and
the summary, step wrapper and prepared model/data are what the GPU run will read. The GPU run itself needs a
lent device (docs/training.md, "GPU smoke test")."""
from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import time
import tomllib
from pathlib import Path

import pytest
from conftest import ROOT, run_shellcheck

_spec = importlib.util.spec_from_file_location("gpu_smoke", ROOT / "bench" / "gpu_smoke.py")
gpu_smoke = importlib.util.module_from_spec(_spec)  # bench/ is no package: loaded from its file, sys.path untouched
_spec.loader.exec_module(gpu_smoke)

SCRIPT = ROOT / "bench" / "gpu_smoke.sh"
LIST = ROOT / "bench" / "gpu_smoke_wheels.txt"
STEPS = ["install", "env", "sft_warmup", "grpo", "grpo_zero3", "zero3_load", "export", "eval"]


def sh(*args: str, env: dict | None = None, timeout: int = 60) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(SCRIPT), *args], cwd=ROOT, capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, "PYTHON": sys.executable, **(env or {})})


def tiny_wheel(path: Path) -> None:
    """A whole (tiny) wheel file: a zip with one member; --run reads its name and checks the zip is whole."""
    import zipfile

    with zipfile.ZipFile(path, "w") as z:
        z.writestr(f"{path.name.split('-')[0]}/__init__.py", "")


def fake_prepared(tmp: Path, leave_out: str | None = None) -> Path:
    """A prepared folder's layout: the model/data files the script checks for, and a wheel file (tiny: its name
    is read and its zip checked before the GPU machine installs it) for each carried package, one left out on
    request."""
    prep = tmp / "prep"
    (prep / "model").mkdir(parents=True)
    (prep / "model" / "config.json").write_text("{}")
    (prep / "data").mkdir()
    for name in ("train", "sft", "eval"):
        (prep / "data" / f"{name}.jsonl").write_text("")
    (prep / "wheels").mkdir()
    for kind, name, spec in gpu_smoke.read_list(LIST):
        if kind == "carry" and name != leave_out:
            tiny_wheel(prep / "wheels" / f"{name.replace('-', '_')}-{spec[2:]}-py3-none-any.whl")
    return prep


def test_shellcheck_clean():
    res = run_shellcheck(str(SCRIPT))
    assert res.returncode == 0, res.stdout


def test_no_cuda_fails_at_once_in_one_line(tmp_path):
    if shutil.which("nvidia-smi") and subprocess.run(["nvidia-smi", "-L"], capture_output=True).returncode == 0:
        pytest.skip("this machine has a GPU")
    t = time.monotonic()
    res = sh("--run", str(fake_prepared(tmp_path)), "--work", str(tmp_path / "work"), "--out", str(tmp_path / "out"))
    assert time.monotonic() - t < 5
    assert res.returncode == 2 and res.stderr.count("\n") == 1 and res.stderr.startswith("error: no CUDA GPU here")
    assert "--dry-run" in res.stderr and res.stdout == ""
    assert not (tmp_path / "work").exists() and not (tmp_path / "out").exists()  # nothing started


def test_dry_run_prints_every_step_and_runs_nothing(tmp_path):
    prep = fake_prepared(tmp_path)
    res = sh("--run", str(prep), "--dry-run", "--work", str(tmp_path / "work"), "--out", str(tmp_path / "out"))
    assert res.returncode == 0, res.stderr
    cmds = {m[1]: m[2] for m in re.finditer(r"^\[(\w+)\] (.*)$", res.stdout, re.M)}
    assert list(cmds) == STEPS
    assert "--no-index --no-deps" in cmds["install"] and f"--target {tmp_path}/work/site" in cmds["install"]
    for kind, name, spec in gpu_smoke.read_list(LIST):  # every carried wheel, and nothing the image has
        assert (f"/{name.replace('-', '_')}-{spec[2:]}-" in cmds["install"]) == (kind == "carry"), name
    paper = "recipes/grpo.py --config recipes/configs/grpo_qwen14b_sync.yaml"
    for name in ("grpo", "grpo_zero3"):
        assert paper in cmds[name] and "--use_vllm false" in cmds[name] and "--max_steps 3" in cmds[name]
        assert "--entropy_coef 0.01" in cmds[name]  # real gradients though a random model earns no reward
        assert "--bf16 false" not in cmds[name] and "--use_liger_kernel false" not in cmds[name]
    assert ("accelerate.commands.launch --config_file recipes/accelerate/zero3.yaml --num_processes 1"
            in cmds["grpo_zero3"])
    assert "recipes/sft_warmup.py" in cmds["sft_warmup"] and "--bf16 true --dtype bfloat16" in cmds["sft_warmup"]
    assert "-m eval run --backend hf --device cuda" in cmds["eval"] and "eval.jsonl" in cmds["eval"]
    assert "recipes/export.py" in cmds["export"] and "check-load" in cmds["zero3_load"]
    assert not (tmp_path / "work").exists() and not (tmp_path / "out").exists()


def test_cpu_rehearsal_dry_run_swaps_only_precision_and_device(tmp_path):
    res = sh("--run", str(fake_prepared(tmp_path)), "--dry-run", "--cpu-rehearsal")
    assert res.returncode == 0, res.stderr
    cmds = {m[1]: m[2] for m in re.finditer(r"^\[(\w+)\] (.*)$", res.stdout, re.M)}
    assert list(cmds) == STEPS
    for name in ("grpo", "grpo_zero3"):
        assert "--bf16 false --dtype float32 --use_cpu true --use_liger_kernel false" in cmds[name]
    assert "--num_processes 1 --main_process_port 29517 --mixed_precision no" in cmds["grpo_zero3"]
    assert "--device cpu" in cmds["eval"] and "--cpu" in cmds["env"]


def test_dry_run_names_a_missing_wheel_in_one_line(tmp_path):
    res = sh("--run", str(fake_prepared(tmp_path, leave_out="liger-kernel")), "--dry-run")
    assert res.returncode == 2 and res.stderr.count("\n") == 1 and "liger-kernel==" in res.stderr, res.stderr
    res = sh("--run", str(tmp_path / "nowhere"), "--dry-run")
    assert res.returncode == 2 and res.stderr.count("\n") == 1 and "--prepare" in res.stderr
    res = sh("--prepare", "--dry-run")
    assert res.returncode == 2 and res.stderr == "error: --dry-run goes with --run\n"
    res = sh("--run", "--budget", "soon")
    assert res.returncode == 2 and res.stderr == "error: --budget needs a whole number of seconds\n"


def test_dry_run_refuses_a_truncated_wheel_in_one_line(tmp_path):
    prep = fake_prepared(tmp_path)
    wheel = next((prep / "wheels").glob("trl-*.whl"))
    data = wheel.read_bytes()
    wheel.write_bytes(data[: len(data) // 2])  # a download cut short: no central directory
    res = sh("--run", str(prep), "--dry-run")
    assert res.returncode == 2 and res.stderr.count("\n") == 1, res.stderr
    assert "trl==" in res.stderr and f"{wheel.name} is not a whole wheel" in res.stderr, res.stderr
    import zipfile

    with zipfile.ZipFile(wheel, "w") as z:  # whole length, a corrupt body: its CRC names the member
        z.writestr("trl/__init__.py", "hello world")
    wheel.write_bytes(wheel.read_bytes().replace(b"hello world", b"hellO world"))
    assert gpu_smoke.wheel_problem(wheel) == f"{wheel.name}: trl/__init__.py fails its CRC check (a corrupt download)"


def test_prepare_without_torch_or_unifont_is_one_line(tmp_path):
    """--prepare checks the Python and GNU Unifont before downloading anything: one line, no traceback."""
    bare = tmp_path / "python"  # this interpreter without its site-packages: no torch, no transformers
    bare.write_text(f"#!/bin/sh\nexec {sys.executable} -S \"$@\"\n")
    bare.chmod(0o755)
    res = sh("--prepare", str(tmp_path / "prep"), env={"PYTHON": str(bare)})
    assert res.returncode == 2 and res.stderr.count("\n") == 1 and "Traceback" not in res.stderr, res.stderr
    assert res.stderr.startswith("error: ") and "has no torch, transformers" in res.stderr, res.stderr
    res = sh("--prepare", str(tmp_path / "prep"), "--assets-only", env={"TASE_UNIFONT": str(tmp_path / "none.hex")})
    assert res.returncode == 2 and res.stderr.count("\n") == 1, res.stderr
    assert res.stderr.startswith("error: GNU Unifont not found") and not (tmp_path / "prep").exists()


def test_wheel_list_covers_the_project_and_follows_the_lock(tmp_path):
    entries = gpu_smoke.read_list(LIST)
    named = {gpu_smoke.norm(n) for _, n, _ in entries}
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    for dep in project["dependencies"] + project["optional-dependencies"]["gpu"]:  # `.[gpu]`: vllm deepspeed ...
        assert gpu_smoke.norm(re.split(r"[<>=!~\[; ]", dep)[0]) in named, dep
    _, problems = gpu_smoke.resolve_wheels(entries, None, gpu_smoke.lock_versions(ROOT / "requirements.lock"))
    assert problems == []
    carried = {gpu_smoke.norm(n) for k, n, _ in entries if k == "carry"}
    assert {"trl", "peft", "liger-kernel", "deepspeed", "datasets"} <= carried
    assert {"torch", "accelerate"} <= {gpu_smoke.norm(n) for k, n, _ in entries if k == "image"}
    # two builds of one wheel (a folder prepared for two Pythons) would stop pip: named, not guessed between
    for tag in ("cp311-cp311", "cp312-cp312"):
        (tmp_path / f"pydantic_core-2.50.4-{tag}-manylinux_2_17_x86_64.whl").write_bytes(b"")
    _, problems = gpu_smoke.resolve_wheels([("carry", "pydantic-core", "==2.50.4")], tmp_path, None)
    assert len(problems) == 1 and "2 wheels" in problems[0] and "one Python version per folder" in problems[0]
    # a pin that disagrees with the lock is named
    _, problems = gpu_smoke.resolve_wheels([("carry", "trl", "==0.1")], None, {"trl": "1.16.0"})
    assert problems == ["trl: list pins 0.1, requirements.lock has 1.16.0"]


def test_summary_reports_each_step(tmp_path):
    log = tmp_path / "grpo.log"
    log.write_text("Traceback (most recent call last):\n  ...\nRuntimeError: expected scalar type BFloat16\n"
                   " 50%|#####     | 1/2 [00:01<00:01,  1.2it/s]\n")
    rec = tmp_path / "sft.json"
    rec.write_text(json.dumps({"status": 0, "peak_gpu_mem_bytes": 3 * 2**20, "peak_gpu_reserved_bytes": 4 * 2**20}))
    env = tmp_path / "env.json"
    env.write_text(json.dumps({"gpu": "NVIDIA H100 80GB HBM3", "torch": "2.11.0+cu130", "cuda": "13.0"}))
    z3 = tmp_path / "z3"  # a run that exited 0 but logged a NaN loss: not ok
    z3.mkdir()
    (z3 / "metrics.jsonl").write_text("".join(json.dumps(m) + "\n" for m in (
        {"step": 1, "loss": 0.5, "grad_norm": 1.0, "reward": 0.0}, {"step": 2, "loss": float("nan"), "grad_norm": 2.0},
        {"step": 2, "train_runtime": 3.0})))
    tsv = tmp_path / "steps.tsv"
    tsv.write_text(f"sft_warmup\t0\t12.5\t{tmp_path}/sft.log\t{rec}\tpython3 sft\n"
                   f"grpo\t1\t30.0\t{log}\t{tmp_path}/none.json\tpython3 grpo\n"
                   f"grpo_zero3\t0\t40.0\t{log}\t\tpython3 -m accelerate grpo.py --output_dir {z3}\n"
                   f"eval\t124\t120.0\t{log}\t\tpython3 eval\n"
                   "export\tskipped: grpo failed\t\t\t\t\n")
    out = tmp_path / "s.json"
    assert gpu_smoke.main(["summary", "--steps", str(tsv), "--env", str(env), "--out", str(out)]) == 0
    doc = json.loads(out.read_text())
    assert doc["gpu"] == "NVIDIA H100 80GB HBM3" and doc["torch"] == "2.11.0+cu130" and doc["all_ok"] is False
    sft, grpo, z3run, ev, exp = doc["steps"]
    assert z3run["ok"] is False and z3run["error"] == "non-finite loss nan at step 2"
    assert z3run["detail"]["optimizer_steps"] == 2 and z3run["detail"]["grad_norm"] == 2.0
    assert sft == {"name": "sft_warmup", "ok": True, "wall_s": 12.5, "peak_gpu_mem_bytes": 3 * 2**20,
                   "peak_gpu_reserved_bytes": 4 * 2**20, "peak_gpu_mem_mib": 3.0, "cmd": "python3 sft"}
    assert grpo["ok"] is False and grpo["error"] == "RuntimeError: expected scalar type BFloat16" and grpo["rc"] == 1
    assert ev["error"] == "timed out (step time limit)"
    assert exp["ok"] is False and exp["skipped"] == "grpo failed"


def test_step_wrapper_records_exit_status(tmp_path, monkeypatch):
    script = tmp_path / "s.py"
    script.write_text("import sys\nprint(sys.argv[1:])\nraise SystemExit(3)\n")
    monkeypatch.setattr(sys, "argv", list(sys.argv))
    monkeypatch.setattr(sys, "path", list(sys.path))
    rec = tmp_path / "rec.json"
    assert gpu_smoke.main(["step", "--record", str(rec), "--", str(script), "a", "--b"]) == 3
    assert json.loads(rec.read_text()) == {"status": 3, "peak_gpu_mem_bytes": None, "peak_gpu_reserved_bytes": None}


def test_step_wrapper_writes_where_the_script_reads(tmp_path, monkeypatch):
    """The shell's step() names the record file (GPU_SMOKE_RECORD) that its summary reads; on the first H100 run
    the commands named other files, and every step's peak GPU memory came back null."""
    script = tmp_path / "s.py"
    script.write_text("raise SystemExit(0)\n")
    monkeypatch.setattr(sys, "argv", list(sys.argv))
    monkeypatch.setattr(sys, "path", list(sys.path))
    rec = tmp_path / "03-sft_warmup.json"
    monkeypatch.setenv("GPU_SMOKE_RECORD", str(rec))
    assert gpu_smoke.main(["step", "--", str(script)]) == 0
    assert json.loads(rec.read_text())["status"] == 0
    monkeypatch.delenv("GPU_SMOKE_RECORD")
    with pytest.raises(SystemExit) as e:
        gpu_smoke.main(["step", "--", str(script)])
    assert e.value.code == 2
    sh = SCRIPT.read_text()
    assert "--record" not in sh and "GPU_SMOKE_RECORD=$record timeout" in sh


def test_assets_are_a_tiny_llama_and_record_files(tmp_path, default_model):
    """The prepared model and data, on one task and language (--prepare writes all tasks x en/zh/ko)."""
    from transformers import AutoConfig, AutoTokenizer

    info = gpu_smoke.make_assets(tmp_path, rows=32, tasks=("sort_lengths", "freq_count"), langs=("en",))
    assert info["train"] == 32 and info["eval"] == 32 and info["tasks"] == ["freq_count", "sort_lengths"]
    cfg = AutoConfig.from_pretrained(tmp_path / "model")
    assert cfg.model_type == "llama" and cfg.hidden_size == 64 and cfg.num_hidden_layers == 2
    assert len(AutoTokenizer.from_pretrained(tmp_path / "model")) == len(AutoTokenizer.from_pretrained(default_model))
    assert (tmp_path / "model" / "model.safetensors").stat().st_size < 8 * 2**20  # bf16: carried within 64 MiB
    rows = [json.loads(l) for l in (tmp_path / "data" / "train.jsonl").read_text().splitlines()]
    assert len(rows) == 32 and all({"id", "task", "lang", "prompt", "type"} <= set(r) for r in rows)
