"""Answer-independent strategies and valid-answer sets: what the training rewards are checked against.

Why: the official verdict pays some answers that do not answer the question (a list of every option, the
unsplit word, ...). The training rewards (`accuracy_strict`, `accuracy_fine`) must pay such a strategy
no more than a uniform random guess among the row's valid answers. This module builds both sides from a
record's prompt (never from its label) so that `bench/loophole_audit.py` (the measured pass rates in
docs/rewards.md) and the property tests check the same strategies.

- `valid_answers(rec, pool)`: the answers a random guess picks from (SORT: the 6 orders; DOT: the listed
  classes; NUMBER: 0..max of `pool`; SPLIT en: every split of the word into the asked number of pieces;
  DIFF: the yes-word and every token of the two sequences; COMPM combine en: every order of the pieces;
  LENGTH: texts of 1..M units, M the largest target in `pool` (the target is the label here: `relabel`
  moves it); SHUFFLE: reorderings of the input). Where the prompt does not enumerate them, `pool` (the
  distinct labels of the row's file, one per answer the official cleaning tells apart) stands in.
- `relabel(rec, answer)`: the row with `answer` as its label (LENGTH: the prompt asking for that many
  units), for the bound with the label drawn uniformly from the valid answers.
- `strategies(rec, pool)`: name -> answer text, each computed without the label: the echo of the prompt,
  the echo of its input, every option listed at once, and per type the known hedges (the unsplit word,
  every permutation of the pieces, a fixed-length text).
"""
from __future__ import annotations

import itertools
import random
import re
from collections.abc import Mapping, Sequence
from typing import Any

from .base import field
from .match_answer import ORDER_TASKS
from .shuffle import input_line, tokens

YES = {"en": "yes", "zh": "是", "ko": "예"}
_INT = re.compile(r"\d+")
_CLASS_LINE = re.compile(r"^\s*-\s*([A-Za-z]+)\s*\(", re.MULTILINE)
_SEQ = re.compile(r"^\s*seq[12]\s*[:：]\s*(.*)$", re.MULTILINE)
_BRACED = re.compile(r"\{([^{}]*)\}")
_QUOTED = re.compile(r"[“\"'‘]([^”\"'’]+)[”\"'’]")
_MAX_OPTIONS = 64


def _sample(opts: list[str], seed: str) -> list[str]:
    """At most _MAX_OPTIONS of `opts`, a deterministic sample per row (the seed is the prompt)."""
    if len(opts) <= _MAX_OPTIONS:
        return opts
    return random.Random(seed).sample(opts, _MAX_OPTIONS)


def split_word(prompt: str) -> str:
    """The word or character a SPLIT prompt asks to decompose: `Split WORD into`, `“字”`, `'쇽'`."""
    m = re.search(r"Split\s+(\S+)\s+into", prompt) or _QUOTED.search(prompt)
    return m.group(1) if m else ""


def pieces(prompt: str) -> list[str]:
    """The pieces a COMPM combine prompt gives, in the given order: `{a}, {b}`, `“亻 乍”`, `: ㅅ, ㅛ, ㄱ`."""
    braced = _BRACED.findall(prompt)
    if braced:
        return braced
    m = _QUOTED.search(prompt)
    if m:
        return m.group(1).split()
    after = re.split(r"[:：]", prompt)[-1]
    return [p.strip() for p in after.split(",") if p.strip()]


def input_text(rec: Mapping[str, Any]) -> str:
    """The input a question hands over (what an echo strategy repeats)."""
    prompt, typ, sub = field(rec, "prompt"), field(rec, "type"), field(rec, "subtask")
    if typ == "SPLIT":
        return split_word(prompt)
    if sub == "combine":
        return "".join(pieces(prompt))
    if typ == "DIFF":
        seqs = _SEQ.findall(prompt)
        return seqs[0] if seqs else prompt
    lines = [ln for ln in prompt.strip().splitlines() if ln.strip()]
    last = lines[-1] if lines else ""
    parts = re.split(r"[:：]", last, maxsplit=1)
    return (parts[1] if len(parts) == 2 else last).strip().strip("'‘’\"")


def units(text: str) -> int:
    """How many units a LENGTH answer has, by the official count."""
    from .length import count_units

    return count_units(text)


def relabel(rec: Mapping[str, Any], answer: str) -> dict[str, Any]:
    """The row with `answer` as its label; for LENGTH (no stored label) the prompt's target becomes the
    number of units of `answer`."""
    if field(rec, "type") == "LENGTH":
        return dict(rec, prompt=_INT.sub(str(units(answer)), field(rec, "prompt"), count=1))
    return dict(rec, answer=answer)


def _pool_ints(pool: Sequence[str]) -> int:
    vals = [int(m.group()) for p in pool if (m := _INT.search(p)) and len(m.group()) < 7]
    return max(vals, default=10)


def valid_answers(rec: Mapping[str, Any], pool: Sequence[str] = ()) -> list[str]:
    """The answers a uniform random guess picks from, built from the prompt (and `pool`), not the label."""
    prompt, typ, task, sub = field(rec, "prompt"), field(rec, "type"), field(rec, "task"), field(rec, "subtask")
    if typ == "NUMBER":
        return [str(i) for i in range(_pool_ints(pool) + 1)]
    if typ == "LENGTH":
        unit = {"zh": "字", "ko": "가"}.get(field(rec, "lang"))
        top = _pool_ints(pool)
        return _sample([unit * k if unit else " ".join(["word"] * k) for k in range(1, top + 1)], str(top))
    if typ == "SHUFFLE":
        line = input_line(prompt) or ""
        toks = tokens(line)
        sep = " " if line.isascii() else ""
        rng = random.Random(prompt)
        return [sep.join(rng.sample(toks, len(toks))) for _ in range(16)]
    if typ == "DIFF":
        toks: list[str] = []
        for line in _SEQ.findall(prompt):
            toks += line.split() if line.isascii() else [c for c in line if not c.isspace()]
        yes = YES.get(field(rec, "lang"), "yes")
        return [yes] + sorted(set(toks) - {yes})
    if typ == "SPLIT" and field(rec, "lang") == "en":
        word, k = split_word(prompt), max(1, prompt.count("from "))
        cuts = itertools.combinations(range(1, len(word)), k - 1)
        return _sample([", ".join(word[i:j] for i, j in zip((0, *c), (*c, len(word)))) for c in cuts], prompt)
    if task in ORDER_TASKS:  # an order of the sentences A, B, C
        return ["".join(p) for p in itertools.permutations("ABC")]
    if typ == "MATCH_ANSWER" and _CLASS_LINE.search(prompt):  # the prompt lists the classes ("- digit (0-9)")
        return _CLASS_LINE.findall(prompt)
    if sub == "combine" and field(rec, "lang") == "en":
        return _sample(["".join(p) for p in itertools.permutations(pieces(prompt))], prompt)
    distinct: dict[str, str] = {}
    for p in sorted(pool):  # labels the official cleaning cannot tell apart ("Γ", "γ") are one answer
        distinct.setdefault(re.sub(r"[,。，:：；;、 ]", "", p).lower().strip(), p)
    return list(distinct.values()) or [""]


def strategies(rec: Mapping[str, Any], pool: Sequence[str] = ()) -> dict[str, str]:
    """Answer-independent strategies for a row: name -> answer text (to be put in answer tags)."""
    prompt, typ, sub = field(rec, "prompt"), field(rec, "type"), field(rec, "subtask")
    opts = valid_answers(rec, pool)
    out = {"echo prompt": prompt, "echo input": input_text(rec), "every option": " ".join(opts)}
    if typ == "SPLIT":
        word = split_word(prompt)
        out["unsplit word"] = word
        out["word, then every option"] = word + " " + " ".join(opts)
    if sub == "combine":
        ps = pieces(prompt)
        perms = ["".join(p) for p in itertools.islice(itertools.permutations(ps), 720)]
        out["every permutation of the pieces"] = " ".join(perms)
    if typ == "DIFF":
        seqs = _SEQ.findall(prompt)
        toks = seqs[0].split() if seqs and seqs[0].isascii() else list((seqs or [""])[0].replace(" ", ""))
        if len(toks) >= 2:
            out["two tokens quoted"] = f"'{toks[0]}' '{toks[1]}'"
            out["two tokens"] = f"{toks[0]} {toks[1]}"
    if typ == "LENGTH":
        unit = {"zh": "字", "ko": "가"}.get(field(rec, "lang"))
        out["fixed 100 units"] = unit * 100 if unit else " ".join(["word"] * 100)
    return out
