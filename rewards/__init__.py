"""Scorers for TASE-style records: the official coarse verdict, the strict verdict (the official one
without its loopholes) and the training credit built on it (fine).

`score(example, completion) -> Score` (in `rewards.router`) routes by `example["type"]` to one small pure module per
type (number, length, shuffle, split, diff, match_answer, plus exact for beyond-TASE tasks);
`get_reward_funcs(names)` wraps them for TRL's GRPOTrainer. `Score.coarse` is exactly the official
evaluator's verdict (evaluate/metrics.py of the TASE release, Apache-2.0, whose rules are re-implemented
here); `Score.strict` refuses what passes it only through a loophole (a list holding the label, the unsplit
word, two guesses), and `Score.fine`, the training reward, pays no answer-independent strategy more than a
random guess (rewards.loopholes, docs/rewards.md "Loopholes"); `Score.valid` is False where that
evaluator would raise and drop the row from its denominator.
Nothing here raises or hangs on any completion. Every rule and formula: docs/rewards.md.
"""
from __future__ import annotations

from .base import INVALID, Score
from .extract import completion_text, extract_answer
from .format import format_score, length_penalty
from .router import SCORERS, Scorer, score
from .trl import REWARD_FUNCS, get_reward_funcs, make_length_penalty

__all__ = [
    "INVALID",
    "Score",
    "Scorer",
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
