"""DIFF: the differing token, or yes/是/예.

coarse: both extracted answer and label are cleaned (lower-case; remove "不是", the word "no" and
        `,.。:：、；;"'‘’“”`; strip); equal -> 1. For variation modify/修改 (official special case): 1 if
        the label is among at most two distinct non-empty quoted strings (`'...'`/`"..."`) of the answer,
        or is one of exactly two distinct tokens (CJK characters or Latin words) of the cleaned answer.
fine:   equal to coarse (an exact identification task: there is no partial credit to give).
"""
from __future__ import annotations

import re

from .extract import extract_answer

_NO = re.compile(r"\bno\b", re.IGNORECASE)
_QUOTED = re.compile(r"['\"](.*?)['\"]")
_TOKEN = re.compile(r"[\u4e00-\u9fa5]|[a-zA-Z]+")
_SYMBOLS = ",.。:：、；;\"'‘’“”"
_TABLE = str.maketrans("", "", _SYMBOLS)


def clean_text(text: str) -> str:
    text = text.lower().replace("不是", "")
    text = _NO.sub("", text)
    return text.translate(_TABLE).lower().strip()


def score_diff(prompt: str, completion: str, label: str, variation: str | None) -> tuple[float, float, str, bool]:
    """(coarse, fine, extracted, valid) for a DIFF row."""
    extracted = extract_answer(completion)
    a1, a2 = clean_text(extracted), clean_text(label)
    if a1 == a2:
        return 1.0, 1.0, extracted, True
    if variation is None:  # the official code calls variation.lower() here and raises
        return 0.0, 0.0, extracted, False
    if variation.lower() in ("modify", "修改"):
        quoted = {c for c in (clean_text(q) for q in _QUOTED.findall(extracted)) if c}
        if len(quoted) <= 2 and a2 in quoted:
            return 1.0, 1.0, extracted, True
        toks = set(_TOKEN.findall(a1))
        if len(toks) == 2 and a2 in toks:
            return 1.0, 1.0, extracted, True
    return 0.0, 0.0, extracted, True
