"""python -m eval {run,score,compare,export-lm-eval,tokstats}: the one evaluator for base and tuned models."""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m eval", description=__doc__)
    sub = p.add_subparsers(dest="cmd", required=True)

    r = sub.add_parser("run", help="generate with a model, score, write results.json + samples.jsonl (resumable)")
    r.add_argument("--model", default="default", help="HF folder, .gguf file, or 'default' (SmolLM2-135M-Instruct)")
    r.add_argument("--data", required=True, help="official:DIR (official release layout) or FILE.jsonl")
    r.add_argument("--backend", choices=["hf", "vllm"], default="hf")
    r.add_argument("--out", required=True, help="output folder; rerunning the same command resumes")
    r.add_argument("--limit", type=int, default=None, help="at most N rows per file, evenly spread")
    r.add_argument("--cot", action="store_true", help="append a step-by-step instruction to each prompt")
    r.add_argument("--max-new-tokens", type=int, default=1024)
    r.add_argument("--temperature", type=float, default=0.0, help="0 = greedy (default)")
    r.add_argument("--top-p", type=float, default=1.0)
    r.add_argument("--top-k", type=int, default=-1)
    r.add_argument("--seed", type=int, default=0)
    r.add_argument("--batch-size", type=int, default=8)
    r.add_argument("--system-prompt", default=None, help="override the official system prompt")
    r.add_argument("--no-progress", action="store_true")

    s = sub.add_parser("score", help="score completions produced elsewhere (JSON lines: id, completion)")
    s.add_argument("--data", required=True)
    s.add_argument("--predictions", required=True)
    s.add_argument("--out", required=True)

    c = sub.add_parser("compare", help="paper-style tables, bootstrap deltas and a plot for several runs")
    c.add_argument("dirs", nargs="+", help="result folders; the first is the baseline")
    c.add_argument("--out", required=True)
    c.add_argument("--n-boot", type=int, default=1000)
    c.add_argument("--seed", type=int, default=0)

    e = sub.add_parser("export-lm-eval", help="write an lm-evaluation-harness task folder scoring with rewards")
    e.add_argument("--data", required=True)
    e.add_argument("--out", required=True)
    e.add_argument("--max-new-tokens", type=int, default=1024)

    t = sub.add_parser("tokstats", help="tokenizer diagnostics per task and language (fertility, PCW, parity)")
    t.add_argument("--model", default="default", help="HF folder, .gguf file or 'default'")
    t.add_argument("--data", required=True)
    t.add_argument("--results", default=None, help="an `eval run` folder: accuracy vs fragmentation + plot")
    t.add_argument("--out", default=None, help="folder for tokstats.json / tokstats.md / plot")
    t.add_argument("--name", default=None, help="display name (default: the model folder's name)")
    return p


def _summary(res: dict) -> str:
    tasks = " ".join(f"{k} {v:.1f}" for k, v in res["by_task"].items())
    return f"overall {res['overall']:.2f} (micro {res['micro']['overall']:.2f}, n={res['n']}) | {tasks}"


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    from .backends import BackendError, GenConfig
    from .compare import CompareError
    from .data import DataError
    from .models import ModelError
    from .runner import RunError

    try:
        if args.cmd == "run":
            gen = GenConfig(args.max_new_tokens, args.temperature, args.top_p, args.top_k, args.seed, args.batch_size)
            from .prompts import SYSTEM_PROMPT
            from .runner import run

            res = run(args.model, args.data, args.out, args.backend, args.limit, args.cot, gen,
                      SYSTEM_PROMPT if args.system_prompt is None else args.system_prompt, not args.no_progress)
            print(_summary(res))
            print(f"wrote {Path(args.out) / 'results.json'} and samples.jsonl")
        elif args.cmd == "score":
            from .runner import score_predictions

            res = score_predictions(args.data, args.predictions, args.out)
            print(_summary(res))
        elif args.cmd == "compare":
            from .compare import compare

            summary = compare(args.dirs, args.out, args.n_boot, args.seed)
            print(summary["markdown"])
        elif args.cmd == "export-lm-eval":
            from .lm_eval_export import export

            names = export(args.data, args.out, args.max_new_tokens)
            print(f"wrote {len(names)} lm-eval tasks (group 'tase') to {args.out}")
        elif args.cmd == "tokstats":
            return _tokstats(args)
    except (DataError, ModelError, BackendError, RunError, CompareError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except OSError as e:
        print(f"error: {e.filename or ''}: {e.strerror}", file=sys.stderr)
        return 2
    return 0


def _tokstats(args: argparse.Namespace) -> int:
    from transformers import AutoTokenizer

    from . import tokstats as ts
    from .data import load_data
    from .models import resolve_model

    path = resolve_model(args.model)
    tok = AutoTokenizer.from_pretrained(path)
    records = list(load_data(args.data))
    stats = ts.cell_stats(tok, records)
    par = ts.parity(tok)
    speed = ts.throughput(tok, [r["prompt"] for r in records[:2000]])
    name = args.name or path.name
    md = ts.markdown_table(stats, par, speed, name)
    report = {"model": str(args.model), "cells": [c.row() for c in stats], "parity": par, "throughput": speed}
    if args.results:
        from .runner import iter_samples

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
    print(md)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
