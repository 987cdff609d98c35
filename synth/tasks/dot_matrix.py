"""DOT: 16x16 dot-matrix characters from GNU Unifont (language slot `mul`).

char_classification: the character as text -> its category; bitmap_type_classification: the bitmap ->
category; bitmap_classification: the bitmap and its category -> the character. Categories and text
formats are the official ones; blank glyphs are rejected.
"""
from __future__ import annotations

import random
from functools import lru_cache

from ..core import Generator, register
from ..record import make_record
from ..structural import dot_charset, glyph_bits

CATEGORIES = (
    "- digit (0–9)\n- latin (A–Z, a–z)\n- hanzi (Chinese characters)\n- hangul (Korean characters)\n"
    "- kana (Japanese hiragana/katakana)\n- greek (Greek letters)\n- symbol (punctuation or other symbols)"
)
T = {
    "char_classification": ("\nPlease classify the following character into one of the following categories:\n"
                            + CATEGORIES + "\ncharacter: '{c}'\n"),
    "bitmap_type_classification": ("\nPlease classify the following 16x16 bitmap into one of the following "
                                   "categories:\n" + CATEGORIES + "\n\nbitmap:\n{rows_nl}\n                "),
    "bitmap_classification": ("Please classify the following 16x16 bitmap into the character it represents in "
                              "the category ({cat}):\n{rows_list}"),
}


@lru_cache(maxsize=4096)
def formatted(ch: str) -> tuple[str, str]:
    bits = glyph_bits(ch)
    rows = [str(list(r)) for r in bits]
    return "\n" + "\n".join(rows), "[\n" + ",\n".join(rows) + "]"


@register
class DotMatrix(Generator):
    task = "dot_matrix"
    langs = ("mul",)
    subtasks = ("char_classification", "bitmap_type_classification", "bitmap_classification")

    def make(self, rng: random.Random, lang: str, subtask: str):
        charset = dot_charset()
        cat = rng.choice(sorted(charset))
        ch = rng.choice(charset[cat])
        if subtask == "char_classification":
            prompt, answer = T[subtask].format(c=ch), cat
        else:
            rows_nl, rows_list = formatted(ch)
            if subtask == "bitmap_type_classification":
                prompt, answer = T[subtask].format(rows_nl=rows_nl), cat
            else:
                prompt, answer = T[subtask].format(cat=cat, rows_list=rows_list), ch
        return make_record(id="", task=self.task, subtask=subtask, lang="mul", type="MATCH_ANSWER",
                           prompt=prompt, answer=answer, meta={"char": ch, "category": cat})
