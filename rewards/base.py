"""The few helpers every scorer shares, and the result type they return (`Score`, which lives with the
registry of scoring types in the floor, `common.types`, and is re-exported here).

Kept apart from `rewards/__init__.py` so that the per-type modules can import it without a circular import.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from common.types import INVALID, Score  # noqa: F401  (re-exported: every scorer returns one)


def field(example: Mapping[str, Any], key: str) -> str:
    """A text field of a record; missing or None reads as "" (the official CSV reader's default)."""
    value = example.get(key)
    return value if isinstance(value, str) else "" if value is None else str(value)


def label_of(example: Mapping[str, Any]) -> str:
    """The gold label as the official evaluator sees it: `row.get("answer", "").strip()`."""
    return field(example, "answer").strip()
