"""SHUFFLE (REORD): reorder so that no token stays next to an original neighbour.

coarse: original = the prompt text after its first `:`/`：` up to the line end; both it and the
        extracted answer are lower-cased and tokenised (CJK characters if any, else Hangul syllables if
        any, else `\\b[\\w'-]+\\b` words); the multisets must be equal, and mapping each answer token to the
        first unused original position of that token, no two consecutive answer tokens may map to
        adjacent positions.
fine:   0 unless the multisets match; then 1 - kept / (n - 1), kept = adjacent answer pairs that map to
        adjacent original positions (n = 10, 3 neighbours kept -> 0.67; the unchanged input -> 0).
"""
from __future__ import annotations

import re

from .extract import extract_answer
from .length import CJK_CHAR, HANGUL_CHAR

_ORIG = re.compile(r"[:：]\s*([^\n\r]*)")
_WORD = re.compile(r"\b[\w'-]+\b")


def tokens(s: str) -> list[str]:
    if CJK_CHAR.search(s):
        return CJK_CHAR.findall(s)
    if HANGUL_CHAR.search(s):
        return HANGUL_CHAR.findall(s)
    return _WORD.findall(s)


def kept_neighbours(orig: list[str], shuf: list[str]) -> int | None:
    """Adjacent pairs kept under the greedy position mapping; None when the multisets differ."""
    if len(orig) != len(shuf) or sorted(orig) != sorted(shuf):
        return None
    where: dict[str, list[int]] = {}
    for i, t in enumerate(orig):
        where.setdefault(t, []).append(i)
    used: dict[str, int] = {}
    pos = []
    for t in shuf:
        lst = where.get(t)
        k = used.get(t, 0)
        if lst is None or k >= len(lst):
            return None
        used[t] = k + 1
        pos.append(lst[k])
    return sum(1 for a, b in zip(pos, pos[1:]) if abs(a - b) == 1)


def score_shuffle(prompt: str, completion: str, label: str) -> tuple[float, float, str]:
    """(coarse, fine, extracted) for a SHUFFLE row."""
    extracted = extract_answer(completion)
    m = _ORIG.search(prompt)
    if not m:
        return 0.0, 0.0, extracted
    orig = tokens(m.group(1).lower().strip())
    shuf = tokens(extracted.lower().strip())
    kept = kept_neighbours(orig, shuf)
    if kept is None:
        return 0.0, 0.0, extracted
    if kept == 0:
        return 1.0, 1.0, extracted
    return 0.0, 1.0 - kept / max(len(orig) - 1, 1), extracted
