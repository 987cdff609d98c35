"""The one error family: what a library function raises when it refuses (bad input, a state it cannot go on
from), instead of ending the process.

Why: only entry points end the process (a `__main__` module, a script's `if __name__ == "__main__":` block);
their `main` turns a `TaseError` into the project's one line, `error: <message>` on stderr, with `one_line`,
and returns its exit status (2, `EXIT_CODE`), so `main(argv)` can be called in-process too. Library code that
raises one can be called, caught and tested in-process. Each package's error keeps its own name and its builtin
base (`DataError` is a `ValueError`, `RunError` a `RuntimeError`), so code that caught those still does.
"""
from __future__ import annotations

import sys

EXIT_CODE = 2  # bad input or a refusal: the exit status of every entry point's one-line error


class TaseError(Exception):
    """A refusal; `str(e)` is the one line the entry point prints after `error: `, `exit_code` its exit status."""

    exit_code: int = EXIT_CODE


class StepFailed(TaseError):
    """A pipeline's step (a child command: recipes' demo, proof and ablate) exited non-zero. The step printed its
    own error; the message names the step, and the pipeline ends with the step's own exit code."""

    def __init__(self, message: str, exit_code: int) -> None:
        super().__init__(message)
        self.exit_code = exit_code


def one_line(e: TaseError) -> int:
    """Print `e` as the one line `error: <message>` on stderr; the exit status for the entry point to return."""
    print(f"error: {e}", file=sys.stderr)
    return e.exit_code
