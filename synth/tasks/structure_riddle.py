"""RIDL: riddles solvable from spelling or structure alone, each with a unique answer (checked).

ko: initial-consonant (초성) quiz; the answer's 초성 string is unique among the 2-4 syllable words of
the 20,000 most frequent Hangul-only words of wordfreq ko (there is no maintained semantic category list, so the "theme" is the word's
length and frequency band).
en: reversal ("which word is 'stressed' backwards?"), anagram (pairs only: the other word is unique),
letter deletion and hidden words (exactly one vocabulary word of that length hidden), all over wordfreq.
zh: component arithmetic (亻+乍=?, unique in the chaizi dictionary) and removal (休 minus 亻).
"""
from __future__ import annotations

import random
from collections import defaultdict
from functools import lru_cache

from ..core import Generator, register
from ..record import make_record
from ..resources import word_list
from ..structural import chaizi, combine_index, common_hanzi, components, jamo_of

VOCAB_EN = 30000


@lru_cache(maxsize=None)
def en_vocab() -> tuple[str, ...]:
    return tuple(w for w in word_list("en").words[:VOCAB_EN] if w.isalpha() and w.islower() and len(w) >= 3)


@lru_cache(maxsize=None)
def en_sets() -> tuple[frozenset[str], dict[str, list[str]]]:
    vocab = en_vocab()
    ana: dict[str, list[str]] = defaultdict(list)
    for w in vocab:
        ana["".join(sorted(w))].append(w)
    return frozenset(vocab), ana


@lru_cache(maxsize=None)
def en_reversals() -> tuple[tuple[str, str], ...]:
    vs, _ = en_sets()
    return tuple((w, w[::-1]) for w in en_vocab() if w[::-1] in vs and w[::-1] != w)


@lru_cache(maxsize=None)
def en_anagram_pairs() -> tuple[tuple[str, str], ...]:
    _, ana = en_sets()
    return tuple((a, b) for ws in ana.values() if len(ws) == 2 for a, b in (ws, ws[::-1]))


def hidden_words(text: str, n: int, vocab: frozenset[str]) -> set[str]:
    s = text.replace(" ", "")
    return {s[i : i + n] for i in range(len(s) - n + 1)} & vocab


@lru_cache(maxsize=None)
def ko_words() -> tuple[tuple[str, str], ...]:
    """(word, 초성 string) for 2-4 syllable words whose 초성 string is unique in the top 20,000."""
    words = [w for w in word_list("ko").words[:20000] if 2 <= len(w) <= 4]
    cho = [(w, "".join(jamo_of(s)[0] for s in w)) for w in words]
    count: dict[str, int] = defaultdict(int)
    for _, c in cho:
        count[c] += 1
    return tuple((w, c) for w, c in cho if count[c] == 1)


@register
class StructureRiddle(Generator):
    task = "structure_riddle"

    def make(self, rng: random.Random, lang: str, subtask: str):
        if lang == "ko":
            words = ko_words()
            i = rng.randrange(len(words))
            w, c = words[i]
            band = "자주 쓰는 말" if i < len(words) // 3 else "일상 어휘" if i < 2 * len(words) // 3 else "덜 흔한 말"
            theme = f"{len(w)}글자 단어, {band}"
            prompt = f"초성 퀴즈입니다!\n제시된 주제와 초성을 보고 단어를 맞혀보세요.\n주제: {theme}.\n초성: {c}"
            return self._rec(lang, prompt, w, {"kind": "chosung", "chosung": c})
        if lang == "en":
            return self._en(rng)
        return self._zh(rng)

    def _en(self, rng: random.Random):
        vocab, _ = en_sets()
        kind = rng.choice(("reversal", "anagram", "deletion", "hidden"))
        if kind == "reversal":
            a, b = rng.choice(en_reversals())
            prompt = f"Which English word is '{a}' spelled backwards? ({len(b)})"
            ans = b
        elif kind == "anagram":
            a, b = rng.choice(en_anagram_pairs())
            prompt = f"Rearrange all the letters of '{a}' to make another English word. ({len(b)})"
            ans = b
        elif kind == "deletion":
            w = rng.choice(en_vocab())
            c = rng.choice(w)
            ans = w.replace(c, "")
            if len(ans) < 3 or ans not in vocab:
                return None
            prompt = f"Remove every letter '{c}' from '{w}' to get an English word. ({len(ans)})"
        else:
            ans = rng.choice([w for w in (rng.choice(en_vocab()) for _ in range(8)) if len(w) >= 5] or [None])
            if ans is None:
                return None
            pre, post = rng.choice(en_vocab()), rng.choice(en_vocab())
            k = rng.randint(1, len(ans) - 1)
            text = f"{pre}{ans[:k]} {ans[k:]}{post}"
            if hidden_words(text, len(ans), vocab) != {ans}:
                return None
            prompt = f"A {len(ans)}-letter English word is hidden across the words of '{text}'. Find it. ({len(ans)})"
        return self._rec("en", prompt, ans, {"kind": kind})

    def _zh(self, rng: random.Random):
        ch = rng.choice(common_hanzi(2500))
        dec = rng.choice(chaizi()[ch])
        if ch in dec or any(ch in components(p) for p in dec):
            return None  # self-referential entries (e.g. a part that is the character's own variant)
        if rng.random() < 0.5:
            if combine_index().get(tuple(sorted(dec))) != [ch]:
                return None
            prompt = f"{'+'.join(dec)}=?(猜一字，按字形部件组合)"
            return self._rec("zh", prompt, ch, {"kind": "arithmetic", "parts": dec})
        if len(dec) != 2:
            return None
        rest = dec[1]
        if not ("\u4e00" <= rest <= "\u9fff") or rest == ch:
            return None
        prompt = f"“{ch}”字去掉“{dec[0]}”，剩下的是什么字？(猜一字)"
        return self._rec("zh", prompt, rest, {"kind": "removal", "char": ch, "removed": dec[0]})

    def _rec(self, lang, prompt, answer, meta):
        return make_record(id="", task=self.task, lang=lang, type="MATCH_ANSWER", prompt=prompt, answer=answer, meta=meta)
