"""Korean: a character language (tokens are Hangul syllables, U+AC00..U+D7A3) that writes spaces between
eojeols.

Running text: konlpy's bundled corpus files (the Constitution of the Republic of Korea and 10 bills), read
as plain text (konlpy's taggers and Java are not used), article numbers removed. Word list: wordfreq ko
(morphemes). Denylist: synth/data/denylist_ko.txt, matched as substrings.
"""
from __future__ import annotations

import re

from ._sources import ir_files
from .base import Language

_SPLIT = re.compile(r"(?<=[.?!])\s+")
_ARTICLE = re.compile(r"제\d+(?:조|항|호|장|절|관)(?:의\d+)?|[①-⑳]|\d+\.")
_HANGUL = re.compile(r"[\uac00-\ud7a3]+")


def sentences() -> list[tuple[str, list[str]]]:
    root = ir_files("konlpy") / "data" / "corpus"
    sents: list[str] = []
    for f in [root / "kolaw" / "constitution.txt", *sorted((root / "kobill").glob("*.txt"))]:
        for line in f.read_text(encoding="utf-8").splitlines():
            line = _ARTICLE.sub("", line)
            sents.extend(s for s in (" ".join(x.split()) for x in _SPLIT.split(line)) if _HANGUL.search(s))
    return [("konlpy corpus (kolaw constitution, kobill bills)", sents)]


LANGUAGE = Language(
    code="ko", name="Korean", stems=("korean", "kor"), unit="syllables", yes="예", filler="가",
    char_ranges=((0xAC00, 0xD7A3),), spaced=True, punct=",.", wordfreq="ko", sentences=sentences,
    denylist="denylist_ko.txt", freq_vocab="chars",
    perturbations=frozenset({"zero_width", "spacing", "keyboard_typo", "jamo"}),
)
