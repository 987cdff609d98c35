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

from ..core import Generator, register
from ..record import VARIATIONS, YES, make_record
from ..denylist import denylist
from ..resources import corpus, real_text
from ._common import JOIN, alt_tokens, fast_permutation, random_span

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
        "seq1 和 seq2 中的字是否一一完全对应（忽略顺序）？如果是，回答“是”；如果不是，请指出不同的那个字。\nseq1: {a}\nseq2: {b}",
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

    def make(self, rng: random.Random, lang: str, subtask: str):
        corp = real_text(lang).corpus if self.config.text_source == "real" else corpus(lang)
        n = rng.randint(*self.n_range(MIN_N, MAX_N))
        base = corp.tokens(random_span(rng, corp, n), n)
        variation = VARIATIONS[rng.randrange(4)]
        other = list(base)
        if variation == "unchanged":
            answer = YES[lang]
        elif variation == "add":
            answer = alt_tokens(rng, corp, RESERVED[lang])[0]
            if not _usable(answer, lang):
                return None
            other.append(answer)
        else:
            i = rng.randrange(n)
            answer = base[i]
            if not _usable(answer, lang):
                return None
            if variation == "delete":
                del other[i]
            else:
                other[i] = alt_tokens(rng, corp, RESERVED[lang] | {answer})[0]
        seq1 = [base[i] for i in fast_permutation(rng, len(base))]
        seq2 = [other[i] for i in fast_permutation(rng, len(other))]
        j = JOIN[lang]
        a, b = j.join(seq1), j.join(seq2)
        dl = denylist(lang)
        if lang == "en":
            if dl.bad_words(seq1, _heads(self.config.text_source)) or dl.bad_words(seq2, _heads(self.config.text_source)):
                return None
        elif dl.bad(a) or dl.bad(b):
            return None
        prompt = self.template(rng, TEMPLATES, lang).format(a=a, b=b)
        return make_record(
            id="", task=self.task, lang=lang, type="DIFF", prompt=prompt, answer=answer,
            variation=variation, meta={"length": n},
        )


_HEADS: dict[str, frozenset[str]] = {}


def _heads(source: str) -> frozenset[str]:
    """The English words of the source's vocabulary that start a listed phrase (any case)."""
    if source not in _HEADS:
        corp = real_text("en").corpus if source == "real" else corpus("en")
        _HEADS[source] = denylist("en").heads_in(set(corp.text.split(" ")))
    return _HEADS[source]
