"""A vLLM platform plugin: on CPUs without native bfloat16, `dtype="auto"` means float32.

Why: vLLM's CPU platform claims bfloat16 on every x86 CPU, so `dtype="auto"` keeps bf16 checkpoints (the
default model folder) in bf16 and even downcasts float32 checkpoints to it (`vllm/config/model.py`,
`_resolve_auto_dtype`). On a CPU without AVX512-BF16 or AMX,
bf16 is emulated and about 4.7x slower than float32 (a SmolLM2 prefill of 8 x 64 tokens: 8.5-9.0 s vs 1.8-1.9 s
on the 2-core AVX2 EPYC, docs/benchmarks.md). Our own evaluator passes an explicit dtype, but TRL 1.16 builds its
colocated `LLM(...)` (and `trl vllm-serve` its server) with no dtype, so GRPO rollouts on such CPUs ran emulated
bf16 against a float32 policy: slower, and off-policy by bf16 noise.

How: vLLM's public platform-plugin entry point (`vllm.platform_plugins`, registered in pyproject.toml). The
function below is called by vLLM in every process when it resolves its platform; it returns our subclass of
vLLM's own `CpuPlatform` only where vLLM would pick that class and the CPU lacks native bf16, else None (then
vLLM's built-in detection decides, unchanged: GPUs, CPUs with bf16, Zen+zentorch). The subclass changes one
thing: `supported_dtypes` is `[float32]`, what this CPU computes natively, so "auto" runs bf16 and float16
checkpoints upcast to float32 (exact; vLLM logs "doesn't support torch.bfloat16. Falling back to
torch.float32") and float32 ones as they are. An explicit `dtype=` still wins: vLLM checks
`supported_dtypes` only to resolve "auto".

The switch, `TASE_VLLM_CPU_FP32`: unset or `1` as above; `0` turns the plugin off (vLLM's own "auto": bf16 on every
x86 CPU, emulated where not native); `force` turns it on even where bf16 is native, so a machine with AVX512-BF16
can run the float32 path of an AVX2-only CPU (the suite is checked under `0` and `force`, docs/benchmarks.md).
Any other value is named in one warning line and read as unset: vLLM swallows a plugin's exceptions.

Upstreamable as-is: the same check in `CpuPlatform.supported_dtypes` (no bf16 or fp16 where the CPU has no
native bf16) is the whole change vLLM would need.
"""
from __future__ import annotations

import os
from collections.abc import Mapping

ENV = "TASE_VLLM_CPU_FP32"
MODES = ("0", "1", "force")  # off, on without native bf16 (the default), on everywhere
_warned: list[str] = []


def mode(env: Mapping[str, str] | None = None) -> str:
    """The switch's value in `env` (os.environ by default), one of MODES; a bad value is named once per process
    and read as the default "1"."""
    import sys

    value = (os.environ if env is None else env).get(ENV, "1").strip().lower() or "1"
    if value in MODES:
        return value
    if value not in _warned:
        _warned.append(value)
        print(f"warning: {ENV}={value!r} is not one of 0, 1, force; using 1", file=sys.stderr)
    return "1"


def active(native_bf16: bool | None = None, env: Mapping[str, str] | None = None) -> bool:
    """Whether the switch asks for float32 on a CPU with (or without) native bf16; the CPU's own flags by default."""
    m = mode(env)
    if m == "0":
        return False
    if m == "force":
        return True
    if native_bf16 is None:
        from .backends import cpu_has_native_bf16

        native_bf16 = cpu_has_native_bf16()
    return not native_bf16


def platform(env: Mapping[str, str] | None = None) -> str | None:
    """vLLM platform-plugin hook (called with no argument): the qualified name of the platform class to use, or
    None to stay out. Tests pass `env` to ask what a subprocess with that environment gets."""
    if not active(env=env):
        return None
    try:
        from vllm.platforms import cpu_platform_plugin
    except ImportError:
        return None
    if cpu_platform_plugin() != "vllm.platforms.cpu.CpuPlatform":  # a GPU build, or Zen with zentorch
        return None
    return "eval.vllm_cpu.Float32FirstCpuPlatform"


def __getattr__(name: str):  # the class is built lazily: importing this module must not import vLLM
    if name == "Float32FirstCpuPlatform":
        import torch
        from vllm.platforms.cpu import CpuPlatform

        class Float32FirstCpuPlatform(CpuPlatform):
            """vLLM's CPU platform, float32 only for `dtype="auto"`: no emulated bf16 or fp16."""

            @property
            def supported_dtypes(self) -> list[torch.dtype]:
                return [torch.float32]

        Float32FirstCpuPlatform.__module__ = __name__
        Float32FirstCpuPlatform.__qualname__ = "Float32FirstCpuPlatform"
        globals()[name] = Float32FirstCpuPlatform
        return Float32FirstCpuPlatform
    raise AttributeError(name)
