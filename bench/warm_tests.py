"""The suite's warm interpreter (tests/warm_python.py) against fresh interpreters, side by side on one selection.

    python bench/warm_tests.py [--repeat 2] [--workers 0] [TEST_SELECTION ...]

Runs `pytest -q -p no:cacheprovider -n WORKERS SELECTION` alternately with TASE_TEST_WARM=1 (the CLI runs forked
from the warm server, what `make test` does) and TASE_TEST_WARM=0 (every CLI run a fresh `python`), `--repeat` times
each, warm first, and prints each run's wall time, the CPU seconds of pytest and the processes it waited for, the
load average around it, then the medians and their ratio. Both arms must pass. The default selection is three files
whose tests start GRPO, SFT and proof CLIs. The machine's other load changes the seconds: read the load columns.
"""
from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT = ["tests/test_guidance.py", "tests/test_proof_control.py", "tests/test_tracking.py"]


def one(selection: list[str], warm: bool, workers: int) -> tuple[float, float, float, float]:
    """Wall seconds, CPU seconds (user+sys of the waited-for processes), load average before and after."""
    env = {**os.environ, "TASE_TEST_WARM": "1" if warm else "0"}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    load0 = os.getloadavg()[0]
    t0 = time.perf_counter()
    res = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", str(workers),
                          *selection],
                         cwd=ROOT, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if res.returncode != 0:
        sys.exit(f"error: the {'warm' if warm else 'fresh'} run failed (exit {res.returncode}):\n{res.stdout[-3000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, load0, os.getloadavg()[0]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("selection", nargs="*", default=DEFAULT, help="pytest selection (default: %(default)s)")
    p.add_argument("--repeat", type=int, default=2, help="runs per arm, alternated (default 2)")
    p.add_argument("--workers", type=int, default=0, help="pytest-xdist workers (default 0: one process)")
    args = p.parse_args(argv)
    if args.repeat < 1 or args.workers < 0:
        p.error("--repeat must be >= 1 and --workers >= 0")
    rows: dict[bool, list[tuple[float, float, float, float]]] = {True: [], False: []}
    print(f"{'arm':<6} {'wall s':>8} {'CPU s':>8} {'load before':>12} {'load after':>11}")
    for _ in range(args.repeat):
        for warm in (True, False):
            r = one(args.selection, warm, args.workers)
            rows[warm].append(r)
            print(f"{'warm' if warm else 'fresh':<6} {r[0]:8.1f} {r[1]:8.1f} {r[2]:12.2f} {r[3]:11.2f}", flush=True)
    med = {w: (statistics.median(x[0] for x in rs), statistics.median(x[1] for x in rs)) for w, rs in rows.items()}
    print(f"median wall: warm {med[True][0]:.1f} s, fresh {med[False][0]:.1f} s, fresh/warm "
          f"{med[False][0] / med[True][0]:.2f}x")
    print(f"median CPU:  warm {med[True][1]:.1f} s, fresh {med[False][1]:.1f} s, fresh/warm "
          f"{med[False][1] / med[True][1]:.2f}x")
    print("(CPU: user+sys of pytest and the processes waited for, the forked runs through the server and its "
          "monitors, which wait for them)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
