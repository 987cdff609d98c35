"""LENOP: count the tokens of a sentence (`count`) or write exactly n of them on a topic (`generate`).

`count`: a span of n tokens (5..254; words for English, characters for Chinese, Hangul syllables for
Korean) of real running text, cut as the official scripts cut theirs (`RealText.span`: English words
joined by spaces; Chinese/Korean from a random character, keeping spaces and the official separators);
answer n. `text_source="unigram"` (ablation): n consecutive tokens of the unigram corpus.
`generate`: ask for exactly n tokens on a topic from the release's aligned en/zh/ko topic list; no gold
answer (the LENGTH scorer counts the completion). n is the first integer of every prompt, which is
what the official LENGTH rule reads.
"""
from __future__ import annotations

import json
import random
from functools import cache
from importlib import resources as ir
from typing import Any

from common.languages import codes, language, of_stem
from common.record import make_record

from ..core import UNIT_SAFE, Generator, register
from ..resources import corpus, real_text
from ._common import random_span, text_after

MIN_N, MAX_N = 5, 254
# difficulty levels (a curriculum): n capped at 10, 25, 60, 120 tokens, then the official 5-254 (every file of the
# release, count and generate, spans exactly 5-254, median 130)
LEVELS = tuple({"max_len": n} for n in (10, 25, 60, 120, None))

COUNT_TEMPLATES = {
    "en": (
        "How many English words are in this sentence? The sentence is: '{text}'",
        "Count the English words in the following sentence: '{text}'",
        "How many words does this sentence contain? Sentence: '{text}'",
    ),
    "zh": (
        "这个句子中有多少个汉字（不计算标点符号）？句子是：‘{text}’",
        "请数一数下面这句话里有几个汉字（标点不算）：‘{text}’",
        "下面的句子一共包含多少个汉字？不计标点。句子：‘{text}’",
    ),
    "ko": (
        "이 문장에는 한글 문자가 몇 개 있나요? 문장은: ‘{text}’",
        "다음 문장의 한글 글자 수를 세어 주세요: ‘{text}’",
        "아래 문장에 한글 글자가 모두 몇 개 들어 있습니까? 문장: ‘{text}’",
    ),
}

GENERATE_TEMPLATES = {
    "en": (
        "Please randomly generate {n} English words with the topic of {topic}.",
        "Write exactly {n} English words about {topic}.",
        "Produce a text of exactly {n} English words on the topic of {topic}.",
    ),
    "zh": (
        "请给我随机生成{n}个中文汉字，主题为{topic}",
        "请写出恰好{n}个汉字，主题是{topic}。",
        "围绕“{topic}”这个主题，生成正好{n}个中文汉字。",
    ),
    "ko": (
        "{topic} 주제로 {n}개의 한글 글자를 무작위로 생성해 주세요.",
        "{topic}에 관한 한글 글자를 정확히 {n}개 써 주세요.",
        "주제 {topic}: 한글 글자 {n}개로 된 글을 생성해 주세요.",
    ),
}


@cache
def _release_topics() -> dict[str, tuple[str, ...]]:
    """The release's aligned topic lists (synth/data/topics.json), per language."""
    data = json.loads(ir.files("synth").joinpath("data/topics.json").read_text(encoding="utf-8"))
    return {lang: tuple(words) for lang, words in data.items() if isinstance(words, list)}


def topics() -> dict[str, tuple[str, ...]]:
    """LENOP generate's topics per language: a language module's own (`common.languages`), else the release's."""
    release = _release_topics()
    out = {}
    for code in codes():
        own = language(code).topics
        if own or code in release:
            out[code] = own or release[code]
    return out


@register
class SentenceLength(Generator):
    task = "sentence_length"
    langs = ("en", "zh", "ko")
    answer_types = {"count": "NUMBER", "generate": "LENGTH"}
    perturb_layouts = (
        r"How many English words are in this sentence\? The sentence is: '(?P<p>.*)'",
        r"这个句子中有多少个汉字（不计算标点符号）？句子是：‘(?P<p>.*)’",
        r"이 문장에는 한글 문자가 몇 개 있나요\? 문장은: ‘(?P<p>.*)’",
        r"(?P<i>[^\d]*)(?P<k>\d+)(?P<i2>[^\d]*)",  # generate: the number is kept, the topic is instruction
    )
    perturb_kinds = UNIT_SAFE
    levels = LEVELS
    level_knob = "n, the tokens to count or write (max_len)"

    @classmethod
    def official_file(cls, stem: str) -> tuple[str, str] | None:
        base, _, kind = stem.partition("_")  # `english.csv` (count), `english_generate.csv`
        lang = of_stem(base)
        if lang and kind in ("", "generate"):
            return ("generate" if kind == "generate" else "count"), lang
        return None

    @classmethod
    def sft_response(cls, record: dict[str, Any], unit: str) -> str | None:
        ans = record.get("answer", "")
        return f"The sentence has {ans} {unit}.\n<answer>{ans}</answer>"


    stats_subtask = "count"

    @classmethod
    def stats_texts(cls, prompt: str, lang: str) -> list[str] | None:
        text = text_after(prompt, {"en": "The sentence is: '", "zh": "句子是：‘", "ko": "문장은: ‘"}[lang])
        return [] if text is None else [text[: text.rfind("'" if lang == "en" else "’")]]

    def make(self, rng: random.Random, lang: str, subtask: str):
        n = rng.randint(*self.n_range(MIN_N, MAX_N))
        if subtask == "generate":
            pool = topics()[lang]
            i = rng.randrange(len(pool))
            topic = pool[i]
            prompt = self.template(rng, GENERATE_TEMPLATES, lang, subtask).format(n=n, topic=topic)
            return make_record(
                id="", task=self.task, subtask=subtask, lang=lang, type=self.answer_type(subtask), prompt=prompt,
                answer="", meta={"target": n, "topic": topic, "topic_index": i},
            )
        if self.config.text_source == "real":
            text = real_text(lang).span(rng, n)
            if text is None:
                return None
        else:
            corp = corpus(lang)
            text = corp.span(random_span(rng, corp, n), n)
        prompt = self.template(rng, COUNT_TEMPLATES, lang, subtask).format(text=text)
        return make_record(
            id="", task=self.task, subtask=subtask, lang=lang, type=self.answer_type(subtask), prompt=prompt,
            answer=str(n), meta={"count": n},
        )
