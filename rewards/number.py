"""NUMBER (FREQ, LENOP count, COMPC).

coarse: the last integer (`\\d+`) of the extracted answer equals, as a string, the first integer of the
        label (so "05" != "5", as officially); no label integer or no answer integer -> 0.
fine:   1 when coarse is 1; else 0.9 * exp(-(err / s)^2) with err = |pred - label| and
        s = max(1, label / 10): decays with the squared error (label 7: pred 8 -> 0.33, pred 9 -> 0.02;
        label 120: pred 130 -> 0.33); no integer -> 0.
"""
from __future__ import annotations

import math
import re

from .extract import extract_answer

_INT = re.compile(r"\d+")
_MAX_DIGITS = 30  # beyond this the error is astronomically large: credit 0 without int()


def _to_int(s: str) -> int | None:
    s = s.lstrip("0") or "0"
    if len(s) > _MAX_DIGITS:
        return None
    try:
        return int(s)
    except ValueError:
        return None


def last_integer(text: str) -> str | None:
    """Last run of digits without materialising every match (1 MB completions stay cheap)."""
    m = None
    for m in _INT.finditer(text):
        pass
    return m.group() if m else None


def score_number(prompt: str, completion: str, label: str) -> tuple[float, float, str]:
    """(coarse, fine, extracted) for a NUMBER row."""
    extracted = extract_answer(completion)
    if not completion or not label:
        return 0.0, 0.0, extracted
    lm = _INT.search(label)
    if not lm:
        return 0.0, 0.0, extracted
    pred = last_integer(extracted)
    if pred is None:
        return 0.0, 0.0, extracted
    if pred == lm.group():
        return 1.0, 1.0, extracted
    p, g = _to_int(pred), _to_int(lm.group())
    if p is None or g is None:
        return 0.0, 0.0, extracted
    s = max(1.0, g / 10)
    return 0.0, 0.9 * math.exp(-(((p - g) / s) ** 2)), extracted
