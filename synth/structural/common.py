"""What the structural resource modules share: the error for a missing resource, and `split_total`."""
from __future__ import annotations

import random
from collections.abc import Callable

from ..core import SynthError


class ResourceError(SynthError):
    """A language resource that is not installed (the CLI reports it as one line)."""


def split_total(rng: random.Random, k: int, n_lo: int, n_hi: int, ok: Callable[[int], bool]) -> list[int] | None:
    """A random composition of `k` into between n_lo and n_hi positive parts, each accepted by `ok`
    (e.g. "some word has exactly this many of the letter"); None when a few draws find none."""
    for _ in range(12):
        n = rng.randint(n_lo, min(n_hi, k))
        cuts = sorted(rng.sample(range(1, k), n - 1))
        parts = [b - a for a, b in zip([0, *cuts], [*cuts, k], strict=False)]
        if all(ok(p) for p in parts):
            return parts
    return None
