"""The catalogue of scoring types: one `TypeInfo` row per value of a record's `type`, what every layer may know
about a type without its scorer.

Why here: a scoring type is two things, as a task is (its catalogue row in `common.record` plus its module in
synth/tasks/): this row, the type's registration, and its scorer module rewards/<type>.py, which registers
its behaviour (`rewards.types.ScoringType`: the verdict, the gold and SFT answers, the loophole strategies).
The row holds the facts the floor and the readers need, so they read them here, without importing `rewards`
and without waiting for anything to be registered:

- `needs`: the record fields its verdict depends on (`answer`, `prompt`, `variation`); a training batch
  missing the answer or the question for a row of this type is refused (`rewards.trl`) rather than scored 0,
  and the official reader requires the columns (`synth.readers`: DIFF's `variation`);
- `unlabelled`: official rows hold no label (the rule reads the question); `common.record.UNLABELLED_TYPES`,
  `synth.readers.classify_file`;
- `names_content`: its answers name content (words, strings, pieces), so the contamination guard matches a
  generated answer against the benchmark's (`common.guard`);
- `official_eval`: the official evaluator's name for it in the release's `data/final_token_*.json`
  (`"evaluation"`), "" for a type of ours the release does not have (`synth.readers`);
- `invalid_reason`: why a row of it leaves the denominator (results.json `invalid_by_reason`, `eval.runner`).

The catalogue's order is the order `TYPES`, the router and error messages list. Adding a type: its row here
plus its module rewards/<type>.py and its name in the router's import line; `declare_type` adds a row at
run time (a test-only type) and `undeclare_type` removes it. `TYPE_INFO` is a `common.registry.Registry` (the shape
of every registry: `add`, `remove`, `get`, `names`); the functions below are its names for this catalogue. Part of
the floor: the standard library only.
"""
from __future__ import annotations

from dataclasses import dataclass

from common.registry import Registry, RegistryError

ANSWER = "answer"  # record fields a verdict may need (`TypeInfo.needs`)
PROMPT = "prompt"
VARIATION = "variation"


class TypeRegistryError(RegistryError):
    """A scoring type declared or registered twice, a scorer for a type with no catalogue row, or a row or
    scorer that is not of its class."""


@dataclass(frozen=True)
class TypeInfo:
    """One scoring type's row (see the module docstring for what reads each field)."""

    name: str
    needs: tuple[str, ...] = (ANSWER,)
    unlabelled: bool = False
    names_content: bool = False
    official_eval: str = ""
    invalid_reason: str = ""

    def __post_init__(self) -> None:
        if not self.invalid_reason:
            object.__setattr__(self, "invalid_reason", f"{self.name} row the scorer cannot read")


TYPE_INFO: Registry[TypeInfo] = Registry("scoring type", TypeRegistryError, entries={
    t.name: t
    for t in (
        TypeInfo("NUMBER", official_eval="number"),  # FREQ, LENOP count, COMPC
        TypeInfo("LENGTH", (PROMPT,), unlabelled=True, official_eval="length",  # LENOP generate: the target
                 invalid_reason="LENGTH prompt without an integer target"),
        TypeInfo("SHUFFLE", (PROMPT,), unlabelled=True, official_eval="shuffle"),  # REORD: the original line
        TypeInfo("SPLIT", names_content=True, official_eval="split"),  # COMPM split: pieces
        TypeInfo("DIFF", (ANSWER, VARIATION), official_eval="diff",
                 invalid_reason="DIFF row without a string variation"),
        TypeInfo("MATCH_ANSWER", names_content=True, official_eval="match_answer"),  # words, strings, orders
        TypeInfo("EXACT"),  # beyond TASE (execute): no official evaluator
    )
})


def declare_type(info: TypeInfo) -> TypeInfo:
    """Add a row (refusing a second of the same name) and return it."""
    if not isinstance(info, TypeInfo):
        raise TypeRegistryError(f"declare_type wants a TypeInfo, got {type(info).__name__}")
    return TYPE_INFO.add(info.name, info, "declared")


def undeclare_type(name: str) -> None:
    """Remove a row (tests that declare a test-only type undo it with this)."""
    TYPE_INFO.remove(name)


def type_info(name: object) -> TypeInfo | None:
    """The row of the type called `name`, or None (unknown, or not a string)."""
    return TYPE_INFO.get(name)


def type_names() -> tuple[str, ...]:
    """The declared type names, in catalogue order."""
    return TYPE_INFO.names()


def unlabelled_types() -> tuple[str, ...]:
    """The types whose official rows hold no label."""
    return tuple(n for n, t in TYPE_INFO.items() if t.unlabelled)


def official_types() -> dict[str, str]:
    """The official evaluator's name (`final_token_*.json` "evaluation") -> type name."""
    return {t.official_eval: n for n, t in TYPE_INFO.items() if t.official_eval}


__all__ = ["TypeInfo", "TYPE_INFO", "TypeRegistryError", "declare_type", "undeclare_type", "type_info", "type_names",
           "unlabelled_types", "official_types", "ANSWER", "PROMPT", "VARIATION"]
