"""Process-wide settings, made by the entry points (`python -m eval`, the recipe scripts), never at import.

OpenMP threads that spin while waiting collapse when CPU cores are shared (measured 5-20x slower generation
on a busy 2-core machine; SmolLM2 forward+backward 24 s -> 15 s); passive waiting costs little when they are
not. It must be set before torch is imported, so each entry point calls `apply()` first thing; an explicit
setting in the environment wins. (The csv field limit for long official rows is set by the reader that
needs it, `synth.readers`.)
"""
from __future__ import annotations

import os


def apply() -> None:
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
