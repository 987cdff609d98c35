"""Shaping rewards that give a gradient before the model answers correctly.

format:         1.0 for exactly one `<answer>` and one `</answer>`, in that order, with non-empty
                content; 0.5 when answer tags are there but repeated, empty, unclosed or reversed;
                0.25 when there are no tags but the official `**bold**` fallback finds an answer;
                0 otherwise. A model that never emits tags still sees 0 < 0.25 < 0.5 < 1.
                Worked example: "<answer>7</answer>" -> 1; "<answer>7" -> 0.5; "it is **7**" -> 0.25.
length_penalty: 0 up to `soft` characters, then linearly down to -1 at `hard` characters (the soft
                overlong punishment of DAPO, on characters so that it needs no tokenizer).
                Worked example, soft 1500, hard 2000: 1,750 characters -> -0.5.
"""
from __future__ import annotations

from .extract import CLOSE, OPEN, extract_answer


def format_score(completion: str) -> float:
    n_open, n_close = completion.count(OPEN), completion.count(CLOSE)
    if n_open == 1 and n_close == 1:
        start, end = completion.find(OPEN), completion.find(CLOSE)
        if start < end and completion[start + len(OPEN) : end].strip():
            return 1.0
        return 0.5
    if n_open or n_close:
        return 0.5
    return 0.25 if extract_answer(completion) else 0.0


def length_penalty(completion: str, soft: int = 1500, hard: int = 2000) -> float:
    n = len(completion)
    if n <= soft:
        return 0.0
    if n >= hard or hard <= soft:
        return -1.0
    return -(n - soft) / (hard - soft)
