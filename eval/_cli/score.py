"""`python -m eval score`: score completions produced elsewhere (id + completion)."""
from __future__ import annotations

import argparse
from pathlib import Path

from .common import pass_summary, summary, warn_invalid


def register(sub: argparse._SubParsersAction, fmt: type) -> None:
    s = sub.add_parser("score", formatter_class=fmt, help="score completions produced elsewhere (id + completion)",
                       description="Score completions made elsewhere (an API model, another harness): JSON lines "
                                   "with `id` (as in the data) and `completion` (a string or chat messages). "
                                   "Writes the same results.json and samples.jsonl as `run`.")
    s.add_argument("--data", required=True, help="official:DIR or FILE.jsonl")
    s.add_argument("--predictions", required=True,
                   help="JSON lines: {\"id\": ..., \"completion\": ...}, or {\"id\": ..., \"completions\": [k "
                        "strings]} for pass@k")
    s.add_argument("--out", required=True, help="output folder (must not hold scores unless --force, "
                   "nor be or hold another command's output)")
    s.add_argument("--force", action="store_true", help="replace the scores already in --out")
    s.set_defaults(execute=execute)


def execute(args: argparse.Namespace) -> int:
    from ..runner import score_predictions

    res = score_predictions(args.data, args.predictions, args.out, args.force)
    warn_invalid(res)
    print(summary(res))
    if res.get("pass_at_k"):
        print(pass_summary(res))
    print(f"wrote {Path(args.out) / 'results.json'} and samples.jsonl")
    return 0
