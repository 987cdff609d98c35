"""Bad input, reported in one line: library code raises `TaseError`; only an entry point (a recipe's `main`)
turns it into `error: <message>` on stderr and exit 2 (`fail`, `one_line_exit`), so that code calling the
library can recover and tests can call `main(argv)` in-process. No traceback, nothing written lost.

`TaseError` is the project's one error family (common/errors.py), re-exported here for the recipes."""
from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from typing import NoReturn, TypeVar

from common.errors import EXIT_CODE, TaseError

__all__ = ["TaseError", "fail", "one_line_exit"]


def fail(msg: str, code: int = EXIT_CODE) -> NoReturn:
    """One clear line on stderr, no traceback, exit 2: for entry points only (library code raises TaseError)."""
    print(f"error: {msg}", file=sys.stderr)
    raise SystemExit(code)


F = TypeVar("F", bound=Callable)


def one_line_exit(main: F) -> F:
    """Decorates a recipe's `main`: a TaseError raised anywhere below it becomes its one line and exit 2."""

    @functools.wraps(main)
    def wrapper(*args, **kwargs):
        try:
            return main(*args, **kwargs)
        except TaseError as e:
            fail(str(e))

    return wrapper  # type: ignore[return-value]
