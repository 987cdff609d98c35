"""COMPC: count a component inside tokens, with the total drawn first (0 included) as the official
generators do.

en: a letter in 1-3 distinct words, total uniform in 0..10 (each word holds the letter when the total
is > 0, as the official en.py);
ko: a jamo (initial, medial or final; compound ones such as ㄾ whole, via hgtk) in 1-6 syllables,
total uniform in 0..5; syllables from all 11,172 (as the official file) or from common ones;
zh: a component in 1-6 common characters, total uniform in 0..5, counted at the top level of the
chaizi decompositions, with only characters whose count the dictionary fixes (see
`structural.zh_count_index`) and zeros that contain the component nowhere.
"""
from __future__ import annotations

import random
from collections import Counter
from functools import cache

from common.record import make_record

from ..core import Generator, register
from ..resources import word_list
from ..structural import jamo_count_index, split_total, zh_count_index, zh_tree

TEMPLATES = {
    "en": ('How many times does the letter "{c}" appear in {w}?',
           'Count the letter "{c}" in: {w}. How many times does it occur?',
           'In "{w}", how often does the letter "{c}" occur?'),
    "zh": ('"{w}"的字形中有多少"{c}"存在',
           '在"{w}"这些字的字形里，部件"{c}"一共出现了几次？',
           '数一数"{w}"中包含几个"{c}"部件。'),
    "ko": ('"{w}"에서 "{c}"는 몇 회 출현하였습니까?',
           '"{w}"를 자모로 풀었을 때 "{c}"는 모두 몇 번 나옵니까?',
           '"{w}"에 들어 있는 "{c}"의 개수는 몇 개입니까?'),
}
LETTERS = "abcdefghijklmnopqrstuvwxyz"
EN_VOCAB = 40000
MAX_EN, MAX_KO, MAX_ZH = 10, 5, 5


@cache
def en_letter_index() -> dict[str, tuple[tuple[str, ...], ...]]:
    """letter -> words by how many times they hold it (index 0: words without it)."""
    words = [w for w in word_list("en").words[:EN_VOCAB] if w.islower()]
    out = {}
    for c in LETTERS:
        by: list[list[str]] = [[] for _ in range(MAX_EN + 1)]
        for w in words:
            k = w.count(c)
            if k <= MAX_EN:
                by[k].append(w)
        out[c] = tuple(tuple(x) for x in by)
    return out


@cache
def zh_targets() -> tuple[tuple[str, ...], ...]:
    """Targets per total k: components whose (up to 6) best characters can reach k."""
    idx, _ = zh_count_index()
    reach = {}
    for c, by in idx.items():
        counts = sorted((k for k, chars in by.items() for _ in chars), reverse=True)[:6]
        reach[c] = sum(counts)
    return tuple(tuple(sorted(c for c, r in reach.items() if r >= k)) for k in range(MAX_ZH + 1))


def distinct(items: list[str]) -> bool:
    return len(set(items)) == len(items)


def pick(rng: random.Random, by, parts: list[int]) -> list[str] | None:
    """Distinct items, one per part, each holding exactly that part's count (sampled without
    replacement within a count); None when some count has too few items."""
    need = Counter(parts)
    out: list[str] = []
    for p, m in need.items():
        items = by.get(p, ()) if isinstance(by, dict) else by[p]
        if len(items) < m:
            return None
        out += rng.sample(items, m)
    return out


@register
class ComponentCount(Generator):
    task = "component_count"
    langs = ("en", "zh", "ko")
    answer_types = {"": "NUMBER"}
    perturb_layouts = (
        r'How many times does the letter "(?P<t>[^"\n]+)" appear in (?P<p>[^?]*)\?',
        r'(?P<k>[^"]*"的字形中有多少"[^"]+"存在)',  # zh: the characters hold the answer; nothing to perturb
        r'(?P<k>"[^"]*"에서 "[^"]+")(?P<i>는 몇 회 출현하였습니까)\?',
    )
    perturb_kinds = frozenset({"zero_width", "spacing"})
    unit_in_prompt = True  # tokstats: the asked-about unit is quoted in the prompt

    def make(self, rng: random.Random, lang: str, subtask: str):
        if lang == "en":
            got = self._en(rng)
        elif lang == "ko":
            got = self._ko(rng)
        else:
            got = self._zh(rng)
        if got is None:
            return None
        c, text, count = got
        prompt = self.template(rng, TEMPLATES, lang).format(c=c, w=text)
        return make_record(id="", task=self.task, lang=lang, type=self.answer_type(), prompt=prompt, answer=str(count),
                           meta={"target": c, "text": text, "count": count})

    @staticmethod
    def _en(rng: random.Random):
        k = rng.randint(0, MAX_EN)
        for _ in range(8):
            c = rng.choice(LETTERS)
            by = en_letter_index()[c]
            if k == 0:
                words = [rng.choice(by[0]) for _ in range(rng.randint(1, 3))]
            else:
                parts = split_total(rng, k, 1, 3, lambda p, by=by: bool(by[p]))
                words = pick(rng, by, parts) if parts else None
                if words is None:
                    continue
            if distinct(words):
                return c, " ".join(words), k
        return None

    @staticmethod
    def _ko(rng: random.Random):
        k = rng.randint(0, MAX_KO)
        idx = jamo_count_index(rng.choice(("all", "common")))
        for _ in range(8):
            c = rng.choice(tuple(idx))
            by = idx[c]
            if k == 0:
                sylls = [rng.choice(by[0]) for _ in range(rng.randint(1, 6))]
            else:
                parts = split_total(rng, k, 1, 6, lambda p, by=by: bool(by.get(p)))
                sylls = pick(rng, by, parts) if parts else None
                if sylls is None:
                    continue
                sylls += [rng.choice(by[0]) for _ in range(rng.randint(0, 6 - len(parts)))]
                rng.shuffle(sylls)
            if distinct(sylls):
                return c, "".join(sylls), k
        return None

    @staticmethod
    def _zh(rng: random.Random):
        idx, chars = zh_count_index()
        k = rng.randint(0, MAX_ZH)
        c = rng.choice(zh_targets()[k])
        by = idx[c]
        if k == 0:
            pos: list[str] = []
        else:
            for _ in range(4):
                parts = split_total(rng, k, 1, 6, lambda p, by=by: bool(by.get(p)))
                pos = pick(rng, by, parts) if parts else None
                if pos is not None:
                    break
            else:
                return None
        n_neg = rng.randint(1, 6) if k == 0 else rng.randint(0, 6 - len(pos))
        neg: list[str] = []
        for _ in range(4 * n_neg):
            if len(neg) == n_neg:
                break
            ch = rng.choice(chars)
            if c not in zh_tree(ch) and ch != c:
                neg.append(ch)
        pool = pos + neg
        if not pool or not distinct(pool):
            return None
        rng.shuffle(pool)
        return c, "".join(pool), k
