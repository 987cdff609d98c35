"""VAR: restore text whose characters were replaced by look-alikes; the original is always recoverable.

en: a word (lower case, or capitalised one time in five) with 30-100% of its letters replaced by
homoglyphs from the Unicode confusables table, each standing for exactly one letter of the same case
(`structural.homoglyphs`); ko slot (subtask `digital`, as the official digital.csv fills it): a string
of 4-13 digits with look-alike digits; zh: one or two real sentences (HSK examples) with 30-90% of
the characters that have one replaced by a look-alike variant (Traditional/Japanese forms from
OpenCC, radicals and kana from the confusables table), punctuation untouched ("火星文" style).
"""
from __future__ import annotations

import random
from functools import lru_cache

from ..core import Generator, register
from ..record import make_record
from ..resources import word_list
from ..structural import homoglyphs, zh_sentences, zh_variants

T = {
    "en": ("The following is an English word where some letters have been visually confused with structurally "
           "similar characters. Please recover the original word.\nWord: {x}",
           "Some letters of this English word were swapped for look-alike characters. Write the original word.\n"
           "Word: {x}"),
    "digital": ("The following is a numeric string where some digits have been visually confused with "
                "structurally similar Unicode characters. Please recover the original number.\nNumber: {x}",
                "Some digits of this number were replaced by look-alike characters. Write the original number.\n"
                "Number: {x}"),
    "zh": ("以下是被扰动后的文本，请你还原出原始文本，不修改标点符号：{x}",
           "下面的句子里有些字被换成了形近的异体字，请还原原句（标点不变）：{x}"),
}


@lru_cache(maxsize=None)
def en_words() -> tuple[str, ...]:
    return tuple(w for w in word_list("en").words[:40000] if w.isalpha() and w.islower() and len(w) >= 4)


def perturb(rng: random.Random, text: str, table: dict[str, tuple[str, ...]], rate: float) -> str | None:
    """Replace each character that has look-alikes with probability `rate`; None when nothing changed."""
    out, changed = [], 0
    for ch in text:
        alts = table.get(ch)
        if alts and rng.random() < rate:
            out.append(rng.choice(alts))
            changed += 1
        else:
            out.append(ch)
    return "".join(out) if changed else None


@register
class VariantNormalize(Generator):
    task = "variant_normalize"
    answer_types = {"": "MATCH_ANSWER", "digital": "MATCH_ANSWER"}
    perturb_layouts = (
        r"(?s)(?P<i>The following is an? .*?)(?P<k>\n(?:Word|Number): .*)",
        r"(?P<i>以下是被扰动后的文本，请你还原出原始文本，不修改标点符号)(?P<k>：.*)",
    )
    unit_in_prompt = True  # tokstats: the asked-about unit is quoted in the prompt

    @classmethod
    def official_file(cls, stem: str) -> tuple[str, str] | None:
        if stem == "digital":  # the digit file fills the Korean slot
            return "digital", "ko"
        return super().official_file(stem)

    def supports(self, lang: str, subtask: str) -> bool:
        return (lang, subtask) in (("en", ""), ("zh", ""), ("ko", "digital"))

    def make(self, rng: random.Random, lang: str, subtask: str):
        if subtask == "digital":
            orig = "".join(rng.choice("0123456789") for _ in range(rng.randint(4, 13)))
            x = perturb(rng, orig, homoglyphs("digits"), rng.uniform(0.3, 1.0))
            key = "digital"
        elif lang == "en":
            w = rng.choice(en_words())
            orig = w.capitalize() if rng.random() < 0.2 else w
            x = perturb(rng, orig, homoglyphs("letters"), rng.uniform(0.3, 1.0))
            key = "en"
        else:
            sents = zh_sentences()
            i = rng.randrange(len(sents))
            orig = sents[i] if rng.random() < 0.6 or i + 1 == len(sents) else sents[i] + sents[i + 1]
            x = perturb(rng, orig, zh_variants(), rng.uniform(0.3, 0.9))
            key = "zh"
        if x is None:
            return None
        prompt = self.template(rng, T, key).format(x=x)
        return make_record(id="", task=self.task, subtask=subtask, lang=lang, type=self.answer_type(subtask),
                           prompt=prompt, answer=orig, meta={"perturbed": x})
