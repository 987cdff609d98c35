"""Synthetic TASE-style examples: `synth.generate(task, lang, n, seed, subtask=None)` streams records."""
from .core import GENERATORS, Generator, SynthError, available, combos, generate, register
from .record import LANGS, TASKS, TYPES, Example, make_record

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
