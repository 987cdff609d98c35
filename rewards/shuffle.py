"""SHUFFLE (REORD): reorder the input so that no token stays next to an original neighbour.

coarse: the original = the prompt text after its first `:`/`：` (and spaces) up to the line end; it and
        the extracted answer are lower-cased, stripped and tokenised (CJK characters if any, else Hangul
        syllables if any, else `\\b[\\w'-]+\\b` words). The token multisets must be equal; then each
        answer token is mapped to the first unused original position holding that token, and no two
        consecutive answer tokens may map to adjacent original positions. A prompt without a colon
        scores 0; an empty original with an empty answer scores 1 (both official quirks).
fine:   0 unless the multisets match; then 1 - kept / (n - 1), kept = consecutive answer pairs that map
        to adjacent original positions, n = number of tokens.
        Worked example, original "a b c d e": "b d a c e" -> kept 0 -> 1; "a c e d b" -> kept 1
        ("e d") -> 1 - 1/4 = 0.75; the input unchanged -> kept 4 -> 0; "b d a c" -> multiset differs -> 0.
"""
from __future__ import annotations

import operator
import re
from collections.abc import Mapping
from functools import lru_cache
from typing import Any

from .base import Score, field
from .extract import extract_answer
from .length import CJK_CHAR, HANGUL_CHAR

_ORIG = re.compile(r"[:：]\s*([^\n\r]*)")
_WORD = re.compile(r"\b[\w'-]+\b")


def tokens(s: str) -> list[str]:
    """Official REORD tokens of an already lower-cased, stripped string."""
    if CJK_CHAR.search(s):
        return CJK_CHAR.findall(s)
    if HANGUL_CHAR.search(s):
        return HANGUL_CHAR.findall(s)
    return _WORD.findall(s)


def _by_token(toks: list[str] | tuple[str, ...]) -> list[int]:
    """Positions stably sorted by token: equal tokens keep their order of appearance."""
    return sorted(range(len(toks)), key=toks.__getitem__)


_CACHE_MAX_CHARS = 1 << 14  # bounds what the memo can hold: 1,024 prompts of at most 16 k characters
Prepared = tuple[tuple[str, ...], tuple[str, ...], tuple[int, ...]]


def input_tokens(prompt: str) -> list[str] | None:
    """Tokens of the prompt's input line (after the first colon); None when there is no colon."""
    m = _ORIG.search(prompt)
    return None if m is None else tokens(m.group(1).lower().strip())


def _prepare(orig: list[str]) -> Prepared:
    """(tokens, tokens in sorted order, positions in sorted order): the prompt's half of the work."""
    idx = _by_token(orig)
    return tuple(orig), tuple(map(orig.__getitem__, idx)), tuple(idx)


@lru_cache(maxsize=1024)
def _prepared(prompt: str) -> Prepared | None:
    """Memoised: GRPO scores every prompt once per generation of its group, and this half of the work
    depends on the prompt alone (the values are immutable tuples)."""
    orig = input_tokens(prompt)
    return None if orig is None else _prepare(orig)


def kept_neighbours(orig: list[str] | tuple[str, ...], shuf: list[str]) -> int | None:
    """Consecutive answer pairs that map to adjacent original positions under the official greedy
    mapping (k-th occurrence of a token -> its k-th original position); None when the multisets differ."""
    o_idx = _by_token(orig)
    return _kept(tuple(map(orig.__getitem__, o_idx)), o_idx, shuf)


def _kept(orig_sorted: tuple[str, ...], o_idx: list[int] | tuple[int, ...], shuf: list[str]) -> int | None:
    n = len(shuf)
    if n != len(orig_sorted):
        return None
    s_idx = _by_token(shuf)
    if not all(map(operator.eq, map(shuf.__getitem__, s_idx), orig_sorted)):
        return None
    # Both stable sorts list each token's occurrences in order, so the j-th entries pair the k-th
    # occurrence in the answer with the k-th original position: the greedy mapping, without a loop.
    pos = [0] * n
    for a, b in zip(s_idx, o_idx):
        pos[a] = b
    diffs = list(map(operator.sub, pos[1:], pos))
    return diffs.count(1) + diffs.count(-1)


def score_shuffle(prompt: str, completion: str) -> Score:
    """Score for one SHUFFLE row (official `shuffle_tokens`, both flags required)."""
    extracted = extract_answer(completion)
    shuf = tokens(extracted.lower().strip())
    if len(prompt) <= _CACHE_MAX_CHARS:
        prepared = _prepared(prompt)
    else:  # a huge prompt: not memoised, and not sorted unless the token counts agree
        orig = input_tokens(prompt)
        prepared = None if orig is None or len(orig) != len(shuf) else _prepare(orig)
    if prepared is None:
        return Score(0.0, 0.0, extracted)
    orig_t, orig_sorted, o_idx = prepared
    kept = _kept(orig_sorted, o_idx, shuf)
    if kept is None:
        return Score(0.0, 0.0, extracted)
    if kept == 0:
        return Score(1.0, 1.0, extracted)
    return Score(0.0, 1.0 - kept / max(len(orig_t) - 1, 1), extracted)


def score(example: Mapping[str, Any], completion: str) -> Score:
    return score_shuffle(field(example, "prompt"), completion)
