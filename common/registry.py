"""One shape for the project's registries (issue 61: one name per idea).

The task catalogue (`common.record.TASKS`), the scoring types' catalogue (`common.types.TYPE_INFO`), their behaviour
(`rewards.types.REGISTRY`) and the task generators (`synth.core.GENERATORS`) are each a `Registry`: a dict from name
to entry, in registration order (the order every listing and error message uses), with the same four methods:

- `add(name, entry)`: refuses, in one line, a name already taken (a silent overwrite would swap what a name
  means); where the registry allows it (`again`: the task generators, whose module may be imported twice), the same
  entry again is a no-op;
- `remove(name)`: undoes `add` (tests that add a test-only entry);
- `get(name)`: the entry or None (an unknown name, or a name that is not a string);
- `names()`: the names, in order.

The per-registry functions others call (`declare_type`, `register_type`, `synth.core.register`, `type_info`,
`get_type`, `spec`, ...) are thin wrappers that check their entry's class and call these. Part of the floor: the
standard library only.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any, Generic, TypeVar

from common.errors import TaseError

V = TypeVar("V")


class RegistryError(TaseError, ValueError):
    """A name registered twice (each registry may raise its own subclass)."""


class Registry(dict[str, V], Generic[V]):
    """name -> entry, in registration order; `kind` names an entry in messages ("task", "scoring type"), `error` is
    the exception a refused `add` raises, `origin(entry)` says where an entry comes from (a refusal names both),
    `again`: the same entry added again is a no-op rather than refused."""

    def __init__(self, kind: str, error: type[Exception] = RegistryError, origin: Callable[[Any], str] | None = None,
                 again: bool = False, entries: dict[str, V] | None = None) -> None:
        super().__init__(entries or {})
        self.kind, self.error, self.origin, self.again = kind, error, origin, again

    def add(self, name: str, entry: V, verb: str = "registered") -> V:
        """Add `entry` under `name` and return it; a name already taken is refused in one line ("task 'x' is
        already registered by A; refusing B"), unless it is the same entry and the registry allows that."""
        if name in self and not (self.again and self[name] is entry):
            by = f" by {self.origin(self[name])}; refusing {self.origin(entry)}" if self.origin else ""
            raise self.error(f"{self.kind} {name!r} is already {verb}{by}")
        self[name] = entry
        return entry

    def remove(self, name: str) -> None:
        """Remove `name` (nothing when it is not there)."""
        self.pop(name, None)

    def get(self, name: Any, default: Any = None) -> Any:
        """The entry called `name`, or `default` (an unknown name, or a name that is not a string)."""
        return super().get(name, default) if isinstance(name, str) else default

    def names(self) -> tuple[str, ...]:
        """The names, in registration order."""
        return tuple(self)
