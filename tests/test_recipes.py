"""Training recipes end to end on CPU with a tiny random Llama + the real SmolLM2 tokenizer (wiring, not
learning): GRPO steps with per-function reward logs, export, reload, eval; kill-and-resume; the paper recipe's
dry run; launchers. The pipelines (ablation, proof, SFT budget) are tests/test_recipes_pipelines.py; 2-process
accelerate (gloo) is the unsharded run of tests/test_zero3_cpu.py."""
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import ROOT, call_main

PY = sys.executable
GRPO = [PY, "recipes/grpo.py"]
TINY_ARGS = ["--use_cpu", "true", "--bf16", "false", "--dtype", "float32", "--tasks", "sort_lengths", "freq_count",
             "--langs", "en", "--max_len", "6", "--num_train_examples", "16", "--num_generations", "2",
             "--per_device_train_batch_size", "4", "--max_completion_length", "8", "--logging_steps", "1",
             "--report_to", "none", "--learning_rate", "1e-3", "--seed", "0", "--gradient_checkpointing", "false"]


def run(cmd, timeout=600, **kw):
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=timeout, **kw)


def run_together(*cmds, timeout=600, cwd=ROOT, **kw) -> list[subprocess.CompletedProcess]:
    """Independent CLI runs started at once and waited for together (each exactly as `run` starts it: its own
    process, cwd, output and exit code); on 2 cores the start-ups (torch, transformers, TRL imports) overlap."""
    procs = [subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)
             for cmd in cmds]
    done = []
    try:
        for cmd, proc in zip(cmds, procs, strict=False):
            out, err = proc.communicate(timeout=timeout)
            done.append(subprocess.CompletedProcess(cmd, proc.returncode, out, err))
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    return done


def metrics(out: Path) -> list[dict]:
    return [json.loads(l) for l in (out / "metrics.jsonl").read_text().splitlines()]


def test_grpo_export_reload_eval(tiny_model, tmp_path):
    out = tmp_path / "grpo"
    res = run([*GRPO, "--model_name_or_path", str(tiny_model), "--output_dir", str(out), "--max_steps", "2",
               "--save_steps", "2", "--reward_granularity", "fine", *TINY_ARGS])
    assert res.returncode == 0, res.stderr[-3000:]
    logs = [m for m in metrics(out) if "reward" in m]
    assert [m["step"] for m in logs] == [1, 2]
    for m in logs:  # rewards logged per function, zero-variance fraction logged
        assert {"rewards/accuracy_fine/mean", "rewards/format/mean", "frac_reward_zero_std"} <= set(m)
    cfg = json.loads((out / "tase_config.json").read_text())
    assert cfg["rewards"] == {"names": ["accuracy_fine", "format"], "weights": [1.0, 0.2]}
    exp = tmp_path / "export"
    res = run([PY, "recipes/export.py", str(out / "checkpoint-2"), "--out", str(exp)])
    assert res.returncode == 0, res.stderr[-2000:]
    assert (exp / "model.safetensors").is_file() and (exp / "chat_template.jinja").is_file()
    assert "reward_granularity | `fine`" in (exp / "README.md").read_text()
    import torch
    from transformers import AutoModelForCausalLM

    m = AutoModelForCausalLM.from_pretrained(exp)
    assert m.dtype == torch.bfloat16 and not hasattr(m.config, "quantization_config")
    # export refuses a non-empty folder without --force (in-process: export's subprocess checks are the runs here)
    code, err = call_main(["recipes/export.py", str(out), "--out", str(exp)])
    assert code == 2 and "pass --force" in err and "Traceback" not in err
    # eval on 5 rows
    data = tmp_path / "five.jsonl"
    import synth

    data.write_text("".join(json.dumps(r) + "\n" for r in synth.generate("sort_lengths", "en", 5, 3, max_len=6)))
    res = run([PY, "-m", "eval", "run", "--model", str(exp), "--data", str(data), "--out", str(tmp_path / "ev"),
               "--backend", "hf", "--max-new-tokens", "4", "--no-progress"])
    assert res.returncode == 0, res.stderr[-2000:]
    assert json.loads((tmp_path / "ev" / "results.json").read_text())["n"] == 5
    # --card-only rewrites the card with the evaluation results, weights untouched
    before = (exp / "model.safetensors").stat().st_mtime_ns
    res = run([PY, "recipes/export.py", str(out), "--out", str(exp), "--card-only", "--results", str(tmp_path / "ev")])
    assert res.returncode == 0, res.stderr[-2000:]
    card = (exp / "README.md").read_text()
    assert f"## Evaluation of `{exp}`" in card and "n=5" in card and "## Training log" in card
    assert (exp / "model.safetensors").stat().st_mtime_ns == before
    code, err = call_main(["recipes/export.py", str(out), "--out", str(exp), "--card-only", "--results", str(tmp_path)])
    assert code == 2 and "no results.json" in err


def test_coarse_arm_streaming_logs_coarse_reward(tiny_model, tmp_path):
    """Coarse reward without the format reward, on an endless synth IterableDataset (streaming)."""
    out = tmp_path / "coarse"
    res = run([*GRPO, "--model_name_or_path", str(tiny_model), "--output_dir", str(out), "--max_steps", "1",
               "--save_strategy", "no", "--reward_granularity", "coarse", "--format_reward", "false",
               "--streaming", "true", "--max_prompt_tokens", "400", *TINY_ARGS])
    assert res.returncode == 0, res.stderr[-3000:]
    m = [x for x in metrics(out) if "reward" in x][0]
    assert "rewards/accuracy_coarse/mean" in m and "rewards/format/mean" not in m
    code, err = call_main(["recipes/grpo.py", "--model_name_or_path", str(tiny_model), "--output_dir", str(out),
                           "--streaming", "true", *TINY_ARGS])
    assert code == 2 and "needs --max_steps" in err and "Traceback" not in err
    assert not (out / ".run.lock").exists()  # refused before taking the run's lock (the caller's process keeps it)


def test_training_rows_keep_reward_columns_and_length_cap(tiny_model):
    """Rows carry the conversational prompt and every column the reward functions read; the
    max_prompt_tokens cap drops exactly the prompts whose chat-formatted length exceeds it."""
    from datasets import IterableDataset
    from transformers import AutoTokenizer

    from common.prompts import SYSTEM_PROMPT
    from recipes.shared import data
    from recipes.shared.config import DataArgs

    tok = AutoTokenizer.from_pretrained(tiny_model)
    args = DataArgs(tasks=["sort_lengths", "freq_count"], langs=["en"], max_len=30, num_train_examples=12)
    rows = list(data.rows(args, tok))
    assert len(rows) == 12 and {r["task"] for r in rows} == {"sort_lengths", "freq_count"}
    r = rows[0]
    assert r["prompt"][0] == {"role": "system", "content": SYSTEM_PROMPT}
    assert r["prompt"][1]["role"] == "user" and r["prompt"][1]["content"] == r["question"]
    assert {"type", "answer", "variation", "task", "lang", "question"} <= set(r)
    assert "solution" not in r  # nothing reads it: rows carry only what the rewards and logs use
    measure = data.PromptLength(tok, args.system_prompt)
    lengths = sorted(measure(x) for x in data.iter_records(args))
    cap = lengths[len(lengths) // 2]
    stats: dict = {}
    capped = list(data.rows(DataArgs(**{**args.__dict__, "max_prompt_tokens": cap}), tok, stats=stats))
    assert len(capped) == sum(n <= cap for n in lengths) and stats["dropped"] == sum(n > cap for n in lengths) > 0
    stream = data.build_dataset(DataArgs(**{**args.__dict__, "streaming": True}), tok)
    assert isinstance(stream, IterableDataset)
    first = [x["id"] for _, x in zip(range(40), stream, strict=False)]
    assert len(set(first)) == 40 and first[:12] == [x["id"] for x in rows]  # endless, same order as materialized


@pytest.mark.slow
def test_killed_run_resumes_without_losing_steps(tiny_model, tmp_path):
    out = tmp_path / "resume"
    cmd = [*GRPO, "--model_name_or_path", str(tiny_model), "--output_dir", str(out), "--max_steps", "4",
           "--save_steps", "1", *TINY_ARGS]
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.time() + 300
    while not (out / "checkpoint-2" / "trainer_state.json").exists():
        assert (time.time() < deadline
                and proc.poll() is None), proc.stderr.read().decode()[-2000:] if proc.poll() else "timeout"
        time.sleep(0.2)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    done = sorted(int(p.name.split("-")[1]) for p in out.glob("checkpoint-*"))
    assert 2 <= done[-1] < 4
    res = run(cmd + ["--resume_from_checkpoint", "true"])
    assert res.returncode == 0, res.stderr[-3000:]
    state = json.loads((out / "checkpoint-4" / "trainer_state.json").read_text())
    steps = [h["step"] for h in state["log_history"] if "reward" in h]
    assert steps == [1, 2, 3, 4], steps  # nothing lost, nothing repeated
    # the tiny model ties its head: transformers' "missing keys ['lm_head.weight']" on resume is not a failure
    # (issue 66)
    assert "missing keys" not in res.stderr + res.stdout


def test_paper_recipe_dry_run_and_gpu_check():
    """The paper's recipe is async (Table 13: "GRPO Async with vLLM"); its sync variant keeps ZeRO-3 + colocate."""
    res, sync, gpu = run_together(
        [PY, "-m", "accelerate.commands.launch", "--num_processes", "1", "recipes/grpo_qwen14b.py", "--dry-run"],
        [PY, "recipes/grpo.py", "--config", "recipes/configs/grpo_qwen14b_sync.yaml", "--dry-run"],
        [PY, "recipes/grpo_qwen14b.py"])
    assert res.returncode == 0, res.stderr[-2000:]
    for line in ("model_name_or_path: Qwen/Qwen2.5-14B-Instruct", "trainer: async", "max_staleness: 4",
                 "weight_sync_steps: 1", "token_budget: 18432", "num_train_epochs: 5", "seed: 42",
                 "96 completions/step (12 prompts x 8 generations)",
                 "async split: generation vLLM server", "on GPU(s) 0-1", "training on GPU(s) 2-7",
                 "6 FSDP2 process(es), recipes/accelerate/fsdp2.yaml", "weight sync every 1 optimizer step(s)",
                 # the features it will run (issue 79; docs/training.md): async refuses none of them
                 "features (trainer: async): tracking, presets, reward_log, vllm_cpu, cpu_speed\n",
                 "tracking: the tase/ metrics ride on each sample"):
        assert line in res.stdout, line
    res = sync
    assert res.returncode == 0, res.stderr[-2000:]
    for line in ("model_name_or_path: Qwen/Qwen2.5-14B-Instruct", "per_device_train_batch_size: 4",
                 "gradient_accumulation_steps: 4", "num_train_epochs: 5", "lr_scheduler_type: cosine",
                 "warmup_steps: 0.1", "seed: 42", "use_liger_kernel: true", "save_steps: 25", "logging_steps: 1",
                 "max_prompt_tokens: 16384", "vllm_max_model_length: 18432", "use_vllm: true", "bf16: true",
                 "attn_implementation: flash_attention_2", "effective batch: 4 per device x 4 accumulation"):
        assert line in res.stdout, line
    assert "128 completions/step (16 prompts x 8 generations)" in res.stdout
    # deepspeed is in the lock (ZeRO-3 runs on CPU too): its own estimator, 33.85 GB/GPU for the zero3.yaml row
    assert ("DeepSpeed ZeRO-3 estimator" in res.stdout
            and "33.85GB | offload_param=none, offload_optimizer=none, zero_init=1" in res.stdout)
    assert "planning figure: ~39.9 GiB/GPU at peak" in res.stdout  # that row + the 6 GiB measured on one H200
    assert "~6250 optimizer steps on 8 GPU(s)" in res.stdout  # 20000 prompts x 5 epochs / 16
    res = gpu
    if not __import__("torch").cuda.is_available():
        # 8 - 2 for vLLM
        assert res.returncode == 2 and res.stderr.count("\n") == 1 and "needs 6 CUDA GPUs" in res.stderr


def test_bad_config_is_one_line(tmp_path):
    code, err = call_main(["recipes/grpo.py", "--reward_granularity", "medium", "--dry-run"])  # in-process
    assert code == 2 and err.startswith("error:") and "coarse, strict or fine" in err
    code, err = call_main(["recipes/grpo.py", "--config", str(tmp_path / "missing.yaml")])
    assert code == 2 and "Traceback" not in err
    # the real CLI in a subprocess: exit code and the whole stderr of a fresh interpreter
    res = run([*GRPO, *TINY_ARGS], env={**os.environ, "ACCELERATE_USE_FSDP": "true"})  # accelerate: DDP on CPU
    assert res.returncode == 2 and "FSDP on CPU" in res.stderr and res.stderr.count("\n") == 1, res.stderr[-2000:]


def test_recipes_is_an_installed_package(tmp_path, default_model):  # converted once, before the concurrent runs
    """`recipes` is installed: a script runs as `python recipes/x.py` (recipes/ first on sys.path, where a
    module name must not shadow what the package imports) and as `python -m recipes.x`, from any folder,
    and no code outside tests edits sys.path to find its siblings."""
    dry = ["--config", str(ROOT / "recipes/configs/grpo_smollm2_cpu.yaml"), "--output_dir", str(tmp_path / "o"),
           "--dry-run"]
    helps = ("sft_warmup", "export", "proof", "demo", "ablate")
    as_script, as_module, *helped = run_together(
        [PY, str(ROOT / "recipes/grpo.py"), *dry], [PY, "-m", "recipes.grpo", *dry],
        *([PY, str(ROOT / "recipes" / f"{script}.py"), "--help"] for script in helps), cwd=tmp_path, timeout=300)
    assert as_script.returncode == 0 and "effective batch:" in as_script.stdout, as_script.stderr[-2000:]
    def plan(out: str) -> list[str]:  # DeepSpeed's timestamped "[date] [WARNING] ..." log line aside
        return [line for line in out.splitlines() if not line.startswith("[")]

    assert plan(as_module.stdout) == plan(as_script.stdout), as_module.stderr[-2000:]
    for script, res in zip(helps, helped, strict=False):
        assert res.returncode == 0 and "usage:" in res.stdout, (script, res.stderr[-2000:])
    hits = [f"{p.relative_to(ROOT)}:{i}" for d in ("recipes", "bench", "eval", "synth", "rewards")
            for p in sorted((ROOT / d).rglob("*.py")) for i, line in enumerate(p.read_text().splitlines(), 1)
            if "sys.path.insert" in line or "sys.path.append" in line or "sys.path[0] =" in line]
    # the GPU smoke's step runner starts each recipe in-process (to read its peak GPU memory) and so sets sys.path[0]
    # exactly as the interpreter does for `python SCRIPT` / `python -m MODULE`; nothing else may
    hits = [h for h in hits if not h.startswith("bench/gpu_smoke.py:")]
    assert not hits, hits
    smoke = (ROOT / "bench" / "gpu_smoke.py").read_text()
    assert smoke.count("sys.path[0] =") == 2 and "sys.path.insert" not in smoke


def test_launchers_help_and_dry_run():
    valued = {"launch/local.sh": "--gpus", "launch/cpu.sh": "--steps", "launch/slurm/grpo.sbatch": "--tp"}
    for script, opt in valued.items():
        res = run(["bash", script, "--help"])
        assert res.returncode == 0 and res.stdout.startswith("usage:"), script
        for bad, why in (("--bogus", "unknown option --bogus"), (opt, f"{opt} needs a value")):
            res = run(["bash", script, bad])  # launch/_options.sh: one line, exit 2
            assert res.returncode == 2 and res.stderr == f"error: {why} (see --help)\n", (script, res.stderr)
    res = run(["bash", "launch/slurm/grpo.sbatch", "--dry-run", "--nodes", "4"])
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    assert any("vllm-serve" in l and "--nodelist=node3" in l for l in lines)
    assert any("--num_machines 3 --num_processes 24" in l and "--vllm_mode server" in l for l in lines)
    res = run(["bash", "launch/slurm/grpo.sbatch", "--dry-run", "--async", "--nodes", "4"])
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    assert any("vllm serve" in l and "--weight-transfer-config" in l and "nccl" in l and "--nodelist=node3" in l
               for l in lines)
    assert any("fsdp2.yaml --num_machines 3 --num_processes 24" in l and "--trainer async" in l
               and "http://node3:8000" in l for l in lines)
    res = run(["bash", "launch/local.sh", "--dry-run", "--async", "--gpus", "8"], env={**os.environ, "PYTHON": PY})
    assert res.returncode == 0, res.stderr[-2000:]
    assert "CUDA_VISIBLE_DEVICES=0,1 VLLM_SERVER_DEV_MODE=1" in res.stdout and "--weight-transfer-config" in res.stdout
    assert "CUDA_VISIBLE_DEVICES=2,3,4,5,6,7" in res.stdout and "fsdp2.yaml --num_processes 6" in res.stdout
    assert "async split:" in res.stdout
    res = run(["bash", "launch/cpu.sh", "--dry-run", "--steps", "3"])
    assert res.returncode == 0 and "--max_steps 3" in res.stdout


def test_deepspeed_cpu_op_is_found_where_make_install_built_it(tmp_path, monkeypatch):
    """recipes/grpo_core/distributed.extension_cache: the venv's prebuilt CPU comm op (make install) when it is there,
    else the project cache (built once per cache on first use); an explicit TORCH_EXTENSIONS_DIR always wins."""
    from recipes.grpo_core import distributed

    venv, cache = tmp_path / "venv", tmp_path / "cache"
    monkeypatch.setattr(sys, "prefix", str(venv))
    monkeypatch.setenv("TASE_CACHE", str(cache))
    monkeypatch.delenv("TORCH_EXTENSIONS_DIR", raising=False)
    distributed.extension_cache()
    assert os.environ["TORCH_EXTENSIONS_DIR"] == str(cache / "torch_extensions")  # nothing built at install
    so = venv / "torch_extensions" / distributed.SHM_OP / f"{distributed.SHM_OP}.so"
    so.parent.mkdir(parents=True)
    so.write_bytes(b"")
    monkeypatch.delenv("TORCH_EXTENSIONS_DIR")
    distributed.extension_cache()
    assert os.environ["TORCH_EXTENSIONS_DIR"] == str(venv / "torch_extensions")
    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(tmp_path / "mine"))
    distributed.extension_cache()
    assert os.environ["TORCH_EXTENSIONS_DIR"] == str(tmp_path / "mine")


def test_precision_guard_defers_to_a_deepspeed_config_file(monkeypatch):
    """accelerate launch with a DeepSpeed config file exports mixed_precision "no" (it refuses its own with a file):
    the file's bf16 block governs, so a bf16 recipe is not refused there (the 7B offload row of the GPU table was)."""
    from types import SimpleNamespace

    from recipes.grpo_core.distributed import precision_mismatch

    bf16 = SimpleNamespace(bf16=True, fp16=False)
    monkeypatch.setenv("ACCELERATE_USE_DEEPSPEED", "true")
    monkeypatch.setenv("ACCELERATE_MIXED_PRECISION", "no")
    monkeypatch.delenv("ACCELERATE_DEEPSPEED_CONFIG_FILE", raising=False)
    assert "mixed_precision: no but the recipe trains in bf16" in precision_mismatch(bf16)
    monkeypatch.setenv("ACCELERATE_DEEPSPEED_CONFIG_FILE", "/tmp/ds_offload.json")
    assert precision_mismatch(bf16) is None
