"""The one error family: what a library function raises when it refuses (bad input, a state it cannot go on
from), instead of ending the process.

Why: only entry points end the process (a `__main__` module, a script's `if __name__ == "__main__":` block);
their `main` turns a `TaseError` into the project's one line, `error: <message>` on stderr, with `one_line`,
and returns its exit status (2, `EXIT_CODE`), so `main(argv)` can be called in-process too. Library code that
raises one can be called, caught and tested in-process. Each package's error keeps its own name and its builtin
base (`DataError` is a `ValueError`, `RunError` a `RuntimeError`), so code that caught those still does.
"""
from __future__ import annotations

import argparse
import atexit
import functools
import os
import reprlib
import sys
from collections.abc import Callable
from typing import Any, TypeVar

EXIT_CODE = 2  # bad input or a refusal: the exit status of every entry point's one-line error
MAX_QUOTE = 120  # characters of a value quoted in an error line


class TaseError(Exception):
    """A refusal; `str(e)` is the one line the entry point prints after `error: `, `exit_code` its exit status."""

    exit_code: int = EXIT_CODE


class StepFailed(TaseError):
    """A pipeline's step (a child command: recipes' demo, proof and ablate) exited non-zero. The step printed its
    own error; the message names the step, and the pipeline ends with the step's own exit code."""

    def __init__(self, message: str, exit_code: int) -> None:
        super().__init__(message)
        self.exit_code = exit_code


HELD: list[str] = []  # a quiet rank's lines (quiet_rank), printed at exit unless rank 0 said them (release_held)


def quiet_rank() -> bool:
    """Whether this process is a rank other than 0 of a multi-process launch (torchrun and `accelerate launch` set
    RANK and LOCAL_RANK). Why: every rank checks the same options, so the same line came once per rank; rank 0 says
    it once (recipes/grpo_core/distributed.launcher_exit)."""
    return os.environ.get("LOCAL_RANK") is not None and os.environ.get("RANK", "0") != "0"


def _print_held() -> None:
    for line in HELD:
        print(line, file=sys.stderr)
    HELD.clear()


def release_held() -> None:
    """Drop a quiet rank's held lines: rank 0 printed the same refusal."""
    HELD.clear()


def _progress_bar_open() -> bool:
    """Whether a tqdm progress bar is drawn and not closed (the trainer's step bar, an evaluation's): its line on the
    terminal has no newline yet. Why: an error printed then continued that line (`  0%|  | 0/2 [00:00<?,
    ?it/s]error: the rollout worker died ...`, measured in an async run whose worker died at its first
    generation), so the error was not a line of its own."""
    std = sys.modules.get("tqdm.std")  # tqdm's bars, whichever front end (auto, asyncio) made them
    bars = getattr(getattr(std, "tqdm", None), "_instances", None) or ()
    return any(not getattr(bar, "disable", True) for bar in list(bars))


def one_line(e: TaseError) -> int:
    """Print `e` as the one line `error: <message>` on stderr, on a line of its own after an open progress bar (a
    quiet rank holds it back until exit, where it is printed unless released); the exit status for the entry point
    to return."""
    line = f"error: {e}"
    if quiet_rank():
        if not HELD:
            atexit.register(_print_held)
        HELD.append(line)
    else:
        print(("\n" if _progress_bar_open() else "") + line, file=sys.stderr)
    return e.exit_code


def one_line_errors(parser: argparse.ArgumentParser) -> None:
    """A plain argparse parser's errors (a bad value on the command line) as one TaseError line, not usage text
    (under one_line_exit: exit 2)."""

    def error(message: str):
        raise TaseError(message)

    parser.error = error  # type: ignore[method-assign]


F = TypeVar("F", bound=Callable[..., int])


def one_line_exit(main: F) -> F:
    """Decorates a recipe's `main`: a TaseError raised anywhere below it becomes its one line, and `main` returns
    the exit status (`one_line`) for its `if __name__ == "__main__":` block to exit with. No traceback, nothing
    written lost; only the script's main guard ends the process."""

    @functools.wraps(main)
    def wrapper(*args, **kwargs) -> int:
        try:
            return main(*args, **kwargs)
        except TaseError as e:
            return one_line(e)

    return wrapper  # type: ignore[return-value]


# `bounded`: why: an error line quotes the value it refuses, and a value read from a file can be megabytes (a long
# string, an alias bomb's expansion, an integer of 5,000 digits): the line stays one short line
_REPR = reprlib.Repr()
_REPR.maxlevel, _REPR.maxdict, _REPR.maxlist, _REPR.maxtuple, _REPR.maxset = 3, 4, 4, 4, 4
_REPR.maxstring, _REPR.maxother, _REPR.maxlong = 60, 60, 40


def names(values: list[str], limit: int = MAX_QUOTE) -> str:
    """Names for an error line, joined with commas as they are (`unknown task(s): nope, zz`) when that reads as one
    short printable line; otherwise bounded(values), so a name holding a newline or a huge one cannot break the line."""
    text = ", ".join(values)
    return text if text.isprintable() and len(text) <= limit else bounded(values, limit)


def bounded(value: Any, limit: int = MAX_QUOTE) -> str:
    """repr(value) for an error line, at most `limit` characters however large or deep the value (reprlib stops at
    depth 3 and 4 items a level, so an alias bomb is never expanded; an int past repr's digit limit is named)."""
    try:
        text = _REPR.repr(value)
    except (ValueError, RecursionError):  # int over sys.get_int_max_str_digits, or too deep for reprlib
        text = f"<{type(value).__name__}>"
    return text if len(text) <= limit else text[: limit - 3] + "..."
