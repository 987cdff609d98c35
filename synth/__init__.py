"""Synthetic TASE-style examples: `synth.generate(task, lang, n, seed, subtask=None)` streams records."""
from common import record
from common.record import TASKS, Example, make_record

from . import tasks  # noqa: F401  (the package imports its parts: this registers every task's generator)
from .core import GENERATORS, Generator, SynthError, available, combos, generate, register


def __getattr__(name: str):
    """`synth.TYPES`, `synth.LANGS`: the scoring types and the language codes of their catalogues, read when
    asked (see `common.record.__getattr__`)."""
    if name in ("TYPES", "UNLABELLED_TYPES", "LANGS"):
        return getattr(record, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

__all__ = [
    "GENERATORS",
    "Generator",
    "SynthError",
    "available",
    "combos",
    "generate",
    "register",
    "LANGS",
    "TASKS",
    "TYPES",
    "Example",
    "make_record",
]
