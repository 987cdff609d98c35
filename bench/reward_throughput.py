"""Completions/second per scoring type on one core, short and 4 kB completions, with p99 latency.

    python bench/reward_throughput.py [--n 20000]

Targets (issue 5): >= 50,000/s for short completions; p99 under 1 ms for 4 kB completions.
"""
from __future__ import annotations

import argparse
import os
import platform
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import synth  # noqa: E402
from rewards import score  # noqa: E402

CELLS = {  # one representative task per type
    "NUMBER": ("freq_count", None),
    "LENGTH": ("sentence_length", "generate"),
    "SHUFFLE": ("shuffle_tokens", None),
    "DIFF": ("diff_tokens", None),
    "MATCH_ANSWER": ("sort_lengths", None),
    "EXACT": ("execute", "spell"),
}


def completions(rec: dict, size: int, rng: random.Random) -> list[str]:
    """Realistic mixes: right, wrong and untagged answers; padded with reasoning text to `size` chars."""
    gold = rec["meta"].get("solution") if rec["type"] == "SHUFFLE" else rec["answer"] or "one two three"
    outs = [f"<answer>{gold}</answer>", f"<answer>{gold[::-1]}</answer>", f"The answer is **{gold}**", "I am not sure."]
    pad = "Let me think step by step about the tokens in the question. "
    if size > 64:
        outs = [(pad * (size // len(pad) + 1))[: size - len(o)] + o for o in outs]
    return [outs[rng.randrange(len(outs))] for _ in range(16)]


def run(n: int, size: int) -> list[tuple[str, float, float]]:
    rng = random.Random(0)
    rows = []
    for typ, (task, sub) in CELLS.items():
        recs = list(synth.generate(task, "en", 64, 1, sub))
        pairs = [(r, c) for r in recs for c in completions(r, size, rng)]
        lat = []
        t0 = time.perf_counter()
        for i in range(n):
            r, c = pairs[i % len(pairs)]
            t = time.perf_counter()
            score(r, c)
            lat.append(time.perf_counter() - t)
        total = time.perf_counter() - t0
        p99 = statistics.quantiles(lat, n=100)[98]
        rows.append((typ, n / total, p99 * 1e3))
    return rows


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, default=20000)
    args = p.parse_args()
    try:
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
    except (AttributeError, OSError):
        pass
    print(f"# reward throughput, one core ({platform.machine()}, Python {platform.python_version()})")
    print(f"{'type':<14} {'short /s':>10} {'short p99 ms':>13} {'4kB /s':>10} {'4kB p99 ms':>11}")
    short, long = run(args.n, 0), run(args.n // 4, 4096)
    for (t, r1, p1), (_, r2, p2) in zip(short, long):
        print(f"{t:<14} {r1:>10,.0f} {p1:>13.4f} {r2:>10,.0f} {p2:>11.4f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
