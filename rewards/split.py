"""SPLIT (COMPM split): decompose a character or word into its components.

coarse: spaces are removed from the extracted answer; the label lists alternative decompositions
        separated by `;`, each a `,`-separated list of parts (each stripped); 1 if every part of some
        alternative is a substring of the answer (order and extra text do not matter; an empty part
        is in every answer, as officially).
fine:   the best overlap ratio over the alternatives: max over alternatives of parts found / parts.
        Worked example, label "亻,列;人,列": answer "亻, 歹" -> best 1/2 = 0.5; "人列" -> 1.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .base import Score, label_of
from .extract import extract_answer


def score_split(completion: str, label: str) -> Score:
    """Score for one SPLIT row (official `split_components`)."""
    extracted = extract_answer(completion)
    pred = extracted.replace(" ", "")
    best = 0.0
    for option in label.split(";"):
        parts = [p.strip() for p in option.split(",")]
        found = sum(1 for p in parts if p in pred)
        if found == len(parts):
            return Score(1.0, 1.0, extracted)
        best = max(best, found / len(parts))
    return Score(0.0, best, extracted)


def score(example: Mapping[str, Any], completion: str) -> Score:
    return score_split(completion, label_of(example))
