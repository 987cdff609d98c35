"""Scorers for TASE-style records: the official coarse verdict and a fine-grained partial credit.

`score(example, completion) -> Score` routes by `example["type"]` to one small pure module per type
(number, length, shuffle, split, diff, match_answer, plus exact for beyond-TASE tasks);
`get_reward_funcs(names)` wraps them for TRL's GRPOTrainer. `Score.coarse` is exactly the official
evaluator's verdict (evaluate/metrics.py of the TASE release, Apache-2.0, whose rules are re-implemented
here); `Score.valid` is False where that evaluator would raise and drop the row from its denominator.
Nothing here raises or hangs on any completion. Every rule and formula: docs/rewards.md.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from . import diff, exact, length, match_answer, number, shuffle, split
from .base import INVALID, Score
from .extract import completion_text, extract_answer
from .format import format_score, length_penalty
from .trl import REWARD_FUNCS, get_reward_funcs, make_length_penalty

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


__all__ = [
    "Score",
    "SCORERS",
    "REWARD_FUNCS",
    "score",
    "get_reward_funcs",
    "extract_answer",
    "completion_text",
    "format_score",
    "length_penalty",
    "make_length_penalty",
]
