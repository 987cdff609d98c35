"""COMPM: split tokens into parts and combine parts into tokens (round-trip checked for every pair).

en split: a word of more than 5 letters cut into 2-4 parts of >= 2 letters; the prompt names each part
by its first and last letter ("from i to t"); answer "irritat, ion". en combine: the shuffled parts;
only words whose parts make exactly one vocabulary word in any order.
ko: a syllable -> its jamo ("ㅅ, ㅛ, ㄱ") and back (valid Unicode syllables only).
zh: a character -> its components with up to 4 alternative decompositions ("人,列;亻,列"); combine:
only component sets that make exactly one character of the chaizi dictionary.
"""
from __future__ import annotations

import itertools
import random
from functools import lru_cache

from ..core import Generator, register
from ..record import make_record
from ..resources import word_list
from ..structural import chaizi, combine_index, common_hanzi, compose, jamo_of

T_SPLIT = {
    "en": ("Split {w} into {spec}.", "Cut the word {w} into these pieces: {spec}. Write the pieces separated by commas."),
    "ko": ("'{w}'의 초성, 중성, 종성(있는 경우)은 무엇인가요? 쉼표로 구분하세요.",
           "'{w}'를 초성, 중성, 종성(있으면)으로 나누어 쉼표로 구분해 쓰세요."),
    "zh": ("请将“{w}”拆分为可重新组合的基本部件.", "把汉字“{w}”拆成能重新组合回去的部件。"),
}
T_COMBINE = {
    "en": ("Combine {parts} into one word.", "Put the pieces {parts} together (in some order) to make one word."),
    "ko": ("다음 자모를 조합하세요: {parts}", "다음 자모로 한 글자를 만드세요: {parts}"),
    "zh": ("使用“{parts}”可以组成哪个汉字？", "用“{parts}”这几个部件能拼成哪个汉字？"),
}


@lru_cache(maxsize=None)
def en_words() -> tuple[str, ...]:
    return tuple(w for w in word_list("en").words if len(w) > 5)


@lru_cache(maxsize=None)
def en_vocab() -> frozenset[str]:
    return frozenset(word_list("en").words)


def cut(rng: random.Random, w: str) -> list[str] | None:
    k = rng.randint(2, min(4, len(w) // 2))
    cuts = sorted(rng.sample(range(2, len(w) - 1), k - 1)) if len(w) - 3 >= k - 1 else None
    if cuts is None:
        return None
    parts = [w[a:b] for a, b in zip([0, *cuts], [*cuts, len(w)])]
    return parts if all(len(p) >= 2 for p in parts) else None


@register
class ComponentSplit(Generator):
    task = "component_split"
    subtasks = ("split", "combine")

    def make(self, rng: random.Random, lang: str, subtask: str):
        t = self.template(rng, T_SPLIT if subtask == "split" else T_COMBINE, lang)
        if lang == "en":
            w = rng.choice(en_words())
            parts = cut(rng, w)
            if parts is None:
                return None
            if subtask == "split":
                spec = ", ".join(f"from {p[0]} to {p[-1]}" for p in parts)
                return self._rec(lang, subtask, t.format(w=w, spec=spec), ", ".join(parts), {"word": w, "parts": parts})
            shuffled = list(parts)
            rng.shuffle(shuffled)
            words = {"".join(p) for p in itertools.permutations(parts)} & en_vocab()
            if words != {w}:
                return None  # not uniquely reconstructible
            return self._rec(lang, subtask, t.format(parts=", ".join("{" + p + "}" for p in shuffled)), w,
                             {"word": w, "parts": shuffled})
        if lang == "ko":
            s = chr(0xAC00 + rng.randrange(11172))
            js = jamo_of(s)
            if compose(js) != s:
                return None
            if subtask == "split":
                return self._rec(lang, subtask, t.format(w=s), ", ".join(js), {"char": s, "jamo": js})
            return self._rec(lang, subtask, t.format(parts=", ".join(js)), s, {"char": s, "jamo": js})
        ch = rng.choice(common_hanzi())
        decs = chaizi()[ch][:4]
        if subtask == "split":
            ans = ";".join(",".join(d) for d in decs)
            return self._rec(lang, subtask, t.format(w=ch), ans, {"char": ch, "decompositions": decs})
        dec = rng.choice(decs)
        if combine_index().get(tuple(sorted(dec))) != [ch]:
            return None  # not uniquely reconstructible
        return self._rec(lang, subtask, t.format(parts=" ".join(dec)), ch, {"char": ch, "parts": dec})

    def _rec(self, lang, subtask, prompt, answer, meta):
        return make_record(id="", task=self.task, subtask=subtask, lang=lang,
                           type="SPLIT" if subtask == "split" else "MATCH_ANSWER", prompt=prompt, answer=answer, meta=meta)
