"""Process-wide settings, made by the entry points (`python -m eval`, the recipe scripts), never at import.

OpenMP threads that spin while waiting collapse when CPU cores are shared (measured 5-20x slower generation
on a busy 2-core machine; SmolLM2 forward+backward 24 s -> 15 s); passive waiting costs little when they are
not. It must be set before torch is imported, so each entry point calls `apply()` first thing; an explicit
setting in the environment wins. (The csv field limit for long official rows is set by the reader that
needs it, `synth.readers`.)

vLLM on CPU keeps one core per engine out of its worker's OpenMP threads, for the scheduler process
(`VLLM_CPU_NUM_OF_RESERVED_CPU`, default: one per worker on x86). On a 2-core machine that halves the
model's threads: an evaluation of 48 short prompts took 81-86 s with the reserve and 62-64 s without it
(alternated, two runs each, eval/vllm; docs/benchmarks.md). So the entry points give the worker every
core unless the environment says otherwise; vLLM warns that this is below its minimum, and the scheduler
then shares the cores, which costs less than the idle core did.

Logs are quiet by default (`apply`): vLLM at WARNING unless --verbose / TASE_VERBOSE=1.
"""
from __future__ import annotations

import os


def apply(verbose: bool | None = None) -> None:
    """Set the process-wide defaults above; also quiet by default: vLLM's own log at WARNING or above (its
    INFO lines were 291 of the 482 lines `make demo` printed), progress bars say the rest. `verbose` (the
    `--verbose` flags, or TASE_VERBOSE=1 in the environment) keeps vLLM at INFO."""
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    os.environ.setdefault("VLLM_CPU_NUM_OF_RESERVED_CPU", "0")
    if verbose is None:
        verbose = os.environ.get("TASE_VERBOSE", "") not in ("", "0")
    if verbose:
        os.environ["TASE_VERBOSE"] = "1"  # child processes (the demo's steps, vLLM workers) inherit it
        os.environ["VLLM_LOGGING_LEVEL"] = "INFO"
    else:
        os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")
