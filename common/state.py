"""The one checked reader of the state files a command reads back when it resumes (curriculum.json,
best_checkpoint.json, a proof's select_<run>/best_checkpoint.json or a former selection.json, dynamic sampling's
state in trainer_state.json): valid JSON of the wrong shape (`5`, `null`, a string where a number belongs), a
folder of that name or an unreadable file is one line (a TaseError) naming the file and what is wrong, or the caller's
documented fallback; never a crash deep in the code that uses it. Each caller gives the shape as a function returning
what is wrong (None when nothing)."""
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
    such file. A folder of that name, a symlink out of its folder, an unreadable file, invalid JSON or a value `shape`
    refuses: StateError,
    "PATH: WHY" and `advice` (e.g. "; remove it to select again")."""
    try:
        if path.is_symlink():  # the project writes its state files itself: a link out of the folder is not its own
            import os

            real, home = os.path.realpath(path), os.path.realpath(path.parent)
            if os.path.dirname(real) != home:
                raise StateError(f"{path}: a link to {real[:200]}, outside {path.parent}, where this command's own "
                                 f"state file belongs{advice}")
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


TRAINER_STATE = "trainer_state.json"
# The one fallback order of a feature's state saved with a checkpoint (the curriculum's curriculum.json, guidance's
# guidance.json): (1) the feature's own file in the checkpoint; (2) where it is missing or unusable, the copy the
# feature's callback saved in the checkpoint's trainer_state.json (stateful_callbacks[NAME].attributes.saved, written
# with the checkpoint itself, so a kill between the two files loses nothing); (3) neither there: the checkpoint of a
# run without the feature (None). A usable copy after an unusable own file is a note line; an unusable copy where
# it is needed, or an unusable own file with no copy, is one error line: never a silent start over.
FALLBACK = ("own file", TRAINER_STATE)


def read_saved(ckpt: Path, own: str, callback: str, shape: Callable[[Any], str | None], what: str) -> Any | None:
    """A feature's state saved with checkpoint `ckpt`, in the FALLBACK order above: CKPT/`own` checked by `shape`,
    else the copy under `callback` in trainer_state.json (checked by `shape` too), else None. `what` names the state
    in the lines ("curriculum levels")."""
    import sys

    ckpt = Path(ckpt)
    try:
        value = read_state(ckpt / own, shape)
    except StateError as e:
        value, broken = None, str(e)
    else:
        broken = None
        if value is not None:
            return value
    try:
        st = read_state(ckpt / TRAINER_STATE, lambda v: None if isinstance(v, dict) else "not a JSON object")
    except StateError as e:
        if broken:
            raise StateError(f"{broken}, and {e}; fix or remove {ckpt / own}") from None
        raise
    entry = ((st or {}).get("stateful_callbacks") or {}) if isinstance((st or {}).get("stateful_callbacks") or {},
                                                                      dict) else {}
    entry = entry.get(callback)
    entry = entry[-1] if isinstance(entry, list) and entry else entry
    attributes = entry.get("attributes") if isinstance(entry, dict) else None
    copy = attributes.get("saved") if isinstance(attributes, dict) else None
    if entry is not None and copy is None:
        why = f"{ckpt / TRAINER_STATE}: {callback} holds no saved {what} ({bounded(entry)})"
        raise StateError(f"{broken}, and {why}" if broken else why)
    if copy is not None and shape(copy):
        why = f"{ckpt / TRAINER_STATE}: {callback}'s saved {what}: {shape(copy)}"
        raise StateError(f"{broken}, and {why}" if broken else why)
    if broken:
        if copy is None:
            raise StateError(f"{broken}, and {ckpt / TRAINER_STATE} holds no copy of the {what}; fix or remove "
                             f"{ckpt / own} (removed: the levels start over)")
        print(f"note: {broken}; using the {what} saved in {ckpt / TRAINER_STATE}", file=sys.stderr)
    return copy
