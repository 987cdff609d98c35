"""Small helpers shared by the awareness generators."""
from __future__ import annotations

import random

import numpy as np

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


def fast_permutation(rng: random.Random, n: int) -> list[int]:
    """A uniform random permutation of range(n) from the example's own rng: random 64-bit keys
    argsorted by numpy (random.shuffle costs a Python-level call per element, which dominated
    generation time)."""
    return np.argsort(np.frombuffer(rng.randbytes(8 * n), dtype=np.uint64), kind="stable").tolist()


def non_adjacent_order_ids(ids: np.ndarray) -> list[int] | None:
    """Vectorised fast path of `non_adjacent_order` for integer token ids: every group arranged as two
    ascending parity runs (three parity patterns tried); None when each pattern has a junction that
    joins neighbours (then use the full search)."""
    n = len(ids)
    idx = np.arange(n)
    by_token = np.argsort(ids, kind="stable")
    sid = ids[by_token]
    starts = np.empty(n, dtype=bool)
    starts[0] = True
    np.not_equal(sid[1:], sid[:-1], out=starts[1:])
    run_start = np.maximum.accumulate(np.where(starts, idx, 0))
    rank = np.empty(n, dtype=np.int64)
    rank[by_token] = idx - run_start
    par = idx & 1
    for key in (par, par ^ (rank & 1), 1 - par):  # evens first / alternating by rank / odds first
        order = np.argsort((rank * 2 + key) * n + idx)  # one integer key: rank, parity pattern, position
        d = order[1:] - order[:-1]
        if not (d * d == 1).any():
            return order.tolist()
    return None


def non_adjacent_order(tokens: list[str]) -> list[int] | None:
    """Positions in an order that is a valid REORD answer under the official greedy rule, or None.

    Positions are grouped by occurrence rank (k-th occurrence of its token), groups concatenated in
    rank order, so each token's occurrences appear in increasing original order and the greedy
    mapping returns exactly these positions. Inside a group, evens and odds each run with steps >= 2,
    so only junctions can touch: each group has up to 8 arrangements (parity order x directions), and
    a small dynamic programme picks one per group so that no junction joins neighbours.
    """
    seen: dict[str, int] = {}
    groups: list[list[int]] = []
    for p, t in enumerate(tokens):
        k = seen.get(t, 0)
        seen[t] = k + 1
        if k == len(groups):
            groups.append([])
        groups[k].append(p)
    splits = [([p for p in g if not p & 1], [p for p in g if p & 1]) for g in groups]
    # fast path: first fitting arrangement per group, left to right
    order: list[int] = []
    last = -10
    for ev, od in splits:
        for a, b in _arrangements(ev, od):
            if abs((a[0] if a else b[0]) - last) != 1:
                order += a
                order += b
                last = order[-1]
                break
        else:
            break
    else:
        return order
    layers = [list(_arrangements(ev, od)) for ev, od in splits]
    if not all(layers):
        return None
    # DP: reach[i][j] = index of the option in layer i-1 that option j of layer i can follow
    reach: list[dict[int, int]] = [{j: -1 for j in range(len(layers[0]))}]
    for i in range(1, len(layers)):
        cur: dict[int, int] = {}
        for j, (a, b) in enumerate(layers[i]):
            first = a[0] if a else b[0]
            for pj in reach[i - 1]:
                pa, pb = layers[i - 1][pj]
                last = pb[-1] if pb else pa[-1]
                if abs(first - last) != 1:
                    cur[j] = pj
                    break
        if not cur:
            return None
        reach.append(cur)
    j = next(iter(reach[-1]))
    chosen = []
    for i in range(len(layers) - 1, -1, -1):
        chosen.append(layers[i][j])
        j = reach[i][j]
    order = []
    for a, b in reversed(chosen):
        order += a
        order += b
    return order


def _arrangements(ev: list[int], od: list[int]):
    """Orders of one group (evens and odds as runs, either first, either direction) whose internal
    junction does not join neighbours; the common two come first and reversed copies only on demand."""
    for a, b in ((ev, od), (od, ev)):
        if not (a and b and abs(a[-1] - b[0]) == 1):
            yield a, b
    er, orr = ev[::-1], od[::-1]
    for a, b in ((er, orr), (orr, er), (ev, orr), (od, er), (er, od), (orr, ev)):
        if not (a and b and abs(a[-1] - b[0]) == 1):
            yield a, b
