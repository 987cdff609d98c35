"""The one error family: what a library function raises when it refuses (bad input, a state it cannot go on
from), instead of ending the process.

Why: only entry points (`__main__` modules, a recipe's `main`) end the process; they turn a `TaseError` into
the project's one line, `error: <message>` on stderr, and exit 2 (`EXIT_CODE`). Library code that raises one
can be called, caught and tested in-process. Each package's error keeps its own name and its builtin base
(`DataError` is a `ValueError`, `RunError` a `RuntimeError`), so code that caught those still does.
"""
from __future__ import annotations

EXIT_CODE = 2  # bad input or a refusal: the exit status of every entry point's one-line error


class TaseError(Exception):
    """A refusal; `str(e)` is the one line the entry point prints after `error: `."""
