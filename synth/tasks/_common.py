"""Small helpers shared by the awareness generators."""
from __future__ import annotations

import random

import numpy as np

from rewards.reorder import non_adjacent_order, repair_junctions, search_order  # noqa: F401  (the reference solver)

from ..resources import Corpus

JOIN = {"en": " ", "zh": "", "ko": ""}


def text_after(prompt: str, marker: str) -> str | None:
    """What follows `marker` in `prompt` (its first occurrence), or None when it is absent."""
    i = prompt.find(marker)
    return None if i < 0 else prompt[i + len(marker) :]


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


def fast_permutation(rng: random.Random, n: int) -> list[int]:
    """A uniform random permutation of range(n) from the example's own rng: random 64-bit keys
    argsorted by numpy (random.shuffle costs a Python-level call per element, which dominated
    generation time)."""
    return np.argsort(np.frombuffer(rng.randbytes(8 * n), dtype=np.uint64), kind="stable").tolist()


# --- REORD: the reference solver lives in rewards/reorder.py (the SHUFFLE type builds its gold answer
# with it); the numpy forms below give identical orders (`non_adjacent_order_ids`, `SpanOrders`).

def _vector_order(key0: np.ndarray, prv, nxt, off: int) -> np.ndarray | list[int] | None:
    """`non_adjacent_order` from numpy: `key0` = 2 x occurrence rank + parity of the position in the
    line (the sort key of the first pattern), of an integer dtype (uint16 makes the stable argsort a
    radix sort); prv/nxt/off as in `repair_junctions`. Returns a numpy array when no repair was needed (the
    common case), else a list."""
    n = len(key0)
    for pattern in range(3):
        key = key0 if pattern == 0 else key0 ^ ((key0 >> 1) & 1) if pattern == 1 else key0 ^ 1
        order = key.argsort(kind="stable")
        d = order[1:] - order[:-1]
        d *= d
        touch = d == 1
        if not np.count_nonzero(touch):
            return order
        out = repair_junctions(order.tolist(), np.flatnonzero(touch).tolist(), prv, nxt, off)
        if out is not None:
            return out
    return search_order([prv[x + off] - off for x in range(n)], [nxt[x + off] - off for x in range(n)])


def non_adjacent_order_ids(ids: np.ndarray) -> list[int] | None:
    """`non_adjacent_order` for a numpy array of integer token ids (the same order, vectorised)."""
    n = len(ids)
    if n < 2:
        return list(range(n))
    by = np.argsort(ids, kind="stable")
    sid = ids[by]
    same = sid[1:] == sid[:-1]  # by[i + 1] is the next occurrence of the token at by[i]
    idx = np.arange(n)
    run_start = np.maximum.accumulate(np.where(np.concatenate(([False], same)), 0, idx))
    dt = np.uint16 if n < 1 << 15 else np.int64  # uint16 keys sort by radix
    rank2 = np.empty(n, dtype=dt)
    rank2[by] = 2 * (idx - run_start)
    prv = np.full(n, -1, dtype=np.int64)
    nxt = np.full(n, n, dtype=np.int64)
    prv[by[1:][same]] = by[:-1][same]
    nxt[by[:-1][same]] = by[1:][same]
    order = _vector_order(rank2 | (idx & 1).astype(dt), memoryview(prv), memoryview(nxt), 0)
    return order if order is None or isinstance(order, list) else order.tolist()


class SpanOrders:
    """`non_adjacent_order` for spans of one fixed corpus (token ids `ids`), with per-corpus tables
    built once so that a span's occurrence ranks come without sorting it by token.

    `occ2[i]` is 2 x the number of earlier occurrences of token i's id in the whole corpus, mod 2**16
    (uint16 differences wrap, and 2 x a rank is below 2**16 in spans of under 32,768 tokens, the
    limit of `order`); `prev[i]` / `next[i]` are the previous / next corpus position of the same id
    (-1 / len(ids) when none). In a span, the tokens whose previous occurrence lies before the span
    are first occurrences: their `occ2` written into a scratch array indexed by token gives
    `2 x rank = occ2 - occ2(first occurrence)`, and subtracting from `occ2 | parity` (kept for even
    and odd span starts) gives the sort key directly. Read-only after construction, so one instance
    may serve several threads.
    """

    def __init__(self, ids: np.ndarray) -> None:
        size = len(ids)
        uniq, dense = np.unique(ids, return_inverse=True)
        by = np.argsort(dense, kind="stable")
        sd = dense[by]
        same = sd[1:] == sd[:-1]
        idx = np.arange(size)
        run_start = np.maximum.accumulate(np.where(np.concatenate(([False], same)), 0, idx))
        occ = np.empty(size, dtype=np.int64)
        occ[by] = idx - run_start
        self.occ2 = ((2 * occ) & 0xFFFF).astype(np.uint16)
        self.prev = np.full(size, -1, dtype=np.int64)
        self.next = np.full(size, size, dtype=np.int64)
        self.prev[by[1:][same]] = by[:-1][same]
        self.next[by[:-1][same]] = by[1:][same]
        self._prev_py, self._next_py = memoryview(self.prev), memoryview(self.next)  # fast scalar reads
        self.tok = dense.astype(np.uint16 if len(uniq) <= 1 << 16 else np.int64)  # dense token ids
        self._vocab = len(uniq)
        par = (idx & 1).astype(np.uint16)  # parity within a span that starts at an even position
        self._key = (self.occ2 | par, self.occ2 | (par ^ 1))  # for spans at even / odd starts

    def order(self, start: int, n: int) -> np.ndarray | list[int] | None:
        """Positions 0..n-1 of the span of n (< 32,768) tokens at `start` in a valid REORD order (a numpy
        array or a list), or None; the same order as `non_adjacent_order` on the span's tokens."""
        end = start + n
        tok = self.tok[start:end]
        occ2 = self.occ2[start:end]
        first = self.prev[start:end] < start
        scratch = np.empty(self._vocab, dtype=np.uint16)  # only entries of the span's tokens are read
        scratch[tok[first]] = occ2[first]
        key0 = self._key[start & 1][start:end] - scratch[tok]  # 2 x rank + parity
        return _vector_order(key0, self._prev_py, self._next_py, start)


def pieces_hint(pieces: list[str], level: int, sep: str, unit: str) -> str | None:
    """A graded hint on an answer made of `pieces` (a split's parts, a syllable's jamo), from the strongest
    (level 0: every piece but the last) through the first piece alone (1) to the pieces' sizes only (2); None when
    the answer has a single piece (the hint would give it away)."""
    if len(pieces) < 2:
        return None
    if level == 0:
        return f'the answer begins with "{sep.join(pieces[:-1])}{sep}" and has {len(pieces)} pieces.'
    if level == 1:
        return f"the first piece is {pieces[0]}; there are {len(pieces)} pieces."
    return f"there are {len(pieces)} pieces of {', '.join(str(len(p)) for p in pieces)} {unit}."
