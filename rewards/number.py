"""NUMBER (FREQ, LENOP count, COMPC): a count.

coarse: the last integer (`\\d+`) of the extracted answer equals, as a digit string, the first integer
        of the label; an empty completion, an empty label or a missing integer on either side -> 0.
        String comparison is the official rule, so "05" does not match "5".
fine:   1 when coarse is 1; else 0.9 * exp(-(err / s)^2), err = |pred - gold|, s = max(1, gold / 10);
        no integer -> 0. It decays with the squared error, relative to the size of the gold count.
        Worked example, gold 7 (s = 1): 8 -> 0.9 * e^-1 = 0.331, 9 -> 0.9 * e^-4 = 0.016;
        gold 120 (s = 12): 126 -> 0.9 * e^-0.25 = 0.701, 132 -> 0.331.
        Digit strings of any length are compared exactly with `decimal` (int() refuses more than 4,300
        digits on Python 3.11+), so a 10,000-digit answer costs one linear conversion, never an error.
"""
from __future__ import annotations

import decimal
import math
import re
import unicodedata
from collections.abc import Mapping
from typing import Any

from .base import Score, field, label_of
from .extract import extract_answer

_INT = re.compile(r"\d+")  # Unicode digits included, as in the official regex
_CAP = 0.9  # fine credit of any wrong count stays below this, so fine == 1 iff coarse == 1


def last_integer(text: str) -> str | None:
    """The last run of digits, without materialising every match (1 MB completions stay cheap)."""
    m = None
    for m in _INT.finditer(text):
        pass
    return m.group() if m else None


def _ascii_digits(s: str) -> str:
    if not s.isascii():  # `\d` also matches e.g. Arabic-Indic or full-width digits
        s = "".join(str(unicodedata.decimal(c)) for c in s)
    return s.lstrip("0") or "0"


def closeness(pred: str, gold: str) -> float:
    """0.9 * exp(-(err/s)^2) for two digit strings of any length (monotone in |pred - gold|)."""
    p, g = _ascii_digits(pred), _ascii_digits(gold)
    if len(p) > len(g) + 2:  # pred > 100 * gold: err/s >= 90, the credit underflows to 0 anyway
        return 0.0
    ctx = decimal.Context(prec=60)  # local context: no shared state, exact enough for any ratio
    gd = decimal.Decimal(g)
    err = ctx.abs(ctx.subtract(decimal.Decimal(p), gd))
    s = max(decimal.Decimal(1), ctx.divide(gd, 10))
    z = float(ctx.divide(err, s))
    if z > 30.0:  # exp(-900) is below the smallest double
        return 0.0
    return _CAP * math.exp(-z * z)


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
    return Score(0.0, closeness(pred, gold.group()), extracted)


def score(example: Mapping[str, Any], completion: str) -> Score:
    return score_number(completion, label_of(example))
