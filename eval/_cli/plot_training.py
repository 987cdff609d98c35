"""`python -m eval plot-training RUN [RUN...] --out PNG`: training curves of GRPO runs from their metrics.jsonl."""
from __future__ import annotations

import argparse
from pathlib import Path


def register(sub: argparse._SubParsersAction, fmt: type) -> None:
    p = sub.add_parser("plot-training", formatter_class=fmt,
                       help="reward, official and strict accuracy, loophole and zero-variance shares against the "
                            "step, for one or more GRPO runs, in one PNG")
    p.add_argument("runs", nargs="+", metavar="RUN", help="a run folder of recipes/grpo.py (its metrics.jsonl), or "
                   "that file")
    p.add_argument("--out", default=None, help="the PNG to write (default: RUN/training.png of the first run)")
    p.add_argument("--name", action="append", default=None, help="legend name of each run, in order (default: the "
                   "folder names)")
    p.set_defaults(execute=execute)


def execute(args: argparse.Namespace) -> int:
    from ..plot_training import PlotError, plot_training

    if args.name and len(args.name) != len(args.runs):
        raise PlotError(f"--name given {len(args.name)} times for {len(args.runs)} runs")
    first = Path(args.runs[0])
    out = Path(args.out) if args.out else (first if first.is_dir() else first.parent) / "training.png"
    if out.suffix.lower() != ".png":
        raise PlotError(f"--out {out}: a .png file is expected")
    print(f"Plot: {plot_training(args.runs, out, args.name)}")
    return 0
