"""The one checked reader of the state files a command reads back when it resumes (curriculum.json,
best_checkpoint.json, a proof's select_<run>/best_checkpoint.json or a former selection.json, dynamic sampling's
state in trainer_state.json): valid JSON of the wrong shape (`5`, `null`, a string where a number belongs), a
folder of that name or an unreadable file is one line (a TaseError) naming the file and what is wrong, or the caller's documented fallback; never a crash deep in
the code that uses it. Each caller gives the shape as a function returning what is wrong (None when nothing)."""
from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

from common.errors import TaseError, bounded


class StateError(TaseError):
    """A state file that cannot be used: its path and what is wrong, in one line."""


def read_state(path: Path, shape: Callable[[Any], str | None], advice: str = "") -> Any | None:
    """The JSON value of the state file `path`, checked by `shape` (what is wrong, or None); None when there is no
    such file. A folder of that name, an unreadable file, invalid JSON or a value `shape` refuses: StateError,
    "PATH: WHY" and `advice` (e.g. "; remove it to select again")."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except IsADirectoryError:
        raise StateError(f"{path}: a folder where a state file belongs{advice}") from None
    except (OSError, UnicodeDecodeError) as e:
        raise StateError(f"{path}: unreadable ({getattr(e, 'strerror', None) or e}){advice}") from None
    try:
        value = json.loads(text)
    except (ValueError, RecursionError) as e:
        raise StateError(f"{path}: not valid JSON ({str(e)[:80]}){advice}") from None
    why = shape(value)
    if why:
        raise StateError(f"{path}: {why}{advice}")
    return value


def whole(v: Any, low: int | None = 0) -> bool:
    """An integer (not a bool) of at least `low`."""
    return isinstance(v, int) and not isinstance(v, bool) and (low is None or v >= low)


def number(v: Any) -> bool:
    """A finite number (not a bool)."""
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def mapping_problem(value: Any, keys: dict[str, Callable[[Any], bool]], where: str = "",
                    optional: tuple[str, ...] = ()) -> str | None:
    """What is wrong with `value` as a mapping holding `keys` (each checked by its test; those in `optional` may be
    absent), or None."""
    if not isinstance(value, dict):
        return f"{where}must be a JSON object, got {bounded(value)}"
    for key, ok in keys.items():
        if key not in value:
            if key in optional:
                continue
            return f"{where}has no {key!r}"
        if not ok(value[key]):
            return f"{where}{key} is {bounded(value[key])}, not what it should be"
    return None
