"""SPLIT (COMPM split).

coarse: spaces are removed from the extracted answer; the label lists alternatives separated by `;`,
        each a `,`-separated list of parts (stripped); 1 if every part of some alternative is a
        substring of the answer.
fine:   best over alternatives of (parts found / parts) (label "亻,列;人,列", answer "亻,歹" -> 0.5).
"""
from __future__ import annotations

from .extract import extract_answer


def score_split(prompt: str, completion: str, label: str) -> tuple[float, float, str]:
    """(coarse, fine, extracted) for a SPLIT row."""
    extracted = extract_answer(completion)
    pred = extracted.replace(" ", "")
    best = 0.0
    for opt in label.split(";"):
        parts = [p.strip() for p in opt.split(",")]
        found = sum(1 for p in parts if p in pred)
        if found == len(parts):
            return 1.0, 1.0, extracted
        best = max(best, found / len(parts))
    return 0.0, best, extracted
