"""Quiet, honest output (issue 66): the known-harmless library messages are filtered once at the entry points and
come back with --verbose; a training log step is one short line; summaries say what happened."""
from __future__ import annotations

import logging
import os
import subprocess
import sys
import warnings

import pytest

from tests.conftest import ROOT

# library warnings are printed once per interpreter: a warm fork would hide them (tests/warm_python.py)
pytestmark = pytest.mark.fresh_python


# A message as the library prints it, for each QUIET pattern (a new pattern needs its example here).
EXAMPLES = {
    "TRL currently supports vLLM versions from": "TRL currently supports vLLM versions from 0.22.0 to 0.31.0. You have "
                                                  "version 0.32.0 installed.",
    "You are importing from 'trl.experimental'": "You are importing from 'trl.experimental'. APIs here may change.",
    "`torch.distributed.reduce_op` is deprecated": "`torch.distributed.reduce_op` is deprecated, please use "
                                                   "`torch.distributed.ReduceOp` instead",
    "Triton is installed, but doesn't include CPU backend": "Triton is installed, but doesn't include CPU backend. "
                                                            "Disabling Triton.",
    "Triton is not installed. triton-cpu is expected": "Triton is not installed. triton-cpu is expected on x86 CPUs.",
    "Model Runner V2 requires Triton; using the V1 model runner": "Model Runner V2 requires Triton; using the V1 model "
                                                                  "runner instead.",
    "Enforce eager set, disabling torch.compile": "Enforce eager set, disabling torch.compile, CUDAGraphs, and JIT "
                                                  "kernel warmup.",
    "Inductor compilation was disabled by user settings": "Inductor compilation was disabled by user settings, "
                                                          "optimizations settings ... will be ignored.",
    "VLLM_CPU_NUM_OF_RESERVED_CPU is less than the minimum requirement": "VLLM_CPU_NUM_OF_RESERVED_CPU is less than "
                                                                         "the minimum requirement: 1 cores",
    "(libtcmalloc|libiomp) is not found in LD_PRELOAD": "libtcmalloc is not found in LD_PRELOAD. For best performance",
    "OMP_NUM_THREADS=d+ is set; leaving Torch threads at d+ for serving": "OMP_NUM_THREADS=2 is set; leaving Torch "
                                                                          "threads at 2 for serving. Multi-threaded",
    "The global random seed is set to d+. Since VLLM_ENABLE_V1_MULTIPROCESSING is set to False": "The global random "
    "seed is set to 0. Since VLLM_ENABLE_V1_MULTIPROCESSING is set to False, this may affect the random state of the "
    "Python process that launched vLLM.",
    "CPU backend doesn't allow to use `torch.set_num_threads` after the thread binding": "CPU backend doesn't allow to "
    "use `torch.set_num_threads` after the thread binding, skip it.",
    "(RotaryEmbedding|ParallelLMHead): Failed to load weights": "ParallelLMHead: Failed to load weights",
    "You are adding a <class 'trl.experimental.async_grpo.async_grpo_trainer.StepIntervalCallback'>": "You are adding "
    "a <class 'trl.experimental.async_grpo.async_grpo_trainer.StepIntervalCallback'> to the callbacks of this "
    "Trainer, but there is already one. The current list of callbacks is:\n:DefaultFlowCallback",
    "Setting accelerator to CPU": "Setting accelerator to CPU.",
    "Attempted to load weight ": "Attempted to load weight (torch.float32) into parameter (torch.bfloat16)",
    "[shutdown] ": "[shutdown] Process manager: force killing remaining process EngineCore pid 7",
    "[shutdown] force killing sub process": "[shutdown] force killing sub process VLLM::Worker pid 12816",
    "resource_tracker: There appear to be d+ leaked shared_memory objects": "resource_tracker: There appear to be 1 "
                                                                            "leaked shared_memory objects to clean up",
    "NUMA binding: Using MEMBIND policy": "NUMA binding: Using MEMBIND policy for memory allocation on the NUMA nodes",
    "Loading safetensors checkpoint shards": "Loading safetensors checkpoint shards: 100% Completed | 1/1",
}


def _key(pattern: str) -> str:
    return pattern.replace("\\", "")


def test_quiet_filters_each_listed_message_and_only_those():
    """common.process.QUIET's messages are dropped after quiet_libraries() (a logger's, a warning) and by the line
    filter (any of them, as printed); a neighbour of the same logger, and the same message mentioning NaN, are not."""
    from common.process import QUIET, harmless, quiet_libraries

    quiet_libraries()
    quiet_libraries()  # once: a second call adds no second filter
    assert {_key(p) for _, p, _ in QUIET} == set(EXAMPLES), "each pattern has an example message here"
    for source, start, why in QUIET:
        assert why and len(why) > 35, f"{start}: say why it is harmless"
        msg = EXAMPLES[_key(start)]
        assert harmless(f"(EngineCore pid=1) WARNING 12-07 05:49:10 [x.py:1] {msg}\n") and harmless(msg + "\n")
        assert not harmless(f"WARNING 12-07 05:49:10 [x.py:1] {msg} (loss is nan)\n")
        if source == "output":
            continue
        if source == "warnings":
            with warnings.catch_warnings(record=True) as got:
                # catch_warnings copies the filters: the ones quiet_libraries installed still apply inside
                warnings.warn(msg, UserWarning, stacklevel=1)
                warnings.warn("an unrelated warning", UserWarning, stacklevel=1)
            assert [str(w.message) for w in got] == ["an unrelated warning"]
            assert harmless(f"/x/y.py:3: FutureWarning: {msg}\n")
            continue
        log = logging.getLogger(source)
        assert sum(1 for f in log.filters if start in getattr(f, "starts", ())) == 1
        kept = log.makeRecord(source, logging.WARNING, __file__, 1, "something else %s", ("x",), None)
        dropped = log.makeRecord(source, logging.WARNING, __file__, 1, "%s", (msg,), None)
        assert log.filter(kept) and not log.filter(dropped)


@pytest.mark.parametrize("line", [
    "/x/lib.py:3: RuntimeWarning: invalid value encountered in divide (NaN)\n",
    "(Worker pid=8) WARNING 12-07 05:49:10 [memory.py:1] CUDA out of memory. Tried to allocate 2.00 GiB\n",
    "(EngineCore pid=1) WARNING 12-07 05:49:10 [scheduler.py:1] a vLLM warning nobody listed\n",
    "(EngineCore pid=1) ERROR 12-07 05:49:10 [core.py:1] EngineCore failed to start.\n",
    "[2026-11-24 18:17:48,481] [WARNING] [engine.py:1:step] overflow, skipping step\n",
    "Traceback (most recent call last):\n",
    "OOM while sampling\n",
    "INFO 12-07 05:49:10 [x.py:1] loss became nan\n",
])
def test_unknown_warnings_errors_nan_and_oom_lines_are_never_dropped(line):
    """Issue 80: the filters dropped every WARNING line of a known format, a NaN RuntimeWarning and a CUDA OOM
    warning with them; only a listed harmless pattern drops a line now."""
    from common.process import harmless

    assert not harmless(line)


def test_verbose_keeps_the_library_messages():
    """apply(verbose=True) installs no filter (checked in a fresh interpreter: the filters are process-wide)."""
    code = ("import logging, warnings; from common.process import apply, QUIET; apply(True); "
            "print(any(logging.getLogger(s).filters for s, _, _ in QUIET if s != 'warnings'), "
            "any('trl' in str(f[1]) for f in warnings.filters))")
    res = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60,
                         env={**os.environ, "TASE_VERBOSE": ""})
    assert res.stdout.split() == ["False", "False"], res.stderr


def test_summary_line_is_short_and_names_what_matters():
    from recipes.features.tracking.metrics import summary_line

    logs = {"loss": 0.0123, "grad_norm": 1.5, "learning_rate": 5e-06, "num_tokens": 12345.0,
            "completions/mean_length": 31.5, "rewards/accuracy_fine/mean": 0.3, "rewards/format/mean": 1.0,
            "reward": 0.43, "reward_std": 0.2, "frac_reward_zero_std": 0.5, "tase/strict_acc": 0.25,
            "tase/official_acc": 0.3125, "step_time": 12.34, "epoch": 0.1,
            **{f"tase/task/{i}/strict_acc": 0.5 for i in range(40)}}
    assert len(str(logs)) > 1000
    line = summary_line(logs, 3, 40)
    assert line == ("step 3/40 | loss 0.0123 | reward 0.43 ± 0.2 | accuracy_fine 0.3, format 1 | "
                    "acc strict 0.25, official 0.3125 | lr 5e-06 | 12.3 s/step")
    assert summary_line({"train_runtime": 61.2, "train_loss": 0.5}, 1, 1) == "trained 1 step in 61 s, mean loss 0.5"


def test_api_fails_fast_when_the_host_does_not_resolve(tmp_path, fixture_root):
    """A host name with no address is one line after the first attempt, not minutes of retries behind a full bar
    (`.invalid` never resolves, RFC 2606). The summary counts the failed requests' retries."""
    from eval.api_backend import name_unresolved, summarize

    res = subprocess.run([sys.executable, "-m", "eval", "run", "--backend", "openai", "--base-url",
                          "http://tase-no-such-host.invalid/v1", "--model-name", "m", "--data",
                          f"official:{fixture_root}", "--limit", "1", "--out", str(tmp_path / "o"), "--no-progress"],
                         cwd=ROOT, capture_output=True, text=True, timeout=120,
                         env={**os.environ, "OPENAI_API_KEY": "x"})
    assert res.returncode == 2, res.stderr[-2000:]
    assert "cannot resolve the host" in res.stderr and res.stderr.count("\n") == 1 and "Traceback" not in res.stderr
    import socket

    err = ConnectionError("wrapped")
    err.__cause__ = socket.gaierror(-2, "Name or service not known")
    assert name_unresolved(err) and not name_unresolved(ConnectionError("refused"))
    s = summarize([{"attempts": 2, "latency_s": 0.1}], {"a": "x", "b": "y"}, failed_attempts=14)
    assert s["requests_ok"] == 1 and s["n_failed"] == 2 and s["retries"] == 1 + 12


def test_plot_of_one_step_has_whole_steps_and_a_colour_per_curve(tmp_path):
    import json

    from matplotlib.figure import Figure

    import eval.plot_training as pt

    run = tmp_path / "run"
    run.mkdir()
    (run / "metrics.jsonl").write_text(json.dumps({"step": 1, "reward": 0.4, "tase/official_acc": 0.5,
                                                   "tase/strict_acc": 0.25}) + "\n")
    drawn: list = []
    real = Figure.savefig

    def keep(self, *a, **k):
        drawn.append(self)
        return real(self, *a, **k)

    Figure.savefig = keep
    try:
        pt.plot_training([run], tmp_path / "p.png")
    finally:
        Figure.savefig = real
    ax_reward, ax_acc = drawn[0].axes[0], drawn[0].axes[1]
    assert ax_reward.get_xlim() == (0.0, 2.0)
    official, strict = ax_acc.get_lines()
    assert official.get_color() != strict.get_color() and official.get_marker() != strict.get_marker()


@pytest.mark.parametrize("size,total", [("0.5B", 494_032_768), ("14B", 14_770_033_664), ("72B", 72_706_203_648)])
def test_qwen25_shape_table_gives_the_released_parameter_counts(size, total):
    from recipes.grpo_core.model_shapes import known_config, param_counts

    for name in (f"Qwen/Qwen2.5-{size}", f"Qwen/Qwen2.5-{size}-Instruct"):
        assert param_counts(known_config(name))[0] == total
    assert known_config("Qwen/Qwen2.5-13B") is None and known_config("meta/llama") is None


def test_shape_table_matches_transformers_model():
    """The formula counts what transformers builds from the same config (0.5B and 7B: tied and untied heads)."""
    import torch
    from accelerate import init_empty_weights
    from transformers import AutoModelForCausalLM, Qwen2Config

    from recipes.grpo_core.model_shapes import known_config, param_counts

    for name in ("Qwen/Qwen2.5-0.5B-Instruct", "Qwen/Qwen2.5-7B-Instruct"):
        cfg = {k: v for k, v in known_config(name).items() if k not in ("model_type", "architectures")}
        with init_empty_weights():
            m = AutoModelForCausalLM.from_config(Qwen2Config(**cfg), dtype=torch.bfloat16)
        m.tie_weights()
        assert sum(p.numel() for p in m.parameters()) == param_counts(known_config(name))[0], name


def test_paper_recipe_dry_run_with_an_empty_hub_cache(tmp_path):
    """`accelerate launch recipes/grpo_qwen14b.py --dry-run` on a fresh machine (empty HF_HOME, offline): the plan
    from the known shape, said in one line, exit 0."""
    env = {**os.environ, "HF_HOME": str(tmp_path / "hf"), "HF_HUB_OFFLINE": "1",
           "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)}
    res = subprocess.run([sys.executable, "-m", "accelerate.commands.launch", "--num_processes", "1",
                          "recipes/grpo_qwen14b.py", "--dry-run"], cwd=ROOT, env=env, capture_output=True, text=True,
                         timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    assert res.stdout.count("is not in the local Hugging Face cache") == 1
    assert "the plan uses its known shape (48 layers, hidden 5120, 14.77B parameters" in res.stdout
    assert "SW: Model with 14770M total params" in res.stdout and "async split:" in res.stdout
    assert "Traceback" not in res.stderr


def test_refusal_under_accelerate_launch_has_no_launcher_traceback(tmp_path):
    """A refusal under `accelerate launch` (one process) is our one line, without accelerate's CalledProcessError
    traceback: the launcher is ended before it can print one."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)}
    res = subprocess.run([sys.executable, "-m", "accelerate.commands.launch", "--num_processes", "1",
                          "recipes/grpo_qwen14b.py", "--reward_granularity", "medium", "--dry-run"], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=600)
    assert res.returncode != 0
    assert "Traceback" not in res.stderr and "CalledProcessError" not in res.stderr, res.stderr[-3000:]
    assert [line for line in res.stderr.splitlines() if line.startswith("error:")] == [
        line for line in res.stderr.splitlines() if "error" in line.lower()], res.stderr
    assert res.stderr.count("error:") == 1 and "coarse, strict or fine" in res.stderr


def test_a_real_start_downloads_a_hub_id_unless_offline_or_told_not_to(tmp_path, monkeypatch):
    """A training start fetches a hub id the cache lacks, as TRL does; HF_HUB_OFFLINE=1 (the test session's setting)
    makes that one line before anything starts, and --local_files_only true keeps the local-only refusal. The
    download itself needs the network, which the suite does not use."""
    from conftest import call_main

    import common.models as models

    base = ["recipes/grpo.py", "--config", "recipes/configs/grpo_smollm2_cpu.yaml", "--output_dir", str(tmp_path / "o"),
            "--model_name_or_path", "tase-test/not-downloaded"]
    code, err = call_main(base)
    assert code == 2 and "HF_HUB_OFFLINE is set" in err and err.count("\n") == 1, err
    code, err = call_main([*base, "--local_files_only", "true"])
    assert code == 2 and "runs read local files only" in err and err.count("\n") == 1, err
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(models.ModelError, match="HF_HUB_OFFLINE is set"):
        models.resolve_model("tase-test/not-downloaded", download=True)
    calls = []
    monkeypatch.delenv("HF_HUB_OFFLINE")
    monkeypatch.setattr("huggingface_hub.snapshot_download",
                        lambda repo, **kw: calls.append((repo, kw)) or str(tmp_path))
    assert models.download_hub_model("tase-test/x") == tmp_path and calls[0][0] == "tase-test/x"
    assert "*.safetensors" in calls[0][1]["allow_patterns"] and "*.bin" not in calls[0][1]["allow_patterns"]


def test_filtered_output_never_blocks_its_writers_when_the_reader_leaves():
    """`python -m eval compare ... | head -1`: the reader goes away; the filter keeps draining the pipe, so the
    command writes its 1 MB and ends instead of blocking on a full pipe."""
    script = ("import sys\nfrom common.process import filtered_output\nwith filtered_output():\n"
              "    for i in range(20000):\n        print('x' * 50)\nprint('done', file=sys.stderr)\n")
    res = subprocess.run(["bash", "-c", f"{sys.executable} -c \"$0\" | head -1", script], cwd=ROOT,
                         capture_output=True, text=True, timeout=120, env={**os.environ, "TASE_OUTPUT_FILTERED": ""})
    assert res.stdout == "x" * 50 + "\n" and res.stderr.strip().endswith("done"), res.stderr[-2000:]


def test_a_line_glued_to_a_progress_bar_after_a_dropped_line_is_shown():
    """A dropped library line, then a progress bar's redraw ("\\r", then the bar without a newline), then another
    process's line glued to that bar: the line reaches the terminal. The continuation rule (an indented line after a
    dropped one is part of it) once swallowed it, as the async rollout worker's dynamic-sampling line in CI."""
    import threading

    from common.process import pump

    r, w = os.pipe()
    shown: list[bytes] = []
    data = (b"INFO 12-07 10:00:00 [core.py:1] engine ready\n\r" + b"  3%|\xe2\x96\x8e  | 3/100 [00:09<05:00]"
            + b"dynamic sampling: 1 uniform group(s) dropped per group delivered\n"
            + b"Warning: x\n  indented continuation of a kept line\n")
    os.write(w, data)
    os.close(w)
    pump(r, shown.append, None, threading.Lock())
    out = b"".join(shown).decode()
    assert "INFO 12-07" not in out
    assert "dynamic sampling: 1 uniform group(s) dropped" in out and "indented continuation" in out
