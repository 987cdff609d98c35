"""DOT: 16x16 dot-matrix characters from GNU Unifont (language slot `mul`, as the official files).

char_classification: the character as text -> its category; bitmap_type_classification: the bitmap ->
its category; bitmap_classification: the bitmap and its category -> the character. Categories, prompt
wording and the 0/1 row formats are the official ones. The category is drawn uniformly, then a
character of it; blank glyphs and glyphs shared by two candidates are never used
(`structural.dot_charset`), so every bitmap has one answer.
"""
from __future__ import annotations

import random
from functools import cache, lru_cache
from typing import ClassVar

from common.record import make_record

from ..core import Generator, register
from ..structural import dot_charset, glyph_bits

CATEGORIES = (
    "- digit (0–9)\n- latin (A–Z, a–z)\n- hanzi (Chinese characters)\n- hangul (Korean characters)\n"
    "- kana (Japanese hiragana/katakana)\n- greek (Greek letters)\n- symbol (punctuation or other symbols)"
)
T = {
    "char_classification": (
        "\nPlease classify the following character into one of the following categories:\n" + CATEGORIES
        + "\ncharacter: '{c}'\n",
        "Which category does the character '{c}' belong to? Choose one of:\n" + CATEGORIES + "\n",
    ),
    "bitmap_type_classification": (
        "\nPlease classify the following 16x16 bitmap into one of the following categories:\n" + CATEGORIES
        + "\n\nbitmap:\n{rows_nl}\n                ",
        "Each row below is one line of a 16x16 bitmap (1 = ink). Which category is the character it shows?\n"
        + CATEGORIES + "\n\nbitmap:\n{rows_nl}\n",
    ),
    "bitmap_classification": (
        "Please classify the following 16x16 bitmap into the character it represents in the category ({cat}):"
        "\n{rows_list}",
        "The 16x16 bitmap below (1 = ink) draws one character of the category ({cat}). Which character is it?"
        "\n{rows_list}",
    ),
}


@lru_cache(maxsize=8192)
def formatted(ch: str) -> tuple[str, str]:
    """The two official matrix texts: rows on separate lines (type) and a bracketed list (char)."""
    rows = [str(list(r)) for r in glyph_bits(ch)]
    return "\n" + "\n".join(rows), "[\n" + ",\n".join(rows) + "]"


@cache
def categories() -> tuple[str, ...]:
    return tuple(sorted(dot_charset()))


@register
class DotMatrix(Generator):
    task = "dot_matrix"  # langs: ("mul",), from the catalogue's no_lang
    answer_types = {"char_classification": "MATCH_ANSWER", "bitmap_type_classification": "MATCH_ANSWER",
                    "bitmap_classification": "MATCH_ANSWER"}
    perturb_layouts = (r"(?s)(?P<k>\n?)(?P<i>Please classify the following) (?P<k2>.*)",)

    OFFICIAL_STEMS: ClassVar[dict[str, str]] = {
        "char_classification": "char_classification",
        "bitmap_type_classification": "bitmap_type_classification",
        "bitmap_classification_final": "bitmap_classification",
    }

    @classmethod
    def official_file(cls, stem: str) -> tuple[str, str] | None:
        sub = cls.OFFICIAL_STEMS.get(stem)
        return (sub, "mul") if sub else None

    def make(self, rng: random.Random, lang: str, subtask: str):
        cat = rng.choice(categories())
        ch = rng.choice(dot_charset()[cat])
        t = self.template(rng, T, subtask)
        if subtask == "char_classification":
            prompt, answer = t.format(c=ch), cat
        else:
            rows_nl, rows_list = formatted(ch)
            if subtask == "bitmap_type_classification":
                prompt, answer = t.format(rows_nl=rows_nl), cat
            else:
                prompt, answer = t.format(cat=cat, rows_list=rows_list), ch
        return make_record(id="", task=self.task, subtask=subtask, lang="mul", type=self.answer_type(subtask),
                           prompt=prompt, answer=answer, meta={"char": ch, "category": cat})
