"""What every scorer returns (`Score`, its one home; `rewards.Score` is the package's name for it) and the
few helpers every scorer shares.

Kept apart from `rewards/__init__.py` so that the per-type modules can import it without a circular import.
"""
from __future__ import annotations

import random
import re
from collections.abc import Mapping, Sequence
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


def tag(text: str) -> str:
    """`text` in the answer tags the official extraction reads first (a gold or SFT completion)."""
    return f"<answer>{text}</answer>"


# Shared by the types' loophole strategies (rewards.loopholes reads them from each type's registration).
QUOTED = re.compile(r"[“\"'‘]([^”\"'’]+)[”\"'’]")  # a quoted word or character: “字”, '쇽'
_INT = re.compile(r"\d+")
MAX_OPTIONS = 64


def sample_options(opts: list[str], seed: str) -> list[str]:
    """At most MAX_OPTIONS of `opts`, a deterministic sample per row (the seed is the prompt)."""
    if len(opts) <= MAX_OPTIONS:
        return opts
    return random.Random(seed).sample(opts, MAX_OPTIONS)


def pool_max(pool: Sequence[str]) -> int:
    """The largest integer of the pool's labels (10 when there is none): the top of a counting guess."""
    vals = [int(m.group()) for p in pool if (m := _INT.search(p)) and len(m.group()) < 7]
    return max(vals, default=10)
