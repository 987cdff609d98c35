"""Small helpers shared by the awareness generators."""
from __future__ import annotations

import random
from bisect import insort
from collections.abc import Hashable, Sequence
from operator import sub

import numpy as np

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


# --- REORD: an order of a line's positions that is a valid answer under the official rule ----------
#
# The official scorer (rewards.shuffle) maps the k-th occurrence of a token in the answer to the k-th
# original position of that token, then requires that no two consecutive mapped positions be
# neighbours. So an order of positions is a valid answer exactly when (a) each token's positions
# appear in increasing order (the mapping then returns the order itself) and (b) no two consecutive
# entries differ by 1 (a "touching junction").
#
# Construction: group positions by occurrence rank (k-th occurrence of their token) and concatenate
# the groups in rank order, which gives (a); write each group as its even positions then its odd ones,
# both ascending, so steps inside a run are >= 2 and only junctions between runs can touch. Then
# `_repair` fixes each touching junction by moving some other position into the gap. Two more parity
# patterns (alternating by rank, odds first) are tried if a repair gets stuck, and a node-bounded
# exhaustive search (`_search`) is the last resort (it settles short lines). Three
# implementations give identical orders: `non_adjacent_order` (plain Python, any hashable tokens; the
# reference, also used by eval gold), `non_adjacent_order_ids` (numpy, integer ids) and `SpanOrders`
# (numpy over a fixed corpus, with per-corpus tables: the generator's hot path).

SEARCH_NODES = 20_000  # placements the exhaustive search may try


def non_adjacent_order(tokens: Sequence[Hashable]) -> list[int] | None:
    """Positions of `tokens` in an order that is a valid REORD answer under the official greedy rule
    (the answer is `[tokens[i] for i in order]`), or None when none was found: e.g. "a a a a a", or
    any line of 2 or 3 tokens. The search makes it exact on short lines: on 30,000 random lines of
    4-16 tokens over 1-6 distinct tokens it found an order exactly when a brute-force check did."""
    n = len(tokens)
    last: dict[Hashable, int] = {}
    prv = [-1] * n  # previous / next position of the same token (-1 / n: none)
    nxt = [n] * n
    rank = [0] * n
    for p, t in enumerate(tokens):
        q = last.get(t, -1)
        last[t] = p
        if q >= 0:
            prv[p] = q
            nxt[q] = p
            rank[p] = rank[q] + 1
    for pattern in range(3):
        keys = [2 * r + _parity(pattern, p, r) for p, r in enumerate(rank)]
        seq = sorted(range(n), key=keys.__getitem__)
        touching = [g for g, d in enumerate(map(sub, seq[1:], seq)) if d * d == 1]
        if not touching:
            return seq
        out = _repair(seq, touching, prv, nxt)
        if out is not None:
            return out
    return _search(prv, nxt)


def _parity(pattern: int, p: int, r: int) -> int:
    """Which run of its rank group position p (of rank r) goes in: 0 first, 1 second."""
    return p & 1 if pattern == 0 else (p ^ r) & 1 if pattern == 1 else ~p & 1


def _repair(seq: list[int], touching: list[int], prv, nxt, off: int = 0) -> list[int] | None:
    """`seq` (each token's positions increasing) with each touching junction (the indices g in
    `touching`: seq[g], seq[g+1] are neighbours) fixed by moving some other position x into the gap;
    None when one cannot be fixed. `seq` is modified in place.

    x qualifies when it is no neighbour of either side, its removal joins no neighbours, and the
    previous occurrence of its token stays before the gap and the next one after it, so that each
    token's positions stay in increasing order. prv[x + off] - off / nxt[x + off] - off are those
    occurrences (negative / >= len(seq) when none): `off` lets a whole corpus' tables serve a span.
    A move fixes one junction and makes none touch, so one pass over the initial ones fixes all."""
    n = len(seq)
    for a, b in [(seq[g], seq[g + 1]) for g in touching]:
        g = seq.index(a)
        if g + 1 == n or seq[g + 1] != b:  # already separated by an earlier move
            continue
        for k, x in enumerate(seq):
            if x - a in (-1, 0, 1) or x - b in (-1, 0, 1):
                continue
            if 0 < k < n - 1 and seq[k - 1] - seq[k + 1] in (-1, 1):
                continue
            p = prv[x + off] - off
            if p >= 0 and seq.index(p) > g:
                continue
            q = nxt[x + off] - off
            if q < n and seq.index(q) <= g:
                continue
            del seq[k]
            seq.insert(g if k < g else g + 1, x)
            break
        else:
            return None
    return seq


def _search(prv: list[int], nxt: list[int], budget: int = SEARCH_NODES) -> list[int] | None:
    """Depth-first search over the orders that keep each token's positions increasing (a position is
    available once the previous occurrence of its token is placed), smallest available position
    first, remembering dead ends (the available positions and the last one placed fix the state),
    within `budget` placements: exhaustive for short lines."""
    n = len(prv)
    seq: list[int] = []  # one entry per stack frame above the root
    stack = [[[p for p in range(n) if prv[p] < 0], -10, 0]]  # [available positions, last placed, next try]
    dead: set[tuple[tuple[int, ...], int]] = set()
    nodes = 0
    while stack:
        frame = stack[-1]
        avail, last, i = frame
        if not avail:
            return seq
        while i < len(avail) and avail[i] - last in (-1, 1):
            i += 1
        if i == len(avail):  # dead end: remember it, undo the placement that led here
            dead.add((tuple(avail), last))
            stack.pop()
            if seq:
                seq.pop()
            continue
        frame[2] = i + 1
        p = avail[i]
        rest = avail[:i] + avail[i + 1 :]
        if nxt[p] < n:
            insort(rest, nxt[p])
        if (tuple(rest), p) in dead:
            continue
        nodes += 1
        if nodes > budget:
            return None
        seq.append(p)
        stack.append([rest, p, 0])
    return None


def _vector_order(key0: np.ndarray, prv, nxt, off: int) -> np.ndarray | list[int] | None:
    """`non_adjacent_order` from numpy: `key0` = 2 x occurrence rank + parity of the position in the
    line (the sort key of the first pattern), of an integer dtype (uint16 makes the stable argsort a
    radix sort); prv/nxt/off as in `_repair`. Returns a numpy array when no repair was needed (the
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
        out = _repair(order.tolist(), np.flatnonzero(touch).tolist(), prv, nxt, off)
        if out is not None:
            return out
    return _search([prv[x + off] - off for x in range(n)], [nxt[x + off] - off for x in range(n)])


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
