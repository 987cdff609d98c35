"""Scorers for TASE-style records: the official coarse verdict and a fine-grained partial credit.

`score(example, completion) -> Score` routes by `example["type"]` to one pure function per type
(number, length, shuffle, split, diff, match_answer); `get_reward_funcs(names)` wraps them for TRL's
GRPOTrainer. `Score.coarse` is exactly the official evaluator's verdict (evaluate/metrics.py of the
TASE release); `Score.valid` is False where that evaluator would raise and drop the row from its
denominator. Nothing here raises on any completion string.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from .diff import score_diff
from .extract import completion_text, extract_answer
from .format import format_score, length_penalty
from .length import score_length
from .match_answer import score_exact, score_match
from .number import score_number
from .shuffle import score_shuffle
from .split import score_split


@dataclass(frozen=True)
class Score:
    """coarse in {0, 1} (official verdict), fine in [0, 1] (1 iff coarse is 1)."""

    coarse: float
    fine: float
    extracted: str = ""
    valid: bool = True


def _number(ex: Mapping[str, Any], c: str) -> Score:
    return Score(*score_number(ex.get("prompt", ""), c, ex.get("answer", "")))


def _length(ex: Mapping[str, Any], c: str) -> Score:
    return Score(*score_length(ex.get("prompt", ""), c, ex.get("answer", "")))


def _shuffle(ex: Mapping[str, Any], c: str) -> Score:
    return Score(*score_shuffle(ex.get("prompt", ""), c, ex.get("answer", "")))


def _split(ex: Mapping[str, Any], c: str) -> Score:
    return Score(*score_split(ex.get("prompt", ""), c, ex.get("answer", "")))


def _diff(ex: Mapping[str, Any], c: str) -> Score:
    return Score(*score_diff(ex.get("prompt", ""), c, ex.get("answer", ""), ex.get("variation")))


def _match(ex: Mapping[str, Any], c: str) -> Score:
    return Score(*score_match(ex.get("prompt", ""), c, ex.get("answer", ""), ex.get("task", "")))


def _exact(ex: Mapping[str, Any], c: str) -> Score:
    return Score(*score_exact(ex.get("prompt", ""), c, ex.get("answer", "")))


SCORERS: dict[str, Callable[[Mapping[str, Any], str], Score]] = {
    "NUMBER": _number,
    "LENGTH": _length,
    "SHUFFLE": _shuffle,
    "SPLIT": _split,
    "DIFF": _diff,
    "MATCH_ANSWER": _match,
    "EXACT": _exact,
}


def score(example: Mapping[str, Any], completion: Any) -> Score:
    """Score one completion (string or chat messages) for one record; never raises."""
    try:
        text = completion_text(completion)
        fn = SCORERS.get(str(example.get("type", "")))
        if fn is None:
            return Score(0.0, 0.0, extract_answer(text), valid=False)
        return fn(example, text)
    except Exception:  # noqa: BLE001 - a scorer must never take a training run down
        return Score(0.0, 0.0, "", valid=False)


from .trl import REWARD_FUNCS, get_reward_funcs  # noqa: E402

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
]
