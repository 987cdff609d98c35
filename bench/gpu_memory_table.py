"""GPU memory and time table of the paper's sync recipe on random Qwen2.5-shaped models (issue 52), one GPU.

    python bench/gpu_memory_table.py --prep runs/gpu_smoke/prep [--shapes 0.5B,1.5B,3B,7B] [--steps 2]
                                     [--budget 540] [--out DIR] [--dry-run] [--cpu-rehearsal]
                                     [--offload auto|always|never] [--host-gib G]

For each shape: a random model made on this machine from its config (Qwen2.5's layer shapes with the prepared
folder's SmolLM2 tokenizer, a 49,152 vocabulary; nothing carried but the tokenizer), DeepSpeed's ZeRO-3 estimate
as `--dry_run` prints it, then the sync paper recipe (recipes/configs/grpo_qwen14b_sync.yaml: bf16, Liger where
installed, gradient checkpointing, 4 x 4 accumulation, 8 generations, transformers generation: vLLM is not carried)
under `accelerate launch --config_file recipes/accelerate/zero3.yaml --num_processes 1`, for `--steps` optimizer
steps through bench/grpo_step.py's child (TRL's profiling hooks: step, generation, loss times). Optimizer offload
(to CPU, torch AdamW: DeepSpeed's CPUAdam op is not built in the carried wheel) where the estimate without
offload does not fit in 85% of the GPU (`--offload always` plans an 80 GiB card's rows on a larger one); a row whose
offload needs more host memory than the machine has (DeepSpeed's per-CPU estimate) is skipped as "does not fit"
(the 7B offload row was killed on a 128 GiB host). Recorded per shape: parameters, the last step's seconds, generation
seconds and generated tokens/s, peak GPU memory from torch's allocator (in the training process) and from
nvidia-smi (polled every 0.25 s), and the estimates beside them. One JSON, rewritten after every shape:
OUT/gpu_memory_table.json (OUT: --out, else $OUT, else runs/gpu_memory_table).

--dry-run: the plan (shapes, parameter counts, estimates, offload decisions, commands) and its JSON, on any
machine, no GPU and no weights. --cpu-rehearsal: a tiny shape, float32, no DeepSpeed, no Liger, on CPU: the
same model maker, child, parser and JSON writer (tests/test_gpu_memory_table.py runs both). Bad input: one
line, exit 2.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
CONFIG = "recipes/configs/grpo_qwen14b_sync.yaml"
# Qwen2.5 (0.5B-7B) layer shapes from their config.json files; the vocabulary is the tokenizer's (49,152 here)
SHAPES: dict[str, dict[str, Any]] = {
    "0.5B": dict(hidden_size=896, intermediate_size=4864, num_hidden_layers=24, num_attention_heads=14,
                 num_key_value_heads=2, tie_word_embeddings=True),
    "1.5B": dict(hidden_size=1536, intermediate_size=8960, num_hidden_layers=28, num_attention_heads=12,
                 num_key_value_heads=2, tie_word_embeddings=True),
    "3B": dict(hidden_size=2048, intermediate_size=11008, num_hidden_layers=36, num_attention_heads=16,
               num_key_value_heads=2, tie_word_embeddings=True),
    "7B": dict(hidden_size=3584, intermediate_size=18944, num_hidden_layers=28, num_attention_heads=28,
               num_key_value_heads=4, tie_word_embeddings=False),
    "tiny": dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                 num_key_value_heads=2, tie_word_embeddings=True),  # --cpu-rehearsal only
}
# the recipe's options for a table row (the paper's sync settings otherwise): 16 completions x 256 tokens per step
ROW_SETS = ["use_vllm=false", "attn_implementation=sdpa", "min_gpus=0", "max_completion_length=256",
            "num_train_examples=64", "entropy_coef=0.01"]
FIT = 0.85  # offload the optimizer where the no-offload estimate exceeds this share of the GPU's memory
GIB = 2**30


def fail(msg: str) -> None:
    """Bad input: one line on stderr, exit 2."""
    print(f"error: {msg}", file=sys.stderr)
    raise SystemExit(2)


def qwen_config(shape: str, tokenizer_dir: Path) -> Any:
    """A Qwen2Config of that shape with the tokenizer's vocabulary and special tokens."""
    from transformers import AutoTokenizer, Qwen2Config

    tok = AutoTokenizer.from_pretrained(tokenizer_dir)
    return Qwen2Config(vocab_size=len(tok), max_position_embeddings=4096, rope_theta=1e6, rms_norm_eps=1e-6,
                       bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id,
                       pad_token_id=tok.pad_token_id, **SHAPES[shape])


def param_count(cfg: Any) -> int:
    """Parameters of a Qwen2 model of this config (q/k/v carry biases), counted without building it."""
    h, i, n, v = cfg.hidden_size, cfg.intermediate_size, cfg.num_hidden_layers, cfg.vocab_size
    kv = cfg.num_key_value_heads * (h // cfg.num_attention_heads)
    layer = h * h + h + 2 * (h * kv + kv) + h * h + 3 * h * i + 2 * h
    return v * h * (1 if cfg.tie_word_embeddings else 2) + n * layer + h


def ds_estimates(total: int, largest: int) -> dict[str, float]:
    """DeepSpeed's ZeRO-3 model-state estimate on one GPU (GiB), the rows `--dry_run` prints: per GPU with no offload
    and with optimizer offload, and the host memory that offload needs (`cpu_for_offload`). Empty without deepspeed."""
    from recipes.grpo_core.plan import zero3_model_states

    try:
        _, none = zero3_model_states(total, largest, 1, optimizer_offload=False)
        host, offload = zero3_model_states(total, largest, 1, optimizer_offload=True)
    except ImportError:
        return {}
    return {"none": none, "optimizer_cpu": offload, "cpu_for_offload": host}


def host_memory_gib() -> float | None:
    """This machine's RAM (MemTotal), which optimizer offload must hold: the 7B offload row was killed (SIGKILL)
    on a 128 GiB host, where DeepSpeed's estimate had asked for 153.7 GB."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) / 2**20
    except (OSError, ValueError, IndexError):
        pass
    return None


def dry_run_estimate(model_dir: Path) -> str:
    """The memory part of the recipe's own `--dry_run` for this model folder (recipes/grpo_core/plan.py)."""
    from recipes.grpo_core.plan import memory_estimate

    return memory_estimate(str(model_dir), 1)


def make_model(shape: str, tokenizer_dir: Path, out: Path, device: str, seed: int = 0) -> dict[str, Any]:
    """A random model of this shape (bf16 on CUDA, float32 on CPU) with the tokenizer, as safetensors in `out`."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    cfg = qwen_config(shape, tokenizer_dir)
    torch.manual_seed(seed)
    dtype = torch.bfloat16 if device == "cuda" else torch.float32
    with torch.device(device):
        model = AutoModelForCausalLM.from_config(cfg, dtype=dtype)
    model.save_pretrained(out)
    AutoTokenizer.from_pretrained(tokenizer_dir).save_pretrained(out)
    n = sum(p.numel() for p in model.parameters())
    largest = max(p.numel() for p in model.parameters())
    del model
    if device == "cuda":
        torch.cuda.empty_cache()
    return {"params": n, "largest": largest}


class SmiPeak:
    """Peak GPU memory used, polled from nvidia-smi (all processes on GPU 0) while the block runs."""

    def __init__(self, interval: float = 0.25) -> None:
        self.interval, self.peak_mib, self._stop = interval, None, threading.Event()

    def _poll(self) -> None:
        while not self._stop.is_set():
            try:
                out = subprocess.run(["nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader,nounits",
                                      "-i", "0"], capture_output=True, text=True, timeout=5).stdout.strip()
                if out:
                    self.peak_mib = max(self.peak_mib or 0, int(out.splitlines()[0]))
            except (OSError, subprocess.SubprocessError, ValueError):
                return
            self._stop.wait(self.interval)

    def __enter__(self) -> SmiPeak:
        self._t = threading.Thread(target=self._poll, daemon=True)
        self._t.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._t.join(timeout=10)


def gpu_info() -> dict[str, Any]:
    """This machine's GPU (name, memory) from nvidia-smi; empty without one."""
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=name,memory.total", "--format=csv,noheader,nounits", "-i",
                              "0"], capture_output=True, text=True, timeout=10).stdout.strip()
        name, mib = [x.strip() for x in out.splitlines()[0].split(",")]
        return {"name": name, "memory_gib": int(mib) / 1024}
    except (OSError, subprocess.SubprocessError, ValueError, IndexError):
        return {}


def accelerate_config(work: Path, offload: bool) -> Path:
    """recipes/accelerate/zero3.yaml for one process; with offload, a DeepSpeed config that keeps the optimizer on
    the CPU with torch's AdamW (zero_force_ds_cpu_optimizer false)."""
    import yaml

    cfg = yaml.safe_load((ROOT / "recipes/accelerate/zero3.yaml").read_text())
    cfg["num_processes"] = 1
    if offload:
        ds = {"zero_optimization": {"stage": 3, "offload_optimizer": {"device": "cpu", "pin_memory": True},
                                    "offload_param": {"device": "none"},
                                    "stage3_gather_16bit_weights_on_model_save": True},
              "bf16": {"enabled": "auto"}, "zero_force_ds_cpu_optimizer": False, "zero_allow_untested_optimizer": True,
              "gradient_accumulation_steps": "auto", "gradient_clipping": "auto",
              "train_batch_size": "auto", "train_micro_batch_size_per_gpu": "auto"}
        (work / "ds_offload.json").write_text(json.dumps(ds, indent=1))
        cfg["deepspeed_config"] = {"deepspeed_config_file": str(work / "ds_offload.json"), "zero3_init_flag": True,
                                   "deepspeed_multinode_launcher": "standard"}
        cfg.pop("mixed_precision", None)  # the DeepSpeed file's bf16 "auto" follows the recipe's bf16
    path = work / f"accelerate{'_offload' if offload else ''}.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def row_command(model_dir: Path, data: Path, result: Path, run_dir: Path, steps: int, cpu: bool,
                acc_config: Path | None, liger: bool) -> list[str]:
    """The command of one row: bench/grpo_step.py's child on the paper's sync config (under accelerate on a GPU)."""
    sets = [*ROW_SETS, f"model_name_or_path={model_dir}", f"train_data={data}",
            f"use_liger_kernel={str(liger).lower()}"]
    if cpu:
        sets += ["use_cpu=true", "bf16=false", "dtype=float32", "gradient_checkpointing=false",
                 "max_completion_length=8", "per_device_train_batch_size=4", "gradient_accumulation_steps=1",
                 "num_generations=4", "num_train_examples=8"]
    child = [str(ROOT / "bench/grpo_step.py"), "--child", "hf", "--config", CONFIG, "--steps", str(steps),
             "--result", str(result), "--output_dir", str(run_dir), *sum((["--set", s] for s in sets), [])]
    if cpu:
        return [sys.executable, *child]
    return [sys.executable, "-m", "accelerate.commands.launch", "--config_file", str(acc_config), "--num_processes",
            "1", "--main_process_port", "29531", *child]


def summarise_result(res: dict[str, Any]) -> dict[str, Any]:
    """bench/grpo_step.py's per-phase medians of the timed steps (the last `steps - 1`) plus the child's peaks."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("tase_bench_grpo_step", ROOT / "bench/grpo_step.py")
    grpo_step = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(grpo_step)  # by path: no sys.path edit (tests/test_recipes.py)
    s = grpo_step.summarise(res)
    out = {"step_s": s["step_s"], "generate_s": s["gen_s"], "loss_fwd_s": s["loss_s"], "bwd_opt_s": s["backward_s"],
           "generated_tokens": s["tokens"], "generated_tok_per_s": s["tok_per_s"],
           "step_seconds_all": [round(x["seconds"], 2) for x in res["steps"]]}
    for k in ("peak_gpu_alloc_bytes", "peak_gpu_reserved_bytes"):
        if res.get(k) is not None:
            out[k.replace("_bytes", "_gib")] = res[k] / GIB
    return out


def plan(shapes: list[str], tokenizer_dir: Path, gpu_gib: float | None, cpu: bool, offload_mode: str = "auto",
         host_gib: float | None = None) -> list[dict[str, Any]]:
    """Per shape: parameters, DeepSpeed's estimates and whether the optimizer goes to the CPU (`auto`: where the
    no-offload estimate exceeds FIT of the GPU). A row whose offload needs more host memory than `host_gib` is not
    run: the process would be killed, as the 7B row was on a 128 GiB host."""
    rows = []
    for shape in shapes:
        cfg = qwen_config(shape, tokenizer_dir)
        n = param_count(cfg)
        largest = cfg.vocab_size * cfg.hidden_size
        est = ds_estimates(n, largest)
        if cpu or offload_mode == "never":
            offload = False
        elif offload_mode == "always":
            offload = True
        else:
            offload = gpu_gib is not None and est.get("none") is not None and est["none"] > FIT * gpu_gib
        row = {"shape": shape, "params": n, "largest_layer_params": largest,
               "ds_estimate_gib": est.get("none"), "ds_estimate_offload_gib": est.get("optimizer_cpu"),
               "ds_estimate_offload_host_gib": est.get("cpu_for_offload"), "optimizer_offload": offload,
               "status": "planned"}
        need = est.get("cpu_for_offload")
        if offload and host_gib is not None and need is not None and need > host_gib:
            row["status"] = (f"skipped: does not fit: {est['none']:.1f} GiB on the GPU without offload, and optimizer "
                             f"offload needs {need:.1f} GiB of host memory (this host: {host_gib:.0f} GiB)")
        rows.append(row)
    return rows


def write(out: Path, doc: dict[str, Any]) -> None:
    """The JSON, replaced atomically (a run cut short keeps the rows so far)."""
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(".tmp")
    tmp.write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
    tmp.replace(out)


def run_row(row: dict[str, Any], a: argparse.Namespace, work: Path, tokenizer_dir: Path, left: float) -> None:
    """Make the model, read the dry-run estimate, run the recipe's steps and fill the row in place."""
    shape, cpu = row["shape"], a.cpu_rehearsal
    model_dir = work / f"model_{shape}"
    t0 = time.time()
    made = make_model(shape, tokenizer_dir, model_dir, "cpu" if cpu else "cuda")
    row["make_model_s"] = round(time.time() - t0, 1)
    row["params_built"] = made["params"]
    row["dry_run_estimate"] = dry_run_estimate(model_dir)
    liger = not cpu and _has("liger_kernel")
    row["liger"] = liger
    acc = None if cpu else accelerate_config(work, row["optimizer_offload"])
    result, run_dir = work / f"result_{shape}.json", work / f"run_{shape}"
    cmd = row_command(model_dir, Path(a.prep) / "data" / "train.jsonl", result, run_dir, a.steps, cpu, acc, liger)
    row["command"] = " ".join(cmd)
    env = {**os.environ, "TRL_EXPERIMENTAL_SILENCE": "1", "PYTHONUNBUFFERED": "1"}
    log = work / f"log_{shape}.txt"
    t0 = time.time()
    with SmiPeak() as smi, open(log, "w") as f:
        try:
            proc = subprocess.run(cmd, cwd=ROOT, stdout=f, stderr=subprocess.STDOUT, env=env, timeout=max(left, 10))
            rc = proc.returncode
        except subprocess.TimeoutExpired:
            rc = "timeout"
    row["run_s"] = round(time.time() - t0, 1)
    row["peak_nvidia_smi_gib"] = smi.peak_mib / 1024 if smi.peak_mib is not None else None
    if rc == 0 and result.exists():
        row.update(summarise_result(json.loads(result.read_text())), status="ok")
        peak = row.get("peak_nvidia_smi_gib") or row.get("peak_gpu_alloc_gib")
        if peak and row.get("ds_estimate_gib"):
            ref = row["ds_estimate_offload_gib"] if row["optimizer_offload"] else row["ds_estimate_gib"]
            row["peak_over_estimate"] = peak / ref
    else:
        tail = [x for x in log.read_text(errors="replace").splitlines() if x.strip() and "it/s]" not in x][-3:]
        row.update(status=f"failed ({rc})", error_tail=tail)
    for p in model_dir.glob("*.safetensors"):  # 15 GB at 7B: the disk is 64 GB
        p.unlink()


def _has(module: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(module) is not None


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--prep", default="runs/gpu_smoke/prep", help="bench/gpu_smoke.sh --prepare folder (tokenizer in "
                   "model/, data/train.jsonl)")
    p.add_argument("--shapes", default="0.5B,1.5B,3B,7B")
    p.add_argument("--steps", type=int, default=2, help="optimizer steps per shape (the last is reported)")
    p.add_argument("--budget", type=float, default=540.0, help="seconds for all rows (a row gets what is left)")
    p.add_argument("--out", default=None, help="folder of gpu_memory_table.json (default $OUT, else "
                   "runs/gpu_memory_table)")
    p.add_argument("--work", default=None, help="scratch folder (models, logs; default a temporary one)")
    p.add_argument("--dry-run", action="store_true", help="the plan and its JSON only")
    p.add_argument("--cpu-rehearsal", action="store_true", help="tiny shape, float32, on CPU, no DeepSpeed")
    p.add_argument("--offload", choices=("auto", "always", "never"), default="auto",
                   help=f"optimizer offload to the CPU: auto (where the no-offload estimate exceeds {FIT * 100:.0f}%% "
                   "of the GPU), always (an 80 GiB card's rows on a larger one), never")
    p.add_argument("--host-gib", type=float, default=None, help="host memory that offload may use (default: this "
                   "machine's MemTotal on a GPU run; none assumed on a dry run)")
    a = p.parse_args(argv)
    t_start = time.time()
    shapes = [s.strip() for s in a.shapes.split(",") if s.strip()]
    if a.cpu_rehearsal and a.shapes == p.get_default("shapes"):
        shapes = ["tiny"]
    bad = [s for s in shapes if s not in SHAPES or (s == "tiny" and not a.cpu_rehearsal)]
    if not shapes or bad:
        fail(f"--shapes: unknown {', '.join(bad) or '(none)'}; choose from 0.5B, 1.5B, 3B, 7B (tiny with "
             f"--cpu-rehearsal)")
    if a.steps < 2:
        fail("--steps must be >= 2 (the first step is a warm-up)")
    for flag, v in (("--budget", a.budget), ("--host-gib", a.host_gib)):
        if v is not None and not 0 < v < math.inf:  # nan fails both: a NaN was written into the JSON plan
            fail(f"{flag} must be a number > 0, got {v}")
    tokenizer_dir = Path(a.prep) / "model"
    if not (tokenizer_dir / "tokenizer_config.json").exists() or not (Path(a.prep) / "data" / "train.jsonl").exists():
        fail(f"{a.prep}: no prepared tokenizer and data (bash bench/gpu_smoke.sh --prepare {a.prep} --assets-only)")
    gpu = gpu_info()
    if not a.dry_run and not a.cpu_rehearsal and not gpu:
        fail("no CUDA GPU here (nvidia-smi finds none): run on a GPU machine, or --dry-run / --cpu-rehearsal")
    out = Path(a.out or os.environ.get("OUT") or "runs/gpu_memory_table") / "gpu_memory_table.json"
    from common.paths import blocker_line

    why = blocker_line(out, "--out")  # an existing file as --out: one line, not FileExistsError from mkdir
    if why:
        fail(why)
    if not gpu:  # the per-GPU figures below are for an assumed card, not this machine
        print("no CUDA GPU here: the per-GPU figures assume an 80 GiB GPU" if a.dry_run else
              "no CUDA GPU here: a CPU rehearsal (tiny shape, float32, no DeepSpeed)", flush=True)
    gib = gpu.get("memory_gib") or (80.0 if a.dry_run else None)
    host = a.host_gib if a.host_gib is not None else (None if a.dry_run or a.cpu_rehearsal else host_memory_gib())
    rows = plan(shapes, tokenizer_dir, gib, a.cpu_rehearsal, a.offload, host)
    doc: dict[str, Any] = {"mode": "dry-run" if a.dry_run else "cpu-rehearsal" if a.cpu_rehearsal else "gpu",
                           "gpu": gpu or None, "gpu_memory_gib_assumed": None if gpu else gib, "host_memory_gib": host,
                           "offload": a.offload, "config": CONFIG,
                           "recipe_sets": ROW_SETS, "steps": a.steps, "budget_s": a.budget, "rows": rows,
                           "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "versions": versions()}
    write(out, doc)
    for r in rows:
        print(f"{r['shape']:>5}: {r['params'] / 1e9:.3f}B params, DeepSpeed estimate "
              + (f"{r['ds_estimate_gib']:.2f} GiB (optimizer offload {r['ds_estimate_offload_gib']:.2f} GiB)"
                 if r["ds_estimate_gib"] is not None else "unavailable (no deepspeed)")
              + (", optimizer offload" if r["optimizer_offload"] else "")
              + (f"; {r['status']}" if r["status"] != "planned" else ""), flush=True)
    if a.dry_run:
        print(f"dry run: nothing run; plan in {out}")
        return 0
    work = Path(a.work) if a.work else Path(tempfile.mkdtemp(prefix="gpu_table_"))
    work.mkdir(parents=True, exist_ok=True)
    for r in rows:
        left = a.budget - (time.time() - t_start)
        if r["status"].startswith("skipped"):
            pass
        elif left < 30:
            r["status"] = "skipped: out of time"
        else:
            run_row(r, a, work, tokenizer_dir, left)
        doc["wall_s"] = round(time.time() - t_start, 1)
        write(out, doc)
        print(f"{r['shape']:>5}: {r['status']}"
              + (f", step {r['step_s']:.1f} s, generation {r['generated_tok_per_s']:.0f} "
                 f"tok/s, peak {r.get('peak_gpu_alloc_gib') or 0:.2f} GiB (allocator), "
                 f"{r.get('peak_nvidia_smi_gib') or 0:.2f} GiB (nvidia-smi)" if r["status"] == "ok" else ""),
              flush=True)
    print(f"table: {out}")
    return 0 if all(r["status"] == "ok" or r["status"].startswith("skipped: does not fit") for r in rows) else 1


def versions() -> dict[str, str | None]:
    from importlib import metadata

    out = {}
    for name in ("torch", "transformers", "trl", "accelerate", "deepspeed", "liger-kernel"):
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    return out


if __name__ == "__main__":
    raise SystemExit(main())
