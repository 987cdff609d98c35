"""LENGTH (LENOP generate): write exactly n tokens.

coarse: target n = first integer of the prompt; the extracted answer's tokens are counted as CJK
        characters (U+4E00..U+9FFF) if it has any, else Hangul syllables if it has any, else valid English
        words (`\\b[\\w'-]+\\b` matches that fully match `[a-zA-Z]+(?:[-'][a-zA-Z]+)*`); equal -> 1.
        A prompt without an integer makes the official evaluator raise: the row is `valid=False`.
fine:   max(0, 1 - |count - n| / max(n, 1)): linear in the relative length error
        (n = 50: 45 words -> 0.9, 25 -> 0.5, 0 -> 0).
"""
from __future__ import annotations

import re

from .extract import extract_answer

_INT = re.compile(r"\d+")
_WORD = re.compile(r"\b[\w'-]+\b")
_VALID_EN = re.compile(r"[a-zA-Z]+(?:[-'][a-zA-Z]+)*")


def is_cjk(ch: str) -> bool:
    return "\u4e00" <= ch <= "\u9fff"


def is_hangul(ch: str) -> bool:
    return "\uac00" <= ch <= "\ud7a3"


CJK_CHAR = re.compile(r"[\u4e00-\u9fff]")
HANGUL_CHAR = re.compile(r"[\uac00-\ud7a3]")


def count_units(content: str) -> int:
    """Token count by the official LENGTH rule (regex scans: C speed on long completions)."""
    if CJK_CHAR.search(content):
        return len(CJK_CHAR.findall(content))
    if HANGUL_CHAR.search(content):
        return len(HANGUL_CHAR.findall(content))
    return sum(1 for w in _WORD.findall(content) if _VALID_EN.fullmatch(w))


def target_length(prompt: str) -> int | None:
    m = _INT.search(prompt)
    if not m:
        return None
    try:
        return int(m.group())
    except ValueError:  # e.g. more digits than int() accepts: the official code raises too
        return None


def score_length(prompt: str, completion: str, label: str) -> tuple[float, float, str, bool]:
    """(coarse, fine, extracted, valid) for a LENGTH row."""
    target = target_length(prompt)
    extracted = extract_answer(completion)
    if target is None:
        return 0.0, 0.0, extracted, False
    n = count_units(extracted)
    if n == target:
        return 1.0, 1.0, extracted, True
    return 0.0, max(0.0, 1.0 - abs(n - target) / max(target, 1)), extracted, True
