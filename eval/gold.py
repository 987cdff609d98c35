"""Gold completions: a correct, tagged answer for any record, checked by `rewards.score`.

Why: `eval gold` and the tests feed these to `eval score`, which must then report 100.0 in every table;
that checks the whole path (data reader, scorer routing, aggregation) on real rows. Rows without a
stored label get a constructed answer: REORD (SHUFFLE) a reordering with no original neighbours kept,
LENOP generate (LENGTH) text with the requested number of units.
"""
from __future__ import annotations

import random
from collections.abc import Iterable, Iterator
from typing import Any

from rewards import score
from rewards.length import target_length
from rewards.shuffle import input_line, kind, tokens

FILLER = {"zh": "字", "ko": "가"}


class GoldError(ValueError):
    """No correct completion could be built for a record (one line naming its id)."""


def tag(text: str) -> str:
    return f"<answer>{text}</answer>"


def _spread(n: int) -> list[int]:
    """Odd positions, then even ones: no two neighbours stay adjacent once n >= 4."""
    return list(range(1, n, 2)) + list(range(0, n, 2))


def shuffle_candidates(prompt: str, seed: int = 0, tries: int = 2000) -> Iterator[str]:
    """Reorderings of a REORD prompt's input line: the odd/even spread first, then seeded shuffles."""
    line = input_line(prompt)
    if line is None:
        return
    toks = tokens(line)
    sep = " " if kind(line) == "word" else ""
    yield sep.join(toks[i] for i in _spread(len(toks)))
    rng = random.Random(seed)
    for _ in range(tries):
        cand = toks[:]
        rng.shuffle(cand)
        yield sep.join(cand)


def length_text(rec: dict[str, Any]) -> str:
    """`n` units in the record's language (one CJK character / Hangul syllable / English word each)."""
    n = target_length(rec["prompt"]) or 0
    fill = FILLER.get(rec.get("lang", ""))
    return fill * n if fill else " ".join(["word"] * n)


def gold_completion(rec: dict[str, Any], seed: int = 0) -> str:
    """A completion that `rewards.score` marks correct (coarse 1.0); raises GoldError when none exists
    (e.g. a REORD line of 2 or 3 tokens). Rows the official evaluator drops (valid=False) get the tagged
    label, since no completion can make them count."""
    typ = rec.get("type")
    if typ == "SHUFFLE":
        cands: Iterable[str] = shuffle_candidates(rec["prompt"], seed)
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
