"""Synthetic TASE-style examples: `synth.generate(task, lang, n, seed, subtask=None)` streams records."""
from .core import GENERATORS, Generator, SynthError, available, combos, generate, register
from .record import LANGS, TASKS, Example, make_record


def __getattr__(name: str):
    """`synth.TYPES`: the registered scoring types, read when asked (see `synth.record.__getattr__`)."""
    if name in ("TYPES", "UNLABELLED_TYPES"):
        from . import record

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
