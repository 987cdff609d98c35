"""RIDL: riddles solvable from spelling or glyph structure alone, each with one answer in its source
vocabulary (checked here, and again by brute force in the tests).

ko: the official initial-consonant (초성) quiz. Themed words are Korean CLDR names (Countries, Cities,
Languages via babel); other words come from the 20,000 most frequent Hangul-only words of wordfreq ko
(theme "Common words"). The 초성 string is unique within the theme's list.
en: reversal ("which word is 'stressed' backwards?"), anagram (only words with exactly one other
anagram), letter deletion, and hidden words (exactly one vocabulary word of that length hidden across
the gap), over the 30,000 most frequent lower-case words of wordfreq en.
zh: component arithmetic (亻+乍=?, unique in the whole chaizi dictionary) and removal (休 minus 亻,
the same remainder under every decomposition of the character that has that part).
"""
from __future__ import annotations

import random
from collections import Counter, defaultdict
from functools import cache

from common.record import make_record

from ..core import Generator, register
from ..resources import word_list
from ..structural import chaizi, combine_index, common_hanzi, is_hanzi, jamo_of, ko_themes, split_options

VOCAB_EN = 30000
VOCAB_KO = 20000
COMMON_KO = "Common words"

T_KO = ("초성 퀴즈입니다!\n제시된 주제와 초성을 보고 단어를 맞혀보세요.\n주제: {theme}\n초성: {cho}",
        "초성만 보고 단어를 맞혀 보세요.\n주제: {theme}\n초성: {cho}")
T_EN = {
    "reversal": ("Which English word is '{q}' spelled backwards? ({n})",
                 "Read '{q}' from right to left: which English word do you get? ({n})"),
    "anagram": ("Rearrange all the letters of '{q}' to make another English word. ({n})",
                "Which other English word uses exactly the letters of '{q}'? ({n})"),
    "deletion": ("Remove every letter '{c}' from '{q}' to get an English word. ({n})",
                 "Cross out each '{c}' in '{q}'. What English word is left? ({n})"),
    "hidden": ("A {n}-letter English word is hidden across the words of '{q}'. Find it. ({n})",
               "Ignoring the space, '{q}' hides a {n}-letter English word. Which one? ({n})"),
}
T_ZH = {
    "arithmetic": ("{expr}=？(猜一字)", "按字形组合：{expr}=？(猜一字)"),
    "removal": ("“{ch}”字去掉“{part}”，剩下的是什么字？(猜一字)", "从“{ch}”中拿走“{part}”，还剩哪个字？(猜一字)"),
}


def choseong(word: str) -> str:
    return "".join(jamo_of(s)[0] for s in word)


@cache
def ko_pools() -> tuple[tuple[str, tuple[tuple[str, str], ...]], ...]:
    """(theme, ((word, 초성), ...)) with only words whose 초성 is unique within the theme."""
    themes = dict(ko_themes())
    themes[COMMON_KO] = tuple(w for w in word_list("ko").words[:VOCAB_KO] if 2 <= len(w) <= 5)
    out = []
    for theme, words in themes.items():
        cho = [(w, choseong(w)) for w in dict.fromkeys(words)]
        count = Counter(c for _, c in cho)
        out.append((theme, tuple((w, c) for w, c in cho if count[c] == 1)))
    return tuple(out)


@cache
def en_vocab() -> tuple[str, ...]:
    return tuple(w for w in word_list("en").words[:VOCAB_EN] if w.isalpha() and w.islower() and len(w) >= 3)


@cache
def en_sets() -> tuple[frozenset[str], dict[str, list[str]]]:
    vocab = en_vocab()
    ana: dict[str, list[str]] = defaultdict(list)
    for w in vocab:
        ana["".join(sorted(w))].append(w)
    return frozenset(vocab), ana


@cache
def en_reversals() -> tuple[tuple[str, str], ...]:
    vs, _ = en_sets()
    return tuple((w, w[::-1]) for w in en_vocab() if w[::-1] in vs and w[::-1] != w)


@cache
def en_anagram_pairs() -> tuple[tuple[str, str], ...]:
    _, ana = en_sets()
    return tuple((a, b) for ws in ana.values() if len(ws) == 2 for a, b in (ws, ws[::-1]))


@cache
def en_long() -> tuple[str, ...]:
    return tuple(w for w in en_vocab() if len(w) >= 5)


def hidden_words(text: str, n: int, vocab: frozenset[str]) -> set[str]:
    s = text.replace(" ", "")
    return {s[i : i + n] for i in range(len(s) - n + 1)} & vocab


@cache
def zh_removals() -> tuple[tuple[str, str, str], ...]:
    """(character, removed part, remaining character) where every decomposition of the character that
    lists the part has exactly one other part, always the same CJK character."""
    out = []
    for ch in common_hanzi(2500):
        decs = chaizi()[ch]
        for part in dict.fromkeys(p for d in decs for p in d):
            rests = {tuple(x for i, x in enumerate(d) if i != d.index(part)) for d in decs if part in d}
            if len(rests) == 1:
                rest = next(iter(rests))
                if len(rest) == 1 and is_hanzi(rest[0]) and rest[0] != ch:
                    out.append((ch, part, rest[0]))
    return tuple(out)


@register
class StructureRiddle(Generator):
    task = "structure_riddle"
    langs = ("en", "zh", "ko")
    answer_types = {"": "MATCH_ANSWER"}
    perturb_layouts = (
        r"(?P<k>.*)(?P<i>\(猜一字\))",
        r"(?s)(?P<i>초성 퀴즈입니다!\n제시된 주제와 초성을 보고 단어를 맞혀보세요)(?P<k>\..*)",
    )

    def make(self, rng: random.Random, lang: str, subtask: str):
        if lang == "ko":
            theme, words = rng.choice(ko_pools())
            w, c = rng.choice(words)
            prompt = self.template(rng, {"ko": T_KO}, "ko").format(theme=theme, cho=c)
            return self._rec(lang, prompt, w, {"kind": "chosung", "theme": theme, "chosung": c})
        if lang == "en":
            return self._en(rng)
        return self._zh(rng)

    def _en(self, rng: random.Random):
        vocab, _ = en_sets()
        kind = rng.choice(tuple(T_EN))
        t = self.template(rng, T_EN, kind)
        meta = {"kind": kind}
        if kind == "reversal":
            q, ans = rng.choice(en_reversals())
            prompt = t.format(q=q, n=len(ans))
        elif kind == "anagram":
            q, ans = rng.choice(en_anagram_pairs())
            prompt = t.format(q=q, n=len(ans))
        elif kind == "deletion":
            q = rng.choice(en_long())
            c = rng.choice(q)
            ans = q.replace(c, "")
            if len(ans) < 3 or ans not in vocab:
                return None
            prompt = t.format(c=c, q=q, n=len(ans))
            meta["letter"] = c
        else:
            ans = rng.choice(en_long())
            pre, post = rng.choice(en_vocab()), rng.choice(en_vocab())
            k = rng.randint(1, len(ans) - 1)
            q = f"{pre}{ans[:k]} {ans[k:]}{post}"
            if hidden_words(q, len(ans), vocab) != {ans}:
                return None
            prompt = t.format(q=q, n=len(ans))
        meta["question"] = q
        return self._rec("en", prompt, ans, meta)

    def _zh(self, rng: random.Random):
        if rng.random() < 0.5:
            ch = rng.choice(common_hanzi(2500))
            opts = split_options(ch)
            if not opts:
                return None
            dec = rng.choice(opts)
            if combine_index()[tuple(sorted(dec))] != {ch}:
                return None
            prompt = self.template(rng, T_ZH, "arithmetic").format(expr="+".join(dec))
            return self._rec("zh", prompt, ch, {"kind": "arithmetic", "parts": list(dec)})
        ch, part, rest = rng.choice(zh_removals())
        prompt = self.template(rng, T_ZH, "removal").format(ch=ch, part=part)
        return self._rec("zh", prompt, rest, {"kind": "removal", "char": ch, "removed": part})

    def _rec(self, lang, prompt, answer, meta):
        return make_record(id="", task=self.task, lang=lang, type=self.answer_type(), prompt=prompt, answer=answer,
                           meta=meta)
