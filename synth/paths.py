"""Where an output can go: the one check behind every --out/--output_dir (synth, eval, the recipes)."""
from __future__ import annotations

import os
from pathlib import Path


def write_blocker(out: Path, include_self: bool = False) -> tuple[Path, str] | None:
    """The nearest existing folder on the way to `out` (from `out` itself with `include_self`, else from
    its parent) when it stops `out` being written: `(path, "file")` when that path is a file,
    `(path, "unwritable")` when the folder lacks write or search permission; None when `out` can be
    created there. Each caller words its own one-line error."""
    for d in ((out,) if include_self else ()) + tuple(out.parents):
        if d.exists():
            if not d.is_dir():
                return d, "file"
            if not os.access(d, os.W_OK | os.X_OK):
                return d, "unwritable"
            return None
    return None
