"""COMPM: split tokens into parts and combine parts into tokens; every pair is round-trip checked.

en split: a word of more than 5 letters cut into 2-4 parts of >= 2 letters; the prompt names each part
by its first and last letter ("from i to t, from i to n"), answer "irritat, ion"; only cuts that are
the single segmentation of the word matching that description (parts of any length >= 1).
en combine: the parts in a uniformly shuffled order ("{irrit}, {on}, {ati}"), the word's own order
included (1 in k! rows, as the release: 24.8% of its rows, 52% of two-piece rows); only words that are
the single vocabulary word spelled by the parts in some order.
ko: a syllable -> its jamo ("ㅅ, ㅛ, ㄱ") and back (syllables that hgtk round-trips).
zh split: a character -> up to 4 alternative decompositions ("人,列;亻,列"; at most 4 parts and no
stroke part, as the official filter); combine: the parts of one decomposition that make exactly one
character of the whole chaizi dictionary.
"""
from __future__ import annotations

import itertools
import random
from collections import defaultdict
from dataclasses import dataclass
from functools import cache
from typing import Any

from common.languages import of_stem
from common.record import make_record

from ..core import Generator, register
from ..resources import word_list
from ..structural import combine_index, common_hanzi, compose, jamo_of, split_options, syllable_pools
from ._common import pieces_hint

# The official files' range (the last level): en words of 6-21 letters in 2-4 pieces (en_split/en_combine), Korean
# syllables of 2 or 3 jamo (kor_*: 88 of 1000 rows without a final consonant), Chinese decompositions of 2-4 parts
# (zh_*: 2 parts in 89.9% of zh_combine rows, 4 in 1.5%) of the 3,500 most frequent characters.
LEVELS = (
    {"max_word_len": 7, "max_parts": 2, "hanzi": 500, "ko_final": False},
    {"max_word_len": 9, "max_parts": 3, "hanzi": 1000, "ko_final": True},
    {"max_word_len": 12, "max_parts": 4, "hanzi": 2000, "ko_final": True},
    {"max_word_len": None, "max_parts": 4, "hanzi": 3500, "ko_final": True},
)

T_SPLIT = {
    "en": ("Split {w} into {spec}.",
           "Cut the word {w} into these pieces: {spec}. Write the pieces separated by commas.",
           "Divide {w} into parts as follows: {spec}."),
    "ko": ("'{w}'의 초성, 중성, 종성(있는 경우)은 무엇인가요? 쉼표로 구분하세요.",
           "'{w}'를 초성, 중성, 종성(있으면)으로 나누어 쉼표로 구분해 쓰세요.",
           "글자 '{w}'를 자모로 분해하세요(초성, 중성, 종성 순, 쉼표로 구분)."),
    "zh": ("请将“{w}”拆分为可重新组合的基本部件.",
           "把汉字“{w}”拆成能重新组合回去的部件。",
           "“{w}”这个字可以拆成哪些部件？"),
}
T_COMBINE = {
    "en": ("Combine {parts} into one word.",
           "Put the pieces {parts} together (in some order) to make one word.",
           "Which word do the pieces {parts} form when joined in the right order?"),
    "ko": ("다음 자모를 조합하세요: {parts}",
           "다음 자모로 한 글자를 만드세요: {parts}",
           "자모 {parts}를 모아 쓴 글자는 무엇입니까?"),
    "zh": ("使用“{parts}”可以组成哪个汉字？",
           "用“{parts}”这几个部件能拼成哪个汉字？",
           "“{parts}”合在一起是什么字？"),
}


@cache
def en_words(max_len: int | None = None, min_len: int = 6) -> tuple[str, ...]:
    """Vocabulary words of at least `min_len` letters (the official minimum, 6, by default), at most `max_len`
    letters when given."""
    return tuple(w for w in word_list("en").words if max(min_len, 6) <= len(w) <= (max_len or len(w)))


@cache
def ko_pool(pool: str, final: bool) -> tuple[str, ...]:
    """A syllable pool, or with `final` False only its syllables without a final consonant (2 jamo)."""
    return syllable_pools()[pool] if final else tuple(s for s in syllable_pools()[pool] if len(jamo_of(s)) == 2)


@cache
def en_vocab() -> frozenset[str]:
    return frozenset(word_list("en").words)


def cut(rng: random.Random, w: str, max_parts: int = 4, min_parts: int = 2) -> list[str]:
    """`min_parts`-`max_parts` parts of >= 2 letters (as many as the word allows), lengths drawn uniformly among
    such compositions' shapes."""
    k = rng.randint(min(min_parts, len(w) // 2), min(max_parts, len(w) // 2))
    extra = len(w) - 2 * k
    bars = sorted(rng.randint(0, extra) for _ in range(k - 1))
    lengths = [2 + b - a for a, b in zip([0, *bars], [*bars, extra], strict=False)]
    out, i = [], 0
    for n in lengths:
        out.append(w[i : i + n])
        i += n
    return out


def spec_matches(w: str, spec: list[tuple[str, str]]) -> int:
    """How many ways `w` splits into len(spec) consecutive parts (length >= 1) with those first/last
    letters; a part of one letter needs first == last."""
    ways = {0: 1}
    for a, b in spec:
        nxt: dict[int, int] = defaultdict(int)
        for s, n in ways.items():
            if s < len(w) and w[s] == a:
                for e in range(s, len(w)):
                    if w[e] == b:
                        nxt[e + 1] += n
        ways = nxt
    return ways.get(len(w), 0)


@register
class ComponentSplit(Generator):
    task = "component_split"
    langs = ("en", "zh", "ko")
    answer_types = {"split": "SPLIT", "combine": "MATCH_ANSWER"}
    perturb_layouts = (
        r"(?P<i>Combine) (?P<k>.*) (?P<i2>into one word)\.",
        r"(?P<i>Split) (?P<k>.*)\.",
        r"(?P<i>다음 자모를 조합하세요)(?P<k>: .*)",
        r"(?P<k>'.')(?P<i>의 초성, 중성, 종성\(있는 경우\)은 무엇인가요\? 쉼표로 구분하세요)\.",
        r"(?P<i>使用)(?P<k>“[^”]*”)(?P<i2>可以组成哪个汉字)？",
        r"(?P<i>请将)(?P<k>“[^”]*”)(?P<i2>拆分为可重新组合的基本部件).",
    )
    unit_in_prompt = True  # tokstats: the asked-about unit is quoted in the prompt
    levels = LEVELS
    level_knob = ("en: longest word (letters) and most pieces; zh: most parts per decomposition and the most "
                  "frequent characters drawn from; ko: 2-jamo syllables only, then 2-3")
    # beyond the official range (en only: 2-4 pieces of 6-21-letter words there): 5-6 pieces of words of 12 or more
    # letters; zh and ko have nothing harder to draw (synth --harder refuses them)
    harder = {"min_word_len": 12, "min_parts": 5, "max_parts": 6}
    harder_knob = "en: 5-6 pieces (the official files: 2-4) of words of 12 or more letters"

    @dataclass
    class Config(Generator.Config):
        max_word_len: int | None = None  # en: longest word drawn (None: the official 6-21 letters)
        max_parts: int = 4  # en: pieces per word (min_parts..max_parts); zh: parts per decomposition
        min_word_len: int = 6  # en: shortest word drawn (the official minimum; `harder` raises it)
        min_parts: int = 2  # en: fewest pieces per word (`harder` raises it past the official 4)
        hanzi: int = 3500  # zh: characters drawn from this many most frequent ones
        ko_final: bool = True  # ko: syllables with a final consonant (3 jamo) too; False: 2 jamo only

    hint_levels = 3  # guided GRPO: the split's leading pieces, the first piece, the pieces' sizes (_common.pieces_hint)

    @classmethod
    def hint(cls, record: dict[str, Any], level: int) -> str | None:
        """From the row's gold answer only: a split's pieces (en: parts, ko: jamo, zh: the first decomposition's
        parts), an en combine word's leading letters; ko and zh combine answers are one character: no hint."""
        ans, lang = str(record.get("answer", "")), record.get("lang")
        if record.get("subtask") == "split":
            if lang == "zh":
                return pieces_hint(ans.split(";")[0].split(","), level, ",", "characters")
            return pieces_hint(ans.split(", "), level, ", ", "letters" if lang == "en" else "jamo")
        if lang != "en" or len(ans) < 2:
            return None
        if level < 2:
            k = max(1, min(len(ans) - 1, -(-len(ans) * (3 - level) // 4)))  # 3/4, then 1/2 of the letters
            return f"the word begins with {ans[:k]} and has {len(ans)} letters."
        return f"the word has {len(ans)} letters."

    @classmethod
    def official_file(cls, stem: str) -> tuple[str, str] | None:
        prefix, _, kind = stem.partition("_")  # `en_split.csv`, `kor_combine.csv`, ...
        lang = of_stem(prefix)
        if lang and kind in ("split", "combine"):
            return kind, lang
        return None

    @classmethod
    def has_harder(cls, lang: str, subtask: str) -> bool:
        return lang == "en"

    def make(self, rng: random.Random, lang: str, subtask: str):
        t = self.template(rng, T_SPLIT if subtask == "split" else T_COMBINE, lang)
        if lang == "en":
            return self._en(rng, subtask, t)
        if lang == "ko":
            s = rng.choice(ko_pool(rng.choice(("all", "common")), self.config.ko_final))
            js = jamo_of(s)
            if compose(js) != s:  # pragma: no cover - the table keeps round-tripping syllables only
                return None
            if subtask == "split":
                return self._rec(lang, subtask, t.format(w=s), ", ".join(js), {"char": s, "jamo": list(js)})
            return self._rec(lang, subtask, t.format(parts=", ".join(js)), s, {"char": s, "jamo": list(js)})
        ch = rng.choice(common_hanzi(self.config.hanzi))
        opts = split_options(ch)
        if not opts or any(ch not in combine_index()[tuple(sorted(d))] for d in opts):
            return None
        if max(len(d) for d in opts) > self.config.max_parts:
            return None  # an easier level: every decomposition within max_parts
        if subtask == "split":
            ans = ";".join(",".join(d) for d in opts)
            return self._rec(lang, subtask, t.format(w=ch), ans,
                             {"char": ch, "decompositions": [list(d) for d in opts]})
        dec = rng.choice(opts)
        if combine_index()[tuple(sorted(dec))] != {ch}:
            return None  # not uniquely reconstructible
        return self._rec(lang, subtask, t.format(parts=" ".join(dec)), ch, {"char": ch, "parts": list(dec)})

    def _en(self, rng: random.Random, subtask: str, t: str):
        w = rng.choice(en_words(self.config.max_word_len, self.config.min_word_len))
        parts = cut(rng, w, self.config.max_parts, self.config.min_parts)
        if "".join(parts) != w:  # pragma: no cover - cut() partitions the word
            return None
        if subtask == "split":
            spec = [(p[0], p[-1]) for p in parts]
            if spec_matches(w, spec) != 1:
                return None  # the description fits another segmentation too
            text = ", ".join(f"from {a} to {b}" for a, b in spec)
            return self._rec("en", subtask, t.format(w=w, spec=text), ", ".join(parts), {"word": w, "parts": parts})
        # A uniform shuffle, the word's own order included, as the release has it: its en_combine keeps the given
        # order in 24.8% of rows, 52% of two-piece rows (1/k! for k pieces); always moving the pieces (as
        # before) taught that the given order is never the answer.
        shuffled = list(parts)
        rng.shuffle(shuffled)
        if {"".join(p) for p in itertools.permutations(parts)} & en_vocab() != {w}:
            return None  # not uniquely reconstructible
        prompt = t.format(parts=", ".join("{" + p + "}" for p in shuffled))
        return self._rec("en", subtask, prompt, w, {"word": w, "parts": shuffled})

    def _rec(self, lang, subtask, prompt, answer, meta):
        return make_record(id="", task=self.task, subtask=subtask, lang=lang,
                           type=self.answer_type(subtask), prompt=prompt, answer=answer, meta=meta)
