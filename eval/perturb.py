"""Answer-preserving, rule-based prompt perturbations (TokSuite-style) for `python -m eval robustness`.

A prompt is cut into three kinds of spans by a per-task *layout* (a regex over the official wording):

* **keep**: what the answer or the scorer depends on and nothing may touch: the counted target
  ("homeland", 看), the REORD "Input:" marker the SHUFFLE scorer parses, answer vocabulary in quotes
  ('yes', “是”, ABC), digits (the LENGTH scorer reads the first integer), line breaks, punctuation.
* **payload**: the material the model works on (the counted text, the sentences to sort). Perturbed
  only by the kinds listed for that task in `PAYLOAD_KINDS`, i.e. where the gold answer provably
  stays right: a count of words or characters does not change when a word gains a zero-width space,
  a Cyrillic "а", a typo inside it or an extra space before it; the target itself is never touched and
  never created.
* **instruction**: everything else; every kind may perturb it (outside quotes, words next to digits,
  and all-caps labels).

Rows whose prompt matches no layout (paraphrased templates, EXECUTE) are not perturbed and are counted
as skipped. Every function is pure: (text, rng) in, text out; the seed is per row and kind.
"""
from __future__ import annotations

import random
import re
import unicodedata
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import cache
from typing import Any

from common.languages import LANGUAGES, char_languages, language

ZERO_WIDTH = ("\u200b", "\u200c", "\u200d", "\u2060")

# ---- units ---------------------------------------------------------------------------------------
_EN_WORD = re.compile(r"[A-Za-z]+")


def _unit_pattern(lang: str) -> re.Pattern[str]:
    """Units of a language (`common.languages`): runs of a character language's token characters or English
    words (zh/ko prompts also carry English words: seq1, Text...); English words alone in the word language;
    `mul` rows (any code outside the catalogue): every character language's runs, then English words."""
    entry = language(lang)
    runs = [entry] if entry is not None else char_languages()
    return re.compile("|".join([*(f"{x.char_re.pattern}+" for x in runs if x.is_char), _EN_WORD.pattern]))
_QUOTED = re.compile(r"'[^'\n]*'|\"[^\"\n]*\"|“[^”\n]*”|‘[^’\n]*’|\{[^}\n]*\}")

UnitFn = Callable[[str, random.Random], "str | None"]


def _math_styles() -> tuple[tuple[int, int], ...]:
    """(capital A, small a) code points of the complete Mathematical Alphanumeric styles: bold,
    sans-serif, sans-serif bold, monospace (italic and script have holes, e.g. no italic h)."""
    return ((0x1D400, 0x1D41A), (0x1D5A0, 0x1D5BA), (0x1D5D4, 0x1D5EE), (0x1D670, 0x1D68A))


@cache
def latin_homoglyphs() -> dict[str, tuple[str, ...]]:
    """ASCII letter -> Cyrillic/Greek look-alikes from the Unicode confusables table (via
    `synth.structural.homoglyphs`), excluding styled forms that NFKC folds back (those are `math_style`)
    and ones whose compatibility form is not one letter (Greek ypogegrammeni "ͺ" folds to space + mark)."""
    from synth.structural import homoglyphs

    out = {}
    for c, glyphs in homoglyphs("letters").items():
        g = tuple(x for x in glyphs if unicodedata.name(x, "").startswith(("CYRILLIC", "GREEK"))
                  and len(nf := unicodedata.normalize("NFKC", x)) == 1 and nf != c and nf.isalpha())
        if g:
            out[c] = g
    return out


def _pick(rng: random.Random, word: str, ok: Callable[[str], bool]) -> int | None:
    idx = [i for i, ch in enumerate(word) if ok(ch)]
    return rng.choice(idx) if idx else None


def homoglyph(word: str, rng: random.Random) -> str | None:
    table = latin_homoglyphs()
    i = _pick(rng, word, lambda ch: ch in table)
    return None if i is None else word[:i] + rng.choice(table[word[i]]) + word[i + 1:]


def zero_width(word: str, rng: random.Random) -> str | None:
    if len(word) < 2:
        return None
    i = rng.randrange(1, len(word))
    return word[:i] + rng.choice(ZERO_WIDTH) + word[i:]


def fullwidth(word: str, rng: random.Random) -> str | None:
    return "".join(chr(ord(c) + 0xFEE0) if c.isascii() and c.isalpha() else c for c in word)


def math_style(word: str, rng: random.Random) -> str | None:
    cap, small = rng.choice(_math_styles())
    return "".join(chr(cap + ord(c) - 65) if "A" <= c <= "Z" else chr(small + ord(c) - 97) if "a" <= c <= "z"
                   else c for c in word)


def case(word: str, rng: random.Random) -> str | None:
    style = rng.randrange(3)
    out = word.upper() if style == 0 else word.title() if style == 1 else "".join(
        c.upper() if rng.random() < 0.5 else c.lower() for c in word)
    return out if out != word else word.swapcase()


def spacing(word: str, rng: random.Random) -> str | None:
    """An extra space: before an English word (double spacing), inside a CJK/Hangul run."""
    if word.isascii():
        return " " + word
    if len(word) < 2:
        return None
    i = rng.randrange(1, len(word))
    return word[:i] + " " + word[i:]


def hyphenation(word: str, rng: random.Random) -> str | None:
    if len(word) < 6:
        return None
    i = rng.randrange(3, len(word) - 2)
    return word[:i] + "-" + word[i:]


_QWERTY = ("qwertyuiop", "asdfghjkl", "zxcvbnm")


@cache
def _neighbours(rows: tuple[str, ...]) -> dict[str, str]:
    """Key -> keys next to it on the same row or diagonally above/below (staggered rows)."""
    pos = {c: (r, i) for r, row in enumerate(rows) for i, c in enumerate(row)}
    out = {}
    for c, (r, i) in pos.items():
        near = [rows[r][j] for j in (i - 1, i + 1) if 0 <= j < len(rows[r])]
        for rr, js in ((r - 1, (i, i + 1)), (r + 1, (i - 1, i))):
            if 0 <= rr < len(rows):
                near += [rows[rr][j] for j in js if 0 <= j < len(rows[rr])]
        out[c] = "".join(near)
    return out


# Korean 2-beolsik layout on the same keys as QWERTY (ㅂ on q, ㅁ on a, ...).
_DUBEOLSIK = ("ㅂㅈㄷㄱㅅㅛㅕㅑㅐㅔ", "ㅁㄴㅇㄹㅎㅗㅓㅏㅣ", "ㅋㅌㅊㅍㅠㅜㅡ")
_CHO = "ㄱㄲㄴㄷㄸㄹㅁㅂㅃㅅㅆㅇㅈㅉㅊㅋㅌㅍㅎ"
_JUNG = "ㅏㅐㅑㅒㅓㅔㅕㅖㅗㅘㅙㅚㅛㅜㅝㅞㅟㅠㅡㅢㅣ"


def _keyboard_en(word: str, rng: random.Random) -> str | None:
    nb = _neighbours(_QWERTY)
    i = _pick(rng, word, lambda ch: ch.lower() in nb)
    if i is None:
        return None
    c = rng.choice(nb[word[i].lower()])
    return word[:i] + (c.upper() if word[i].isupper() else c) + word[i + 1:]


def _keyboard_ko(word: str, rng: random.Random) -> str | None:
    """A jamo typo: one syllable's initial consonant or vowel replaced by a neighbouring key of the
    same class (the syllable stays one syllable, so syllable counts are unchanged)."""
    nb = _neighbours(_DUBEOLSIK)
    i = rng.randrange(len(word))
    code = ord(word[i]) - 0xAC00
    cho, jung, jong = code // 588, (code % 588) // 28, code % 28
    if rng.random() < 0.5:
        opts = [c for c in nb.get(_CHO[cho], "") if c in _CHO]
        if not opts:
            return None
        cho = _CHO.index(rng.choice(opts))
    else:
        opts = [c for c in nb.get(_JUNG[jung], "") if c in _JUNG]
        if not opts:
            return None
        jung = _JUNG.index(rng.choice(opts))
    return word[:i] + chr(0xAC00 + cho * 588 + jung * 28 + jong) + word[i + 1:]


def keyboard_typo(word: str, rng: random.Random) -> str | None:
    return _keyboard_en(word, rng) if word.isascii() else _keyboard_ko(word, rng)


# Letter-shape confusions of OCR engines (letters to letters only: digits would change what the
# LENGTH scorer reads as the target number).
_OCR = (("rn", "m"), ("m", "rn"), ("cl", "d"), ("d", "cl"), ("vv", "w"), ("w", "vv"), ("l", "I"),
        ("I", "l"), ("e", "c"), ("c", "e"), ("h", "b"), ("u", "v"), ("n", "h"), ("ri", "n"))


def ocr_typo(word: str, rng: random.Random) -> str | None:
    hits = [(i, a, b) for a, b in _OCR for i in range(len(word)) if word.startswith(a, i)]
    if not hits:
        return None
    i, a, b = rng.choice(hits)
    return word[:i] + b + word[i + len(a):]


@cache
def _s2t():
    import opencc

    return opencc.OpenCC("s2t")


def traditional(word: str, rng: random.Random) -> str | None:
    """Simplified -> Traditional with OpenCC (phrase-aware); only kept when it maps one character to
    one character, so character counts stay put."""
    out = _s2t().convert(word)
    return out if len(out) == len(word) and out != word else None


def jamo_nfd(word: str, rng: random.Random) -> str | None:
    """One syllable written as conjoining jamo (Unicode NFD): it renders the same, but a tokenizer
    sees two or three code points instead of one."""
    i = rng.randrange(len(word))
    return word[:i] + unicodedata.normalize("NFD", word[i]) + word[i + 1:]


@dataclass(frozen=True)
class Kind:
    """One perturbation: what it does to one unit; `langs`, the languages whose units it applies to, are those
    whose catalogue entry lists it (`common.languages.Language.perturbations`)."""

    name: str
    fn: UnitFn
    doc: str

    @property
    def langs(self) -> frozenset[str]:
        return frozenset(code for code, entry in LANGUAGES.items() if self.name in entry.perturbations)


KINDS: dict[str, Kind] = {k.name: k for k in (
    Kind("homoglyph", homoglyph, "one letter -> a Cyrillic/Greek look-alike (Unicode confusables)"),
    Kind("zero_width", zero_width, "a zero-width space/joiner inside a word or run"),
    Kind("fullwidth", fullwidth, "a word in full-width forms (ａｂｃ)"),
    Kind("math_style", math_style, "a word in a Mathematical Alphanumeric style (𝐚𝐛𝐜, 𝚊𝚋𝚌)"),
    Kind("spacing", spacing, "an extra space (double spacing; a space inside a CJK/Hangul run)"),
    Kind("hyphenation", hyphenation, "a hyphen inside a word of 6+ letters"),
    Kind("case", case, "a word in UPPER, Title or rAnDoM case"),
    Kind("keyboard_typo", keyboard_typo,
         "a neighbouring key (QWERTY; Korean 2-beolsik, one jamo of a syllable)"),
    Kind("ocr_typo", ocr_typo, "an OCR letter-shape confusion (rn<->m, cl<->d, l<->I...)"),
    Kind("traditional", traditional, "Simplified -> Traditional Chinese (OpenCC s2t, 1:1 only)"),
    Kind("jamo", jamo_nfd, "a Hangul syllable decomposed into conjoining jamo (NFD)"),
)}

# Kinds allowed on each task's payload: the gold answer is a count of words/characters/syllables (or
# an order of such counts), so any change inside a unit that keeps it one unit is answer-preserving;
# the counted target is protected separately. Hyphenation is excluded ("home-land": one word or two?).
# COMPC counts letters: only kinds that add no letter. DIFF and REORD answers copy payload tokens:
# only extra spaces, which neither their scorers nor a reader see as a token.
_UNIT_SAFE = frozenset(KINDS) - {"hyphenation"}

# ---- layouts -------------------------------------------------------------------------------------
# Each task module declares the layouts matching its prompt templates (`perturb_layouts`) and the kinds
# allowed on its payload (`perturb_kinds`, UNIT_SAFE meaning `_UNIT_SAFE`), read here from the registry.
# Named groups: p* = payload, t = counted target (kept), k* = kept verbatim, i* = the only instruction
# spans (when a layout has i* groups, text outside every group is kept too).


@cache
def _from_registry() -> tuple[dict[str, frozenset[str]], dict[str, tuple[re.Pattern[str], ...]]]:
    """(PAYLOAD_KINDS, LAYOUTS), read from the registry on first use: importing this module stays light
    (the CLI lists KINDS in its help without loading every task module)."""
    from synth.core import UNIT_SAFE, available

    kinds, layouts = {}, {}
    for task, gen in available().items():
        if gen.perturb_kinds:
            kinds[task] = _UNIT_SAFE if gen.perturb_kinds == UNIT_SAFE else frozenset(gen.perturb_kinds)
        if gen.perturb_layouts:
            layouts[task] = tuple(re.compile(p) for p in gen.perturb_layouts)
    return kinds, layouts


def __getattr__(name: str) -> Any:
    """`PAYLOAD_KINDS` (task -> kinds allowed on its payload) and `LAYOUTS` (task -> compiled layouts)."""
    if name == "PAYLOAD_KINDS":
        return _from_registry()[0]
    if name == "LAYOUTS":
        return _from_registry()[1]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


@dataclass(frozen=True)
class Span:
    text: str
    role: str  # "instruction" | "payload" | "keep"


def _layout(record: dict[str, Any]) -> re.Match[str] | None:
    """The first layout of the record's task that matches its whole prompt."""
    for pat in _from_registry()[1].get(record["task"], ()):
        m = pat.fullmatch(record["prompt"])
        if m is not None:
            return m
    return None


def _cut(m: re.Match[str]) -> list[Span]:
    prompt = m.string
    groups = [(m.start(g), m.end(g), g) for g in m.re.groupindex if m.start(g) >= 0]
    outside = "keep" if any(g.startswith("i") for *_, g in groups) else "instruction"
    out, pos = [], 0
    for a, b, g in sorted(groups):
        if a > pos:
            out.append(Span(prompt[pos:a], outside))
        role = "payload" if g.startswith("p") else "instruction" if g.startswith("i") else "keep"
        out.append(Span(prompt[a:b], role))
        pos = b
    if pos < len(prompt):
        out.append(Span(prompt[pos:], outside))
    return [s for s in out if s.text]


def spans(record: dict[str, Any]) -> list[Span] | None:
    """The prompt cut into instruction / payload / keep spans, or None when no layout matches."""
    m = _layout(record)
    return None if m is None else _cut(m)


def target_of(record: dict[str, Any]) -> str | None:
    """The counted target of FREQ/COMPC (kept, never created in the payload)."""
    m = _layout(record)
    return None if m is None else m.groupdict().get("t")


def _units(text: str, lang: str, instruction: bool, target: str | None = None) -> list[tuple[int, int]]:
    """Perturbable units of a span: English words (letters only); Hanzi and Hangul runs cut into
    two-character pieces (so a rate means about the same share of text in every language), never
    spanning a counted target character. In instructions: never inside quotes, never next to a digit
    (seq1), never an all-caps label (ABC)."""
    pat = _unit_pattern(lang)
    blocked = [(m.start(), m.end()) for m in _QUOTED.finditer(text)] if instruction else []
    out = []
    for m in pat.finditer(text):
        a, b = m.span()
        w = m.group()
        if instruction:
            if any(x <= a < y for x, y in blocked) or (w.isupper() and len(w) <= 3):
                continue
            if (a > 0 and text[a - 1].isdigit()) or (b < len(text) and text[b].isdigit()):
                continue
        if w.isascii():
            if target:  # the whitespace token around the word: "east-west" is one target, not two words
                x, y = a, b
                while x > 0 and not text[x - 1].isspace():
                    x -= 1
                while y < len(text) and not text[y].isspace():
                    y += 1
                if target.lower() in text[x:y].lower():
                    continue
            out.append((a, b))
            continue
        start = a
        for j in range(a, b + 1):  # pieces of <= 2 characters between target characters
            if j == b or (target and text[j] in target):
                out += [(x, min(x + 2, j)) for x in range(start, j, 2)]
                start = j + 1
    return out


def _unit_lang(word: str) -> str:
    """The language of a unit: the word language's for English letters, else the character language whose
    token characters it is made of."""
    if word.isascii():
        return next((code for code, entry in LANGUAGES.items() if not entry.is_char), "")
    return next((x.code for x in char_languages() if x.char_re.match(word)), "")


def perturb(record: dict[str, Any], kind: str, seed: int, rate: float = 0.3) -> dict[str, Any] | None:
    """A copy of `record` with `kind` applied to a share `rate` of its perturbable units (at least
    one), or None when the kind cannot change this row (no layout, no unit it applies to).

    The copy keeps id and answer; `meta["perturbation"]` names the kind and the original prompt."""
    k = KINDS[kind]
    langs = k.langs
    m = _layout(record)
    if m is None:
        return None
    cut, target = _cut(m), m.groupdict().get("t")
    rng = random.Random(f"{seed}:{kind}:{record['id']}")
    payload_ok = kind in _from_registry()[0].get(record["task"], frozenset())
    slots: list[tuple[int, int, int]] = []  # (span index, start, end)
    for si, s in enumerate(cut):
        if s.role == "instruction" or (s.role == "payload" and payload_ok):
            for a, b in _units(s.text, record["lang"], s.role == "instruction",
                               target if s.role == "payload" else None):
                if _unit_lang(s.text[a:b]) not in langs:
                    continue
                if kind == "spacing" and s.text[a:b].isascii() and not (a > 0 and s.text[a - 1] == " "):
                    continue  # English spacing doubles an existing space (no leading spaces)
                slots.append((si, a, b))
    if not slots:
        return None
    order = list(range(len(slots)))
    rng.shuffle(order)
    want = max(1, round(rate * len(slots)))
    edits: dict[int, list[tuple[int, int, str]]] = {}
    done = 0
    for j in order:
        if done >= want:
            break
        si, a, b = slots[j]
        w = cut[si].text[a:b]
        new = k.fn(w, rng)
        if new is None or new == w:
            continue
        if cut[si].role == "payload" and target and _fold(new).count(t := _fold(target)) != _fold(w).count(t):
            continue  # would create or remove an occurrence of the counted target
        edits.setdefault(si, []).append((a, b, new))
        done += 1
    if not done:
        return None
    parts = []
    for si, s in enumerate(cut):
        text = s.text
        for a, b, new in sorted(edits.get(si, ()), reverse=True):
            text = text[:a] + new + text[b:]
        parts.append(text)
    out = dict(record)
    out["prompt"] = "".join(parts)
    out["meta"] = {**(record.get("meta") or {}), "perturbation": kind, "canonical_prompt": record["prompt"]}
    return out


def _fold(s: str) -> str:
    """What a reader sees: NFKC (full-width, math styles, conjoining jamo), no zero-width, lower case."""
    s = unicodedata.normalize("NFKC", s)
    return "".join(c for c in s if c not in ZERO_WIDTH).lower()


def perturbed_sets(records: Iterable[dict[str, Any]], kinds: Iterable[str], seed: int = 0,
                   rate: float = 0.3) -> tuple[list[dict[str, Any]], dict[str, list[dict[str, Any]]], dict[str, int]]:
    """(canonical rows, kind -> perturbed rows with the same ids, kind -> rows it could not change)."""
    canonical = list(records)
    out: dict[str, list[dict[str, Any]]] = {}
    skipped: dict[str, int] = {}
    for kind in kinds:
        rows = [p for r in canonical if (p := perturb(r, kind, seed, rate)) is not None]
        out[kind] = rows
        skipped[kind] = len(canonical) - len(rows)
    return canonical, out, skipped
