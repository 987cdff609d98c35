"""DIFF: do two shuffled token sequences match one-to-one, and if not, which token differs?

A run of n consecutive tokens (5..254) of real running text (default; words for English, characters
for Chinese, Hangul syllables for Korean, as the official scripts take them; `text_source="unigram"`:
of the unigram corpus) is copied and changed by one of four variations in equal shares:
unchanged, add (one extra token), delete (one token removed), modify (one token replaced by a
different one). Both sequences are shuffled. The answer is the differing token (for modify: the
original token, as the official files write it) or yes/是/예 when unchanged. Tokens the official DIFF
cleaning would erase or confuse with the yes-answer (no, yes, 是, 예) never differ. Added and
replacement tokens are drawn from the same text (so by frequency, as the official scripts do); a pair
of shuffled lines in which a denylisted term forms is redrawn.
"""
from __future__ import annotations

import random
import re
from functools import cache
from typing import Any

import numpy as np

from common.languages import language
from common.record import VARIATIONS, make_record

from ..core import Generator, register
from ..denylist import denylist
from ..resources import corpus, real_text
from ._common import random_span

MIN_N, MAX_N = 5, 254
RESERVED = {"en": {"yes", "no"}, "zh": {"是"}, "ko": {"예"}}

TEMPLATES = {
    "en": (
        "Are the words in seq1 and seq2 exactly matching one-to-one (ignoring order)? If yes, answer 'yes'. "
        "If not, which word is different?\nseq1: {a}\nseq2: {b}",
        "Ignoring order, do seq1 and seq2 contain exactly the same words? Answer 'yes' if they do; "
        "otherwise name the word that differs.\nseq1: {a}\nseq2: {b}",
    ),
    "zh": (
        "seq1 和 seq2 中的字是否一一完全对应（忽略顺序）？如果是，回答“是”；如果不是，请指出不同的那个字。\n"
        "seq1: {a}\nseq2: {b}",
        "不考虑顺序，seq1 和 seq2 包含的字完全相同吗？相同请回答“是”，不同请写出那个不同的字。\nseq1: {a}\nseq2: {b}",
    ),
    "ko": (
        "seq1과 seq2는 글자 단위로 하나하나 정확히 대응됩니까? (순서 무시)\n맞으면 '예'라고 대답하십시오. "
        "아니면 어떤 글자가 다른지 말하십시오.\nseq1: {a}\nseq2: {b}",
        "순서를 무시할 때 seq1과 seq2의 글자가 완전히 같습니까? 같으면 '예', 다르면 다른 글자를 쓰십시오.\n"
        "seq1: {a}\nseq2: {b}",
    ),
}


def _usable(tok: str, lang: str) -> bool:
    return tok not in RESERVED[lang] and (lang != "en" or tok.isalpha())


@register
class DiffTokens(Generator):
    task = "diff_tokens"
    langs = ("en", "zh", "ko")
    answer_types = {"": "DIFF"}
    perturb_layouts = (r"(?s)(?P<i>.*?)\n(?P<k>seq1: )(?P<p>[^\n]*)\n(?P<k2>seq2: )(?P<p2>[^\n]*)",)
    perturb_kinds = frozenset({"spacing"})

    @classmethod
    def sft_response(cls, record: dict[str, Any], unit: str) -> str | None:
        ans = record.get("answer", "")
        if record.get("variation") == "unchanged":
            return f"Both sequences hold the same tokens.\n<answer>{ans}</answer>"
        return f"The token that differs is {ans}.\n<answer>{ans}</answer>"

    @classmethod
    def stats_texts(cls, prompt: str, lang: str) -> list[str] | None:
        m = re.search(r"^seq1: (.*)$", prompt, re.M)
        return [m.group(1)] if m else []

    def make(self, rng: random.Random, lang: str, subtask: str):
        tab = _tables(lang, self.config.text_source)
        corp = tab.corp
        n = rng.randint(*self.n_range(MIN_N, MAX_N))
        start = random_span(rng, corp, n)
        base = np.arange(start, start + n)  # corpus positions; tokens are looked up once at the end
        variation = VARIATIONS[rng.randrange(4)]
        other = base
        if variation == "unchanged":
            answer = language(lang).yes
        elif variation == "add":
            p = _alt_position(rng, tab, RESERVED[lang])
            answer = tab.token(p)
            if not _usable(answer, lang):
                return None
            other = np.append(base, p)
        else:
            i = rng.randrange(n)
            answer = tab.token(start + i)
            if not _usable(answer, lang):
                return None
            if variation == "delete":
                other = np.delete(base, i)
            else:
                other = base.copy()
                other[i] = _alt_position(rng, tab, RESERVED[lang] | {answer})
        seq1 = base[_permutation(rng, len(base))]
        seq2 = other[_permutation(rng, len(other))]
        a, b = tab.text(seq1), tab.text(seq2)
        if tab.bad(seq1, a) or tab.bad(seq2, b):
            return None  # a denylisted term formed where shuffled tokens met
        prompt = self.template(rng, TEMPLATES, lang).format(a=a, b=b)
        return make_record(
            id="", task=self.task, lang=lang, type=self.answer_type(), prompt=prompt, answer=answer,
            variation=variation, meta={"length": n},
        )


def _permutation(rng: random.Random, n: int) -> np.ndarray:
    """`fast_permutation` as an index array (the same draws)."""
    return np.argsort(np.frombuffer(rng.randbytes(8 * n), dtype=np.uint64), kind="stable")


def _alt_position(rng: random.Random, tab: _Tables, avoid: set[str]) -> int:
    """A random corpus position (so a token drawn by frequency) whose token is not in `avoid`."""
    while True:
        p = rng.randrange(len(tab.corp))
        if tab.token(p) not in avoid:
            return p


class _Tables:
    """One text source's tokens by corpus position, and its denylist test for shuffled lines."""

    def __init__(self, lang: str, source: str) -> None:
        self.lang = lang
        self.corp = corp = real_text(lang).corpus if source == "real" else corpus(lang)
        self.dl = denylist(lang)
        if lang == "en":
            self.words = np.array(corp.text.split(" "), dtype=object)
            vocab, inv = np.unique(self.words, return_inverse=True)
            a, b, self.table = self.dl.pair_classes(vocab.tolist())
            self.a, self.b = a[inv], b[inv]  # per corpus position
        else:
            self.cps = corp.ids.astype("<u4")

    def token(self, p: int) -> str:
        return self.words[p] if self.lang == "en" else self.corp.joined[p]

    def text(self, pos: np.ndarray) -> str:
        if self.lang == "en":
            return " ".join(self.words[pos].tolist())
        return self.cps[pos].tobytes().decode("utf-32-le")

    def bad(self, pos: np.ndarray, text: str) -> bool:
        """Whether `text` (the tokens at `pos`, in order) holds a listed term. English words are clean
        one by one, so only phrases across neighbours can appear: a vectorised pre-check first."""
        if self.lang == "en":
            pair = self.table[self.a[pos[:-1]], self.b[pos[1:]]]
            if not pair.any():
                return False
            hits = np.flatnonzero(pair)
            m = self.dl.max_phrase  # re-read only the words a phrase through the pair could cover
            return any(self.dl.bad(" ".join(self.words[pos[max(0, i - m + 2) : i + m]].tolist()))
                       for i in hits.tolist())
        return self.dl.bad(text)


@cache
def _tables(lang: str, source: str) -> _Tables:
    return _Tables(lang, source)
