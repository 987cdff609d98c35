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


def _parent_cmdline() -> list[str]:
    try:
        with open(f"/proc/{os.getppid()}/cmdline", "rb") as f:
            return [a.decode(errors="replace") for a in f.read().split(b"\0")]
    except OSError:
        return []


def _children(pid: int) -> list[int]:
    """The processes whose parent is `pid` (read from /proc; those that cannot be read are skipped)."""
    out = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat", encoding="utf-8", errors="replace") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        if ppid == pid:
            out.append(int(d))
    return out


def _elastic_agent(parent: list[str]) -> bool:
    """Whether `parent` is torch's elastic agent: torchrun, `python -m torch.distributed.run`, or `accelerate launch`
    with several processes (it runs torch.distributed.run in its own process)."""
    head = parent[:4]
    return (any(a.endswith("/torchrun") or a == "torchrun" or a == "torch.distributed.run" for a in head)
            or (any(a.endswith(("/accelerate", "accelerate.commands.launch")) or a == "accelerate" for a in head[:3])
                and "launch" in " ".join(head)))


def launcher_exit(code: int) -> int:
    """The exit status for a recipe's `__main__`, after its one-line refusal (exit 2) under a launcher that would print
    a traceback of its own under that line (torchrun, accelerate); every other exit is left alone. Linux only (the
    parent is read from /proc).

    - `accelerate launch` with one process: its simple launcher answers a non-zero exit with a CalledProcessError
      traceback. The launcher is ended with SIGTERM first, so the line is the last thing printed; the shell sees 143.
    - torchrun, or `accelerate launch` with several (LOCAL_RANK set): the elastic agent answers with a
      ChildFailedError traceback, and its SIGTERM/SIGINT/SIGHUP handlers print one too, so rank 0 ends the other
      ranks with SIGTERM (as the agent would: none goes on alone, waiting for rank 0 in a collective) and the agent
      with SIGKILL (the shell sees 137), after printing the line (common/errors.quiet_rank). Another rank waits up
      to 10 s for rank 0 to do so; where rank 0 did not refuse (the ranks disagree), it prints its own line and
      leaves the agent to report."""
    import signal
    import time

    from common.errors import release_held

    if code != 2 or not sys.platform.startswith("linux"):
        return code
    parent = _parent_cmdline()
    if os.environ.get("LOCAL_RANK") is not None:
        if not _elastic_agent(parent):
            return code
        sys.stderr.flush()
        agent = os.getppid()
        if os.environ.get("RANK", "0") == "0":
            for pid in _children(agent):  # as the agent would: a rank that did not refuse must not go on alone
                if pid != os.getpid():
                    os.kill(pid, signal.SIGTERM)
            os.kill(agent, signal.SIGKILL)
            return code
        for _ in range(100):
            if os.getppid() != agent:  # rank 0 ended the agent: its line is the one
                release_held()
                return code
            time.sleep(0.1)
        return code  # rank 0 goes on: this rank's own line (held) is printed at exit, the agent reports the rest
    launcher = any(a.endswith(("/accelerate", "accelerate.commands.launch")) or a == "accelerate" for a in parent[:3])
    if launcher and "launch" in " ".join(parent[:4]):
        sys.stderr.flush()
        os.kill(os.getppid(), signal.SIGTERM)
    return code
