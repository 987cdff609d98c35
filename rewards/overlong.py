"""DAPO's soft overlong punishment (`soft_overlong`), the one reward that needs the run's max_completion_length and so
is built per run (rewards.get_reward_funcs builds it by name; `--preset dapo` or `soft_overlong: true` adds it)."""
from __future__ import annotations

from typing import Any

from common.errors import TaseError

SOFT_OVERLONG = "soft_overlong"


def overlong_cache(max_completion_length: int, cache: int | None) -> int:
    """DAPO's L_cache: where the soft penalty starts before max_completion_length (default a fifth, DAPO's 4096 of
    20480); one line where it does not fit."""
    if cache is None:
        cache = max(1, max_completion_length // 5)
    if isinstance(cache, bool) or not isinstance(cache, int) or not 0 < cache <= max_completion_length:
        raise TaseError(f"soft_overlong_cache must be an integer in [1, max_completion_length {max_completion_length}]"
                        f", got {cache!r}")
    return cache


def soft_overlong(max_completion_length: int, cache: int | None = None) -> Any:
    """TRL's soft overlong punishment (DAPO Eq. 13: 0 up to L_max - L_cache, then linearly down to -1 at L_max),
    logged under the reward name `soft_overlong`; picklable, so the async rollout worker can take it."""
    from trl.rewards import get_soft_overlong_punishment

    func = get_soft_overlong_punishment(max_completion_length, overlong_cache(max_completion_length, cache))
    func.__name__ = SOFT_OVERLONG  # TRL logs rewards/<__name__>/mean
    return func
