"""Answer-independent strategies and valid-answer sets: what the training rewards are checked against.

Why: the official verdict pays some answers that do not answer the question (a list of every option, the
unsplit word, ...). The training rewards (`accuracy_strict`, `accuracy_fine`) must pay such a strategy
no more than a uniform random guess among the row's valid answers. This module builds both sides from a
record's prompt (never from its label) so that `bench/loophole_audit.py` (the measured pass rates in
docs/rewards.md) and the property tests check the same strategies.

- `valid_answers(rec, pool)`: the answers a random guess picks from (SORT: the 6 orders; DOT: the listed
  classes; NUMBER: 0..max of `pool`; SPLIT en: every split of the word into the asked number of pieces;
  DIFF: the yes-word and every token of the two sequences; COMPM combine en: every order of the pieces;
  LENGTH: texts of 1..M units, M the largest target in `pool` (the target is the label here: `relabel`
  moves it); SHUFFLE: reorderings of the input). Where the prompt does not enumerate them, `pool` (the
  distinct labels of the row's file, one per answer the official cleaning tells apart) stands in.
- `relabel(rec, answer)`: the row with `answer` as its label (LENGTH: the prompt asking for that many
  units), for the bound with the label drawn uniformly from the valid answers.
- `strategies(rec, pool)`: name -> answer text, each computed without the label: the echo of the prompt,
  the echo of its input, every option listed at once, and per type the known hedges (the unsplit word,
  every permutation of the pieces, a fixed-length text).

What is particular to a type (its valid answers, its input, its relabelling, its hedges) is declared by the
type's own module in its registration (`rewards.types.ScoringType`); this module holds the rules every type
shares and the defaults.
"""
from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from .base import field
from .types import get_type


def input_text(rec: Mapping[str, Any]) -> str:
    """The input a question hands over (what an echo strategy repeats): the type's own (`ScoringType.input_text`),
    else the text after the colon of the question's last line."""
    t = get_type(field(rec, "type"))
    own = t.input_text(rec) if t is not None and t.input_text is not None else None
    if own is not None:
        return own
    lines = [ln for ln in field(rec, "prompt").strip().splitlines() if ln.strip()]
    last = lines[-1] if lines else ""
    parts = re.split(r"[:：]", last, maxsplit=1)
    return (parts[1] if len(parts) == 2 else last).strip().strip("'‘’\"")


def relabel(rec: Mapping[str, Any], answer: str) -> dict[str, Any]:
    """The row with `answer` as its label (a type without a stored label moves its own: LENGTH's target)."""
    t = get_type(field(rec, "type"))
    if t is not None and t.relabel is not None:
        return t.relabel(rec, answer)
    return dict(rec, answer=answer)


def valid_answers(rec: Mapping[str, Any], pool: Sequence[str] = ()) -> list[str]:
    """The answers a uniform random guess picks from, built from the prompt (and `pool`), not the label: the
    type's own (`ScoringType.valid_answers`), else the pool's labels that the official cleaning tells apart."""
    t = get_type(field(rec, "type"))
    own = t.valid_answers(rec, pool) if t is not None and t.valid_answers is not None else None
    if own is not None:
        return own
    distinct: dict[str, str] = {}
    for p in sorted(pool):  # labels the official cleaning cannot tell apart ("Γ", "γ") are one answer
        distinct.setdefault(re.sub(r"[,。，:：；;、 ]", "", p).lower().strip(), p)
    return list(distinct.values()) or [""]


def strategies(rec: Mapping[str, Any], pool: Sequence[str] = ()) -> dict[str, str]:
    """Answer-independent strategies for a row: name -> answer text (to be put in answer tags)."""
    opts = valid_answers(rec, pool)
    out = {"echo prompt": field(rec, "prompt"), "echo input": input_text(rec), "every option": " ".join(opts)}
    t = get_type(field(rec, "type"))
    if t is not None and t.hedges is not None:
        out.update(t.hedges(rec, opts))
    return out
