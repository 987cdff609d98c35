"""Confusables and variants: the Unicode confusables table via `confusable-homoglyphs`; Chinese look-alike
variants via OpenCC (Traditional, Taiwan, Hong Kong and Japanese Shinjitai forms) plus CJK/Kangxi
radicals and kana from the confusables table."""
from __future__ import annotations

import unicodedata
from collections import defaultdict
from functools import cache

from .chinese import common_hanzi, hanzi_by_frequency, is_hanzi

LETTERS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
DIGITS = frozenset("0123456789")


@cache
def _confusable_neighbours() -> dict[str, frozenset[str]]:
    """Single-codepoint confusable pairs of the Unicode table, as an undirected neighbour map."""
    from confusable_homoglyphs.confusables import confusables_data as data

    nb: dict[str, set[str]] = defaultdict(set)
    for k, lst in data.items():
        for item in lst:
            c = item["c"]
            if len(k) == 1 and len(c) == 1 and k != c:
                nb[k].add(c)
                nb[c].add(k)
    return {k: frozenset(v) for k, v in nb.items()}


def _usable_glyph(g: str) -> bool:
    """Printable, NFC-stable (so no normaliser silently restores the original), not a mark/space."""
    return unicodedata.category(g)[0] in "LNSP" and unicodedata.normalize("NFC", g) == g


@cache
def homoglyphs(domain: str) -> dict[str, tuple[str, ...]]:
    """`letters` or `digits` -> look-alikes per ASCII character, each recoverable in its domain.

    A glyph's ASCII group is its confusable skeleton (its ASCII neighbours and theirs: 𝟏 -> l -> {1, I}).
    It stands for t when t is the only member of the domain in that group, or when its NFKC form is t
    (𝐈 -> I). Letters keep case (a glyph for "I" never stands for "l"); words never get ASCII glyphs;
    numbers may (O for 0, as the official digital file does).
    """
    targets = LETTERS if domain == "letters" else DIGITS
    nb = _confusable_neighbours()
    out: dict[str, set[str]] = defaultdict(set)
    for g, near in nb.items():
        if g in targets or (domain == "letters" and g.isascii()) or not _usable_glyph(g):
            continue
        first = {a for a in near if a.isascii()}
        group = set(first)
        for a in first:
            group |= {b for b in nb.get(a, ()) if b.isascii()}
        dom = group & targets
        nf = unicodedata.normalize("NFKC", g)
        if len(dom) == 1:
            out[next(iter(dom))].add(g)
        elif nf in dom:
            out[nf].add(g)
    return {k: tuple(sorted(v)) for k, v in sorted(out.items())}


@cache
def zh_variants() -> dict[str, tuple[str, ...]]:
    """Simplified character -> look-alike variants that point back to it alone.

    Candidates: its Traditional, Taiwan, Hong Kong and Japanese Shinjitai forms from OpenCC (each
    converted back to the same character: 学 -> 學, 學 -> 学 (jp); 战 -> 戰, 戦), and CJK radicals,
    Kangxi radicals, kana and ideographs that the Unicode confusables table pairs with it (口 -> ロ, 囗).
    Kept only when the variant is not itself a common Simplified character, is NFC-stable (no
    compatibility ideographs), and no other character claims it, so the original is recoverable.
    """
    import opencc

    cv = {name: opencc.OpenCC(name) for name in ("s2t", "t2s", "s2tw", "tw2s", "s2hk", "hk2s", "t2jp", "jp2t")}
    chars = common_hanzi(3500)
    common = set(hanzi_by_frequency()[:6000])
    joined = "".join(chars)
    forms = {
        "t": cv["s2t"].convert(joined),
        "tw": cv["s2tw"].convert(joined),
        "hk": cv["s2hk"].convert(joined),
    }
    forms["jp"] = cv["t2jp"].convert(forms["t"])
    back = {
        "t": lambda v: cv["t2s"].convert(v),
        "tw": lambda v: cv["tw2s"].convert(v),
        "hk": lambda v: cv["hk2s"].convert(v),
        "jp": lambda v: cv["t2s"].convert(cv["jp2t"].convert(v)),
    }
    cands: dict[str, set[str]] = defaultdict(set)  # variant -> originals
    for kind, text in forms.items():
        if len(text) != len(joined):  # pragma: no cover - OpenCC maps characters one to one here
            continue
        for s, v in zip(joined, text, strict=False):
            if v != s and back[kind](v) == s:
                cands[v].add(s)
    nb = _confusable_neighbours()
    for s in chars:
        for g in nb.get(s, ()):
            cat = unicodedata.name(g, "")
            if cat.startswith(("CJK RADICAL", "KANGXI RADICAL", "KATAKANA", "HIRAGANA", "CJK UNIFIED", "BOPOMOFO")):
                cands[g].add(s)
    for g in list(cands):  # a look-alike of another common character (or NFKC-equal to one) is not ours
        cands[g] |= {c for c in nb.get(g, ()) if c in common and is_hanzi(c)}
        nf = unicodedata.normalize("NFKC", g)
        if nf != g and is_hanzi(nf):
            cands[g].add(nf)
    out: dict[str, set[str]] = defaultdict(set)
    for v, owners in cands.items():
        if len(owners) == 1 and v not in common and _usable_glyph(v):
            out[next(iter(owners))].add(v)
    return {k: tuple(sorted(v)) for k, v in sorted(out.items())}
