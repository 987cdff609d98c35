"""TRL-compatible reward functions: `f(prompts, completions, **columns) -> list[float]`.

GRPOTrainer calls every reward function with the chat prompts, the completions (strings, or lists of
{"role", "content"} messages for conversational data) and every dataset column except `prompt` as
keyword lists (plus extras such as `completion_ids` and `trainer_state`). Each row is routed by its
`type` column. The rules that read the question (LENGTH target, SHUFFLE original) must see the raw
row text, not the chat prompt, so the question is taken from, in order: a `question` column (what
`recipes/` writes, since TRL withholds the `prompt` column), a `prompt` column of strings (callers
outside TRL), the last user message of the chat prompt, or the prompt itself when it is a string.
`accuracy_coarse` is the official verdict (the benchmark's, loopholes included); the training rewards
`accuracy_strict` and `accuracy_fine` pay nothing for a hedge or an echo (docs/rewards.md, "Loopholes").
Each function keeps a distinct `__name__`, which TRL logs as `rewards/<name>/mean`.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from .extract import completion_text
from .format import format_score
from .format import length_penalty as _length_penalty
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


class RewardInputError(ValueError):
    """A batch the accuracy rewards cannot route: without a usable `type` column every reward would be
    0 and a GRPO run would train on zeros without a word, so the first such batch stops the run."""


def _check_types(n: int, columns: dict[str, Any]) -> None:
    types = columns.get("type")
    if types is None:
        raise RewardInputError(f"accuracy reward: the batch of {n} completions has no `type` column (columns: "
                               f"{', '.join(sorted(columns)) or 'none'}); each row needs its scorer type")
    if not isinstance(types, (list, tuple)) or len(types) != n:
        got = f"{len(types)} values" if isinstance(types, (list, tuple)) else f"a {type(types).__name__}"
        raise RewardInputError(f"accuracy reward: the `type` column has {got} for {n} completions")
    for i, t in enumerate(types):
        if t not in SCORERS:
            raise RewardInputError(f"accuracy reward: row {i} of the batch has unknown type {t!r}; expected one "
                                   f"of {', '.join(SCORERS)}")


def _rows(prompts: Sequence[Any] | None, n: int, columns: dict[str, Any]) -> list[dict[str, Any]]:
    """One record per completion from the keyword columns (only lists as long as the batch); the
    `type` column must be there, full length and known (RewardInputError otherwise)."""
    _check_types(n, columns)
    cols = {k: v for k, v in columns.items() if isinstance(v, (list, tuple)) and len(v) == n}
    prompts = prompts if isinstance(prompts, (list, tuple)) else []
    rows = []
    for i in range(n):
        row = {k: v[i] for k, v in cols.items()}
        q = row.get("question")
        if not (isinstance(q, str) and q):
            q = row.get("prompt")
            if not isinstance(q, str):
                q = _question(prompts[i]) if i < len(prompts) else ""
        row["prompt"] = q
        rows.append(row)
    return rows


def accuracy_coarse(prompts: Sequence[Any], completions: Sequence[Any], **columns: Any) -> list[float]:
    """Official binary verdict (the benchmark's accuracy) as the reward; invalid rows give 0."""
    rows = _rows(prompts, len(completions), columns)
    return [score(r, c).coarse for r, c in zip(rows, completions)]


def accuracy_strict(prompts: Sequence[Any], completions: Sequence[Any], **columns: Any) -> list[float]:
    """Strict binary verdict: the official one without its loopholes (hedges, echoes earn 0); invalid rows 0."""
    rows = _rows(prompts, len(completions), columns)
    return [score(r, c).strict for r, c in zip(rows, completions)]


def accuracy_fine(prompts: Sequence[Any], completions: Sequence[Any], **columns: Any) -> list[float]:
    """Partial credit in [0, 1] built on the strict verdict: 1 exactly when it is 1, and no credit an
    answer-independent strategy (a constant, an echo, a list of every option) could collect."""
    rows = _rows(prompts, len(completions), columns)
    return [score(r, c).fine for r, c in zip(rows, completions)]


def format_reward(prompts: Sequence[Any], completions: Sequence[Any], **columns: Any) -> list[float]:
    """Answer-tag format reward in {0, 0.25, 0.5, 1} (see rewards.format)."""
    return [format_score(completion_text(c)) for c in completions]


# TRL logs a reward as rewards/<__name__>/mean: keep the registry name without shadowing the builtin here
format_reward.__name__ = "format"  # __qualname__ stays: pickle finds the function by it (async GRPO ships rewards to a child)


def length_penalty(prompts: Sequence[Any], completions: Sequence[Any], **columns: Any) -> list[float]:
    """Soft overlong penalty in [-1, 0] on completion characters (0 up to 1,500, -1 from 2,000)."""
    return [_length_penalty(completion_text(c)) for c in completions]


def make_length_penalty(soft: int = 1500, hard: int = 2000) -> RewardFunc:
    """A `length_penalty` reward with other limits (same `__name__`, so TRL logs it the same way)."""
    if not 0 <= soft <= hard:
        raise ValueError(f"length penalty needs 0 <= soft <= hard, got soft={soft}, hard={hard}")

    def length_penalty(prompts: Sequence[Any], completions: Sequence[Any], **columns: Any) -> list[float]:
        return [_length_penalty(completion_text(c), soft, hard) for c in completions]

    length_penalty.__doc__ = f"Soft overlong penalty in [-1, 0]: 0 up to {soft} characters, -1 from {hard}."
    return length_penalty


REWARD_FUNCS: dict[str, RewardFunc] = {
    "accuracy_coarse": accuracy_coarse,
    "accuracy_strict": accuracy_strict,
    "accuracy_fine": accuracy_fine,
    "format": format_reward,
    "length_penalty": length_penalty,
}


def get_reward_funcs(names: Sequence[str] | str) -> list[RewardFunc]:
    """Reward functions by name (open-r1 style registry); unknown names, or none at all (a trainer with
    no reward learns nothing), raise one clear ValueError."""
    if isinstance(names, str):
        names = [n.strip() for n in names.split(",") if n.strip()]
    if not names:
        raise ValueError(f"no reward functions given; choose from: {', '.join(REWARD_FUNCS)}")
    unknown = [n for n in names if n not in REWARD_FUNCS]
    if unknown:
        raise ValueError(f"unknown reward function(s) {', '.join(map(str, unknown))}; "
                         f"choose from: {', '.join(REWARD_FUNCS)}")
    return [REWARD_FUNCS[n] for n in names]
