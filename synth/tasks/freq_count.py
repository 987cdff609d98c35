"""FREQ: how many times does a target token occur in a text (paper's recipe).

The target is injected 1..10 times (uniform) at random positions into a run of corpus tokens from which
every other occurrence of it was removed; the text has between 10 x count and 500 tokens (words for
English, characters for Chinese and Korean), as the official generators do.
"""
from __future__ import annotations

import random

from ..core import Generator, register
from ..record import make_record
from ..resources import corpus, word_list
from ._common import JOIN, random_span

MAX_TOKENS = 500

TEMPLATES = {
    "en": (
        'How many times does "{t}" appear in the following text? Text: {text}',
        'Count how often the word "{t}" occurs in the text below. Text: {text}',
        'In the following passage, how many occurrences of "{t}" are there? Passage: {text}',
    ),
    "zh": (
        "在以下文本中，{t} 出现了多少次？文本：{text}",
        "请数一数“{t}”在下面的文本里一共出现了几次。文本：{text}",
        "下面这段文字中，“{t}”这个字出现了几次？文字：{text}",
    ),
    "ko": (
        '다음 문장에서 "{t}"는 몇 번 나타납니까? 문장: {text}',
        '다음 글에서 "{t}" 글자가 모두 몇 번 나오는지 세어 보세요. 글: {text}',
        '아래 문장에 "{t}"가 몇 번 들어 있습니까? 문장: {text}',
    ),
}


@register
class FreqCount(Generator):
    task = "freq_count"

    def make(self, rng: random.Random, lang: str, subtask: str):
        corp = corpus(lang)
        count = rng.randint(1, 10)
        length = rng.randint(*self.n_range(count * 10, MAX_TOKENS))
        if lang == "en":
            target = rng.choice(word_list("en").words)
        else:
            target = corp.tokens(rng.randrange(len(corp)), 1)[0]
        start = random_span(rng, corp, length - count)
        if lang == "en":
            span = corp.span_text(start, length - count)
            others = span.split(" ")
            if f" {target} " in f" {span} ":  # rare: filter word by word only when the target is there
                others = [t for t in others if t != target]
        else:  # one character per token: filter at C speed
            others = list(corp.joined[start : start + length - count].replace(target, ""))
        for p in sorted(rng.sample(range(len(others) + count), count)):
            others.insert(p, target)
        text = JOIN[lang].join(others)
        prompt = self.template(rng, TEMPLATES, lang).format(t=target, text=text)
        return make_record(
            id="",
            task=self.task,
            lang=lang,
            type="NUMBER",
            prompt=prompt,
            answer=str(count),
            meta={"target": target, "count": count, "tokens": len(others)},
        )
