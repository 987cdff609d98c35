"""The registry of scoring types' behaviour: one `ScoringType` per type, registered by its scorer module.

A scoring type is its catalogue row (`common.types.TypeInfo`: the fields its verdict needs, whether it has
a label, the guard's match rule, the official evaluator's name, its invalid reason), which the floor reads,
and its module rewards/<type>.py, which ends with `TYPE = register_type(ScoringType(...))` and holds
everything the type does:

- `score(example, completion) -> Score` (coarse = the official verdict, strict, fine): `rewards.score` (the
  router), `rewards.SCORERS`, the TRL reward functions;
- `gold(example)`: candidate answer texts (untagged) tried in order by `synth.gold.gold_completion`; the
  default is the stored label, the unlabelled types construct one;
- `sft(record, unit, texts)`: the SFT warm-up's target where it is not the label (`synth.gold.sft_completion`);
  None: the tagged label after the task's reasoning line. `texts(lang)` is the synth corpus (a type cannot
  import synth), `unit` the language's unit word or None;
- the loophole strategies `rewards.loopholes` checks the training rewards against: `valid_answers(rec, pool)`
  (what a uniform random guess picks from; None: the pool's distinct labels), `input_text(rec)` (what an
  echo repeats; None: the question's last line), `relabel(rec, answer)` (the row with `answer` as its
  label; None: set `answer`) and `hedges(rec, options)` (the type's known hedges, name -> answer text).

Registering a type with no catalogue row is refused: the row is what the record checks and readers read. `REGISTRY`
is a `common.registry.Registry`, the shape of the catalogue beside it (`common.types.TYPE_INFO`) and of the task
registries (`common.record.TASKS`, `synth.core.GENERATORS`): `register_type`, `unregister_type` and `get_type` are its
`add`, `remove` and `get`.
"""
from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from common.registry import Registry
from common.types import TypeInfo, TypeRegistryError, type_info

from .base import Score

Scorer = Callable[[Mapping[str, Any], str], Score]


def label_answers(example: Mapping[str, Any]) -> list[str]:
    """The default gold answer: the stored label, as the official CSVs write it."""
    return [str(example.get("answer", ""))]


@dataclass(frozen=True)
class ScoringType:
    """Everything one scoring type does (see the module docstring); its facts are `info`, its catalogue row."""

    name: str
    score: Scorer
    gold: Callable[[Mapping[str, Any]], list[str]] = label_answers
    sft: Callable[[Mapping[str, Any], str | None, Callable[[str], Any]], str | None] | None = None
    valid_answers: Callable[[Mapping[str, Any], Sequence[str]], list[str] | None] | None = None
    input_text: Callable[[Mapping[str, Any]], str | None] | None = None
    relabel: Callable[[Mapping[str, Any], str], dict[str, Any]] | None = None
    hedges: Callable[[Mapping[str, Any], list[str]], dict[str, str]] | None = None

    @property
    def info(self) -> TypeInfo:
        """The type's catalogue row (common.types)."""
        info = type_info(self.name)
        if info is None:
            raise TypeRegistryError(f"scoring type {self.name!r} has no catalogue row (common.types.declare_type)")
        return info


def _origin(t: ScoringType) -> str:
    """Where a type was registered: its scorer's module (a refused second registration names both)."""
    return t.score.__module__


REGISTRY: Registry[ScoringType] = Registry("scoring type", TypeRegistryError, origin=_origin)


def register_type(t: ScoringType) -> ScoringType:
    """Add `t` to the registry (refusing a second type of the same name, or one with no catalogue row) and
    return it."""
    if not isinstance(t, ScoringType):
        raise TypeRegistryError(f"register_type wants a ScoringType, got {type(t).__name__}")
    if t.name not in REGISTRY:
        t.info  # noqa: B018  (raises for a type the catalogue does not declare)
    return REGISTRY.add(t.name, t)


def unregister_type(name: str) -> None:
    """Remove a type (tests that register a test-only type undo it with this)."""
    REGISTRY.remove(name)


def get_type(name: Any) -> ScoringType | None:
    """The registered type called `name`, or None (unknown, or not a string)."""
    return REGISTRY.get(name)


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
