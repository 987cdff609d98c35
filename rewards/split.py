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

import itertools
import re
from collections.abc import Mapping, Sequence
from typing import Any

from .base import QUOTED, Score, field, label_of, sample_options
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


def split_word(prompt: str) -> str:
    """The word or character a SPLIT prompt asks to decompose: `Split WORD into`, `“字”`, `'쇽'`."""
    m = re.search(r"Split\s+(\S+)\s+into", prompt) or QUOTED.search(prompt)
    return m.group(1) if m else ""


def input_text(rec: Mapping[str, Any]) -> str:
    return split_word(field(rec, "prompt"))


def valid_answers(rec: Mapping[str, Any], pool: Sequence[str]) -> list[str] | None:
    """English: every split of the word into the asked number of pieces; else None (the file's labels)."""
    if field(rec, "lang") != "en":
        return None
    prompt = field(rec, "prompt")
    word, k = split_word(prompt), max(1, prompt.count("from "))
    cuts = itertools.combinations(range(1, len(word)), k - 1)
    return sample_options([", ".join(word[i:j] for i, j in zip((0, *c), (*c, len(word)), strict=False)) for c in cuts],
                          prompt)


def hedges(rec: Mapping[str, Any], options: list[str]) -> dict[str, str]:
    """The unsplit word (the official rule accepts it where the label lists it as an alternative), alone and
    before every option."""
    word = split_word(field(rec, "prompt"))
    return {"unsplit word": word, "word, then every option": word + " " + " ".join(options)}


TYPE = register_type(ScoringType("SPLIT", score, input_text=input_text, valid_answers=valid_answers, hedges=hedges))
