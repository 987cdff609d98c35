"""Language resources for the generators, built from maintained packages (no hand-typed word lists).

* English: `wordfreq.top_n_list('en', 60000)`, kept to words the official scorer calls valid
  (`[a-zA-Z]+(?:[-'][a-zA-Z]+)*`), weighted by their `wordfreq` frequency.
* Chinese: `wordfreq` zh words (jieba-segmented, Simplified) made only of CJK ideographs.
* Korean: `wordfreq` ko tokens made only of Hangul syllables (wordfreq splits Korean into morphemes,
  so an eojeol here is one or two of them glued together).

`Corpus` is a fixed, frequency-weighted sample of those words (seeded with `CORPUS_SEED`, independent of
the user's seed) that generators slice "consecutive tokens" from. It is a unigram sample, not running
news text as in the official release: the token statistics are real, the syntax is not.
"""
from __future__ import annotations

import random
import re
from array import array
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np

CORPUS_SEED = 20251122
CORPUS_TOKENS = 200_000
TOP_N = 60_000

EN_VALID = re.compile(r"[a-zA-Z]+(?:[-'][a-zA-Z]+)*")
CJK = re.compile(r"[\u4e00-\u9fff]+")
HANGUL = re.compile(r"[\uac00-\ud7a3]+")


def is_cjk(ch: str) -> bool:
    return "\u4e00" <= ch <= "\u9fff"


def is_hangul(ch: str) -> bool:
    return "\uac00" <= ch <= "\ud7a3"


@dataclass(frozen=True)
class WordList:
    """Words of one language with cumulative frequency weights for `random.choices`."""

    lang: str
    words: tuple[str, ...]
    cum_weights: tuple[float, ...]

    def sample(self, rng: random.Random, k: int) -> list[str]:
        return rng.choices(self.words, cum_weights=self.cum_weights, k=k)


@lru_cache(maxsize=None)
def word_list(lang: str) -> WordList:
    """Frequency-weighted word list for `lang` from wordfreq (cached per process)."""
    import wordfreq

    pattern = {"en": EN_VALID, "zh": CJK, "ko": HANGUL}[lang]
    freqs = wordfreq.get_frequency_dict(lang)
    words = [w for w in wordfreq.top_n_list(lang, TOP_N) if pattern.fullmatch(w)]
    if lang == "en":
        # one-letter tokens other than a/i are mostly initials and noise in web text
        words = [w for w in words if len(w) > 1 or w in ("a", "i")]
    total = 0.0
    cum = []
    for w in words:
        total += freqs.get(w, 1e-9)
        cum.append(total)
    return WordList(lang, tuple(words), tuple(cum))


@dataclass(frozen=True)
class Corpus:
    """A fixed token stream for one language.

    `text` is the running text; `pos[i]` is the character offset of token i in `text` and `end[i]` its
    end, so `text[pos[i]:end[j-1]]` is tokens i..j-1 with the original spacing/punctuation between them.
    Tokens: English words, Chinese characters, Hangul syllables.
    """

    lang: str
    text: str
    pos: array
    end: array
    joined: str = ""  # zh/ko: the tokens concatenated (one character each), for C-speed slicing
    ids: Any = None  # numpy uint32 token ids aligned with the tokens (codepoints for zh/ko)

    def __len__(self) -> int:
        return len(self.pos)

    def span(self, start: int, n: int) -> str:
        """Text covering exactly `n` tokens starting at token `start`."""
        return self.text[self.pos[start] : self.end[start + n - 1]]

    def tokens(self, start: int, n: int) -> list[str]:
        if self.lang == "en":
            return self.span_text(start, n).split(" ")
        return list(self.joined[start : start + n])

    def span_text(self, start: int, n: int) -> str:
        """Tokens start..start+n-1 as one string (joined by spaces in English, nothing otherwise)."""
        if self.lang == "en":
            return self.text[self.pos[start] : self.end[start + n - 1]]
        return self.joined[start : start + n]


@lru_cache(maxsize=None)
def corpus(lang: str) -> Corpus:
    """Build (once per process) the deterministic token stream for `lang`."""
    rng = random.Random(CORPUS_SEED)
    wl = word_list(lang)
    pos, end = array("i"), array("i")
    if lang == "en":
        words = wl.sample(rng, CORPUS_TOKENS)
        off = 0
        for w in words:
            pos.append(off)
            end.append(off + len(w))
            off += len(w) + 1
        index = {w: i for i, w in enumerate(wl.words)}
        ids = np.fromiter((index[w] for w in words), dtype=np.uint32, count=len(words))
        return Corpus(lang, " ".join(words), pos, end, "", ids)
    parts: list[str] = []
    off = 0
    n_tok = 0
    words = wl.sample(rng, CORPUS_TOKENS)
    wi = 0
    next_punct = rng.randint(6, 24)
    while n_tok < CORPUS_TOKENS:
        if lang == "zh":
            unit = words[wi]
            wi += 1
        else:  # ko: an eojeol of one or two morphemes, then a space
            k = 1 if rng.random() < 0.5 else 2
            unit = "".join(words[wi : wi + k])
            wi += k
        if wi >= len(words) - 2:
            words = wl.sample(rng, CORPUS_TOKENS)
            wi = 0
        for ch in unit:
            pos.append(off)
            end.append(off + 1)
            parts.append(ch)
            off += 1
            n_tok += 1
        sep = ""
        next_punct -= len(unit)
        if next_punct <= 0:
            sep = rng.choice("，。，、") if lang == "zh" else rng.choice(",.")
            next_punct = rng.randint(6, 24)
        if lang == "ko":
            sep += " "
        parts.append(sep)
        off += len(sep)
    text = "".join(parts)
    joined = "".join(text[i] for i in pos)
    ids = np.frombuffer(joined.encode("utf-32-le"), dtype=np.uint32).copy()
    return Corpus(lang, text, pos, end, joined, ids)
