"""Small helpers shared by the awareness generators."""
from __future__ import annotations

import random

from ..resources import Corpus

JOIN = {"en": " ", "zh": "", "ko": ""}


def random_span(rng: random.Random, corp: Corpus, n: int) -> int:
    """Start index of a random run of `n` consecutive corpus tokens."""
    return rng.randrange(0, len(corp) - n)


def alt_tokens(rng: random.Random, corp: Corpus, avoid: set[str], k: int = 1) -> list[str]:
    """`k` corpus tokens (frequency-weighted, since the corpus is) none of which is in `avoid`."""
    out: list[str] = []
    while len(out) < k:
        tok = corp.tokens(rng.randrange(len(corp)), 1)[0]
        if tok not in avoid:
            out.append(tok)
    return out


def greedy_positions(orig: list[str], shuf: list[str]) -> list[int] | None:
    """Map each shuffled token to the first unused original position of that token (the official
    REORD rule); None when the multisets differ."""
    where: dict[str, list[int]] = {}
    for i, t in enumerate(orig):
        where.setdefault(t, []).append(i)
    nxt: dict[str, int] = {}
    out = []
    for t in shuf:
        lst = where.get(t)
        k = nxt.get(t, 0)
        if lst is None or k >= len(lst):
            return None
        nxt[t] = k + 1
        out.append(lst[k])
    return out if len(out) == len(orig) else None


def is_valid_shuffle(orig: list[str], shuf: list[str]) -> bool:
    """Same multiset and no two originally adjacent tokens adjacent (greedy position mapping)."""
    pos = greedy_positions(orig, shuf)
    if pos is None:
        return False
    return all(abs(a - b) != 1 for a, b in zip(pos, pos[1:]))
