"""SORT: order three labelled sequences from longest to shortest (answer like CAB).

Default (`text_source="real"`), as the official scripts build their rows: a base span of n tokens
(5..254) of real running text and two more spans drawn from the alternative lengths n - d1, n - d1 - 1,
n + d2, n + d2 + 1 (d in 1..n//10+1). English takes the first two alternatives in Python's set order,
as the official en script does; Chinese and Korean draw two of the alternatives' spans at random. Spans
are cut as `RealText.span` does (Korean keeps its spaces); lengths are always distinct, so there are no
ties. `text_source="unigram"` (ablation): spans of lengths n, n - d1, n + d2 of the unigram corpus.
Lengths count words (en), Chinese characters (zh) or Hangul syllables (ko).
"""
from __future__ import annotations

import random
import re
from typing import Any

from common.record import make_record

from ..core import UNIT_SAFE, Generator, register
from ..resources import corpus, real_text
from ._common import random_span

MIN_N, MAX_N = 5, 254
# difficulty levels (a curriculum): the base length n capped at 10, 25, 60, 120 tokens, then the official 5-254 (the
# release's longest span, n + d2 + 1, reaches 281 words in english.csv)
LEVELS = tuple({"max_len": n} for n in (10, 25, 60, 120, None))

TEMPLATES = {
    "en": (
        "Given three English sentences, sort them from longest to shortest based on the number of words.\n"
        "Output their corresponding labels in order, such as ABC, CAB, BAC, etc.\nA: {a}\nB: {b}\nC: {c}",
        "Rank the three sentences below by word count, longest first.\n"
        "Reply with the labels in order, for example ABC or CAB.\nA: {a}\nB: {b}\nC: {c}",
    ),
    "zh": (
        "给定三个句子，请根据它们的汉字数从长到短进行排序。\n请输出对应的顺序标签，例如：ABC、CAB、BAC 等。\n"
        "A: {a}\nB: {b}\nC: {c}",
        "按汉字个数从多到少给下面三个句子排序，只输出标签顺序（如 ABC、CAB）。\nA: {a}\nB: {b}\nC: {c}",
    ),
    "ko": (
        "다음 세 문장을 한국어 글자 수 기준으로 길이순 정렬하세요 (긴 것부터 짧은 것까지).\n"
        "정답 예시: ABC, CAB, BAC 등\nA: {a}\nB: {b}\nC: {c}",
        "아래 세 문장을 한글 글자 수가 많은 것부터 적은 것 순서로 나열하세요. 레이블만 쓰세요 (예: ABC, CAB).\n"
        "A: {a}\nB: {b}\nC: {c}",
    ),
}


@register
class SortLengths(Generator):
    task = "sort_lengths"
    langs = ("en", "zh", "ko")
    answer_types = {"": "MATCH_ANSWER"}
    perturb_layouts = (r"(?s)(?P<i>[^\n]*)(?P<k>\n.*?\n)(?P<k2>A: )(?P<p>[^\n]*)\n(?P<k3>B: )(?P<p2>[^\n]*)\n"
        r"(?P<k4>C: )(?P<p3>[^\n]*)",)
    perturb_kinds = UNIT_SAFE
    levels = LEVELS
    level_knob = "n, the base length of the three spans (max_len)"

    @classmethod
    def sft_response(cls, record: dict[str, Any], unit: str) -> str | None:
        meta, ans = record.get("meta") or {}, record.get("answer", "")
        if "lengths" not in meta:
            return None
        la, lb, lc = meta["lengths"]
        return f"A has {la} {unit}, B has {lb}, C has {lc}. Longest to shortest: {ans}.\n<answer>{ans}</answer>"

    @classmethod
    def stats_texts(cls, prompt: str, lang: str) -> list[str] | None:
        return re.findall(r"^[ABC]: (.*)$", prompt, re.M)

    def make(self, rng: random.Random, lang: str, subtask: str):
        n = rng.randint(*self.n_range(MIN_N, MAX_N))
        dmax = n // 10 + 1
        if self.config.text_source == "real":
            rt = real_text(lang)
            d_dec, d_inc = rng.randint(1, dmax), rng.randint(1, dmax)
            alts = {n - d_dec, n - d_dec - 1, n + d_inc, n + d_inc + 1} - {0}  # iterated in set order
            if lang == "en":
                lengths = [n, *list(alts)[:2]]
            else:
                pool = [k for k in alts for _ in range(2)]
                pick = rng.sample(pool, 2)
                while pick[0] == pick[1]:  # a tie: the official scripts skip it and draw again
                    pick = rng.sample(pool, 2)
                lengths = [n, *pick]
            rng.shuffle(lengths)
            texts = [rt.span(rng, k) for k in lengths]
            if None in texts:
                return None
        else:
            corp = corpus(lang)
            lengths = [n, n - rng.randint(1, dmax), n + rng.randint(1, dmax)]
            rng.shuffle(lengths)
            texts = [corp.span(random_span(rng, corp, k), k) for k in lengths]
        order = sorted(range(3), key=lambda i: -lengths[i])
        answer = "".join("ABC"[i] for i in order)
        prompt = self.template(rng, TEMPLATES, lang).format(a=texts[0], b=texts[1], c=texts[2])
        return make_record(
            id="", task=self.task, lang=lang, type=self.answer_type(), prompt=prompt, answer=answer,
            meta={"lengths": lengths},
        )
