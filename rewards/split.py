"""SPLIT (COMPM split): decompose a character or word into its components.

coarse: spaces are removed from the extracted answer; the label lists alternative decompositions
        separated by `;`, each a `,`-separated list of parts (each stripped); 1 if every part of some
        alternative is a substring of the answer (order and extra text do not matter; an empty part
        is in every answer, as officially). Loophole: the unsplit word contains every part
        ("Split irritation ..." -> "irritation" passes), and so does any list that holds them.
strict: the official verdict, and the answer read as lists of parts (alternatives split at ; or ；,
        parts at commas, 、, +, /, | and spaces) has every list equal to some alternative of the label,
        part for part and in order: the parts rebuild the word, and every decomposition named is right
        (the label itself, "人,列;亻,列", passes; "人,列;口,列" does not).
fine:   = strict. No credit for some of the pieces: a constant made of frequent components (ㅇ, ㅏ; 亻,
        口) or of cuts near the ends of a word matches part of many labels, and so is paid more than a
        random split (measured on the fixture: docs/rewards.md, "Loopholes").
        Worked example, label "亻,列;人,列": "人, 列" -> 1; "人列" (one part) -> coarse 1, strict 0;
        "列, 人" -> coarse 1, strict 0; "亻, 歹" -> 0.
"""
from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from .base import Score, label_of
from .extract import extract_answer
from .types import ScoringType, register_type

_ALT = re.compile(r"[;；]")
_SEP = re.compile(r"[,，、+/|\s]+")


def answer_parts(group: str) -> list[str]:
    """The parts one decomposition lists, in order (separators: commas, 、, +, /, |, whitespace)."""
    return [p for p in _SEP.split(group.strip(" .。")) if p]


def score_split(completion: str, label: str) -> Score:
    """Score for one SPLIT row (official `split_components`, plus the strict verdict)."""
    extracted = extract_answer(completion)
    pred = extracted.replace(" ", "")
    options = [[p.strip() for p in option.split(",")] for option in label.split(";")]
    if not any(all(p in pred for p in parts) for parts in options):
        return Score(0.0, 0.0, extracted)
    groups = [answer_parts(g) for g in _ALT.split(extracted)]
    groups = [g for g in groups if g]
    ok = float(bool(groups) and all(g in options for g in groups))
    return Score(1.0, ok, extracted, strict=ok)


def score(example: Mapping[str, Any], completion: str) -> Score:
    return score_split(completion, label_of(example))


TYPE = register_type(ScoringType("SPLIT", score))
