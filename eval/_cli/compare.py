"""`python -m eval compare`: paper-style tables, bootstrap deltas and a plot for several runs."""
from __future__ import annotations

import argparse
import sys

from .common import n_boot


def register(sub: argparse._SubParsersAction, fmt: type) -> None:
    c = sub.add_parser("compare", formatter_class=fmt,
                       help="paper-style tables, bootstrap deltas and a plot for several runs",
                       description="Table 1 (tasks) and Table 2 (languages) for several result folders, deltas "
                                   "against the first with paired 95% bootstrap intervals, and a PNG. Writes "
                                   "OUT/comparison.md, comparison.json and comparison.png.")
    c.add_argument("dirs", nargs="+", metavar="DIR", help="result folders; the first is the baseline")
    c.add_argument("--out", required=True, help="a new folder, or an earlier comparison (never a folder "
                   "that is or holds another command's output)")
    c.add_argument("--n-boot", type=n_boot, default=1000,
                   help="bootstrap resamples, 1 to 1,000,000 and within memory (default 1000)")
    c.add_argument("--seed", type=int, default=0, help="bootstrap seed (default 0)")
    c.set_defaults(execute=execute)


def execute(args: argparse.Namespace) -> int:
    from ..compare import compare

    summary = compare(args.dirs, args.out, args.n_boot, args.seed)
    print(summary["markdown"])
    for w in summary["warnings"]:
        print(w, file=sys.stderr)
    return 0
