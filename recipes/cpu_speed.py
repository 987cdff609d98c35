"""A faster sync GRPO step on CPU (issue 52), with float32 weights kept so that what is learned stays the same.

Three levers, each measured in docs/benchmarks.md ("GRPO step on 2 CPU cores: bf16 where native"):

* `cpu_bf16` (TaseArgs: auto, true, false). `auto` turns on bf16 autocast (`bf16: true`, accelerate's mixed
  precision) on a CPU that computes bf16 natively (avx512_bf16 or AMX: oneDNN's bf16 matmuls then run about twice
  the float32 rate) and leaves float32 where bf16 would be emulated (AVX2-only CPUs, where it is slower). The
  weights, their gradients and AdamW's state stay float32 (`dtype: float32`): bf16 weights with a bf16 AdamW would
  round most updates of a 5e-6 learning rate away (an update is ~1e-4 of a weight, bf16 keeps ~4e-3).
  An explicit `bf16` in the config or on the command line wins; only sync runs on CPU are touched; without
  `cpu_bf16` a run keeps the trainer's own bf16 default.
* Generation casts the weights once per `generate` (one autocast region around it), not once per decoded token:
  accelerate wraps each forward in its own autocast region, whose cast cache dies with it, so 32 new tokens
  paid 32 casts of every weight.
* The fused LM head (TRL's `_ChunkedLogProbFunction`) scores only the completion tokens on CPU, as it does on
  CUDA; TRL 1.16 scores every position (prompt included, then masked) off Triton devices to keep tile shapes
  fixed for compilers, which a CPU does not need. The log-probs of completion tokens are the same rows either way.

`speed_up` applies the last two to a built trainer; the test is tests/test_cpu_speed.py.
"""
from __future__ import annotations

import functools
import types
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

CHOICES = ("auto", "true", "false")


def native_bf16(flags: set[str] | None = None) -> bool:
    """Whether this CPU computes bf16 natively (avx512_bf16 or AMX-BF16): the evaluator's answer
    (eval.backends.cpu_has_native_bf16, from /proc/cpuinfo), or from the given flags."""
    if flags is None:
        from eval.backends import cpu_has_native_bf16

        return cpu_has_native_bf16()
    return bool({"avx512_bf16", "amx_bf16"} & flags)


def resolve(setting: str, native: bool | None = None) -> bool:
    """cpu_bf16 -> whether a CPU run trains under bf16 autocast: auto = where native, true = always, false = never."""
    if setting not in CHOICES:
        raise ValueError(f"cpu_bf16 must be one of {', '.join(CHOICES)}, got {setting!r}")
    if setting == "auto":
        return native_bf16() if native is None else native
    return setting == "true"


def bf16_argv(setting: str | None, given: set[str], on_cpu: bool, trainer: str) -> list[str]:
    """The options to add to a recipe's command line for cpu_bf16 (before parsing, as `use_cpu` is added): `--bf16
    true` or `--bf16 false` as it resolves (TRL's GRPOConfig would otherwise turn bf16 on by itself); nothing when
    cpu_bf16 is not given, the run is not a sync run on CPU, or `bf16` is given explicitly."""
    setting = "false" if setting is None else str(setting).lower()
    if "cpu_bf16" not in given or not on_cpu or trainer != "sync" or "bf16" in given:
        resolve(setting, native=False)  # still one line for a bad value
        return []
    return ["--bf16", "true" if resolve(setting) else "false"]


def cast_once_generate(model: Any) -> None:
    """`model.generate` inside one bf16 autocast region: the weights are cast to bf16 on the first decoded token and
    the cast is reused for the rest (autocast caches casts of leaf weights until its outermost region ends)."""
    import torch

    generate = model.generate

    @functools.wraps(generate)
    def one_region(*args: Any, **kwargs: Any) -> Any:
        with torch.autocast("cpu", dtype=torch.bfloat16):
            return generate(*args, **kwargs)

    model.generate = one_region
    model._tase_cast_once_generate = True


@contextmanager
def _compact_scoring() -> Iterator[None]:
    """TRL's fused LM head scores only the positions with a label (its CUDA path) while inside this block."""
    import trl.trainer.utils as tu

    original = tu._use_triton
    tu._use_triton = lambda device: device.type == "cpu" or original(device)
    try:
        yield
    finally:
        tu._use_triton = original


def compact_lm_head(model: Any) -> bool:
    """Make the model's fused-LM-head forward (TRL's `add_fused_lm_head`) score only completion tokens on CPU. The
    switch is scoped to this model's forward calls; the backward needs no switch (it sees the compact rows). False
    where the model has no fused head (nothing to change)."""
    forward = model.forward
    func = getattr(forward, "__func__", None)
    code = getattr(func, "__code__", None)  # TRL's forward carries the model's name and signature (functools.wraps)
    if code is None or "fused_lm_head" not in code.co_varnames[:code.co_argcount + code.co_kwonlyargcount]:
        return False

    @functools.wraps(func)
    def compact_forward(self: Any, *args: Any, fused_lm_head: bool = False, **kwargs: Any) -> Any:
        if not fused_lm_head:
            return forward(*args, **kwargs)
        with _compact_scoring():
            return forward(*args, fused_lm_head=True, **kwargs)

    model.forward = types.MethodType(compact_forward, model)
    return True


def speed_up(trainer: Any) -> list[str]:
    """Apply the generation cast and the compact LM head to a sync GRPOTrainer on CPU; returns what was applied
    (for the run's rollouts line). Nothing on CUDA runs."""
    import torch

    args = trainer.args
    if not (args.use_cpu or not torch.cuda.is_available()):
        return []
    done = []
    model = trainer.model
    if compact_lm_head(model):
        done.append("LM head scores completion tokens only")
    if args.bf16 and not args.use_vllm:
        cast_once_generate(model)
        done.append("bf16 autocast (float32 weights), generation casts weights once per batch")
    elif args.bf16:
        done.append("bf16 autocast (float32 weights)")
    return done


def describe(setting: str, bf16: bool) -> str:
    """The one line a dry run or a start prints about CPU precision."""
    native = native_bf16()
    return (f"cpu_bf16 {setting}: {'bf16 autocast, float32 weights' if bf16 else 'float32'} "
            f"(this CPU {'has' if native else 'lacks'} native bf16)")

