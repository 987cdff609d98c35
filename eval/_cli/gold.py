"""`python -m eval gold`: write correct predictions for a data set (sanity check)."""
from __future__ import annotations

import argparse
import json
from pathlib import Path


def register(sub: argparse._SubParsersAction, fmt: type) -> None:
    o = sub.add_parser("gold", formatter_class=fmt, help="write correct predictions for a data set (sanity check)",
                       description="Write a predictions file with a correct completion for every row "
                                   "(labels in tags; constructed answers for REORD and LENOP generate, checked "
                                   "by rewards.score). `eval score` on it must give 100 everywhere.")
    o.add_argument("--data", required=True)
    o.add_argument("--out", required=True, help="predictions FILE.jsonl (an existing file only if it holds "
                   "predictions; never inside another command's output, e.g. RUN/samples.jsonl)")
    o.add_argument("--seed", type=int, default=0,
                   help="unused: REORD answers are constructed deterministically (kept for old command lines)")
    o.set_defaults(execute=execute)


def execute(args: argparse.Namespace) -> int:
    from common.paths import file_refusal, followed, jsonl_with_keys
    from synth.gold import GoldError
    from synth.readers import load_data

    from ..gold import gold_predictions

    out = followed(args.out)  # a symlinked --out: its target is replaced, the link stays (every writer)
    src = Path(args.data.removeprefix("official:"))
    if out.is_dir():
        raise GoldError(f"--out {out} is a folder; gold writes one predictions FILE.jsonl")
    if out.resolve() == src.resolve() or src.resolve() in out.resolve().parents:
        raise GoldError(f"--out {out} is the data being read ({args.data}); write the predictions elsewhere")
    # the one rule for every output (common/paths.py): replace only an earlier predictions file, never a file
    # of the user's own or one inside another command's output (a run's samples.jsonl or results.json)
    why = file_refusal(out, "gold", own=lambda f: jsonl_with_keys(f, ("id", "completion")))
    if why:
        raise GoldError(f"--out {why}; write the predictions elsewhere")
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    n = 0
    with tmp.open("w", encoding="utf-8") as f:
        for line in gold_predictions(load_data(args.data), args.seed):
            f.write(json.dumps(line, ensure_ascii=False) + "\n")
            n += 1
    tmp.replace(out)
    print(f"wrote {n} gold predictions to {out}")
    return 0
