"""Shaping rewards that give a gradient before the model answers correctly.

format: 1.0 for exactly one `<answer>...</answer>` pair with non-empty content; 0.5 when answer tags
        are present but repeated, empty or unclosed; 0.25 when only a `**bold**` answer is there (the
        official fallback); 0 otherwise. A model that never emits tags still sees 0 vs 0.25 vs 1.
length_penalty: 0 up to `soft` characters, then linearly down to -1 at `hard` characters (DAPO-style
        soft overlong punishment, on characters so that it needs no tokenizer).
"""
from __future__ import annotations

from .extract import extract_answer


def format_score(completion: str) -> float:
    n_open, n_close = completion.count("<answer>"), completion.count("</answer>")
    if n_open == 1 and n_close == 1:
        start, end = completion.find("<answer>"), completion.find("</answer>")
        if start < end and completion[start + 8 : end].strip():
            return 1.0
        return 0.5
    if n_open or n_close:
        return 0.5
    return 0.25 if extract_answer(completion) else 0.0


def length_penalty(completion: str, soft: int = 1500, hard: int = 2000) -> float:
    n = len(completion)
    if n <= soft:
        return 0.0
    if n >= hard:
        return -1.0
    return -(n - soft) / (hard - soft)
