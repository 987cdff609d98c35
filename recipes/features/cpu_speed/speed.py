"""A faster sync GRPO step and SFT step on CPU, with float32 weights kept so that what is learned
stays the same.

Five levers, each measured in docs/benchmarks.md ("GRPO step on 2 CPU cores: bf16 where native"):

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

* Each distinct prompt is prefilled once: TRL repeats every prompt `num_generations` times in a row before
  `generate`, whose prefill then computes each repeat again. On a CPU the prefill is compute-bound and most of a
  rollout (45 of 71 s of generation in `make demo`'s GRPO stage, profiled); `shared_prefill_generate` runs the
  distinct prompts once (their shared head once and their own tokens in length buckets, common/prefill.py) and
  hands `generate` their cache, repeated row by row. The loss forward does the same
  (`_shared_prompt_scoring`): each distinct prompt's keys and values are computed once, with their gradients, and
  the completions run on them.

* The SFT warm-up's loss forward computes the batch's common prefix once (`_shared_prefix_scoring`, the same option
  `cpu_shared_prefill`): TRL's SFT collator pads on the right, so every row starts with the chat template's system
  turn and the user turn's header (21 of the demo's 96 padded columns). They run once, batch 1, with their
  gradients; the cache is repeated to every row and the rest of each row runs on it. Its fused LM head scores the
  completion tokens only, as GRPO's does (docs/benchmarks.md, "SFT step").

`speed_up` applies the second to fourth to a built GRPO trainer, `sft_speed_up` the fifth (and the compact head) to
an SFTTrainer; the test is tests/test_cpu_speed.py.
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
    cpu_bf16 is not given, the run is not a GRPO run (sync or async) on CPU, or `bf16` is given explicitly."""
    setting = "false" if setting is None else str(setting).lower()
    if "cpu_bf16" not in given or not on_cpu or trainer not in ("sync", "async") or "bf16" in given:
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


def _distinct_rows(ids: Any, mask: Any) -> tuple[Any, list[int]] | None:
    """The distinct rows (ids and mask alike) wherever they sit: each row's index among them, and the first row of
    each; None when no two rows are equal (nothing to share). TRL repeats a prompt in consecutive rows for `generate`,
    but shuffles the rows of the batch it trains on (the groups of dynamic sampling's rounds included)."""
    import torch

    unique, index = torch.unique(torch.cat([ids, mask.to(ids.dtype)], 1), dim=0, return_inverse=True)
    if unique.shape[0] == ids.shape[0]:
        return None
    first = torch.full((unique.shape[0],), ids.shape[0], dtype=torch.long, device=ids.device)
    first.scatter_reduce_(0, index, torch.arange(ids.shape[0], device=ids.device), reduce="amin")
    return index, first.tolist()


def shared_prefill_generate(model: Any) -> None:
    """`model.generate` that prefills each run of repeated prompt rows once. The distinct prompts go through
    `common.prefill.packed_prefill` (their shared head once, their own tokens in length buckets, all but the last
    token); its cache is repeated to every row of the run, and `generate` then runs the last prompt token and decodes as
    before: the same logits up to float rounding, the same random draws. The returned rows start with the prompt
    tensor as given (TRL slices the completions off at its width). Calls it does not recognise (positional inputs,
    other keyword inputs, several return sequences, dict outputs) go to `generate` unchanged."""
    import torch

    from common.prefill import decode_threads, packed_prefill

    generate = model.generate

    @functools.wraps(generate)
    def shared(*args: Any, **kwargs: Any) -> Any:
        ids, mask, config = kwargs.get("input_ids"), kwargs.get("attention_mask"), kwargs.get("generation_config")
        if (args or ids is None or mask is None or ids.dim() != 2 or ids.shape[1] < 2
                or set(kwargs) - {"input_ids", "attention_mask", "generation_config"}
                or getattr(config, "num_return_sequences", 1) not in (None, 1)
                or getattr(config, "return_dict_in_generate", False)):
            return generate(*args, **kwargs)
        runs = _distinct_rows(ids, mask)
        if runs is None:
            return generate(*args, **kwargs)
        rows, first = runs
        distinct = [ids[i][mask[i].bool()].tolist() for i in first]
        pad = getattr(config, "pad_token_id", None)
        packed = packed_prefill(model, distinct, pad if isinstance(pad, int) else 0)
        if packed is None:
            return generate(*args, **kwargs)
        head_ids, head_mask, cache = packed
        cache.batch_select_indices(rows)
        with decode_threads(len(rows)):  # a small batch decodes faster on one of two threads
            out = generate(input_ids=head_ids[rows], attention_mask=head_mask[rows], generation_config=config,
                           past_key_values=cache)
        return torch.cat([ids, out[:, head_ids.shape[1]:]], 1)

    model.generate = shared
    model._tase_shared_prefill = True


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


def _positions(mask: Any) -> Any:
    """Position ids under left padding, as `generate` gives them (padding at 0)."""
    return (mask.long().cumsum(-1) - 1).masked_fill(mask == 0, 0)


def _padded_outputs(out: Any, skipped: int) -> Any:
    """The fused forward's per-token outputs of a forward that began `skipped` columns in, given the full width again:
    zeros on the skipped columns, which carry no label, as the full forward gives."""
    import torch

    for name in ("log_probs", "entropy", "log_sum_sq_probs", "mean_logits", "is_top1", "label_mask"):
        x = getattr(out, name, None)
        if isinstance(x, torch.Tensor) and x.dim() == 2:
            setattr(out, name, torch.cat([x.new_zeros(x.shape[0], skipped), x], 1))
    return out


def _shared_prompt_scoring(model: Any, forward: Any, kwargs: dict[str, Any]) -> Any | None:
    """The fused-LM-head forward of a GRPO batch with each distinct prompt computed once, or None when the call is not
    one to share (other inputs, no repeated prompt, gradient checkpointing, which drops a given cache).

    TRL scores `prompt + completion` rows whose labels are -100 over the prompt; the rows of a group share their
    prompt (wherever TRL's shuffle of the batch put them). The distinct prompts, all but their last token, run through
    the model once (packed: common/prefill.py, their shared head once and their own tokens in length buckets), keeping
    their keys and values (with their gradients); the cache is repeated to every row (an index, so the gradients of a
    group's rows add up in its one prompt pass) and TRL's own fused forward then runs the rest of each row on it,
    scoring the same labels. Its log-probs start at the prompt's last token; the positions before it carry no label, so
    zeros fill them, as the full forward gives."""
    import torch

    from common.prefill import packed_prefill

    ids, mask, labels = kwargs.get("input_ids"), kwargs.get("attention_mask"), kwargs.get("labels")
    if (ids is None or mask is None or labels is None or ids.dim() != 2
            or set(kwargs) - {"input_ids", "attention_mask", "labels"}
            or getattr(model, "is_gradient_checkpointing", False)):
        return None
    scored = (labels != -100).any(0).nonzero()
    if not len(scored) or int(scored[0]) < 2:
        return None
    start = int(scored[0])  # the first labelled column: the prompt is everything before it
    runs = _distinct_rows(ids[:, :start], mask[:, :start])
    if runs is None:
        return None
    rows, first = runs
    distinct = [ids[i, :start][mask[i, :start].bool()].tolist() for i in first]
    # the padding ids are masked: any id does. `start` columns: the prompts as wide as the batch pads them (dynamic
    # sampling's merge pads to the widest round drawn, wider than the kept groups' longest prompt)
    packed = packed_prefill(model, distinct, 0, grad=True, width=start)
    if packed is None:
        return None
    head_mask, cache = packed[1], packed[2]
    cache.batch_select_indices(rows)
    full = torch.cat([head_mask[rows], mask[:, start:]], 1)  # the packed prompt layout, then the completions
    out = forward(input_ids=ids[:, start - 1:], attention_mask=full, position_ids=_positions(full)[:, start - 1:],
                  past_key_values=cache, labels=labels[:, start - 1:], fused_lm_head=True)
    return _padded_outputs(out, start - 1)  # the full forward's cover positions 0..T-2; these start-1..T-2


def _common_prefix(ids: Any, mask: Any, labels: Any) -> int:
    """How many leading columns every row shares (the same ids, mask 1), capped so that no label falls at or before
    the cut (the rest of each row starts with the token that predicts its first label) and one token of each row is
    left after it; 0 when nothing is shared."""
    shared = int(((ids == ids[:1]).all(0) & (mask == 1).all(0)).long().cumprod(0).sum())
    scored = (labels != -100).any(0).nonzero()
    if not len(scored):
        return 0
    return max(0, min(shared, int(scored[0]) - 1, ids.shape[1] - 1))


def _shared_prefix_scoring(model: Any, forward: Any, kwargs: dict[str, Any]) -> Any | None:
    """The fused-LM-head forward of an SFT training batch with the tokens every row starts with computed once, or None
    when the call is not one to share (other inputs, eval mode, fewer than 2 rows, no common prefix, gradient
    checkpointing, which drops a given cache).

    TRL's SFT collator pads on the right, so the chat template's system turn and the user turn's header sit at
    columns 0..P-1 of every row, with label -100 (completion-only loss). They run through the backbone once (batch 1,
    keeping their keys and values, with their gradients); the cache is repeated to every row (an index, so the rows'
    gradients add up in the one prefix pass), and TRL's own fused forward runs the rest of each row on it with
    position ids P.. and the full attention mask, scoring the same labels with the same count (the loss and
    `num_items_in_batch` mean the same). Its per-token outputs start at column P; the columns before carry no
    label, so zeros fill them, as the full forward gives (TRL's entropy and token accuracy sum over labels only)."""
    import torch

    ids, mask, labels = kwargs.get("input_ids"), kwargs.get("attention_mask"), kwargs.get("labels")
    if (ids is None or mask is None or labels is None or ids.dim() != 2 or ids.shape[0] < 2
            or ids.shape != mask.shape or ids.shape != labels.shape or not model.training
            or set(kwargs) - {"input_ids", "attention_mask", "labels", "use_cache", "num_items_in_batch"}
            or kwargs.get("use_cache") or getattr(model, "is_gradient_checkpointing", False)):
        return None
    cut = _common_prefix(ids, mask, labels)
    if cut < 1:
        return None
    rows, length = ids.shape
    positions = torch.arange(length, device=ids.device).unsqueeze(0)
    cache = model.base_model(input_ids=ids[:1, :cut], attention_mask=mask[:1, :cut], position_ids=positions[:, :cut],
                             use_cache=True).past_key_values
    if not hasattr(cache, "batch_select_indices"):
        return None
    cache.batch_select_indices(torch.zeros(rows, dtype=torch.long, device=ids.device))
    rest = {k: v for k, v in kwargs.items() if k in ("use_cache", "num_items_in_batch")}
    out = forward(input_ids=ids[:, cut:], attention_mask=mask, position_ids=positions[:, cut:].expand(rows, -1),
                  past_key_values=cache, labels=labels[:, cut:], fused_lm_head=True, **rest)
    return _padded_outputs(out, cut)  # the full forward's cover columns 0..T-2; these cut..T-2


def compact_lm_head(model: Any, share_prompts: bool = False, share_prefix: bool = False) -> bool:
    """Make the model's fused-LM-head forward (TRL's `add_fused_lm_head`) score only completion tokens on CPU, and
    with `share_prompts` compute each distinct prompt of the batch once (`_shared_prompt_scoring`, GRPO), with
    `share_prefix` the tokens every row starts with once (`_shared_prefix_scoring`, the SFT warm-up). The switch is
    scoped to this model's forward calls; the backward needs no switch (it sees the compact rows). False where the
    model has no fused head (nothing to change)."""
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
            if (share_prompts or share_prefix) and not args:
                share = _shared_prompt_scoring if share_prompts else _shared_prefix_scoring
                out = share(self, forward, kwargs)
                if out is not None:
                    return out
            return forward(*args, fused_lm_head=True, **kwargs)

    model.forward = types.MethodType(compact_forward, model)
    return True


def speed_up(trainer: Any, shared_prefill: bool = True) -> list[str]:
    """Apply the generation cast, the compact LM head and (unless turned off) the shared prefill to a sync GRPOTrainer
    on CPU; returns what was applied (for the run's rollouts line). Nothing on CUDA runs."""
    import torch

    args = trainer.args
    if not (args.use_cpu or not torch.cuda.is_available()):
        return []
    done = []
    model = trainer.model
    if compact_lm_head(model, share_prompts=shared_prefill):
        done.append("LM head scores completion tokens only" + ("; each distinct prompt computed once in the loss"
                                                               if shared_prefill else ""))
    if shared_prefill and not args.use_vllm:
        shared_prefill_generate(model)
        done.append("each distinct prompt prefilled once")
    if args.bf16 and not args.use_vllm:
        cast_once_generate(model)
        done.append("bf16 autocast (float32 weights), generation casts weights once per batch")
    elif args.bf16:
        done.append("bf16 autocast (float32 weights)")
    return done


def sft_speed_up(trainer: Any, shared_prefix: bool = True) -> list[str]:
    """The SFT warm-up's CPU levers on a built SFTTrainer: its fused LM head scores only the completion tokens and
    (unless turned off) the batch's common prefix is computed once (`_shared_prefix_scoring`); returns what was
    applied, one line each. Nothing on CUDA runs, nor where the model has no fused head (PEFT wraps it)."""
    import torch

    if not (trainer.args.use_cpu or not torch.cuda.is_available()):
        return []
    if not compact_lm_head(trainer.model, share_prefix=shared_prefix):
        return []
    return ["LM head scores completion tokens only" + ("; the batch's shared prefix computed once"
                                                       if shared_prefix else "")]


def describe(setting: str, bf16: bool) -> str:
    """The one line a dry run or a start prints about CPU precision."""
    native = native_bf16()
    return (f"cpu_bf16 {setting}: {'bf16 autocast, float32 weights' if bf16 else 'float32'} "
            f"(this CPU {'has' if native else 'lacks'} native bf16)")

