"""Gold completions: a correct, tagged answer for any record, checked by `rewards.score`.

Why: `eval gold` and the tests feed these to `eval score`, which must then report 100.0 in every table;
that checks the whole path (data reader, scorer routing, aggregation) on real rows. Rows without a
stored label get a constructed answer: REORD (SHUFFLE) a reordering with no original neighbours kept,
built by the same solver as the synthetic REORD solutions (`synth.tasks._common.non_adjacent_order`),
LENOP generate (LENGTH) text with the requested number of units.
"""
from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from rewards import score
from rewards.length import target_length
from rewards.shuffle import input_line, kind, tokens
from synth.tasks._common import non_adjacent_order

FILLER = {"zh": "字", "ko": "가"}


class GoldError(ValueError):
    """No correct completion could be built for a record (one line naming its id)."""


def tag(text: str) -> str:
    return f"<answer>{text}</answer>"


def shuffle_answer(prompt: str) -> str | None:
    """A reordering of a REORD prompt's input line (its official tokens) that keeps no original
    neighbours under the official greedy rule, or None when the solver finds none (a line of 2 or 3
    tokens, or one like "a a a a a"; it is exact up to 16 tokens)."""
    line = input_line(prompt)
    if line is None:
        return None
    toks = tokens(line)
    order = non_adjacent_order(toks)
    if order is None:
        return None
    return (" " if kind(line) == "word" else "").join([toks[i] for i in order])


def length_text(rec: dict[str, Any]) -> str:
    """`n` units in the record's language (one CJK character / Hangul syllable / English word each)."""
    n = target_length(rec["prompt"]) or 0
    fill = FILLER.get(rec.get("lang", ""))
    return fill * n if fill else " ".join(["word"] * n)


def gold_completion(rec: dict[str, Any], seed: int = 0) -> str:
    """A completion that `rewards.score` marks correct (coarse 1.0); raises GoldError when none exists
    (e.g. a REORD line of 2 or 3 tokens). Rows the official evaluator drops (valid=False) get the tagged
    label, since no completion can make them count. `seed` is unused (the REORD answer is constructed,
    not sampled); it stays for callers that pass one."""
    typ = rec.get("type")
    if typ == "SHUFFLE":
        ans = shuffle_answer(rec["prompt"])
        cands: Iterable[str] = [] if ans is None else [ans]
    elif typ == "LENGTH":
        cands = [length_text(rec)]
    else:
        cands = [str(rec.get("answer", ""))]
    for text in cands:
        comp = tag(text)
        s = score(rec, comp)
        if s.coarse == 1.0 or not s.valid:
            return comp
    raise GoldError(f"{rec.get('id', '?')}: no correct {typ} completion could be built")


def gold_predictions(records: Iterable[dict[str, Any]], seed: int = 0) -> Iterator[dict[str, str]]:
    """Prediction lines (`id`, `completion`) for `eval score`, one per record."""
    for r in records:
        yield {"id": r["id"], "completion": gold_completion(r, seed)}
