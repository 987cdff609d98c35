"""Hangul: `hgtk` (initial/medial/final decomposition and composition of all 11,172 syllables)."""
from __future__ import annotations

from collections import defaultdict
from functools import cache

from ..resources import word_list


@cache
def hangul_table() -> dict[str, tuple[str, ...]]:
    """Every precomposed syllable -> its jamo via hgtk (initial, medial, final when present; compound
    finals such as ㄾ stay whole), kept only when hgtk composes the jamo back to the same syllable."""
    import hgtk

    out = {}
    for i in range(11172):
        s = chr(0xAC00 + i)
        cho, jung, jong = hgtk.letter.decompose(s)
        back = hgtk.letter.compose(cho, jung, jong) if jong else hgtk.letter.compose(cho, jung)
        if back == s:
            out[s] = (cho, jung, jong) if jong else (cho, jung)
    return out


def jamo_of(syllable: str) -> tuple[str, ...]:
    return hangul_table()[syllable]


def compose(jamos: tuple[str, ...] | list[str]) -> str:
    import hgtk

    return hgtk.letter.compose(*jamos) if len(jamos) == 3 else hgtk.letter.compose(jamos[0], jamos[1])


@cache
def hangul_syllables() -> tuple[str, ...]:
    """Hangul syllables seen in wordfreq's ko words (frequency order)."""
    seen: dict[str, None] = {}
    for w in word_list("ko").words:
        for ch in w:
            seen.setdefault(ch, None)
    return tuple(seen)


@cache
def syllable_pools() -> dict[str, tuple[str, ...]]:
    """Two syllable pools: `all` 11,172 (as the official files, which are full of rare syllables
    like 붩) and `common` (those in wordfreq ko words, which real tokenizers see)."""
    table = hangul_table()
    return {"all": tuple(table), "common": tuple(s for s in hangul_syllables() if s in table)}


@cache
def jamo_count_index(pool: str) -> dict[str, dict[int, tuple[str, ...]]]:
    """jamo -> {count in the syllable (0, 1 or 2) -> syllables of `pool`}."""
    table = hangul_table()
    syl = syllable_pools()[pool]
    jamos = sorted({j for s in syl for j in table[s]})
    idx: dict[str, dict[int, list[str]]] = {j: defaultdict(list) for j in jamos}
    for s in syl:
        js = table[s]
        for j in jamos:
            idx[j][js.count(j)].append(s)
    return {j: {k: tuple(v) for k, v in d.items()} for j, d in idx.items()}
