"""The "loaded machine" condition of the side-by-side benchmarks: other processes busy on every core.

The issue that asked for these figures defines loaded as another process busy on both cores; a spinning
Python process per core reproduces that on any machine, so quiet and loaded come from one run."""
from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def busy_cores(n: int | None = None) -> Iterator[int]:
    """Start `n` (default: every core) spinning processes for the duration of the block."""
    n = n or os.cpu_count() or 1
    procs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n)]
    try:
        yield n
    finally:
        for p in procs:
            p.kill()
        for p in procs:
            p.wait()
