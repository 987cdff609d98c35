"""REORD: shuffle n consecutive tokens so that no token stays next to an original neighbour.

There is no gold answer; the instance is only emitted when a valid permutation exists under the
official rule (same multiset; each shuffled token mapped to the first unused original position of
that token; no two mapped positions adjacent), and one such permutation is stored in
`meta["solution"]`.
"""
from __future__ import annotations

import random

from ..core import Generator, register
from ..record import make_record
from ..resources import corpus
from ._common import JOIN, is_valid_shuffle, random_span

MIN_N, MAX_N = 5, 254
TRIES = 8

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
        "다음 글자들을 완전히 섞어 주세요. 각 글자가 원래 이웃한 글자들과 더 이상 인접하지 않도록 해 주세요.\n입력: {text}",
        "아래 글자들의 순서를 완전히 바꾸되, 원래 옆에 있던 글자끼리는 서로 붙어 있지 않게 하세요.\n글자: {text}",
    ),
}


def find_solution(rng: random.Random, tokens: list[str]) -> list[str] | None:
    """A permutation valid under the official rule, or None if none was found."""
    n = len(tokens)
    first = [tokens[i] for i in list(range(1, n, 2)) + list(range(0, n, 2))]
    if is_valid_shuffle(tokens, first):
        return first
    cand = list(tokens)
    for _ in range(TRIES):
        rng.shuffle(cand)
        if is_valid_shuffle(tokens, cand):
            return list(cand)
    return None


@register
class ShuffleTokens(Generator):
    task = "shuffle_tokens"

    def make(self, rng: random.Random, lang: str, subtask: str):
        corp = corpus(lang)
        n = rng.randint(MIN_N, MAX_N)
        tokens = corp.tokens(random_span(rng, corp, n), n)
        solution = find_solution(rng, tokens)
        if solution is None:
            return None
        j = JOIN[lang]
        prompt = self.template(rng, TEMPLATES, lang).format(text=j.join(tokens))
        return make_record(
            id="", task=self.task, lang=lang, type="SHUFFLE", prompt=prompt, answer="",
            meta={"length": n, "solution": j.join(solution)},
        )
