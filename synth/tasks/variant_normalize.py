"""VAR: restore text whose characters were replaced by look-alikes; the original is always recoverable.

en: a word with some letters replaced by homoglyphs from the Unicode confusables data (each homoglyph
confusable with exactly one ASCII letter, case preserved); ko slot (subtask `digital`, as the official
digital.csv): digit strings of 4-13 digits with look-alike digits; zh: a sentence from the zh corpus with
characters replaced by Traditional forms (OpenCC, round-trip checked) or confusable radical forms.
"""
from __future__ import annotations

import random
from functools import lru_cache

from ..core import Generator, register
from ..record import make_record
from ..resources import corpus, word_list
from ..structural import homoglyphs, zh_variants

T = {
    "en": ("The following is an English word where some letters have been visually confused with structurally "
           "similar characters. Please recover the original word.\nWord: {x}",
           "Some letters of this English word were swapped for look-alike characters. Write the original word.\n"
           "Word: {x}"),
    "digital": ("The following is a numeric string where some digits have been visually confused with "
                "structurally similar Unicode characters. Please recover the original number.\nNumber: {x}",
                "Some digits of this number were replaced by look-alike characters. Write the original number.\n"
                "Number: {x}"),
    "zh": ("以下是被扰动后的文本，请你还原出原始文本，不修改标点符号：{x}", "下面的句子里有些字被换成了形近的异体字，请还原原句（标点不变）：{x}"),
}


@lru_cache(maxsize=None)
def en_words() -> tuple[str, ...]:
    return tuple(w for w in word_list("en").words if w.isalpha() and len(w) >= 4)


def perturb(rng: random.Random, text: str, table: dict[str, tuple[str, ...]], rate: float) -> str | None:
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
    subtasks = ("", "digital")

    def supports(self, lang: str, subtask: str) -> bool:
        return (lang, subtask) in (("en", ""), ("zh", ""), ("ko", "digital"))

    def make(self, rng: random.Random, lang: str, subtask: str):
        if subtask == "digital":
            orig = str(rng.randint(1, 9)) + "".join(str(rng.randint(0, 9)) for _ in range(rng.randint(3, 12)))
            x = perturb(rng, orig, homoglyphs(), 0.6)
            key = "digital"
        elif lang == "en":
            w = rng.choice(en_words())
            orig = w.capitalize() if rng.random() < 0.2 else w
            x = perturb(rng, orig, homoglyphs(), 0.6)
            key = "en"
        else:
            corp = corpus("zh")
            n = rng.randint(6, 24)
            orig = corp.span(rng.randrange(len(corp) - n), n)
            x = perturb(rng, orig, zh_variants(), 0.5)
            key = "zh"
        if x is None:
            return None
        prompt = self.template(rng, T, key).format(x=x)
        return make_record(id="", task=self.task, subtask=subtask, lang=lang, type="MATCH_ANSWER",
                           prompt=prompt, answer=orig, meta={"perturbed": x})
