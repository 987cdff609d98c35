"""REORD: shuffle n consecutive tokens so that no token stays next to an original neighbour.

There is no gold answer; the instance is only emitted when a valid permutation exists under the
official rule (same multiset; each shuffled token mapped to the first unused original position of
that token; no two mapped positions adjacent), and one such permutation is stored in
`meta["solution"]`.
"""
from __future__ import annotations

import random
from collections.abc import Callable
from operator import itemgetter

from ..core import Generator, register
from ..record import make_record
from ..resources import corpus
from rewards.shuffle import score_shuffle

from ._common import JOIN, fast_permutation, non_adjacent_order, non_adjacent_order_ids, random_span

MIN_N, MAX_N = 5, 254
TRIES = 8
SHORT = 16  # random fallback only below this length

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


def find_solution(rng: random.Random, tokens: list[str], accept: Callable[[list[str]], bool],
                  ids=None) -> list[str] | None:
    """A permutation valid under the official rule, or None if none was found.

    The constructive order (see `non_adjacent_order`; vectorised when token ids are given) works
    for about 83% of corpus spans; random permutations, each checked by `accept` (the official scorer),
    are the fallback for short spans. Longer spans it cannot order are rejected and redrawn (a slight bias
    towards spans with fewer repeated adjacent tokens, documented in the README)."""
    order = non_adjacent_order_ids(ids) if ids is not None else non_adjacent_order(tokens)
    if order is not None:
        return list(itemgetter(*order)(tokens)) if len(order) > 1 else [tokens[i] for i in order]
    if len(tokens) > SHORT:
        return None
    for _ in range(TRIES):
        cand = [tokens[i] for i in fast_permutation(rng, len(tokens))]
        if accept(cand):
            return cand
    return None


@register
class ShuffleTokens(Generator):
    task = "shuffle_tokens"

    def make(self, rng: random.Random, lang: str, subtask: str):
        corp = corpus(lang)
        n = rng.randint(*self.n_range(MIN_N, MAX_N))
        start = random_span(rng, corp, n)
        tokens = corp.tokens(start, n)
        j = JOIN[lang]
        prompt = self.template(rng, TEMPLATES, lang).format(text=j.join(tokens))
        solution = find_solution(
            rng, tokens, lambda cand: score_shuffle(prompt, f"<answer>{j.join(cand)}</answer>").coarse == 1.0,
            corp.ids[start : start + n])
        if solution is None:
            return None
        return make_record(
            id="", task=self.task, lang=lang, type="SHUFFLE", prompt=prompt, answer="",
            meta={"length": n, "solution": j.join(solution)},
        )
