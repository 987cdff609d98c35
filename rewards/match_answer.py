"""MATCH_ANSWER (SORT, VAR, DOT, COMPM combine, RIDL) and EXACT (beyond-TASE tasks).

MATCH_ANSWER coarse: empty completion -> 0; extracted answer empty -> 1 only if the raw completion
        equals the label; else, unless the label is itself a substring of ",。，:：；;、 ", the characters
        ,。，:：；;、 and spaces are deleted from both; both lower-cased and stripped; 1 if the label is a
        substring of the answer (so "CABX" passes for "CAB", and an empty label passes anything).
EXACT coarse: the extracted answer equals the label after lower-casing and collapsing whitespace.
fine:   1 when coarse is 1. Where the label is a sequence (sort_lengths, variant_normalize,
        component_split combine, execute) the rest gets 0.9 * (1 - d / max(|a|, |b|)), d the Levenshtein
        distance between the cleaned label and the cleaned answer cut to 4 x |label| + 8 characters
        (label "CAB", answer "CBA": d = 2 -> 0.3); other MATCH_ANSWER tasks stay binary.
"""
from __future__ import annotations

from .extract import extract_answer

_PUNCT = ",。，:：；;、 "
SEQUENCE_TASKS = frozenset({"sort_lengths", "variant_normalize", "component_split", "execute"})


def _clean(s: str) -> str:
    for ch in _PUNCT:
        s = s.replace(ch, "")
    return s.lower().strip()


def levenshtein(a: str, b: str) -> int:
    """Edit distance, O(len(a) * len(b)) with two rows; callers bound the lengths."""
    if len(a) < len(b):
        a, b = b, a
    prev = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        cur = [i]
        for j, cb in enumerate(b, 1):
            cur.append(min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (ca != cb)))
        prev = cur
    return prev[-1]


def similarity(pred: str, label: str) -> float:
    pred = pred[: 4 * len(label) + 8]
    if not pred and not label:
        return 1.0
    return 1.0 - levenshtein(pred, label) / max(len(pred), len(label))


def score_match(prompt: str, completion: str, label: str, task: str = "") -> tuple[float, float, str]:
    """(coarse, fine, extracted) for a MATCH_ANSWER row."""
    if not completion:
        return 0.0, 0.0, ""
    extracted = extract_answer(completion)
    if extracted == "":
        ok = completion == label
        return float(ok), float(ok), extracted
    pred, lab = extracted, label
    if lab not in _PUNCT:
        pred, lab = _clean(pred), _clean(lab)
    else:
        pred, lab = pred.lower().strip(), lab.lower().strip()
    if lab in pred:
        return 1.0, 1.0, extracted
    if task in SEQUENCE_TASKS:
        return 0.0, 0.9 * similarity(pred, lab), extracted
    return 0.0, 0.0, extracted


def _norm(s: str) -> str:
    return " ".join(s.lower().split())


def score_exact(prompt: str, completion: str, label: str) -> tuple[float, float, str]:
    """(coarse, fine, extracted) for an EXACT row."""
    extracted = extract_answer(completion)
    pred, lab = _norm(extracted), _norm(label)
    if pred == lab:
        return 1.0, 1.0, extracted
    return 0.0, 0.9 * similarity(pred, lab), extracted
