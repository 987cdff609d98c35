"""English: the word language (tokens are valid English words, `[a-zA-Z]+(?:[-'][a-zA-Z]+)*`).

Running text: the English translations of hsk-sentences-audio's sentences, then the prose paragraphs of
CPython's `pydoc_data.topics` (the language reference as shipped with the interpreter). Word list:
wordfreq. Denylist: better-profanity's word list, matched as whole words.
"""
from __future__ import annotations

import re

from ._sources import hsk
from .base import Language

_SENT_SPLIT = re.compile(r"(?<=[.!?])\s+(?=[\"'(A-Z])")


def _pydoc_prose() -> list[str]:
    """Prose paragraphs of the Python language reference as CPython ships it (no code, no headings)."""
    import pydoc_data.topics as topics

    out = []
    for key in sorted(topics.topics):
        for para in topics.topics[key].split("\n\n"):
            lines = para.split("\n")
            if not lines or any(l.startswith(" ") for l in lines) or any(set(l) <= set("*=-~^") for l in lines):
                continue
            out.extend(_SENT_SPLIT.split(" ".join(lines)))
    return out


def sentences() -> list[tuple[str, list[str]]]:
    return [
        ("hsk-sentences-audio (English translations)", [r["translation"]["en"] for r in hsk()]),
        ("CPython pydoc_data.topics (prose)", _pydoc_prose()),
    ]


LANGUAGE = Language(
    code="en", name="English", stems=("english", "en"), unit="words", yes="yes", filler="word",
    wordfreq="en", sentences=sentences, denylist="better-profanity", freq_vocab="words", freq_stream=600_000,
    bigrams=r"\b(?:of|in|to|on|and) the\b",
    perturbations=frozenset({"homoglyph", "zero_width", "fullwidth", "math_style", "spacing", "hyphenation", "case",
                             "keyboard_typo", "ocr_typo"}),
)
