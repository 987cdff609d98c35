"""Bad input, reported in one line: library code raises `TaseError`; a recipe's `main`, decorated with
`one_line_exit`, turns it into `error: <message>` on stderr and returns the exit status (2; a failed pipeline
step's own code), so that code calling the library can recover and tests can call `main(argv)` in-process.
Only the script's `if __name__ == "__main__":` block ends the process. No traceback, nothing written lost.

`TaseError` is the project's one error family (common/errors.py), re-exported here for the recipes."""
from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TypeVar

from common.errors import StepFailed, TaseError, one_line

__all__ = ["StepFailed", "TaseError", "one_line_exit"]

F = TypeVar("F", bound=Callable[..., int])


def one_line_exit(main: F) -> F:
    """Decorates a recipe's `main`: a TaseError raised anywhere below it becomes its one line, and `main` returns
    the exit status (`common.errors.one_line`) for its `if __name__ == "__main__":` block to exit with."""

    @functools.wraps(main)
    def wrapper(*args, **kwargs) -> int:
        try:
            return main(*args, **kwargs)
        except TaseError as e:
            return one_line(e)

    return wrapper  # type: ignore[return-value]
