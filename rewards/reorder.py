"""The reference REORD solver: an order of a line's positions that is a valid answer under the official rule.

Lives in rewards/ because the SHUFFLE scoring type builds its gold answer with it (`rewards.shuffle`,
`ScoringType.gold`); synth's generators use it and its numpy forms (`synth.tasks._common`). Pure Python.
"""
from __future__ import annotations

from bisect import insort
from collections.abc import Hashable, Sequence
from operator import sub

# The official scorer (rewards.shuffle) maps the k-th occurrence of a token in the answer to the k-th
# original position of that token, then requires that no two consecutive mapped positions be
# neighbours. So an order of positions is a valid answer exactly when (a) each token's positions
# appear in increasing order (the mapping then returns the order itself) and (b) no two consecutive
# entries differ by 1 (a "touching junction").
#
# Construction: group positions by occurrence rank (k-th occurrence of their token) and concatenate
# the groups in rank order, which gives (a); write each group as its even positions then its odd ones,
# both ascending, so steps inside a run are >= 2 and only junctions between runs can touch. Then
# `repair_junctions` fixes each touching junction by moving some other position into the gap. Two more parity
# patterns (alternating by rank, odds first) are tried if a repair gets stuck, and a node-bounded
# exhaustive search (`search_order`) is the last resort (it settles short lines). Three
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
        out = repair_junctions(seq, touching, prv, nxt)
        if out is not None:
            return out
    return search_order(prv, nxt)


def _parity(pattern: int, p: int, r: int) -> int:
    """Which run of its rank group position p (of rank r) goes in: 0 first, 1 second."""
    return p & 1 if pattern == 0 else (p ^ r) & 1 if pattern == 1 else ~p & 1


def repair_junctions(seq: list[int], touching: list[int], prv, nxt, off: int = 0) -> list[int] | None:
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


def search_order(prv: list[int], nxt: list[int], budget: int = SEARCH_NODES) -> list[int] | None:
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
