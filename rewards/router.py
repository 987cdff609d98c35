"""The router: `score(example, completion)` dispatches on `example["type"]` to one scorer module per type.

Lives apart from `rewards/__init__` so that `rewards.trl` (and anything else in the package) can import it
without importing the package that imports them (no import cycle); `rewards` re-exports it.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from . import diff, exact, length, match_answer, number, shuffle, split
from .base import INVALID, Score
from .extract import completion_text

Scorer = Callable[[Mapping[str, Any], str], Score]

SCORERS: dict[str, Scorer] = {
    "NUMBER": number.score,
    "LENGTH": length.score,
    "SHUFFLE": shuffle.score,
    "SPLIT": split.score,
    "DIFF": diff.score,
    "MATCH_ANSWER": match_answer.score,
    "EXACT": exact.score,
}


def score(example: Mapping[str, Any], completion: Any) -> Score:
    """Score one completion (a string or chat messages) for one record; never raises.

    A record whose `type` is missing or unknown, or that is not a mapping, gives
    Score(0.0, 0.0, "", valid=False)."""
    try:
        fn = SCORERS.get(example.get("type"))  # type: ignore[arg-type]
        if fn is None:
            return INVALID
        return fn(example, completion_text(completion))
    except Exception:  # noqa: BLE001 - last line of defence: a scorer must never take a run down
        return INVALID
