"""Per-reward logging with weights (verl users ask for it, verl-project/verl#2889): what each reward
function contributes to the reward GRPO trains on, beside its raw mean. TRL logs `rewards/<name>/mean` (raw) and
`reward` (the weighted sum); a run with `1.0 * accuracy_fine + 0.2 * format` could not see which term moved it.
Each reward function is wrapped so that it also logs, through TRL's `log_metric` hook
(recipes/features/tracking/metrics.py says how it reaches metrics.jsonl and the trackers):

    tase/reward/<name>/mean       the raw mean of its batch (None, a function that does not apply, left out)
    tase/reward/<name>/weighted   weight x that mean: the reward's contribution to the mean total reward

`<name>` is the name TRL logs the function under (its `__name__`), so the two sit beside `rewards/<name>/mean`.
Each process logs its own part of the batch and TRL averages the parts: with equal parts (GRPO's are), the mean of
the whole batch."""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from recipes.features.tracking.metrics import PREFIX


def reward_name(func: Any) -> str:
    """The name TRL logs a reward function under (trl.trainer.utils.get_callable_name)."""
    from trl.trainer.utils import get_callable_name

    return get_callable_name(func)


def contribution(values: Sequence[float | None], weight: float) -> tuple[float, float] | None:
    """(raw mean, weight x raw mean) of one batch's rewards, None where the function applied to no row."""
    scored = [float(v) for v in values if v is not None]
    if not scored:
        return None
    mean = sum(scored) / len(scored)
    return mean, weight * mean


class WeightedLog:
    """A reward function that returns exactly what it wraps, keeps its name, and logs its raw mean and weighted
    contribution through `log_metric` where the trainer passes one (TRL's GRPOTrainer does)."""

    def __init__(self, func: Callable[..., Any], weight: float) -> None:
        self.func, self.weight = func, float(weight)
        self.__name__ = reward_name(func)
        self.__doc__ = getattr(func, "__doc__", None)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        out = self.func(*args, **kwargs)
        log = kwargs.get("log_metric")
        if callable(log) and out is not None:
            got = contribution(list(out), self.weight)
            if got is not None:
                log(f"{PREFIX}reward/{self.__name__}/mean", got[0])
                log(f"{PREFIX}reward/{self.__name__}/weighted", got[1])
        return out


def log_weighted(funcs: list[Any], weights: Sequence[float]) -> list[Any]:
    """The run's reward functions, each synchronous one wrapped in WeightedLog with its weight (an async one is left
    as it is: TRL awaits it, and a wrapper would hide its coroutine)."""
    from trl.trainer.utils import is_async_callable

    if len(funcs) != len(weights):
        raise ValueError(f"{len(weights)} weights for {len(funcs)} reward functions")
    return [f if is_async_callable(f) else WeightedLog(f, w) for f, w in zip(funcs, weights, strict=False)]


class WorkerRewardLog:
    """The async rollout worker's reward logging (a rollout hook, recipes/features/reward_log.py): each sample of a
    scored group carries its completion's raw reward and weight x raw under the same keys as sync runs; TRL's
    collator averages each key over the samples that have it, so the logged values are the batch's raw mean and
    weighted contribution (a function that returned None for a completion is left out of its mean). Reads the raw
    values the worker's weighted reward functions kept (recipes/async_grpo/cpu_engine.WeightedReward.last)."""

    def __call__(self, loop: Any, group: Any, samples: list) -> list:
        rows = [i for i, seqs in enumerate(group.completions_sequences) for _ in seqs]  # a conversation's rows share it
        for func in loop.reward_funcs:
            raw, weight = getattr(func, "last", None), getattr(func, "weight", 1.0)
            if not raw:
                continue
            name = getattr(func, "raw_name", reward_name(func))
            for sample, i in zip(samples, rows, strict=False):
                if i < len(raw) and raw[i] is not None:
                    sample.metrics[f"{PREFIX}reward/{name}/mean"] = float(raw[i])
                    sample.metrics[f"{PREFIX}reward/{name}/weighted"] = weight * float(raw[i])
        return samples
