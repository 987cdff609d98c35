"""One clear line on stderr and exit 2: how every recipe reports bad input (no traceback, nothing written lost)."""
from __future__ import annotations

import sys
from typing import NoReturn


def fail(msg: str, code: int = 2) -> NoReturn:
    """One clear line on stderr, no traceback."""
    print(f"error: {msg}", file=sys.stderr)
    raise SystemExit(code)

