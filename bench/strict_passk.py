"""Strict pass@k of `eval run --num-samples K` folders: each stored sample re-scored with the strict verdict (the
official verdict without its loopholes, docs/rewards.md), then the unbiased pass@k estimator per row, averaged over
rows. `eval run` reports pass@k on the official verdict, where a loophole pass counts; the RL question "can the
model sample a right answer at all" is the strict one (issue 63: a warm-up's official pass@8 of 30 was all loopholes).
`eval run --num-samples K` now stores each sample's strict verdict and reports `strict_pass_at_k` itself; this script
serves folders sampled before that (it re-scores every sample).

    python bench/strict_passk.py --data official:runs/proof_guidance_cpu/official \\
        runs/proof_guidance_cpu/eval/passk/* [--out FILE.md]
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from common.errors import TaseError, bounded, one_line_errors, one_line_exit
from common.paths import out_file_refusal
from eval.aggregate import pass_at_k_estimate
from rewards import score
from synth.readers import load_data


def row_counts(folder: Path, rows: dict[str, dict]) -> list[tuple[int, int, int]]:
    """Per valid row of folder/samples.jsonl: (samples, official hits, strict hits); a line that is not an `eval run
    --num-samples` sample is one line naming the file and line."""
    path = folder / "samples.jsonl"
    if not path.is_file():
        raise TaseError(f"{path}: no such file (run `python -m eval run --num-samples K` first)")
    out = []
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise TaseError(f"{path}: cannot read ({getattr(e, 'strerror', None) or e})") from None
    for n, line in enumerate(text.splitlines(), 1):
        try:
            s = json.loads(line)
        except (ValueError, RecursionError):
            raise TaseError(f"{path}: line {n} is not JSON") from None
        if not isinstance(s, dict) or "id" not in s:
            raise TaseError(f"{path}: line {n} is not an `eval run` sample (no id): {bounded(s)}")
        every = s.get("samples")
        if not s.get("valid", True) or not isinstance(every, list) or not every:
            continue
        if not all(isinstance(e, dict) and isinstance(e.get("completion"), str)
                   and isinstance(e.get("coarse"), (int, float)) for e in every):
            raise TaseError(f"{path}: line {n}: each of its samples needs a completion and a coarse verdict")
        if s["id"] not in rows:
            raise TaseError(f"{path}: row {bounded(s['id'])} is not in --data")
        strict = sum(score(rows[s["id"]], e["completion"]).strict for e in every)
        out.append((len(every), int(sum(e["coarse"] for e in every)), int(strict)))
    if not out:
        raise TaseError(f"{path}: no row with several samples (not an `eval run --num-samples K` folder)")
    return out


def pct(counts: list[tuple[int, int, int]], k: int, hits: int) -> str:
    """Mean pass@k over rows in percent; hits 1: official, 2: strict (row_counts' tuple)."""
    return f"{100 * sum(pass_at_k_estimate(r[0], r[hits], k) for r in counts) / len(counts):.2f}"


def table(data: str, folders: list[Path]) -> list[str]:
    """One row per folder at its own K (the fewest samples of any of its rows): pass@j for j = 1, the powers of two
    below K and K; a j beyond a folder's K is `-` (a folder of 4 samples has no pass@8), never a smaller K for all."""
    rows = {r["id"]: r for r in load_data(data)}
    counts = {f.name: row_counts(f, rows) for f in folders}
    own = {name: min(n for n, _, _ in c) for name, c in counts.items()}
    ks = sorted({1} | set(own.values()) | {2**j for k in own.values() for j in range(1, 16) if 2**j < k})
    head = " | ".join(f"strict pass@{j}" for j in ks) + " | official pass@1 | official pass@K"
    lines = ["pass@k (%) per row, unbiased estimator (Chen et al. 2021), K samples a row (each folder's own); strict = "
             "re-scored without the official verdict's loopholes:", "", f"| model | rows | K | {head} |",
             "|---|---:|---:|" + "---:|" * (len(ks) + 2)]
    for name, c in counts.items():
        k = own[name]
        cells = [pct(c, j, 2) if j <= k else "-" for j in ks] + [pct(c, 1, 1), pct(c, k, 1)]
        lines.append(f"| {name} | {len(c)} | {k} | " + " | ".join(cells) + " |")
    return lines


@one_line_exit
def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    one_line_errors(p)  # a bad value: one line and exit 2, as the CLIs
    p.add_argument("--data", required=True, help="the rows the folders were sampled on (official:DIR or a .jsonl)")
    p.add_argument("folders", nargs="+", type=Path, help="`eval run --num-samples K` output folders")
    p.add_argument("--out", help="also write the table here (markdown)")
    args = p.parse_args(argv)
    why = args.out and out_file_refusal(args.out)
    if why:
        raise TaseError(why)
    if len({f.name for f in args.folders}) != len(args.folders):  # the table names a row by its folder's name
        raise TaseError(f"folders must have distinct names, got {', '.join(str(f) for f in args.folders)}")
    text = "\n".join(table(args.data, args.folders)) + "\n"
    print(text, end="")
    if args.out:
        Path(args.out).write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
