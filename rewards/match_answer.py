"""MATCH_ANSWER (SORT, VAR, DOT, COMPM combine, RIDL): the label must appear in the answer.

coarse: an empty completion -> 0. Nothing extracted -> 1 only if the raw completion equals the label.
        Else, unless the label is itself a substring of ",。，:：；;、 " (the empty label included), the
        characters ,。，:：；;、 and spaces are deleted from answer and label; both are lower-cased and
        stripped; 1 if the label is a substring of the answer. The substring test is the official rule,
        quirks kept: "ABCD" passes for "ABC", and an empty label passes any extracted answer.
fine:   1 when coarse is 1. SORT (task sort_lengths, label an order such as "CAB"): a miss that is
        another order of the same labels gets 0.9 * the share of label pairs it puts in the right
        relative order (Kendall agreement): "CBA" for "CAB" -> 2 of 3 pairs -> 0.6, the reversed order
        "BAC" -> 0; anything else (a truncated "CA", repeated or foreign letters) -> 0. (Edit-distance
        credit paid 0.6 for "CA" and 0.3 for "CBA": a 40-step CPU GRPO run learned to answer two
        letters; docs/results.md.)
        Where the label is another sequence (tasks variant_normalize and component_split, whose
        MATCH_ANSWER rows are the combine files) a miss gets character-level
        credit 0.9 * (1 - d / max(|a|, |b|)), d = Levenshtein distance between the cleaned label b and
        the cleaned answer a cut to 4 * |b| + 8 characters (the cut bounds the work on huge answers);
        the 0.9 cap keeps every miss below 1. Other tasks (dot_matrix, structure_riddle: a class name
        or a riddle's solution, where a near spelling is not a near answer) and untagged misses stay 0.
        Worked example, label "irritation": "irritatoin" -> d = 2 -> 0.9 * (1 - 2/10) = 0.72; "xyz" -> 0.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from synth.record import TASKS

from .base import Score, field, label_of
from .extract import extract_answer

_PUNCT = ",。，:：；;、 "
# which tasks' labels earn which partial credit: the catalogue says (TaskInfo.match_credit)
SEQUENCE_TASKS = frozenset(t for t, info in TASKS.items() if info.match_credit == "sequence")
ORDER_TASKS = frozenset(t for t, info in TASKS.items() if info.match_credit == "order")
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


def order_agreement(pred: str, label: str) -> float:
    """Share of label pairs that `pred` orders the same way, when `pred` is a permutation of a label of
    distinct symbols; 0 otherwise (a truncated or padded order earns nothing)."""
    if len(label) < 2 or len(set(label)) != len(label) or sorted(pred) != sorted(label):
        return 0.0
    pos = {c: i for i, c in enumerate(pred)}
    n = len(label)
    good = sum(pos[label[i]] < pos[label[j]] for i in range(n) for j in range(i + 1, n))
    return good / (n * (n - 1) // 2)


def score_match(completion: str, label: str, sequence: bool = False, order: bool = False) -> Score:
    """Score for one MATCH_ANSWER row (official `match_answer`); `sequence` turns on character credit,
    `order` (SORT) the pairwise-order credit instead."""
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
    if order:
        return Score(0.0, _CAP * order_agreement(pred, lab), extracted)
    if sequence:
        return Score(0.0, _CAP * similarity(pred, lab), extracted)
    return Score(0.0, 0.0, extracted)


def score(example: Mapping[str, Any], completion: str) -> Score:
    task = field(example, "task")
    return score_match(completion, label_of(example), task in SEQUENCE_TASKS, task in ORDER_TASKS)
