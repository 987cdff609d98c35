"""MATCH_ANSWER (SORT, VAR, DOT, COMPM combine, RIDL): the label must appear in the answer.

coarse: an empty completion -> 0. Nothing extracted -> 1 only if the raw completion equals the label.
        Else, unless the label is itself a substring of ",。，:：；;、 " (the empty label included), the
        characters ,。，:：；;、 and spaces are deleted from answer and label; both are lower-cased and
        stripped; 1 if the label is a substring of the answer. The substring test is the official rule,
        quirks kept: "ABCD" passes for "ABC", and an empty label passes any extracted answer.
strict: the official verdict for one candidate only: the cleaned answer must equal the cleaned label,
        or equal it once both lose their edge quotes, brackets, stars and full stops (for SORT, compare
        their letters alone: "(CAB)" is "cab"). A list that contains the label ("ABC ACB BAC BCA CAB CBA", every class
        name, every order of the pieces) or extra words around it pass the official rule, not this one.
        Nothing extracted: the raw completion equals the label, as officially (one candidate).
fine:   1 when strict is 1; 0 when only the official verdict passes (a hedge earns nothing). Else
        SORT (task sort_lengths, label an order such as "CAB"): a miss that is another order of the
        same labels gets 0.9 * the share of label pairs it puts in the right relative order (Kendall
        agreement): "CBA" for "CAB" -> 2 of 3 pairs -> 0.6, the reversed order "BAC" -> 0; anything
        else (a truncated "CA", repeated or foreign letters, a list of orders) -> 0. With the gold order
        uniform, every order earns the same expected credit, so no constant order beats a random one.
        Where the label is a string to restore (task variant_normalize: TaskInfo.match_credit "sequence")
        a single candidate of plausible length (at most 1.5 * |label| + 2 characters after cleaning)
        and a near miss (d <= max(1, |label| // 4)) gets 0.9 * (d0 - d) / d0 when d < d0, d = the
        Levenshtein distance from the cleaned answer to the cleaned label, d0 = the distance from the
        label to the closest stretch of the prompt (cleaned, with every non-word character deleted, and
        both again after NFKC folding): the credit is for getting closer to the label than an echo of
        the input could, so an echo (the perturbed text, its NFKC folding) earns 0; originals of
        different rows are seldom within a quarter of their length of each other, so a constant
        collects nothing on the rows it does not match.
        component_split combine, dot_matrix, structure_riddle (orders of the given pieces, class names,
        riddle solutions: a near spelling is not a near answer) and untagged misses stay 0.
        Worked example, label "学生在校园里努力学习。", prompt "...：敩泩茬校圎里怓劦敩習。": d0 = 8 (of 10
        cleaned characters); "学生在校圎里努力学习。" -> d = 1 -> 0.9 * 7/8 = 0.79; the echo -> 0.
"""
from __future__ import annotations

import itertools
import re
import unicodedata
from collections.abc import Mapping, Sequence
from functools import lru_cache
from typing import Any

from common.record import TASKS

from .base import QUOTED, Score, field, label_of, sample_options
from .extract import extract_answer
from .types import ScoringType, register_type

_PUNCT = ",。，:：；;、 "
# which tasks' labels earn which partial credit: the catalogue says (TaskInfo.match_credit)
SEQUENCE_TASKS = frozenset(t for t, info in TASKS.items() if info.match_credit == "sequence")
ORDER_TASKS = frozenset(t for t, info in TASKS.items() if info.match_credit == "order")
_CAP = 0.9
_EDGES = " \t\r\n\"'`*.。!！?？()（）[]【】{}<>「」『』“”‘’"
_NOT_WORD = re.compile(r"[\W_]+")
_NOT_LETTER = re.compile(r"[^a-z]+")
_ECHO_MAX = 1 << 14  # prompts longer than this are cut for the echo distance (bounded work)


def _clean(s: str) -> str:
    for ch in _PUNCT:
        s = s.replace(ch, "")
    return s


def _myers(text: str, pattern: str, search: bool) -> int:
    """Myers' bit-parallel edit distance on Python integers (a handful of big-integer operations per
    character of `text`), `pattern` non-empty. search=False: levenshtein(text, pattern) (the row above
    the first character costs its index). search=True: the least distance of `pattern` to any substring
    of `text`, the empty one included (a match may start anywhere for free)."""
    m = len(pattern)
    peq: dict[str, int] = {}
    for i, ch in enumerate(pattern):
        peq[ch] = peq.get(ch, 0) | (1 << i)
    mask = (1 << m) - 1
    top = 1 << (m - 1)
    carry = 0 if search else 1  # search mode: no carried-in 1, so the row above the first character costs 0
    pv, mv, dist = mask, 0, m
    best = m
    for ch in text:
        eq = peq.get(ch, 0)
        xv = eq | mv
        xh = (((eq & pv) + pv) ^ pv) | eq
        ph = (mv | ~(xh | pv)) & mask
        mh = pv & xh
        if ph & top:
            dist += 1
        elif mh & top:
            dist -= 1
            if search and dist < best:
                best = dist
                if best == 0:
                    return 0
        ph = (ph << 1) | carry
        mh <<= 1
        pv = (mh | ~(xv | ph)) & mask
        mv = ph & xv & mask
    return best if search else dist


def levenshtein(a: str, b: str) -> int:
    """Edit distance (unit costs): Myers' bit-parallel algorithm over the longer string."""
    if len(a) < len(b):
        a, b = b, a
    return len(a) if not b else _myers(a, b, search=False)


def substring_distance(text: str, pattern: str) -> int:
    """min over the substrings s of `text` (the empty one included) of levenshtein(s, pattern): Myers'
    bit-parallel algorithm in search mode."""
    return 0 if not pattern else _myers(text, pattern, search=True)


@lru_cache(maxsize=1024)
def echo_distance(prompt: str, label: str) -> int:
    """How close an echo of the input gets to the (cleaned) label: the smallest edit distance between
    the label and a stretch of the cleaned prompt, or of the prompt with every non-word character
    deleted ("{irrit}, {on}, {ati}" -> "irritonati"). Memoised: GRPO scores a prompt once per
    completion of its group."""
    text = _clean(prompt[:_ECHO_MAX]).lower()
    folded = _clean(unicodedata.normalize("NFKC", prompt[:_ECHO_MAX])).lower()
    return min(substring_distance(t, label) for t in (text, _NOT_WORD.sub("", text), folded, _NOT_WORD.sub("", folded)))


def sequence_credit(cand: str, label: str, prompt: str) -> float:
    """0.9 * (d0 - d) / d0 for one candidate of plausible length (see the module docstring): the share of
    the way from the best echo of the prompt (distance d0) to the label that the answer covers."""
    if not label or len(cand) > 1.5 * len(label) + 2:
        return 0.0
    d0 = echo_distance(prompt, label)
    if d0 == 0:
        return 0.0
    d = levenshtein(cand, label)
    if d >= d0 or d > max(1, len(label) // 4):  # near misses only: two labels are never that close, so a
        return 0.0                              # constant collects no credit from the rows it does not match
    return _CAP * (d0 - d) / d0


def order_agreement(pred: str, label: str) -> float:
    """Share of label pairs that `pred` orders the same way, when `pred` is a permutation of a label of
    distinct symbols; 0 otherwise (a truncated or padded order earns nothing)."""
    if len(label) < 2 or len(set(label)) != len(label) or sorted(pred) != sorted(label):
        return 0.0
    pos = {c: i for i, c in enumerate(pred)}
    n = len(label)
    good = sum(pos[label[i]] < pos[label[j]] for i in range(n) for j in range(i + 1, n))
    return good / (n * (n - 1) // 2)


def candidate(pred: str, order: bool = False) -> str:
    """The one answer a cleaned, lower-cased prediction gives: edge quotes, brackets, stars and full
    stops stripped; for an order (SORT) its letters alone."""
    pred = pred.strip(_EDGES)
    return _NOT_LETTER.sub("", pred) if order else pred


def one_candidate(pred: str, lab: str, order: bool = False) -> bool:
    """Whether a cleaned prediction is the cleaned label and nothing else: equal, or equal once both lose
    their edge quotes, brackets, stars and stops (a label such as "这是什么？" or "!" keeps its own)."""
    if pred == lab:
        return True
    cand = candidate(lab, order)
    return bool(cand) and candidate(pred, order) == cand


def score_match(completion: str, label: str, sequence: bool = False, order: bool = False,
                prompt: str = "") -> Score:
    """Score for one MATCH_ANSWER row (official `match_answer`, plus the strict verdict); `sequence` turns
    on the echo-relative character credit (it reads `prompt`), `order` (SORT) the pairwise-order credit."""
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
    cand = candidate(pred, order)
    if lab in pred:  # the official verdict; strict: for one candidate only (a hedge earns nothing)
        if one_candidate(pred, lab, order):
            return Score(1.0, 1.0, extracted)
        return Score(1.0, 0.0, extracted, strict=0.0)
    if order:
        return Score(0.0, _CAP * order_agreement(cand, lab), extracted)
    if sequence:
        return Score(0.0, sequence_credit(cand, lab, prompt), extracted)
    return Score(0.0, 0.0, extracted)


def score(example: Mapping[str, Any], completion: str) -> Score:
    task = field(example, "task")
    return score_match(completion, label_of(example), task in SEQUENCE_TASKS, task in ORDER_TASKS,
                       field(example, "prompt"))


_CLASS_LINE = re.compile(r"^\s*-\s*([A-Za-z]+)\s*\(", re.MULTILINE)  # a listed class: "- digit (0-9)"
_BRACED = re.compile(r"\{([^{}]*)\}")
COMBINE = "combine"  # the subtask whose question hands over pieces to put together (COMPM combine)


def pieces(prompt: str) -> list[str]:
    """The pieces a COMPM combine prompt gives, in the given order: `{a}, {b}`, `“亻 乍”`, `: ㅅ, ㅛ, ㄱ`."""
    braced = _BRACED.findall(prompt)
    if braced:
        return braced
    m = QUOTED.search(prompt)
    if m:
        return m.group(1).split()
    after = re.split(r"[:：]", prompt)[-1]
    return [p.strip() for p in after.split(",") if p.strip()]


def input_text(rec: Mapping[str, Any]) -> str | None:
    """A combine row's pieces, joined in the given order; None for the others (the question's last line)."""
    return "".join(pieces(field(rec, "prompt"))) if field(rec, "subtask") == COMBINE else None


def valid_answers(rec: Mapping[str, Any], pool: Sequence[str]) -> list[str] | None:
    """SORT: the 6 orders of A, B, C; DOT: the classes the prompt lists; COMPM combine en: every order of the
    pieces; else None (the file's distinct labels)."""
    prompt = field(rec, "prompt")
    if field(rec, "task") in ORDER_TASKS:  # an order of the sentences A, B, C
        return ["".join(p) for p in itertools.permutations("ABC")]
    if _CLASS_LINE.search(prompt):
        return _CLASS_LINE.findall(prompt)
    if field(rec, "subtask") == COMBINE and field(rec, "lang") == "en":
        return sample_options(["".join(p) for p in itertools.permutations(pieces(prompt))], prompt)
    return None


def hedges(rec: Mapping[str, Any], options: list[str]) -> dict[str, str]:
    """A combine row: every permutation of the pieces at once."""
    if field(rec, "subtask") != COMBINE:
        return {}
    perms = ["".join(p) for p in itertools.islice(itertools.permutations(pieces(field(rec, "prompt"))), 720)]
    return {"every permutation of the pieces": " ".join(perms)}


TYPE = register_type(ScoringType("MATCH_ANSWER", score, input_text=input_text, valid_answers=valid_answers,
                                 hedges=hedges))
