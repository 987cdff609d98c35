"""NUMBER (FREQ, LENOP count, COMPC): a count.

coarse: the last integer (`\\d+`) of the extracted answer equals, as a digit string, the first integer
        of the label; an empty completion, an empty label or a missing integer on either side -> 0.
        String comparison is the official rule, so "05" does not match "5".
fine:   = coarse. No partial credit for a near count: credit that grows towards the gold value pays a
        constant near the middle of the range on every row (a CPU GRPO run converged to exactly that
        hedge), and any such kernel pays a central constant more than a uniform random guess.
        The official rule has no list loophole (only the last integer counts), so strict = coarse.
"""
from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from .base import Score, label_of, pool_max
from .extract import extract_answer
from .types import ScoringType, register_type

_INT = re.compile(r"\d+")  # Unicode digits included, as in the official regex


def last_integer(text: str) -> str | None:
    """The last run of digits, without materialising every match (1 MB completions stay cheap)."""
    m = None
    for m in _INT.finditer(text):  # noqa: B007 - the loop only keeps the last match
        pass
    return m.group() if m else None


def score_number(completion: str, label: str) -> Score:
    """Score for one NUMBER row (official `match_number`)."""
    extracted = extract_answer(completion)
    if not completion or not label:
        return Score(0.0, 0.0, extracted)
    gold = _INT.search(label)
    if gold is None:
        return Score(0.0, 0.0, extracted)
    pred = last_integer(extracted)
    if pred is None:
        return Score(0.0, 0.0, extracted)
    if pred == gold.group():
        return Score(1.0, 1.0, extracted)
    return Score(0.0, 0.0, extracted)


def score(example: Mapping[str, Any], completion: str) -> Score:
    return score_number(completion, label_of(example))


def valid_answers(rec: Mapping[str, Any], pool: Sequence[str]) -> list[str]:
    """A random count guess: 0 up to the largest count among the file's labels."""
    return [str(i) for i in range(pool_max(pool) + 1)]


TYPE = register_type(ScoringType("NUMBER", score, valid_answers=valid_answers))
