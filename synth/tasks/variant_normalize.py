"""VAR: restore text whose characters were replaced by look-alikes; the original is always recoverable.

en: a word (lower case, or capitalised one time in five; a hyphenated compound in 20% of rows, as the
release) with 97-100% of its letters (and its hyphen) replaced by homoglyphs from the Unicode confusables
table, each standing for exactly one letter of the same case (`structural.homoglyphs`); ko slot (subtask
`digital`, as the official digital.csv fills it): a string of 4-13 digits, 97-100% replaced by look-alike
digits (the release replaces 97-100% of characters in both files; 30-100% before taught a different
task); zh: one or two real sentences (HSK examples) with 30-90% of
the characters that have one replaced by a look-alike variant (Traditional/Japanese forms from
OpenCC, radicals and kana from the confusables table), punctuation untouched ("火星文" style).
"""
from __future__ import annotations

import random
from dataclasses import dataclass
from functools import cache

from common.record import make_record

from ..core import Generator, register
from ..resources import word_list
from ..structural import homoglyphs, zh_sentences, zh_variants

T = {
    "en": ("The following is an English word where some letters have been visually confused with structurally "
           "similar characters. Please recover the original word.\nWord: {x}",
           "Some letters of this English word were swapped for look-alike characters. Write the original word.\n"
           "Word: {x}"),
    "digital": ("The following is a numeric string where some digits have been visually confused with "
                "structurally similar Unicode characters. Please recover the original number.\nNumber: {x}",
                "Some digits of this number were replaced by look-alike characters. Write the original number.\n"
                "Number: {x}"),
    "zh": ("以下是被扰动后的文本，请你还原出原始文本，不修改标点符号：{x}",
           "下面的句子里有些字被换成了形近的异体字，请还原原句（标点不变）：{x}"),
}


@cache
def en_words() -> tuple[str, ...]:
    return tuple(w for w in word_list("en").words[:40000] if w.isalpha() and w.islower() and len(w) >= 4)


# Hyphenated answers: the release's english.csv has them in about 20% of rows (friendly-fire-like compounds);
# the word list has none (wordfreq splits at hyphens), so compounds are built: a productive first element from
# this list + a word, or two short words.
HYPHEN_SHARE = 0.2
HYPHEN_FIRST = ("self", "well", "non", "anti", "co", "re", "pre", "post", "multi", "half", "semi", "cross", "over",
                "high", "low", "long", "short", "full", "part", "world", "old", "all", "ever", "far", "free", "hand",
                "home", "life", "man", "near", "one", "open", "out", "right", "left", "good", "ill", "first", "second",
                "third", "two", "three", "top", "under", "up", "down", "off", "mid", "ultra", "inter", "counter")
# look-alikes of "-" in the Unicode confusables table (synth.structural's source): a hyphen is perturbed too,
# so hyphenated words keep the release's 97-100% replaced characters
HYPHEN_GLYPHS = ("˗", "‐", "‑", "‒", "–", "⁃", "−", "➖", "Ⲻ", "﹘")
RATE = (0.97, 1.0)  # share of replaceable characters replaced, per row: the release replaces 97-100%


@cache
def short_words() -> tuple[str, ...]:
    return tuple(w for w in en_words()[:8000] if len(w) <= 7)


@cache
def letter_table() -> dict[str, tuple[str, ...]]:
    """`homoglyphs("letters")`, the hyphen's look-alikes, and the compatibility letters (mathematical
    alphanumerics, fullwidth) whose NFKC form is the letter, for letters the confusables table leaves without
    one: "m" (its look-alikes there are two characters, "rn"). The release uses such letters throughout
    (𝖋𝒂Ϲ𑣃𝗅𝙀 for "facile"); without them every "m" stayed plain."""
    import sys
    import unicodedata

    table = {k: list(v) for k, v in homoglyphs("letters").items()}
    for letter in [c for c in "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ" if not table.get(c)]:
        table[letter] = sorted(chr(i) for i in range(0x80, sys.maxunicode + 1)
                               if 0xD800 > i or i > 0xDFFF
                               if unicodedata.category(chr(i)) in ("Ll", "Lu")
                               and unicodedata.normalize("NFKC", chr(i)) == letter)
    table["-"] = list(HYPHEN_GLYPHS)
    return {k: tuple(v) for k, v in table.items() if v}


def en_answer(rng: random.Random) -> str:
    """A lower-case word, or (HYPHEN_SHARE of rows) a hyphenated compound of 2 parts."""
    if rng.random() >= HYPHEN_SHARE:
        return rng.choice(en_words())
    short = short_words()
    first = rng.choice(HYPHEN_FIRST) if rng.random() < 0.5 else rng.choice(short)
    return f"{first}-{rng.choice(short)}"


def perturb(rng: random.Random, text: str, table: dict[str, tuple[str, ...]], rate: float) -> str | None:
    """Replace each character that has look-alikes with probability `rate`; None when nothing changed."""
    out, changed = [], 0
    for ch in text:
        alts = table.get(ch)
        if alts and rng.random() < rate:
            out.append(rng.choice(alts))
            changed += 1
        else:
            out.append(ch)
    return "".join(out) if changed else None


@register
class VariantNormalize(Generator):
    task = "variant_normalize"
    langs = ("en", "zh", "ko")
    answer_types = {"": "MATCH_ANSWER", "digital": "MATCH_ANSWER"}
    perturb_layouts = (
        r"(?s)(?P<i>The following is an? .*?)(?P<k>\n(?:Word|Number): .*)",
        r"(?P<i>以下是被扰动后的文本，请你还原出原始文本，不修改标点符号)(?P<k>：.*)",
    )
    unit_in_prompt = True  # tokstats: the asked-about unit is quoted in the prompt
    # beyond the official range (the digit file only: 4-13 digits there): 14-24 digits; en and zh have nothing
    # harder to draw (synth --harder refuses them)
    harder = {"digits": (14, 24)}
    harder_knob = "digital: 14-24 digits (the official file: 4-13)"

    @dataclass
    class Config(Generator.Config):
        digits: tuple[int, int] = (4, 13)  # digital: the number's length range (the official file's)

    @classmethod
    def has_harder(cls, lang: str, subtask: str) -> bool:
        return subtask == "digital"

    @classmethod
    def official_file(cls, stem: str) -> tuple[str, str] | None:
        if stem == "digital":  # the digit file fills the Korean slot
            return "digital", "ko"
        return super().official_file(stem)

    def supports(self, lang: str, subtask: str) -> bool:
        return (lang, subtask) in (("en", ""), ("zh", ""), ("ko", "digital"))

    def make(self, rng: random.Random, lang: str, subtask: str):
        if subtask == "digital":
            orig = "".join(rng.choice("0123456789") for _ in range(rng.randint(*self.config.digits)))
            x = perturb(rng, orig, homoglyphs("digits"), rng.uniform(*RATE))
            key = "digital"
        elif lang == "en":
            w = en_answer(rng)
            orig = w.capitalize() if rng.random() < 0.2 else w
            x = perturb(rng, orig, letter_table(), rng.uniform(*RATE))
            key = "en"
        else:
            sents = zh_sentences()
            i = rng.randrange(len(sents))
            orig = sents[i] if rng.random() < 0.6 or i + 1 == len(sents) else sents[i] + sents[i + 1]
            x = perturb(rng, orig, zh_variants(), rng.uniform(0.3, 0.9))
            key = "zh"
        if x is None:
            return None
        prompt = self.template(rng, T, key).format(x=x)
        return make_record(id="", task=self.task, subtask=subtask, lang=lang, type=self.answer_type(subtask),
                           prompt=prompt, answer=orig, meta={"perturbed": x})
