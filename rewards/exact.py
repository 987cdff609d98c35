"""EXACT (beyond-TASE tasks such as `execute`: spell, reverse, insert...): the whole answer must match.

coarse: the extracted answer equals the label after lower-casing and collapsing runs of whitespace.
fine:   1 when coarse is 1 (one candidate by construction: equality, so strict = coarse); else the
        echo-relative credit of MATCH_ANSWER sequences (`match_answer.sequence_credit`) on both strings
        with spaces and commas deleted: 0.9 * (d0 - d) / d0 for an answer of plausible length, d its
        edit distance to the label, d0 the distance from the label to the closest stretch of the
        prompt, so an echo of the input earns 0. Worked example, "Spell chevron", label
        "c h e v r o n": d0 = 0 (the prompt holds "chevron"), so a miss earns 0; "Reverse chevron",
        label "norvehc": d0 = 5, "norvehx" -> 0.9 * 4/5 = 0.72.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .base import Score, field, label_of
from .extract import extract_answer
from .match_answer import _clean, sequence_credit
from .types import ScoringType, register_type


def _norm(s: str) -> str:
    return " ".join(s.lower().split())


def score_exact(completion: str, label: str, prompt: str = "") -> Score:
    """Score for one EXACT row."""
    extracted = extract_answer(completion)
    pred, lab = _norm(extracted), _norm(label)
    if pred == lab:
        return Score(1.0, 1.0, extracted)
    return Score(0.0, sequence_credit(_clean(pred), _clean(lab), prompt), extracted)


def score(example: Mapping[str, Any], completion: str) -> Score:
    return score_exact(completion, label_of(example), field(example, "prompt"))


TYPE = register_type(ScoringType("EXACT", score))  # beyond-TASE tasks (execute)
