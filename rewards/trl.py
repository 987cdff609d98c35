"""TRL-compatible reward functions: `f(prompts, completions, **columns) -> list[float]`.

GRPOTrainer passes every dataset column except `prompt` as keyword lists (plus `completion_ids`,
`trainer_state`, ...). The raw question text is read from the `question` column when present, else from
the last user message of the conversational prompt, so the rules that read the question (LENGTH target,
SHUFFLE original) see the row text and not the chat template. Each function has a distinct `__name__`,
which is what TRL logs as `rewards/<name>/mean`.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

RewardFunc = Callable[..., list[float]]


def _question(prompt: Any) -> str:
    if isinstance(prompt, str):
        return prompt
    if isinstance(prompt, (list, tuple)):
        for msg in reversed(prompt):
            if isinstance(msg, dict) and msg.get("role") == "user":
                return str(msg.get("content") or "")
    return ""


def _examples(prompts: Sequence[Any], n: int, columns: dict[str, Any]) -> list[dict[str, Any]]:
    keys = [k for k, v in columns.items() if isinstance(v, (list, tuple)) and len(v) == n]
    rows = []
    for i in range(n):
        row = {k: columns[k][i] for k in keys}
        q = row.get("question")
        row["prompt"] = q if isinstance(q, str) and q else _question(prompts[i] if i < len(prompts) else "")
        rows.append(row)
    return rows


def accuracy_coarse(prompts: Sequence[Any], completions: Sequence[Any], **columns: Any) -> list[float]:
    """Official binary verdict (the benchmark's accuracy) as the reward."""
    from . import score

    rows = _examples(prompts, len(completions), columns)
    return [score(r, c).coarse for r, c in zip(rows, completions)]


def accuracy_fine(prompts: Sequence[Any], completions: Sequence[Any], **columns: Any) -> list[float]:
    """Fine-grained partial credit (1 exactly when the official verdict is 1)."""
    from . import score

    rows = _examples(prompts, len(completions), columns)
    return [score(r, c).fine for r, c in zip(rows, completions)]


def format(prompts: Sequence[Any], completions: Sequence[Any], **columns: Any) -> list[float]:  # noqa: A001
    """Answer-tag format reward (see rewards.format)."""
    from .extract import completion_text
    from .format import format_score

    return [format_score(completion_text(c)) for c in completions]


def length_penalty(prompts: Sequence[Any], completions: Sequence[Any], **columns: Any) -> list[float]:
    """Soft overlong penalty in [-1, 0] on completion characters."""
    from .extract import completion_text
    from .format import length_penalty as lp

    return [lp(completion_text(c)) for c in completions]


REWARD_FUNCS: dict[str, RewardFunc] = {
    "accuracy_coarse": accuracy_coarse,
    "accuracy_fine": accuracy_fine,
    "format": format,
    "length_penalty": length_penalty,
}


def get_reward_funcs(names: Sequence[str]) -> list[RewardFunc]:
    """Reward functions by name (open-r1 style registry); unknown names raise one clear ValueError."""
    unknown = [n for n in names if n not in REWARD_FUNCS]
    if unknown:
        raise ValueError(f"unknown reward function(s) {', '.join(unknown)}; choose from: {', '.join(REWARD_FUNCS)}")
    return [REWARD_FUNCS[n] for n in names]
