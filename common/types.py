"""The registry of scoring types: one `ScoringType` per value of a record's `type`, declared by its module.

Why: a scoring type owns every rule about its rows in one place (rewards/<type>.py): the scorer, the gold
answer a correct completion gives, why a row of it leaves the denominator, and whether official rows of it
carry a label. The router (`rewards.score`), the catalogue (`common.record.TYPES`, `UNLABELLED_TYPES`), the
gold builder (`synth.gold`) and the evaluator (`eval.runner.invalid_reason`) read them from here, as tasks
are read from the task registry (`synth.core.spec`). Adding a type = its module, which ends with
`TYPE = register_type(ScoringType(...))`, plus its name in the router's import line (the registration order,
which error messages list).

Part of the floor (`common/`): pure and stdlib-only. The registry starts empty; importing `rewards` fills
it (each type's module registers itself), so a reader that checks a record's type needs `rewards` imported
(`synth.readers` and `eval.data` do it).
"""
from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from common.errors import TaseError


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


Scorer = Callable[[Mapping[str, Any], str], Score]


def label_answers(example: Mapping[str, Any]) -> list[str]:
    """The default gold answer: the stored label, as the official CSVs write it."""
    return [str(example.get("answer", ""))]


@dataclass(frozen=True)
class ScoringType:
    """Everything the library knows about one scoring type.

    name:           the record's `type` value (NUMBER, LENGTH, ...).
    score:          `score(example, completion_text) -> Score` (coarse = the official verdict).
    gold:           candidate answer texts (untagged) for a record, tried in order by `synth.gold`; the
                    default is the stored label. Types whose official rows hold no label construct one.
    invalid_reason: why a row of this type left the denominator (`Score.valid` False), for results.json.
    unlabelled:     official rows of this type hold no label (the rule reads the question instead).
    """

    name: str
    score: Scorer
    gold: Callable[[Mapping[str, Any]], list[str]] = label_answers
    invalid_reason: str = ""
    unlabelled: bool = False

    def __post_init__(self) -> None:
        if not self.invalid_reason:
            object.__setattr__(self, "invalid_reason", f"{self.name} row the scorer cannot read")


REGISTRY: dict[str, ScoringType] = {}


class TypeRegistryError(TaseError, ValueError):
    """A scoring type registered twice, or one that is not a ScoringType."""


def register_type(t: ScoringType) -> ScoringType:
    """Add `t` to the registry (refusing a second type of the same name) and return it."""
    if not isinstance(t, ScoringType):
        raise TypeRegistryError(f"register_type wants a ScoringType, got {type(t).__name__}")
    if t.name in REGISTRY:
        raise TypeRegistryError(f"scoring type {t.name!r} is already registered (by {REGISTRY[t.name].score.__module__})")
    REGISTRY[t.name] = t
    return t


def unregister_type(name: str) -> None:
    """Remove a type (tests that register a test-only type undo it with this)."""
    REGISTRY.pop(name, None)


def get_type(name: Any) -> ScoringType | None:
    """The registered type called `name`, or None (unknown, or not a string)."""
    return REGISTRY.get(name) if isinstance(name, str) else None


def type_names() -> tuple[str, ...]:
    """The registered type names, in registration order."""
    return tuple(REGISTRY)


def unlabelled_types() -> tuple[str, ...]:
    """The registered types whose official rows hold no label."""
    return tuple(n for n, t in REGISTRY.items() if t.unlabelled)


class ScorerView(Mapping[str, Scorer]):
    """`rewards.SCORERS`: a live read-only mapping type name -> scorer over the registry."""

    def __getitem__(self, name: str) -> Scorer:
        return REGISTRY[name].score

    def __iter__(self) -> Iterator[str]:
        return iter(REGISTRY)

    def __len__(self) -> int:
        return len(REGISTRY)

    def __repr__(self) -> str:
        return f"ScorerView({list(REGISTRY)})"


__all__ = ["Score", "INVALID", "ScoringType", "Scorer", "REGISTRY", "register_type", "unregister_type", "get_type", "type_names",
           "unlabelled_types", "ScorerView", "TypeRegistryError", "label_answers"]
