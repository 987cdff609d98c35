"""The result type every scorer returns and the few helpers all of them share.

Kept apart from `rewards/__init__.py` so that the per-type modules can return a `Score` without a
circular import.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Score:
    """One verdict.

    coarse:    the official evaluator's verdict, 0.0 or 1.0 (loopholes included: it is the benchmark).
    fine:      the training credit in [0, 1]: 1.0 exactly when `strict` is 1.0, partial credit only
               where no answer-independent strategy can collect it (docs/rewards.md, "Loopholes").
    extracted: the answer the official extraction pulled out of the completion ("" when none).
    valid:     False where the official evaluator would raise on this row and drop it from its
               denominator (batch_eval.py: result None -> excluded); coarse and fine are 0.0 then.
    strict:    the strict verdict, 0.0 or 1.0: the official verdict without its loopholes (a list that
               contains the label, the unsplit word, ...), so strict <= coarse. Left out (None), it
               equals `coarse`: the types whose official rule has no loophole.
    """

    coarse: float
    fine: float
    extracted: str = ""
    valid: bool = True
    strict: float = None  # type: ignore[assignment]  # None -> coarse, set in __post_init__

    def __post_init__(self) -> None:
        if self.strict is None:
            object.__setattr__(self, "strict", self.coarse)

    @property
    def loophole(self) -> bool:
        """True when the official verdict passes a completion only through a loophole (coarse 1, strict 0)."""
        return self.coarse == 1.0 and self.strict != 1.0


INVALID = Score(0.0, 0.0, "", valid=False)


def field(example: Mapping[str, Any], key: str) -> str:
    """A text field of a record; missing or None reads as "" (the official CSV reader's default)."""
    value = example.get(key)
    return value if isinstance(value, str) else "" if value is None else str(value)


def label_of(example: Mapping[str, Any]) -> str:
    """The gold label as the official evaluator sees it: `row.get("answer", "").strip()`."""
    return field(example, "answer").strip()
