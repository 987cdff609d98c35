"""A reward defined outside the project, as a user would write one: tests/test_tracking.py trains with it by
import path (`--reward_funcs tests.user_rewards:brevity`). TRL passes the batch as keyword lists."""
from __future__ import annotations

from typing import Any


def brevity(completions: list[Any], **kwargs: Any) -> list[float]:
    """1 for an empty completion, falling linearly to 0 at 40 characters (chat messages or strings)."""
    texts = [c[-1]["content"] if isinstance(c, list) else str(c) for c in completions]
    return [max(0.0, 1.0 - len(t) / 40) for t in texts]


NOT_A_FUNCTION = 3
