"""Paired gains in strict accuracy (the official verdict without its loopholes, docs/rewards.md) between `eval run`
result folders, with the file-stratified 95% bootstrap interval of `eval compare` (which reports official gains):
where an arm's official gain is all loophole passes, this is the line that says so.

    python bench/strict_gains.py --evals runs/proof_guidance_cpu/eval/official --base warm-up \\
        dynamic hint gold sft_control [--vs sft_control] [--n-boot 2000] [--out FILE.md]
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from common.errors import TaseError, one_line_errors, one_line_exit
from common.paths import out_file_refusal
from eval._cli.common import MAX_BOOT, n_boot, nonneg_int
from eval.compare import bootstrap_delta, load_run


def gains(evals: Path, base: str, models: list[str], vs: list[str], n_boot: int, seed: int) -> list[str]:
    """One line per (model vs base) and (model vs each --vs), official and strict, as the proof summary words them."""
    names = list(dict.fromkeys([base, *vs, *models]))
    runs = {n: load_run(evals / n) for n in names}
    for n, (_, _, samples) in runs.items():  # folders scored before samples carried the strict verdict
        if any("strict" not in x for x in samples.values()):
            raise TaseError(f"{evals / n}: its samples carry no strict verdict; re-score it (`python -m eval score "
                            f"--force`) or use bench/strict_passk.py's re-scoring")
    lines = [f"gains on {evals} (points; paired, file-stratified 95% bootstrap, {n_boot} resamples, seed {seed}):",
             "", "| model | vs | official | strict | n |", "|---|---|---:|---:|---:|"]
    for other in [base, *vs]:
        for m in models:
            if m == other:
                continue
            cells = []
            for key in ("coarse", "strict"):
                d = bootstrap_delta(runs[other][2], runs[m][2], n_boot, seed, key=key)
                if not d["n_shared"]:
                    raise TaseError(f"{evals / m} and {evals / other} share no scored row: nothing to pair")
                lo, hi = d["overall"]["ci95"]
                cells.append(f"{d['overall']['delta']:+.2f} [{lo:+.2f}, {hi:+.2f}]")
            lines.append(f"| {m} | {other} | {cells[0]} | {cells[1]} | {d['n_shared']} |")
    return lines


@one_line_exit
def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter)
    one_line_errors(p)  # a bad value: one line and exit 2, as the CLIs (eval compare's own checks)
    p.add_argument("--evals", required=True, help="folder holding one `eval run` folder per model")
    p.add_argument("--base", required=True, help="the model every other is compared with (a folder in --evals)")
    p.add_argument("models", nargs="+", help="models (folders in --evals)")
    p.add_argument("--vs", nargs="*", default=[], help="more baselines, each compared with every model")
    p.add_argument("--n-boot", type=n_boot, default=2000, help=f"bootstrap resamples, 1 to {MAX_BOOT:,} (as eval "
                                                                 "compare; default 2000)")
    p.add_argument("--seed", type=nonneg_int, default=0)
    p.add_argument("--out", help="also write the table here (markdown)")
    args = p.parse_args(argv)
    why = args.out and out_file_refusal(args.out)
    if why:
        raise TaseError(why)
    text = "\n".join(gains(Path(args.evals), args.base, args.models, args.vs, args.n_boot, args.seed)) + "\n"
    print(text, end="")
    if args.out:
        Path(args.out).write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
