"""LENGTH (LENOP generate): write exactly n tokens.

coarse: target n = first integer (`\\d+`) of the prompt; the extracted answer's tokens are counted as
        CJK characters (U+4E00..U+9FFF) if it has any, else Hangul syllables (U+AC00..U+D7A3) if it has
        any, else valid English words (`\\b[\\w'-]+\\b` matches that fully match
        `[a-zA-Z]+(?:[-'][a-zA-Z]+)*`, so digits and "don't!"'s punctuation do not count); equal -> 1.
        A prompt without an integer (or one int() refuses) makes the official evaluator raise: such a
        row is `valid=False`.
fine:   max(0, 1 - |count - n| / max(n, 1)): linear in the relative length error.
        Worked example, n = 50: 45 words -> 0.9, 25 -> 0.5, 0 or 100 -> 0.
"""
from __future__ import annotations

import re
import string
from collections.abc import Mapping
from typing import Any

from .base import Score, field
from .extract import extract_answer

_INT = re.compile(r"\d+")
_WORD = re.compile(r"\b[\w'-]+\b")
_VALID_EN = re.compile(r"[a-zA-Z]+(?:[-'][a-zA-Z]+)*")
CJK_CHAR = re.compile(r"[\u4e00-\u9fff]")
HANGUL_CHAR = re.compile(r"[\uac00-\ud7a3]")


# ASCII punctuation other than ' - _ separates words exactly like a space does (it is neither \w nor
# in [\w'-]), so mapping it to spaces leaves the official word list unchanged.
_PUNCT_TO_SPACE = str.maketrans({c: " " for c in string.punctuation if c not in "'-_"})
_PLAIN = re.compile(r"[a-zA-Z \t\n\r]*")


def count_units(content: str) -> int:
    """Token count by the official LENGTH rule."""
    if CJK_CHAR.search(content):
        return len(CJK_CHAR.findall(content))
    if HANGUL_CHAR.search(content):
        return len(HANGUL_CHAR.findall(content))
    plain = content.translate(_PUNCT_TO_SPACE)
    if _PLAIN.fullmatch(plain):  # fast path: letters between separators, every chunk a valid word
        return len(plain.split())
    full = _VALID_EN.fullmatch
    return sum(1 for w in _WORD.findall(content) if full(w))


def target_length(prompt: str) -> int | None:
    """First integer of the prompt, or None where the official `int(re.search(...).group())` raises."""
    m = _INT.search(prompt)
    if m is None:
        return None
    try:
        return int(m.group())
    except ValueError:  # more digits than int() accepts (Python 3.11+): the official code raises too
        return None


def score_length(prompt: str, completion: str) -> Score:
    """Score for one LENGTH row (official `sentence_length`)."""
    target = target_length(prompt)
    extracted = extract_answer(completion)
    if target is None:
        return Score(0.0, 0.0, extracted, valid=False)
    n = count_units(extracted)
    if n == target:
        return Score(1.0, 1.0, extracted)
    return Score(0.0, max(0.0, 1.0 - abs(n - target) / max(target, 1)), extracted)


def score(example: Mapping[str, Any], completion: str) -> Score:
    return score_length(field(example, "prompt"), completion)
