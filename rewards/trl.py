"""TRL-compatible reward functions: `f(prompts, completions, **columns) -> list[float]`.

GRPOTrainer calls every reward function with the chat prompts, the completions (strings, or lists of
{"role", "content"} messages for conversational data) and every dataset column except `prompt` as
keyword lists (plus extras such as `completion_ids` and `trainer_state`). Each row is routed by its
`type` column. The rules that read the question (LENGTH target, SHUFFLE original) must see the raw
row text, not the chat prompt, so the question is taken from, in order: a `question` column (what
`recipes/` writes, since TRL withholds the `prompt` column), a `prompt` column of strings (callers
outside TRL), the last user message of the chat prompt, or the prompt itself when it is a string.
`accuracy_coarse` is the official verdict (the benchmark's, loopholes included); the training rewards
`accuracy_strict` and `accuracy_fine` pay nothing for a hedge or an echo (docs/rewards.md, "Loopholes"). Each
carries the level it pays as `.level` (rewards/levels.py declares the levels and their reward names).
Each function keeps a distinct `__name__`, which TRL logs as `rewards/<name>/mean`.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

from common.errors import TaseError, bounded
from common.types import ANSWER, PROMPT, type_info

from .base import Score
from .extract import completion_text
from .format import format_score, length_penalty as _length_penalty
from .levels import COARSE, FINE, STRICT, accuracy_reward_name
from .router import SCORERS, score

RewardFunc = Callable[..., list[float]]


def _question(prompt: Any) -> str:
    if isinstance(prompt, str):
        return prompt
    if isinstance(prompt, (list, tuple)):
        for msg in reversed(prompt):
            if isinstance(msg, dict) and msg.get("role") == "user":
                return completion_text(msg)
    return ""


class RewardInputError(TaseError, ValueError):
    """A batch the rewards cannot score as given: a missing or short column, prompts that do not match the
    completions, or a completion of the wrong shape would otherwise score 0 (a wrong answer) without a
    word, and a GRPO run would train on those zeros. The first such batch stops the run, in one line."""


# The one name of a record's question text in a training row. TRL owns the dataset's `prompt` column (the chat
# messages it generates from) and withholds it from reward functions, so the record's `prompt` travels under
# this name: `reward_columns` writes it (recipes/shared/data.py builds rows with it) and `_rows` reads it back.
QUESTION = "question"
# the columns the scorers read; `type` is checked on its own
_READ = ("answer", QUESTION, "prompt", "variation")


def reward_columns(record: dict[str, Any]) -> dict[str, Any]:
    """The dataset columns a training row needs for these rewards, from a record (CONTRACT's layout): its
    scorer type, gold answer and DIFF variation, and its `prompt` text under QUESTION."""
    return {"type": record["type"], QUESTION: record["prompt"], "answer": record.get("answer", ""),
            "variation": record.get("variation", "")}


def _needs(typ: Any, name: str) -> bool:
    """Whether a row of type `typ` is scored against its record field `name` (`answer`, or the question,
    `prompt`): the type's catalogue row says (common.types.TypeInfo.needs)."""
    info = type_info(typ)
    return info is not None and name in info.needs


def _kind(v: Any) -> str:
    return f"{len(v)} values" if isinstance(v, (list, tuple)) else f"a {type(v).__name__}"


def _check_completions(name: str, completions: Any) -> int:
    """The batch size; each completion must be a string or chat messages (a list of message dicts, or one
    dict). Anything else (None, a number, a list of strings: one list too deep) raises RewardInputError,
    since `completion_text` would read it as "" or as its repr and the reward would be a silent 0."""
    if not isinstance(completions, (list, tuple)):
        raise RewardInputError(f"{name} reward: completions must be a list (one per row), got "
                               f"a {type(completions).__name__}")
    for i, c in enumerate(completions):
        if isinstance(c, (str, dict)):
            continue
        if isinstance(c, (list, tuple)) and all(isinstance(m, dict) for m in c):
            parts = [p for m in c if isinstance(m.get("content"), (list, tuple)) for p in m["content"]]
            bad = next((p for p in parts if not isinstance(p, dict)), None)
            if bad is not None:  # content parts are {"type": "text", "text": ...}; a bare value would read as ""
                raise RewardInputError(f"{name} reward: completion {i} has a message whose content holds a "
                                       f"{type(bad).__name__} ({bounded(bad)}); content is a string or a list of "
                                       f"content parts")
            continue
        what = (f"a list holding a {type(next(m for m in c if not isinstance(m, dict))).__name__} (one list too "
                f"deep?)" if isinstance(c, (list, tuple)) else f"a {type(c).__name__}")
        raise RewardInputError(f"{name} reward: completion {i} is {what}; expected a string or a list of chat "
                               f"messages")
    return len(completions)


def _check_types(n: int, columns: dict[str, Any]) -> None:
    types = columns.get("type")
    if types is None:
        raise RewardInputError(f"accuracy reward: the batch of {n} completions has no `type` column (columns: "
                               f"{', '.join(sorted(columns)) or 'none'}); each row needs its scorer type")
    if not isinstance(types, (list, tuple)) or len(types) != n:
        raise RewardInputError(f"accuracy reward: the `type` column has {_kind(types)} for {n} completions")
    for i, t in enumerate(types):
        if t not in SCORERS:
            raise RewardInputError(f"accuracy reward: row {i} of the batch has unknown type {bounded(t)}; expected one "
                                   f"of {', '.join(SCORERS)}")


def _check_columns(prompts: Any, n: int, columns: dict[str, Any]) -> None:
    """Every column a scorer reads is a list as long as the batch; `answer` is there when a row's type reads
    it; `prompts`, when given, match the completions one to one."""
    for k in _READ:
        v = columns.get(k)
        if v is not None and (not isinstance(v, (list, tuple)) or len(v) != n):
            raise RewardInputError(f"accuracy reward: the `{k}` column has {_kind(v)} for {n} completions")
    if "answer" not in columns or columns["answer"] is None:
        need = [i for i, t in enumerate(columns["type"]) if _needs(t, ANSWER)]
        if need:
            raise RewardInputError(f"accuracy reward: the batch has no `answer` column, and row {need[0]} "
                                   f"({columns['type'][need[0]]}) is scored against its gold answer")
    if prompts is not None and (not isinstance(prompts, (list, tuple)) or len(prompts) != n):
        raise RewardInputError(f"accuracy reward: prompts has {_kind(prompts)} for {n} completions")


def _is_answer(a: Any) -> bool:
    """A gold answer a scorer can compare with: a string (the official CSVs' text), or a finite number that a
    loader parsed from one; not None, NaN (a pandas/datasets empty cell), a bool or a container."""
    if isinstance(a, bool) or not isinstance(a, (str, int, float)):
        return False
    return not isinstance(a, float) or math.isfinite(a)


def _rows(prompts: Sequence[Any] | None, n: int, columns: dict[str, Any]) -> list[dict[str, Any]]:
    """One record per completion from the keyword columns; `type` must be there, full length and known, the
    columns the scorers read full length, and the question of every LENGTH/SHUFFLE row findable
    (RewardInputError otherwise: a reward of 0.0 always means a wrong answer)."""
    _check_types(n, columns)
    _check_columns(prompts, n, columns)
    cols = {k: v for k, v in columns.items() if isinstance(v, (list, tuple)) and len(v) == n}
    prompts = prompts if isinstance(prompts, (list, tuple)) else []
    rows = []
    for i in range(n):
        row = {k: v[i] for k, v in cols.items()}
        q = row.get(QUESTION)
        if not (isinstance(q, str) and q):
            q = row.get("prompt")
            if not isinstance(q, str):
                q = _question(prompts[i]) if i < len(prompts) else ""
        if not q and _needs(row["type"], PROMPT):
            raise RewardInputError(f"accuracy reward: row {i} ({row['type']}) has no question text (no `question` "
                                   f"column, and its prompt is {'missing' if i >= len(prompts) else 'empty'}); "
                                   f"its scorer reads the question")
        row["prompt"] = q
        if _needs(row["type"], ANSWER) and not _is_answer(row.get("answer")):
            raise RewardInputError(f"accuracy reward: row {i} ({row['type']}) has answer {bounded(row.get('answer'))}; "
                                   f"its scorer compares with the gold answer, a string (a missing or NaN answer "
                                   f"would score every completion 0)")
        rows.append(row)
    return rows


def _pays(level: str) -> Callable[[RewardFunc], RewardFunc]:
    """Marks an accuracy reward with the level it pays (`func.level`, what a run's resolved level is read from,
    recipes/grpo_core/reward_funcs.py); its name must be the one rewards.levels gives that level."""
    def mark(func: RewardFunc) -> RewardFunc:
        if func.__name__ != accuracy_reward_name(level):
            raise TypeError(f"{func.__name__} pays {level}: name it {accuracy_reward_name(level)}")
        func.level = level  # type: ignore[attr-defined]
        return func
    return mark


@_pays(COARSE)
def accuracy_coarse(prompts: Sequence[Any], completions: Sequence[Any], **columns: Any) -> list[float]:
    """Official binary verdict (the benchmark's accuracy) as the reward; invalid rows give 0."""
    rows = _rows(prompts, _check_completions(accuracy_coarse.__name__, completions), columns)
    return [score(r, c).coarse for r, c in zip(rows, completions, strict=False)]


@_pays(STRICT)
def accuracy_strict(prompts: Sequence[Any], completions: Sequence[Any], **columns: Any) -> list[float]:
    """Strict binary verdict: the official one without its loopholes (hedges, echoes earn 0); invalid rows 0."""
    rows = _rows(prompts, _check_completions(accuracy_strict.__name__, completions), columns)
    return [score(r, c).strict for r, c in zip(rows, completions, strict=False)]


@_pays(FINE)
def accuracy_fine(prompts: Sequence[Any], completions: Sequence[Any], **columns: Any) -> list[float]:
    """Partial credit in [0, 1] built on the strict verdict: 1 exactly when it is 1, and no credit an
    answer-independent strategy (a constant, an echo, a list of every option) could collect."""
    rows = _rows(prompts, _check_completions(accuracy_fine.__name__, completions), columns)
    return [score(r, c).fine for r, c in zip(rows, completions, strict=False)]


def batch_scores(prompts: Sequence[Any] | None, completions: Sequence[Any], **columns: Any) -> list[Score]:
    """Every verdict of a batch at once (coarse, strict, fine and the extracted answer), from the same columns
    and with the same checks as the accuracy rewards: what a training run logs beside the reward it trains on
    (recipes/features/tracking/metrics.py), so that loophole passes show while it trains. RewardInputError as theirs."""
    rows = _rows(prompts, _check_completions("accuracy", completions), columns)
    return [score(r, c) for r, c in zip(rows, completions, strict=False)]


def format_reward(prompts: Sequence[Any], completions: Sequence[Any], **columns: Any) -> list[float]:
    """Answer-tag format reward in {0, 0.25, 0.5, 1} (see rewards.format)."""
    _check_completions("format", completions)
    return [format_score(completion_text(c)) for c in completions]


# TRL logs a reward as rewards/<__name__>/mean: keep the registry name without shadowing the builtin here
# __qualname__ stays: pickle finds the function by it (async GRPO ships rewards to a child)
format_reward.__name__ = "format"


def length_penalty(prompts: Sequence[Any], completions: Sequence[Any], **columns: Any) -> list[float]:
    """Soft overlong penalty in [-1, 0] on completion characters (0 up to 1,500, -1 from 2,000)."""
    _check_completions("length_penalty", completions)
    return [_length_penalty(completion_text(c)) for c in completions]


def make_length_penalty(soft: int = 1500, hard: int = 2000) -> RewardFunc:
    """A `length_penalty` reward with other limits (same `__name__`, so TRL logs it the same way)."""
    if not 0 <= soft <= hard:
        raise ValueError(f"length penalty needs 0 <= soft <= hard, got soft={soft}, hard={hard}")

    def length_penalty(prompts: Sequence[Any], completions: Sequence[Any], **columns: Any) -> list[float]:
        _check_completions("length_penalty", completions)
        return [_length_penalty(completion_text(c), soft, hard) for c in completions]

    length_penalty.__doc__ = f"Soft overlong penalty in [-1, 0]: 0 up to {soft} characters, -1 from {hard}."
    return length_penalty


# by name (each function's __name__: an accuracy reward's is rewards.levels.accuracy_reward_name of its level)
REWARD_FUNCS: dict[str, RewardFunc] = {f.__name__: f for f in (
    accuracy_coarse, accuracy_strict, accuracy_fine, format_reward, length_penalty)}


def get_reward_funcs(names: Sequence[str] | str, *, max_completion_length: int = 256,
                     overlong_cache: int | None = None, other: Callable[[str], Any] | None = None
                     ) -> list[RewardFunc]:
    """The one reward loader (open-r1 style registry): ours by name, in order (REWARD_FUNCS, and `soft_overlong`
    built for the run's max_completion_length: rewards/overlong.py). A name that is not ours goes to `other`
    (recipes/grpo_core/reward_funcs.py passes its loader of a user's function by import path, checked); without it,
    unknown names, or none at all (a trainer with no reward learns nothing), raise one clear ValueError."""
    from .overlong import SOFT_OVERLONG, soft_overlong

    if isinstance(names, str):
        names = [n.strip() for n in names.split(",") if n.strip()]
    ours = [*REWARD_FUNCS, SOFT_OVERLONG]
    if not names:
        raise ValueError(f"no reward functions given; choose from: {', '.join(ours)}")
    unknown = [n for n in names if n not in ours]
    if unknown and other is None:
        raise ValueError(f"unknown reward function(s) {', '.join(map(str, unknown))}; "
                         f"choose from: {', '.join(ours)}")
    return [soft_overlong(max_completion_length, overlong_cache) if n == SOFT_OVERLONG else
            REWARD_FUNCS[n] if n in REWARD_FUNCS else other(str(n)) for n in names]  # type: ignore[misc]
