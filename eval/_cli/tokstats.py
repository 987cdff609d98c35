"""`python -m eval tokstats`: tokenizer diagnostics per task and language (fertility, PCW, parity)."""
from __future__ import annotations

import argparse
import json
from pathlib import Path


def register(sub: argparse._SubParsersAction, fmt: type) -> None:
    t = sub.add_parser("tokstats", formatter_class=fmt,
                       help="tokenizer diagnostics per task and language (fertility, PCW, parity)")
    t.add_argument("--model", default="default", help="HF folder, .gguf file or 'default'")
    t.add_argument("--data", required=True)
    t.add_argument("--results", default=None, help="an `eval run` folder: accuracy vs fragmentation + plot")
    t.add_argument("--out", default=None, help="folder for tokstats.json / tokstats.md / plot")
    t.add_argument("--name", default=None, help="display name (default: the model folder's name)")
    t.set_defaults(execute=execute)


def execute(args: argparse.Namespace) -> int:
    from common.models import resolve_model
    from synth.readers import load_data

    from .. import tokstats as ts
    from ..runner import SAMPLES, RunError

    if args.results and not (Path(args.results) / SAMPLES).is_file():  # else an empty table and plot, silently
        raise RunError(f"--results {args.results}: no {SAMPLES} (an `eval run` or `eval score` folder is expected)")
    if args.out:  # common/paths.py: the one output rule (never into another command's output, at any depth)
        from common.paths import output_refusal

        why = output_refusal(Path(args.out), "tokstats", replace=False)
        if why:
            raise RunError(f"--out {why}; write tokstats into another --out")
    records = list(load_data(args.data))
    if args.results:  # a run of other data: no row to group, an empty table and plot, silently (issue 36)
        from ..runner import read_samples

        ids = read_samples(Path(args.results) / SAMPLES, repair=False)
        shared = sum(i in ids for i in {r["id"] for r in records})
        if not shared:
            raise RunError(f"--results {args.results}: none of its {len(ids)} rows is in --data {args.data} (a run "
                           "of other data?); pass the data that run evaluated")
    from transformers import AutoTokenizer

    path = resolve_model(args.model, allow_pickle_weights=True)  # reads the tokenizer only
    tok = AutoTokenizer.from_pretrained(path)
    stats = ts.cell_stats(tok, records)
    par = ts.parity(tok)
    speed = ts.throughput(tok, [r["prompt"] for r in records[:2000]])
    name = args.name or path.name
    md = ts.markdown_table(stats, par, speed, name)
    report = {"model": str(args.model), "cells": [c.row() for c in stats], "parity": par, "throughput": speed}
    if args.results:
        from ..runner import iter_samples

        recs = {r["id"]: r for r in records}
        curve = ts.accuracy_by_fragmentation(tok, iter_samples(Path(args.results) / "samples.jsonl"), recs)
        report["accuracy_by_fragmentation"] = curve
        md += "\n| tokens per unit | n | accuracy |\n|---|---:|---:|\n" + "".join(
            f"| {k} | {v['n']} | {v['accuracy']:.1f} |\n" for k, v in curve.items())
        if args.out:
            Path(args.out).mkdir(parents=True, exist_ok=True)
            plot = ts.plot_fragmentation({name: curve}, Path(args.out) / "fragmentation.png")
            md += f"\nPlot: {plot}\n"
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        (out / "tokstats.json").write_text(json.dumps(report, ensure_ascii=False, indent=2), encoding="utf-8")
        (out / "tokstats.md").write_text(md, encoding="utf-8")
        from common.paths import write_marker

        write_marker(out, "tokstats", sorted(p.name for p in out.iterdir()
                                             if p.name in ("tokstats.json", "tokstats.md", "fragmentation.png")))
    print(md)
    return 0
