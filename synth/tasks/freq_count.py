"""FREQ: how many times does a target token occur in a text (the official generators' recipe).

Default (`text_source="real"`), per language as the official files are built: the text is random tokens,
not prose. English: words of a 60,000-word list drawn uniformly, joined by spaces; Chinese: characters
drawn by frequency; Korean: Hangul syllables drawn uniformly, joined without spaces (`freq_vocab`).
The target is drawn the same way and injected `count` (1..10, uniform) times at random gaps (as the
official scripts insert: never two targets side by side) into `length - count` drawn tokens, `length`
uniform in [10 x count, 500] (Korean: [count + 10, 500], as the official Korean script has it). The
drawn tokens are a random window of `freq_stream`, a fixed seeded stream of such draws, so a text costs
a slice instead of 250 random draws. Like the official scripts, a draw whose other tokens already
contain the target is rejected and redrawn whole, which shortens texts with frequent Chinese targets
the way the official file is. Texts that would contain a denylisted term are redrawn.
`text_source="unigram"` (ablation): a run of the unigram corpus with the target removed, as before.
"""
from __future__ import annotations

import random
from functools import cache
from typing import Any

from common.record import make_record

from ..core import UNIT_SAFE, Generator, register
from ..denylist import denylist
from ..resources import clean_word_list, corpus, freq_stream, freq_vocab
from ._common import JOIN, random_span, text_after

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
    langs = ("en", "zh", "ko")
    answer_types = {"": "NUMBER"}
    perturb_layouts = (
        r'How many times does "(?P<t>[^"\n]+)" appear in the following text\? (?P<k>Text: )(?P<p>.*)',
        r"在以下文本中，(?P<t>\S+) 出现了多少次？(?P<k>文本：)(?P<p>.*)",
        r'다음 문장에서 "(?P<t>[^"\n]+)"는 몇 번 나타납니까\? (?P<k>문장: )(?P<p>.*)',
    )
    perturb_kinds = UNIT_SAFE
    unit_in_prompt = True  # tokstats: the asked-about unit is quoted in the prompt

    hint_levels = 2  # guided GRPO: a range around the gold count, narrow then wide

    @classmethod
    def hint(cls, record: dict[str, Any], level: int) -> str | None:
        """A range holding the gold count (from the row's answer only): +-1, then +-3."""
        try:
            n = int(str(record.get("answer", "")).strip())
        except ValueError:
            return None
        w = 1 if level == 0 else 3
        return f"the count is between {max(0, n - w)} and {n + w}."

    @classmethod
    def sft_response(cls, record: dict[str, Any], unit: str) -> str | None:
        meta, ans = record.get("meta") or {}, record.get("answer", "")
        if "target" not in meta:
            return None
        return f"Counting every \"{meta['target']}\" in the text gives {ans}.\n<answer>{ans}</answer>"

    @classmethod
    def stats_texts(cls, prompt: str, lang: str) -> list[str] | None:
        text = text_after(prompt, {"en": "Text: ", "zh": "文本：", "ko": "문장: "}[lang])
        return [] if text is None else [text]

    def make(self, rng: random.Random, lang: str, subtask: str):
        if self.config.text_source == "real":
            return self._make_real(rng, lang)
        corp = corpus(lang)
        count = rng.randint(1, 10)
        length = rng.randint(*self.n_range(count * 10, MAX_TOKENS))
        if lang == "en":
            target = rng.choice(clean_word_list("en").words)
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
        if lang == "en" and denylist(lang).bad_words(others) or lang != "en" and denylist(lang).bad(text):
            return None  # removing the target joined two halves of a listed term (rare)
        return self._record(rng, lang, target, count, text, len(others))

    def _make_real(self, rng: random.Random, lang: str):
        toks, cum = freq_vocab(lang)
        count = rng.randint(1, 10)
        length = rng.randint(*self.n_range(count + 10 if lang == "ko" else count * 10, MAX_TOKENS))
        k = length - count
        if cum is None:
            target = toks[rng.randrange(len(toks))]
        else:
            target = toks[min(int(cum.searchsorted(rng.random() * float(cum[-1]), side="right")), len(toks) - 1)]
        stream = freq_stream(lang)
        span = stream.span_text(rng.randrange(len(stream) - k + 1), k)
        # the official scripts reject a draw whose other tokens already hold the target
        if (f" {target} " in f" {span} ") if lang == "en" else (target in span):
            return None
        at = sorted(rng.sample(range(k + 1), count))
        if lang == "en":
            words = span.split(" ")
            for j, p in enumerate(at):
                words.insert(p + j, target)
            text = " ".join(words)
        else:
            parts, prev = [], 0
            for p in at:
                parts += (span[prev:p], target)
                prev = p
            parts.append(span[prev:])
            text = "".join(parts)
        if _risky(lang, target) and denylist(lang).bad(text):
            return None  # the target completed a listed term with a neighbour
        return self._record(rng, lang, target, count, text, length)

    def _record(self, rng: random.Random, lang: str, target: str, count: int, text: str, n_tokens: int):
        prompt = self.template(rng, TEMPLATES, lang).format(t=target, text=text)
        return make_record(
            id="",
            task=self.task,
            lang=lang,
            type=self.answer_type(),
            prompt=prompt,
            answer=str(count),
            meta={"target": target, "count": count, "tokens": n_tokens},
        )


@cache
def _parts(lang: str) -> frozenset[str]:
    """Runs (en) or characters (zh/ko) that occur in some listed term: only a target made of them can
    complete a term next to the stream's tokens."""
    from ..denylist import EN_RUN, terms

    if lang == "en":
        return frozenset(r for t in terms("en") for r in EN_RUN.findall(t))
    return frozenset("".join(terms(lang)))


@cache
def _risky_set(lang: str) -> frozenset[str]:
    """The FREQ tokens that hold a run (en) or character (zh/ko) of some listed term."""
    from ..denylist import EN_RUN

    parts = _parts(lang)
    toks = freq_vocab(lang)[0]
    if lang == "en":
        return frozenset(t for t in toks if any(r in parts for r in EN_RUN.findall(t.lower())))
    return frozenset(t for t in toks if t in parts)


def _risky(lang: str, target: str) -> bool:
    return target in _risky_set(lang)
