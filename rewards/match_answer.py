"""MATCH_ANSWER (SORT, VAR, DOT, COMPM combine, RIDL): the label must appear in the answer.

coarse: an empty completion -> 0. Nothing extracted -> 1 only if the raw completion equals the label.
        Else, unless the label is itself a substring of ",。，:：；;、 " (the empty label included), the
        characters ,。，:：；;、 and spaces are deleted from answer and label; both are lower-cased and
        stripped; 1 if the label is a substring of the answer. The substring test is the official rule,
        quirks kept: "ABCD" passes for "ABC", and an empty label passes any extracted answer.
fine:   1 when coarse is 1. Where the label is a sequence (tasks sort_lengths, variant_normalize and
        component_split, whose MATCH_ANSWER rows are the combine files) a miss gets character-level
        credit 0.9 * (1 - d / max(|a|, |b|)), d = Levenshtein distance between the cleaned label b and
        the cleaned answer a cut to 4 * |b| + 8 characters (the cut bounds the work on huge answers);
        the 0.9 cap keeps every miss below 1. Other tasks (dot_matrix, structure_riddle: a class name
        or a riddle's solution, where a near spelling is not a near answer) and untagged misses stay 0.
        Worked example, label "CAB": "CBA" -> d = 2 -> 0.9 * (1 - 2/3) = 0.3; "CA" -> 0.6; "xyz" -> 0.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .base import Score, field, label_of
from .extract import extract_answer

_PUNCT = ",。，:：；;、 "
SEQUENCE_TASKS = frozenset({"sort_lengths", "variant_normalize", "component_split"})
_CAP = 0.9


def _clean(s: str) -> str:
    for ch in _PUNCT:
        s = s.replace(ch, "")
    return s


def levenshtein(a: str, b: str) -> int:
    """Edit distance (unit costs) by Myers' bit-parallel algorithm on Python integers: one pass over
    the longer string with a handful of big-integer operations per character."""
    if len(a) < len(b):
        a, b = b, a
    m = len(b)
    if m == 0:
        return len(a)
    peq: dict[str, int] = {}
    for i, ch in enumerate(b):
        peq[ch] = peq.get(ch, 0) | (1 << i)
    mask = (1 << m) - 1
    top = 1 << (m - 1)
    pv, mv, dist = mask, 0, m
    for ch in a:
        eq = peq.get(ch, 0)
        xv = eq | mv
        xh = (((eq & pv) + pv) ^ pv) | eq
        ph = (mv | ~(xh | pv)) & mask
        mh = pv & xh
        if ph & top:
            dist += 1
        elif mh & top:
            dist -= 1
        ph = (ph << 1) | 1
        mh <<= 1
        pv = (mh | ~(xv | ph)) & mask
        mv = ph & xv & mask
    return dist


def similarity(pred: str, label: str) -> float:
    """1 - normalised edit distance, with the prediction cut to 4 * |label| + 8 characters."""
    pred = pred[: 4 * len(label) + 8]
    if not pred and not label:
        return 1.0
    return 1.0 - levenshtein(pred, label) / max(len(pred), len(label))


def score_match(completion: str, label: str, sequence: bool = False) -> Score:
    """Score for one MATCH_ANSWER row (official `match_answer`); `sequence` turns on character credit."""
    if not completion:
        return Score(0.0, 0.0, "")
    extracted = extract_answer(completion)
    if extracted == "":
        ok = float(completion == label)
        return Score(ok, ok, extracted)
    pred, lab = extracted, label
    if lab not in _PUNCT:
        pred, lab = _clean(pred), _clean(lab)
    pred, lab = pred.lower().strip(), lab.lower().strip()
    if lab in pred:
        return Score(1.0, 1.0, extracted)
    if sequence:
        return Score(0.0, _CAP * similarity(pred, lab), extracted)
    return Score(0.0, 0.0, extracted)


def score(example: Mapping[str, Any], completion: str) -> Score:
    return score_match(completion, label_of(example), field(example, "task") in SEQUENCE_TASKS)
