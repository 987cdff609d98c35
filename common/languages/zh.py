"""Chinese: a character language (tokens are CJK ideographs, U+4E00..U+9FFF).

Running text: hsk-sentences-audio's Chinese sentences (HSK 1-6). Word list: wordfreq zh (jieba-segmented,
Simplified). Denylist: synth/data/denylist_zh.txt, matched as substrings.
"""
from __future__ import annotations

from ._sources import hsk
from .base import Language


def sentences() -> list[tuple[str, list[str]]]:
    return [("hsk-sentences-audio (Chinese)", [r["chinese"] for r in hsk()])]


LANGUAGE = Language(
    code="zh", name="Chinese", stems=("chinese", "zh"), unit="characters", yes="是", filler="字",
    char_ranges=((0x4E00, 0x9FFF),), punct="，。，、", wordfreq="zh", sentences=sentences,
    denylist="denylist_zh.txt", freq_vocab="weighted_chars", segmenter="jieba",
    perturbations=frozenset({"zero_width", "spacing", "traditional"}),
)
