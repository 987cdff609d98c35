"""The router: `score(example, completion)` dispatches on `example["type"]` to one scorer module per type.

Lives apart from `rewards/__init__` so that `rewards.trl` (and anything else in the package) can import it
without importing the package that imports them (no import cycle); `rewards` re-exports it.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

# The scoring types: each module registers its `ScoringType` (rewards.types) when imported, so this line is
# the whole registration of their behaviour (their catalogue rows are common.types'), in the catalogue's order.
# isort: off
from . import number, length, shuffle, split, diff, match_answer, exact  # noqa: F401 - the catalogue's order
# isort: on
from .base import INVALID, Score
from .extract import completion_text
from .types import Scorer, ScorerView, get_type

SCORERS: Mapping[str, Scorer] = ScorerView()  # type name -> scorer, a live view of the registry


def score(example: Mapping[str, Any], completion: Any) -> Score:
    """Score one completion (a string or chat messages) for one record; never raises.

    A record whose `type` is missing or unknown, or that is not a mapping, gives
    Score(0.0, 0.0, "", valid=False)."""
    try:
        t = get_type(example.get("type"))
        if t is None:
            return INVALID
        return t.score(example, completion_text(completion))
    except Exception:  # noqa: BLE001 - last line of defence: a scorer must never take a run down
        return INVALID
