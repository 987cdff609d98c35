"""Multi-process training without CUDA: the settings `recipes/grpo.py` makes for accelerate + DeepSpeed on CPU.

Why each piece exists (measured with accelerate 1.15, transformers 5.19, DeepSpeed 0.19.8, torch 2.13 CPU):

* `use_cpu` is set by the recipe on a machine without CUDA. Without it transformers' `TrainingArguments` asks
  accelerate for a device backend, finds none on CPU and starts each process alone (`DistributedType.NO`); under
  ZeRO-3 DeepSpeed then stops with `train_batch_size is not equal to micro_batch_per_gpu * gradient_acc_step *
  world_size`. With `use_cpu` the processes join one gloo group; accelerate still prepares the model with
  DeepSpeed (the `Accelerator` is built without `cpu=True`, so `ACCELERATE_USE_DEEPSPEED` from `accelerate
  launch` wins) and DeepSpeed's CPU accelerator runs ZeRO-3 over that group. `accelerate launch --cpu
  --use_deepspeed` is refused by accelerate's launcher, so the config file cannot say it either.
* DeepSpeed's CPU communication backend JIT-compiles its shared-memory all-reduce op with g++ on first use
  (0.6-2.5 min on 2 cores) into torch's extension folder. `make install` builds it once into the venv
  (`.venv/torch_extensions`, see the Makefile), and `TORCH_EXTENSIONS_DIR` points there when that folder holds it;
  otherwise into the project cache (`$TASE_CACHE/torch_extensions`), so that it is built once per install (or per
  cache) and not per process, per run or per emptied cache (CI empties every cache, not the venv).
* `check_precision` turns a mismatch between the accelerate config's `mixed_precision` and the recipe's
  `bf16`/`fp16` into one line; DeepSpeed would otherwise fail deep in `deepspeed.initialize` with a list of
  mismatching config values.
* `ZeroPartitionReport` prints, per rank, how many parameter elements the rank holds under ZeRO-3, so that a
  run shows (and tests/test_zero3_cpu.py asserts) that the parameters really are partitioned.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any


def project_cache() -> Path:
    """The project's cache folder (as common.models: `$TASE_CACHE`, default ~/.cache/tase-grpo)."""
    return Path(os.environ.get("TASE_CACHE") or Path.home() / ".cache" / "tase-grpo")


SHM_OP = "deepspeed_shm_comm"  # DeepSpeed's CPU shm all-reduce op (ShareMemCommBuilder.NAME)


def install_extensions() -> Path:
    """Where `make install` builds DeepSpeed's CPU comm op: the venv of the running interpreter."""
    return Path(sys.prefix) / "torch_extensions"


def extension_cache() -> None:
    """Use DeepSpeed's JIT ops (the CPU shm all-reduce) built at install when present, else build them once into the
    project cache; an explicit TORCH_EXTENSIONS_DIR wins."""
    prebuilt = install_extensions()
    where = prebuilt if (prebuilt / SHM_OP / f"{SHM_OP}.so").is_file() else project_cache() / "torch_extensions"
    os.environ.setdefault("TORCH_EXTENSIONS_DIR", str(where))


def deepspeed_launch() -> bool:
    """Whether `accelerate launch` was given a DeepSpeed config (it exports ACCELERATE_USE_DEEPSPEED)."""
    return os.environ.get("ACCELERATE_USE_DEEPSPEED", "").lower() in ("1", "true")


def precision_mismatch(cfg: Any) -> str | None:
    """One line when accelerate's mixed_precision (from the launch config) contradicts the recipe's bf16/fp16."""
    launched = os.environ.get("ACCELERATE_MIXED_PRECISION", "").lower()
    if not launched or not deepspeed_launch():
        return None
    if os.environ.get("ACCELERATE_DEEPSPEED_CONFIG_FILE"):
        # with a DeepSpeed config file accelerate refuses a mixed_precision of its own and exports "no"; the file's
        # bf16/fp16 block governs, and its "auto" follows the recipe (bench/gpu_memory_table.py's offload rows)
        return None
    recipe = "bf16" if cfg.bf16 else "fp16" if cfg.fp16 else "no"
    if launched == recipe:
        return None
    flag = {"bf16": "--bf16 true", "fp16": "--fp16 true", "no": "--bf16 false"}[launched] if launched in (
        "bf16", "fp16", "no") else f"a precision matching {launched}"
    recipe = {"no": "float32 (bf16: false)", "bf16": "bf16", "fp16": "fp16"}[recipe]
    return (f"the accelerate config says mixed_precision: {launched} but the recipe trains in {recipe}; DeepSpeed "
            f"needs both to agree: pass {flag} to the recipe, or the matching --mixed_precision to accelerate launch")


def ZeroPartitionReport() -> Any:  # noqa: N802  (a factory: transformers is imported only when it is used)
    """A TrainerCallback printing, at the start of training, each rank's share of the ZeRO-3 partitioned parameters:
    `zero3: rank R/W holds L of T parameter elements (N partitioned tensors)`."""
    from transformers import TrainerCallback

    class _Report(TrainerCallback):
        def on_train_begin(self, args, state, control, model=None, **kw):
            if model is None:
                return
            params = list(model.parameters())
            parted = [p for p in params if hasattr(p, "ds_tensor")]
            if not parted:
                return
            total = sum(int(p.ds_numel) for p in parted)
            local = sum(int(p.ds_tensor.numel()) for p in parted)
            rank, world = int(os.environ.get("RANK", "0")), int(os.environ.get("WORLD_SIZE", "1"))
            print(f"zero3: rank {rank}/{world} holds {local} of {total} parameter elements "
                  f"({len(parted)} partitioned tensors of {len(params)})", flush=True)

    return _Report()


def launcher_exit(code: int) -> int:
    """The exit status for a recipe's `__main__`, after its one-line refusal under `accelerate launch` with one
    process. accelerate's simple launcher (accelerate/commands/launch.py, simple_launcher) answers any non-zero exit
    of the script with a CalledProcessError traceback of its own, under our one line (issue 66). Where this process's
    parent is that launcher and the recipe refused (exit 2, its line already printed), the launcher is ended with
    SIGTERM first, so the line is the last thing printed; the shell sees 143 (128 + SIGTERM) instead of 1. Multi-process
    launchers (torchrun sets LOCAL_RANK) and every other exit are left alone."""
    import signal

    if code != 2 or os.environ.get("LOCAL_RANK") is not None or not sys.platform.startswith("linux"):
        return code
    try:
        with open(f"/proc/{os.getppid()}/cmdline", "rb") as f:
            parent = [a.decode(errors="replace") for a in f.read().split(b"\0")]
    except OSError:
        return code
    launcher = any(a.endswith(("/accelerate", "accelerate.commands.launch")) or a == "accelerate" for a in parent[:3])
    if launcher and "launch" in " ".join(parent[:4]):
        sys.stderr.flush()
        os.kill(os.getppid(), signal.SIGTERM)
    return code
