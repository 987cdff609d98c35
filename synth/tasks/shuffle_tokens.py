"""REORD: shuffle n consecutive tokens so that no token stays next to an original neighbour.

The line is n consecutive tokens (5..254) of real running text (default: words joined by spaces for
English; characters, and Hangul syllables with the spaces removed, for Chinese and Korean, as the
official scripts take them) or, with `text_source="unigram"`, of the unigram corpus (ablation).
There is no gold answer; each instance comes with one permutation valid under the official rule
(same multiset; each shuffled token mapped to the first unused original position of that token; no
two mapped positions adjacent) in `meta["solution"]`, built by the constructive solver of `_common`
(`SpanOrders`, the vectorised form of `non_adjacent_order`). A span is redrawn only when the solver
finds no order, which did not happen on 100,000 random spans per language, so the spans and lengths
are not biased towards easy ones (before, the 8-17% of spans the solver could not order were redrawn).
"""
from __future__ import annotations

import random
from functools import cache
from operator import itemgetter

import numpy as np

from common.record import make_record

from ..core import Generator, register
from ..resources import Corpus, corpus, real_text
from ._common import SpanOrders, random_span, text_after

MIN_N, MAX_N = 5, 254

TEMPLATES = {
    "en": (
        "Please shuffle the following words completely. Make sure that each word does not stay adjacent to "
        "its original neighbors.\nInput: {text}",
        "Rearrange the words below so that no word ends up next to any of its original neighbours.\nWords: {text}",
    ),
    "zh": (
        "请完全打乱下面这些字，确保每个字的前后位置都与原句不相邻。\n输入：{text}",
        "把下面的字彻底打乱顺序，任何一个字都不能再和原来相邻的字挨在一起。\n原文：{text}",
    ),
    "ko": (
        "다음 글자들을 완전히 섞어 주세요. 각 글자가 원래 이웃한 글자들과 더 이상 인접하지 않도록 해 주세요.\n"
        "입력: {text}",
        "아래 글자들의 순서를 완전히 바꾸되, 원래 옆에 있던 글자끼리는 서로 붙어 있지 않게 하세요.\n글자: {text}",
    ),
}


class Spans:
    """One language's corpus with its REORD solver: the input line of a span and its tokens written in
    a given order, without splitting the span into a token list."""

    def __init__(self, corp: Corpus) -> None:
        lang = corp.lang
        self.corp = corp
        self.orders = SpanOrders(corp.ids)
        self.en = lang == "en"
        if self.en:  # the corpus' words as an object array: a span's words in order are one fancy index
            self.words = np.array(corp.text.split(" "), dtype=object)
        else:  # zh/ko ids are code points: a UTF-32 buffer decodes straight to the string
            self.cps = corp.ids.astype("<u4")

    def line(self, start: int, n: int) -> str:
        """The span's tokens joined as in the prompt (`JOIN[lang].join(corp.tokens(start, n))`)."""
        c = self.corp
        return c.text[c.pos[start] : c.end[start + n - 1]] if self.en else c.joined[start : start + n]

    def write(self, start: int, n: int, order) -> str:
        """The span's tokens in `order` (positions 0..n-1, a numpy array or, after a repair, a list of
        n >= 2), joined like the line."""
        end = start + n
        if isinstance(order, list):  # cheaper than turning the list into an index array
            if self.en:
                return " ".join(itemgetter(*order)(self.words[start:end].tolist()))
            return "".join(itemgetter(*order)(self.corp.joined[start:end]))
        if self.en:
            return " ".join(self.words[start:end][order].tolist())
        return self.cps[start:end][order].tobytes().decode("utf-32-le")


@cache
def spans(lang: str, source: str = "unigram") -> Spans:
    """The REORD spans of the unigram corpus or (`source="real"`) of the running text."""
    return Spans(real_text(lang).corpus if source == "real" else corpus(lang))


@register
class ShuffleTokens(Generator):
    task = "shuffle_tokens"
    langs = ("en", "zh", "ko")
    answer_types = {"": "SHUFFLE"}
    perturb_layouts = (r"(?s)(?P<i>[^:：]*)(?P<k>[:：]\s*)(?P<p>[^\n]*)",)
    perturb_kinds = frozenset({"spacing"})

    @classmethod
    def stats_texts(cls, prompt: str, lang: str) -> list[str] | None:
        text = text_after(prompt, {"en": "Input: ", "zh": "输入：", "ko": "입력: "}[lang])
        return [] if text is None else [text.split("\n", 1)[0]]

    def make(self, rng: random.Random, lang: str, subtask: str):
        sp = spans(lang, self.config.text_source)
        n = rng.randint(*self.n_range(MIN_N, MAX_N))
        start = random_span(rng, sp.corp, n)
        order = sp.orders.order(start, n)
        if order is None:
            return None
        prompt = self.template(rng, TEMPLATES, lang).format(text=sp.line(start, n))
        return make_record(
            id="", task=self.task, lang=lang, type=self.answer_type(), prompt=prompt, answer="",
            meta={"length": n, "solution": sp.write(start, n, order)},
        )
