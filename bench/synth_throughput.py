"""Examples/second per task and language on one core, beside reasoning-gym generators in the same run.

    python bench/synth_throughput.py [--n 5000] [--repeat 1] [--tasks all] [--text-source real|unigram|both] \\
        [--rg-python PATH]

reasoning-gym (letter_counting, word_sorting) is timed in-process when importable, else through
`--rg-python` (an interpreter of a separate venv with `pip install reasoning-gym`; `make bench` builds
one in .venv-bench), else its column is skipped with a note. Resource loading (word lists, corpora,
dictionaries) is warmed up first and reported separately: it is paid once per process. On a noisy
machine, `--repeat k` times every cell k times (round-robin over the cells) and prints the median.
`--text-source both` times the awareness cells on the real running text and on the unigram ablation,
alternating the two within each round so machine load hits both alike.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")
import synth  # noqa: E402  (after the thread setting above)

RG_SNIPPET = r"""
import json, sys, time, reasoning_gym
n = int(sys.argv[1]); out = {}
for name in ("letter_counting", "word_sorting"):
    reasoning_gym.create_dataset(name, size=50, seed=0)[0]
    t = time.perf_counter()
    ds = reasoning_gym.create_dataset(name, size=n, seed=1)
    for i in range(n):
        ds[i]
    out[name] = n / (time.perf_counter() - t)
print(json.dumps(out))
"""


def time_cell(task: str, lang: str, subtask: str, n: int, source: str = "real") -> float:
    stream = synth.generate(task, lang, n, seed=1, subtask=subtask, text_source=source)
    t = time.perf_counter()
    for _ in stream:
        pass
    return n / (time.perf_counter() - t)


def reasoning_gym_rates(n: int, rg_python: str | None) -> tuple[dict[str, float], str]:
    try:
        import reasoning_gym  # noqa: F401

        cmd = [sys.executable]
    except ImportError:
        if not rg_python:
            return {}, "reasoning-gym not installed here and no --rg-python given: column skipped"
        cmd = [rg_python]
    res = subprocess.run([*cmd, "-c", RG_SNIPPET, str(n)], capture_output=True, text=True)
    if res.returncode != 0:
        return {}, f"reasoning-gym run failed: {res.stderr.strip().splitlines()[-1:]}"
    return json.loads(res.stdout), f"reasoning-gym via {cmd[0]}"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, default=5000, help="examples per task x language cell")
    p.add_argument("--rg-python", default=None, help="python of a venv with reasoning-gym installed")
    p.add_argument("--tasks", default="all", help="comma-separated tasks (default all)")
    p.add_argument("--repeat", type=int, default=1, help="time each cell this many times, print the median")
    p.add_argument("--text-source", choices=("real", "unigram", "both"), default="real",
                   help="what the awareness generators slice (both: alternate real and unigram)")
    args = p.parse_args()
    try:
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})  # one core
    except (AttributeError, OSError):
        pass
    cells = synth.combos("all", "all") if args.tasks == "all" else [
        c for t in args.tasks.split(",") for c in synth.combos(t, "all")]
    t0 = time.perf_counter()
    sources = ["real", "unigram"] if args.text_source == "both" else [args.text_source]
    for c in cells:  # warm-up: builds corpora and tables once
        for src in sources:
            list(synth.generate(c[0], c[1], 20, 0, c[2], text_source=src))
    warm = time.perf_counter() - t0
    rg, note = reasoning_gym_rates(args.n, args.rg_python)
    ref = rg.get("letter_counting")
    print(f"# synth throughput, one core ({platform.processor() or platform.machine()}, Python "
          f"{platform.python_version()})")
    print(f"# resource warm-up for all cells: {warm:.2f} s (once per process)")
    print(f"# reference: {note}" + "".join(f"; {k} {v:,.0f}/s" for k, v in rg.items()))
    reps = max(1, args.repeat)
    if reps > 1:
        print(f"# median of {reps} timings per cell (round-robin over the cells)")
    print(f"{'task':<18} {'subtask':<27} {'lang':<4} {'source':<8} {'examples/s':>11} {'vs rg letter_counting':>22}")
    rates: dict[tuple[str, str, str, str], list[float]] = {(*c, s): [] for c in cells for s in sources}
    for r in range(reps):
        for c in cells:
            for src in sources:
                rates[(*c, src)].append(time_cell(*c, args.n, src))
            if r == reps - 1:
                task, lang, sub = c
                for src in sources:
                    rate = statistics.median(rates[(*c, src)])
                    ratio = f"{rate / ref:.2f}x" if ref else "n/a"
                    print(f"{task:<18} {sub or '-':<27} {lang:<4} {src:<8} {rate:>11,.0f} {ratio:>22}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
