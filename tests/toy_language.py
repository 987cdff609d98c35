"""A toy language, written as a new language is: this one module (tests/test_languages.py declares it).

Its tokens are the 33 Georgian Mkhedruli letters (U+10D0..U+10F0), a script no other language of the catalogue
uses, so the LENGTH rule, the real-text cleaning and the perturbation units tell it apart from every other. Its
running text, word list and topics are made here from a fixed seed (a real language names installed packages'
files instead, see common/languages/ko.py); it brings its own LENOP prompts, so `sentence_length` offers it
without the task naming it, and no other task does.
"""
from __future__ import annotations

import random

from common.languages import Language

FIRST, LAST = 0x10D0, 0x10F0


def _word(rng: random.Random) -> str:
    return "".join(chr(rng.randint(FIRST, LAST)) for _ in range(rng.randint(2, 6)))


def sentences() -> list[tuple[str, list[str]]]:
    """120 sentences of 4-9 words, commas between some of them, a full stop at the end."""
    rng = random.Random(11)
    out = []
    for _ in range(120):
        words = [_word(rng) for _ in range(rng.randint(4, 9))]
        out.append(" ".join(w + ("," if rng.random() < 0.2 else "") for w in words) + ".")
    return [("toy sentences (seeded)", out)]


def words() -> list[tuple[str, float]]:
    """300 words, most frequent first."""
    rng = random.Random(12)
    return [(w, 1.0 / (i + 1)) for i, w in enumerate(dict.fromkeys(_word(rng) for _ in range(300)))]


LANGUAGE = Language(
    code="tx", name="Toy", stems=("toy",), unit="letters", yes="ჰო", filler="ა",
    char_ranges=((FIRST, LAST),), words=words, sentences=sentences,
    perturbations=frozenset({"zero_width", "spacing"}),
    topics=("მთები", "ზღვა", "ხეები"),
    prompts={"sentence_length": {
        "count": ("How many toy letters are in this sentence? The sentence is: ‘{text}’",),
        "generate": ("Write exactly {n} toy letters on the topic of {topic}.",),
    }},
)
