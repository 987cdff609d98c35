"""The checks on a user's reward function (`--reward_funcs module:function`), made on every batch it scores.

TRL takes whatever a reward function returns: a NaN or an infinity trains (an infinite reward gives `reward: inf`
and a zero gradient, exit 0), and a wrong length, a string, a scalar or an exception ends in a traceback from deep
inside the trainer. `CheckedReward` stops the run at the first such batch with one line naming the function
(`RewardInputError`, which `recipes/grpo.py` `train` turns into the recipe's one line and exit 2). What TRL itself
allows stays allowed: None for a completion the function does not score (TRL reads it as NaN and averages it out).
The check costs one pass over the returned list, so it runs on every batch, not only the first.
"""
from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from rewards.trl import RewardInputError

MAX_REPR = 60  # a returned value is quoted in an error at most this long
FLOAT32_MAX = 3.4028234663852886e38  # TRL stores rewards in a float32 tensor: a larger value becomes inf


def short(value: Any, limit: int = MAX_REPR) -> str:
    """repr(value), cut to `limit` characters: an error line stays one short line whatever the value holds."""
    try:
        text = repr(value)
    except Exception:  # noqa: BLE001 - a user object whose __repr__ raises is still named
        text = f"<{type(value).__name__}>"
    return text if len(text) <= limit else text[: limit - 3] + "..."


def check_rewards(name: str, out: Any, n: int) -> list[float | None]:
    """`out` as TRL needs it: one int/float/bool (finite, within float32) or None per completion, `n` in all;
    RewardInputError naming the function otherwise. A numpy array or tensor is read through its `tolist`."""
    if hasattr(out, "tolist") and not isinstance(out, (str, bytes)):
        out = out.tolist()
    if not isinstance(out, (list, tuple)):
        raise RewardInputError(f"reward function {name} returned {type(out).__name__} {short(out)}; it must return a "
                               f"list of {n} numbers (one per completion, None to skip one)")
    if len(out) != n:
        raise RewardInputError(f"reward function {name} returned {len(out)} values for {n} completions; it must "
                               f"return one per completion")
    for i, r in enumerate(out):
        if r is None:
            continue
        if not isinstance(r, (int, float)):  # a bool is an int: TRL's tensor reads True as 1.0
            raise RewardInputError(f"reward function {name}: value {i} is a {type(r).__name__} ({short(r)}); "
                                   f"rewards are numbers, or None to skip a completion")
        try:
            f = float(r)
        except OverflowError:  # an int past float's range (TRL's float32 tensor would hold inf)
            f = math.inf
        if not math.isfinite(f) or abs(f) > FLOAT32_MAX:
            what = str(r) if isinstance(r, float) else "an integer past float32's range"
            raise RewardInputError(f"reward function {name}: value {i} is {what} (rewards must be finite, within "
                                   f"float32; None skips a completion)")
    return list(out)


def _raised(name: str, e: BaseException) -> RewardInputError:
    first = str(e).splitlines()[0] if str(e) else ""
    first = first if len(first) <= 200 else first[:197] + "..."
    return RewardInputError(f"reward function {name} raised {type(e).__name__}: {first}")


def batch_size(args: tuple, kwargs: dict[str, Any]) -> int:
    """How many completions TRL passed (it calls with keywords; `(prompts, completions)` positionally works too)."""
    comps = kwargs["completions"] if "completions" in kwargs else args[1] if len(args) > 1 else []
    return len(comps) if isinstance(comps, (list, tuple)) else 0


class CheckedReward:
    """A user's reward function with its output checked (check_rewards) and its exceptions named in one line. It
    logs under `name` (TRL logs `rewards/<__name__>/mean`), which load_reward_funcs keeps apart from ours. A module
    level class: the async trainer pickles its reward functions."""

    def __init__(self, func: Callable[..., Any], spec: str, name: str) -> None:
        self.func, self.spec, self.__name__ = func, spec, name
        self.__doc__ = getattr(func, "__doc__", None)

    def __call__(self, *args: Any, **kwargs: Any) -> list[float | None]:
        try:
            out = self.func(*args, **kwargs)
        except RewardInputError:
            raise
        except Exception as e:  # noqa: BLE001 - the user's code failed: name it in one line
            raise _raised(self.spec, e) from None
        return check_rewards(self.spec, out, batch_size(args, kwargs))


class AsyncCheckedReward(CheckedReward):
    """CheckedReward for an `async def` reward (TRL awaits those concurrently: is_async_callable sees this
    __call__)."""

    async def __call__(self, *args: Any, **kwargs: Any) -> list[float | None]:  # type: ignore[override]
        try:
            out = await self.func(*args, **kwargs)
        except RewardInputError:
            raise
        except Exception as e:  # noqa: BLE001
            raise _raised(self.spec, e) from None
        return check_rewards(self.spec, out, batch_size(args, kwargs))


def checked(func: Callable[..., Any], spec: str, taken: set[str]) -> CheckedReward:
    """`func` wrapped in CheckedReward (AsyncCheckedReward for an async one), named by its own name unless that is
    in `taken` (our rewards' names and those before it): then by its import path, `module.function` (a user
    `accuracy_fine` would otherwise be averaged with ours into one logged key)."""
    import functools
    import inspect

    inner = func
    while isinstance(inner, functools.partial):  # TRL's get_callable_name and is_async_callable unwrap these too
        inner = inner.func
    name = getattr(inner, "__name__", type(inner).__name__)
    is_async = (inspect.iscoroutinefunction(inner)
                or inspect.iscoroutinefunction(inner.__call__ if callable(inner) else None))
    if name in taken:
        name = spec.replace(":", ".")
        base, k = name, 2
        while name in taken:
            name, k = f"{base}_{k}", k + 1
    cls = AsyncCheckedReward if is_async else CheckedReward
    return cls(func, spec, name)
