"""DIFF: name the token that differs between two sequences, or say yes/是/예 when none does.

coarse: answer and label are cleaned alike (lower-case; delete "不是", the word "no" and the characters
        `,.。:：、；;"'‘’“”`; strip); equal -> 1. Only for variation "modify"/"修改" (case-insensitive;
        "add", "delete", "unchanged" and 增加/删除/不变 get no special case, exactly as officially), two
        more ways to pass: the cleaned label is among the answer's distinct non-empty cleaned quoted
        strings (`'...'` or `"..."`) and there are at most two of them ("'Eurasia' became 'Asia'"), or
        the cleaned answer has exactly two distinct tokens (CJK characters U+4E00..U+9FA5 or Latin
        words) and the label is one of them ("Eurasia Asia").
        A missing or non-string variation makes the official code raise once the plain comparison
        fails: such rows are `valid=False`.
strict: the plain comparison, or, for "modify", the two named tokens (quoted, or the two-token form)
        are exactly the replaced token and its replacement, read from the prompt's `seq1:`/`seq2:`
        lines; one quoted candidate equal to the label passes too. The official modify rules pass any two guesses that
        include the label ("'dog' 'cat'", "dog cat"): twice the chance of one guess, a hedge the strict verdict refuses.
fine:   equal to strict: naming the one differing token is an exact identification, and near misses
        (a similar-looking token) are not closer to knowing the answer.
"""
from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from common.languages import language

from .base import Score, field, label_of
from .extract import extract_answer
from .types import ScoringType, register_type

_NO = re.compile(r"\bno\b", re.IGNORECASE)
_QUOTED = re.compile(r"['\"](.*?)['\"]")
_NOT_CJK = re.compile(r"[^\u4e00-\u9fa5]+")
_LATIN = re.compile(r"[a-zA-Z]+")
_SYMBOLS = ",.。:：、；;\"'‘’“”"
MODIFY = ("modify", "修改")


def clean_text(text: str) -> str:
    """The official DIFF normalisation. The `in` pre-checks skip scans that cannot change anything
    (only n/N and o/O match "no" case-insensitively, and the text is lower-cased first)."""
    text = text.lower()
    if "不是" in text:
        text = text.replace("不是", "")
    if "no" in text:
        text = _NO.sub("", text)
    for ch in _SYMBOLS:  # str.replace per symbol: one fast scan each, unlike translate() on CJK text
        if ch in text:
            text = text.replace(ch, "")
    return text.lower().strip()


def two_tokens(cleaned: str) -> set[str] | None:
    """The distinct official DIFF tokens (CJK characters U+4E00..U+9FA5, Latin letter runs) of a
    cleaned answer when there are exactly two, else None; stops as soon as a third one shows up."""
    found = set(_NOT_CJK.sub("", cleaned))
    if len(found) > 2:
        return None
    for m in _LATIN.finditer(cleaned):
        found.add(m.group())
        if len(found) > 2:
            return None
    return found if len(found) == 2 else None


_SEQ = re.compile(r"^\s*seq([12])\s*[:：]\s*(.*)$", re.MULTILINE)


def _seq_tokens(line: str) -> list[str]:
    """Tokens of a sequence line: CJK characters and Hangul syllables one by one, else words."""
    if re.search(r"[\u4e00-\u9fff\uac00-\ud7a3]", line):
        return [c for c in line if not c.isspace()]
    return line.split()


def changed_pair(prompt: str) -> set[str] | None:
    """The cleaned {replaced token, replacement} of a modify row, from its seq1/seq2 lines; None when the
    prompt does not show exactly one token replaced by one other."""
    seqs = {k: v for k, v in _SEQ.findall(prompt)}
    if set(seqs) != {"1", "2"}:
        return None
    a, b = Counter(_seq_tokens(seqs["1"])), Counter(_seq_tokens(seqs["2"]))
    gone, new = list((a - b).elements()), list((b - a).elements())
    if len(gone) != 1 or len(new) != 1:
        return None
    pair = {clean_text(gone[0]), clean_text(new[0])}
    return pair if len(pair) == 2 else None


def score_diff(completion: str, label: str, variation: Any, prompt: str = "") -> Score:
    """Score for one DIFF row (official `diff_judge`, plus the strict verdict)."""
    extracted = extract_answer(completion)
    a1, a2 = clean_text(extracted), clean_text(label)
    if a1 == a2:
        return Score(1.0, 1.0, extracted)
    if not isinstance(variation, str):  # official: variation.lower() raises here
        return Score(0.0, 0.0, extracted, valid=False)
    if variation.lower() in MODIFY:
        if "'" in extracted or '"' in extracted:
            quoted = {c for c in map(clean_text, _QUOTED.findall(extracted)) if c}
            if len(quoted) <= 2 and a2 in quoted:
                ok = float(quoted == {a2} or quoted == changed_pair(prompt))
                return Score(1.0, ok, extracted, strict=ok)
        toks = two_tokens(a1)
        if toks is not None and a2 in toks:
            ok = float(toks == changed_pair(prompt))
            return Score(1.0, ok, extracted, strict=ok)
    return Score(0.0, 0.0, extracted)


def score(example: Mapping[str, Any], completion: str) -> Score:
    return score_diff(completion, label_of(example), example.get("variation"), field(example, "prompt"))


_SEQ_TEXT = re.compile(r"^\s*seq[12]\s*[:：]\s*(.*)$", re.MULTILINE)  # the text of the seq1/seq2 lines


def input_text(rec: Mapping[str, Any]) -> str:
    """The first sequence (what an echo repeats); the whole prompt when it has no seq lines."""
    prompt = field(rec, "prompt")
    seqs = _SEQ_TEXT.findall(prompt)
    return seqs[0] if seqs else prompt


def valid_answers(rec: Mapping[str, Any], pool: Sequence[str]) -> list[str]:
    """The yes-word and every token of the two sequences."""
    toks: list[str] = []
    for line in _SEQ_TEXT.findall(field(rec, "prompt")):
        toks += line.split() if line.isascii() else [c for c in line if not c.isspace()]
    yes = getattr(language(field(rec, "lang")), "yes", "yes")
    return [yes] + sorted(set(toks) - {yes})


def hedges(rec: Mapping[str, Any], options: list[str]) -> dict[str, str]:
    """Two tokens of the first sequence, quoted and bare (the official rule checks only that the changed
    pair is among the quoted tokens)."""
    seqs = _SEQ_TEXT.findall(field(rec, "prompt"))
    toks = seqs[0].split() if seqs and seqs[0].isascii() else list((seqs or [""])[0].replace(" ", ""))
    if len(toks) < 2:
        return {}
    return {"two tokens quoted": f"'{toks[0]}' '{toks[1]}'", "two tokens": f"{toks[0]} {toks[1]}"}


TYPE = register_type(ScoringType("DIFF", score, input_text=input_text, valid_answers=valid_answers, hedges=hedges))
