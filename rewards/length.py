"""LENGTH (LENOP generate): write exactly n tokens.

coarse: target n = first integer (`\\d+`) of the prompt; the extracted answer's tokens are counted as
        the token characters of the first character language of the catalogue (`common.languages`) it
        has any of: CJK characters (U+4E00..U+9FFF), else Hangul syllables (U+AC00..U+D7A3), else valid
        English words (`\\b[\\w'-]+\\b` matches that fully match
        `[a-zA-Z]+(?:[-'][a-zA-Z]+)*`, so digits and "don't!"'s punctuation do not count); equal -> 1.
        A prompt without an integer (or one int() refuses) makes the official evaluator raise: such a
        row is `valid=False`.
fine:   = coarse. No credit for a near length: the target is in the prompt, and credit that grows with
        closeness to it pays a text of one fixed length (about the middle of the targets) on every row
        more than a random length would earn. The official count has no list loophole: strict = coarse.
"""
from __future__ import annotations

import re
import zlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from common.languages import char_languages, language

from .base import Score, field, pool_max, sample_options, tag
from .extract import extract_answer
from .text import PUNCT_TO_SPACE, words
from .types import ScoringType, register_type

_INT = re.compile(r"\d+")
_VALID_EN = re.compile(r"[a-zA-Z]+(?:[-'][a-zA-Z]+)*")
_LETTERS = re.compile(r"[a-zA-Z ]*")


def count_units(content: str) -> int:
    """Token count by the official LENGTH rule: the characters of the first character language (catalogue
    order) the text has, else valid English words."""
    for lang in char_languages():
        if lang.char_re.search(content):
            return len(lang.not_char_re.sub("", content))  # deleting the other runs beats a string per character
    plain = content.translate(PUNCT_TO_SPACE)
    if _LETTERS.fullmatch(plain):  # fast path: only letters between separators, every word valid
        return len(plain.split())
    found = words(content)
    return len(found) - list(map(_VALID_EN.fullmatch, found)).count(None)


def target_length(prompt: str) -> int | None:
    """First integer of the prompt, or None where the official `int(re.search(...).group())` raises."""
    m = _INT.search(prompt)
    if m is None:
        return None
    try:
        return int(m.group())
    except ValueError:  # more digits than int() accepts (Python 3.11+): the official code raises too
        return None


def score_length(prompt: str, completion: str) -> Score:
    """Score for one LENGTH row (official `sentence_length`)."""
    target = target_length(prompt)
    extracted = extract_answer(completion)
    if target is None:
        return Score(0.0, 0.0, extracted, valid=False)
    ok = float(count_units(extracted) == target)
    return Score(ok, ok, extracted)


def score(example: Mapping[str, Any], completion: str) -> Score:
    return score_length(field(example, "prompt"), completion)


def _units(lang: Any, k: int) -> str:
    """`k` units of the language's LENGTH filler (`common.languages`; English words for any other code)."""
    lang = language(lang) or language("en")
    return lang.length_text(k) if lang is not None else " ".join(["word"] * k)


def length_text(example: Mapping[str, Any]) -> str:
    """`n` units in the record's language (its catalogue `filler`: one CJK character / Hangul syllable /
    English word each), n the prompt's target: the gold answer of a LENOP generate row, which holds no label."""
    return _units(example.get("lang", ""), target_length(field(example, "prompt")) or 0)


def sft_answer(record: Mapping[str, Any], unit: str | None, texts: Callable[[str], Any]) -> str | None:
    """The SFT target of a generated row: the generator's target number of units of real text (a span of the
    language's corpus, `texts(lang)`, chosen by the row's id), after a line saying how many; None without a
    target or a language unit."""
    n = int((record.get("meta") or {}).get("target", 0))
    if not n or unit is None:
        return None
    corp = texts(record["lang"])
    start = zlib.crc32(record["id"].encode()) % (len(corp) - n)  # deterministic per example
    return f"Here are exactly {n} {unit}.\n" + tag(corp.span(start, n))


def valid_answers(rec: Mapping[str, Any], pool: Sequence[str]) -> list[str]:
    """Texts of 1..M units, M the largest target in `pool` (the target is the label here: `relabel` moves it)."""
    top = pool_max(pool)
    return sample_options([_units(field(rec, "lang"), k) for k in range(1, top + 1)], str(top))


def relabel(rec: Mapping[str, Any], answer: str) -> dict[str, Any]:
    """The row whose prompt asks for as many units as `answer` has (a LENGTH row holds no label)."""
    return dict(rec, prompt=_INT.sub(str(count_units(answer)), field(rec, "prompt"), count=1))


def hedges(rec: Mapping[str, Any], options: list[str]) -> dict[str, str]:
    return {"fixed 100 units": _units(field(rec, "lang"), 100)}


TYPE = register_type(ScoringType("LENGTH", score, gold=lambda ex: [length_text(ex)], sft=sft_answer,
                                 valid_answers=valid_answers, relabel=relabel, hedges=hedges))
