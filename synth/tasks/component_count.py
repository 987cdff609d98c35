"""COMPC: count a component inside tokens.

en: a letter in 1-3 words, total controlled (the letter absent in about one case in five, so 0 occurs);
ko: a jamo (initial, medial or final, compound ones whole, via hgtk) in up to 6 syllables;
zh: a component in 2-6 characters, counted over the recursive chaizi decomposition of each character.
"""
from __future__ import annotations

import random

from ..core import Generator, register
from ..record import make_record
from ..resources import word_list
from ..structural import common_hanzi, components, hangul_syllables, jamo_of

TEMPLATES = {
    "en": ('How many times does the letter "{c}" appear in {w}?',
           'Count the letter "{c}" in: {w}. How many times does it occur?'),
    "zh": ('"{w}"的字形中有多少"{c}"存在', '在"{w}"这些字的字形里，部件"{c}"一共出现了几次？'),
    "ko": ('"{w}"에서 "{c}"는 몇 회 출현하였습니까?', '"{w}"를 자모로 풀었을 때 "{c}"는 모두 몇 번 나옵니까?'),
}


@register
class ComponentCount(Generator):
    task = "component_count"

    def make(self, rng: random.Random, lang: str, subtask: str):
        if lang == "en":
            words = [w for w in (rng.choice(word_list("en").words) for _ in range(rng.randint(1, 3)))]
            text = " ".join(words)
            if rng.random() < 0.2:
                absent = sorted(set("abcdefghijklmnopqrstuvwxyz") - set(text.lower()))
                if not absent:
                    return None
                c = rng.choice(absent)
            else:
                c = rng.choice([ch for ch in text if ch.isalpha()])
            count = text.count(c)
        elif lang == "ko":
            sylls = hangul_syllables()
            text = "".join(rng.choice(sylls) for _ in range(rng.randint(1, 6)))
            js = [j for s in text for j in jamo_of(s)]
            c = rng.choice(js) if rng.random() < 0.8 else rng.choice(jamo_of(rng.choice(sylls)))
            count = js.count(c)
        else:
            chars = common_hanzi()
            seed_ch = rng.choice(chars)
            comps = components(seed_ch)
            if not comps:
                return None
            c = rng.choice(comps)
            others = [rng.choice(chars) for _ in range(rng.randint(1, 5))]
            pool = [seed_ch] + others
            rng.shuffle(pool)
            text = "".join(pool)
            count = sum(components(ch).count(c) for ch in pool)
        prompt = self.template(rng, TEMPLATES, lang).format(c=c, w=text)
        return make_record(id="", task=self.task, lang=lang, type="NUMBER", prompt=prompt, answer=str(count),
                           meta={"target": c, "text": text, "count": count})
