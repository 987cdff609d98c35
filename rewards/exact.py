"""EXACT (beyond-TASE tasks such as `execute`: spell, reverse, insert...): the whole answer must match.

coarse: the extracted answer equals the label after lower-casing and collapsing runs of whitespace.
fine:   1 when coarse is 1, else 0.9 * (1 - d / max(|a|, |b|)) on the normalised strings, with the same
        bounded Levenshtein as MATCH_ANSWER sequences. Worked example, label "c h e v r o n", answer
        "c h e v r o m": d = 1 over 13 characters -> 0.9 * 12/13 = 0.83.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .base import Score, label_of
from .extract import extract_answer
from .match_answer import similarity

_CAP = 0.9


def _norm(s: str) -> str:
    return " ".join(s.lower().split())


def score_exact(completion: str, label: str) -> Score:
    """Score for one EXACT row."""
    extracted = extract_answer(completion)
    pred, lab = _norm(extracted), _norm(label)
    if pred == lab:
        return Score(1.0, 1.0, extracted)
    return Score(0.0, _CAP * similarity(pred, lab), extracted)


def score(example: Mapping[str, Any], completion: str) -> Score:
    return score_exact(completion, label_of(example))
