"""What `trainer: async` changes in the options recipes/grpo_core/args.py parses: TRL's AsyncGRPOConfig takes the place
of GRPOConfig (TaseAsyncGRPOConfig stays in grpo_args, where pickled training_args.bin files find it), ModelConfig loses
`dtype` (AsyncGRPOConfig owns it), and a sync-only option is one line naming it."""
from __future__ import annotations

from common.errors import TaseError

ASYNC_REFUSED = {  # ModelConfig options AsyncGRPOTrainer does not take (why, in one line)
    "attn_implementation": "AsyncGRPOTrainer always packs samples into a prefix tree run by its own tree attention "
                           "(FlashAttention-3 on CUDA, recipes/async_grpo/patches.py on CPU)",
}


def async_model_config() -> type:
    """TRL's ModelConfig without `dtype`, which AsyncGRPOConfig owns (both in one TrlParser clash on --dtype)."""
    import dataclasses

    from trl import ModelConfig

    fields = []
    for f in dataclasses.fields(ModelConfig):
        if f.name == "dtype":
            continue
        kw = {"metadata": f.metadata}
        if f.default is not dataclasses.MISSING:
            kw["default"] = f.default
        elif f.default_factory is not dataclasses.MISSING:
            kw["default_factory"] = f.default_factory
        fields.append((f.name, f.type, dataclasses.field(**kw)))
    return dataclasses.make_dataclass("AsyncModelConfig", fields)


def check_async_options(given: set[str]) -> None:
    """trainer: async takes TRL's AsyncGRPOConfig: a GRPOConfig option it lacks is one line, not argparse's usage."""
    import dataclasses

    from trl import GRPOConfig
    from trl.experimental.async_grpo import AsyncGRPOConfig

    only_sync = {f.name for f in dataclasses.fields(GRPOConfig)} - {f.name for f in dataclasses.fields(AsyncGRPOConfig)}
    bad = sorted(given & (only_sync | set(ASYNC_REFUSED)))
    if bad:
        why = "; ".join(f"{k}: {ASYNC_REFUSED[k]}" for k in bad if k in ASYNC_REFUSED)
        raise TaseError(f"trainer: async does not support {', '.join(bad)} (TRL's AsyncGRPOConfig has no such option"
                        + (f"; {why}" if why else "") + "); remove it or use trainer: sync. Reward weights: use "
                        "format_weight")
