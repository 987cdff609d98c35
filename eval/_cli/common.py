"""Pieces every `python -m eval` subcommand shares: argument types, the generation options of `run` and
`robustness run`, and the summary lines."""
from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Callable
from typing import Any


def _number(kind: type, noun: str, bound: str, ok: Callable[[Any], bool]) -> Callable[[str], Any]:
    """An argparse type: `kind(s)` passing `ok`, else one line: "expected <noun><bound>, got '<s>'"."""

    def parse(s: str) -> Any:
        try:
            v = kind(s)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {noun}, got {s!r}") from None
        if not ok(v):
            raise argparse.ArgumentTypeError(f"expected {noun}{bound}, got {s!r}")
        return v

    return parse


pos_int = _number(int, "a positive integer", "", lambda v: v >= 1)
pos_float = _number(float, "a number", " > 0", lambda v: 0 < v < math.inf)  # nan and inf fail both
nonneg_float = _number(float, "a number", " >= 0", lambda v: 0 <= v < math.inf)
nonneg_int = _number(int, "an integer", " >= 0", lambda v: v >= 0)
unit_float = _number(float, "a number", " in (0, 1]", lambda v: 0 < v <= 1)
MAX_BOOT = 1_000_000  # more resamples change no reported digit; the memory check in compare bounds it further
n_boot = _number(int, "an integer", f" from 1 to {MAX_BOOT:,}", lambda v: 1 <= v <= MAX_BOOT)
# pass@k screens use k <= 64; a billion samples per row failed after 38 s in the allocator (issue 36)
MAX_SAMPLES = 1024
num_samples = _number(int, "an integer", f" from 1 to {MAX_SAMPLES:,}", lambda v: 1 <= v <= MAX_SAMPLES)


def add_generation_args(r: argparse.ArgumentParser) -> None:
    """Backend, generation and progress options shared by `run` and `robustness run`."""
    from ..backends import BACKENDS, default_backend_help

    r.add_argument("--backend", choices=BACKENDS.names(), default=None,
                   help="; ".join(f"{n}: {cls.help}" for n, cls in BACKENDS.items())
                        + f" (default: {default_backend_help()})")
    r.add_argument("--no-progress", action="store_true", help="no progress bar")
    r.add_argument("--allow-pickle-weights", action="store_true",
                   help="load a model folder without safetensors weights (pickle files can run code; trusted "
                        "folders only)")
    g = r.add_argument_group("generation (greedy unless --temperature > 0)")
    g.add_argument("--max-new-tokens", type=pos_int, default=1024, help="default 1024")
    g.add_argument("--temperature", type=nonneg_float, default=0.0, help="0 = greedy (default)")
    g.add_argument("--top-p", type=unit_float, default=1.0, help="in (0, 1], default 1.0")
    g.add_argument("--top-k", type=int, default=-1, help="<= 0: off (default)")
    g.add_argument("--seed", type=int, default=0, help="sampling seed (default 0)")
    g.add_argument("--batch-size", type=pos_int, default=None,
                   help="prompts per generate call and per flush (default: "
                        + ", ".join(f"{n} {cls.batch_size}" for n, cls in BACKENDS.items() if not cls.remote) + ")")
    g.add_argument("--system-prompt", default=None,
                   help="override the official system prompt ('' for none)")
    b = r.add_argument_group("backend")
    b.add_argument("--dtype", default=None, help="bfloat16 | float16 | float32 (default on GPU: bfloat16 for hf, "
                                                 "the model's own for vllm; on CPU, both: bfloat16 where the CPU "
                                                 "has it natively (avx512_bf16/amx), else float32, ~4.7x faster "
                                                 "there)")
    b.add_argument("--device", default=None, help="hf only: cpu, cuda, cuda:1 (default: cuda if available)")
    b.add_argument("--threads", type=pos_int, default=None,
                   help="hf on CPU: torch threads (default: torch's choice; 1 is fastest on a busy shared CPU)")
    b.add_argument("--max-model-len", type=pos_int, default=None, help="vllm only (default: the model's)")
    b.add_argument("--enforce-eager", default=None, type=lambda s: s.lower() in ("1", "true", "yes"),
                   metavar="true|false", help="vllm only: skip torch.compile (default: true on CPU, where compiling "
                                              "took minutes of a busy 2-core machine; false on GPU)")
    b.add_argument("--gpu-memory-utilization", type=unit_float, default=None, help="vllm only, in (0, 1] (default 0.9)")
    b.add_argument("--tensor-parallel-size", type=pos_int, default=None, help="vllm only (default 1)")
    a = r.add_argument_group("openai backend (any OpenAI-compatible chat-completions server)")
    a.add_argument("--base-url", default=None, help="e.g. https://api.openai.com/v1 or http://127.0.0.1:8000/v1")
    a.add_argument("--model-name", default=None, help="the model as the server names it (replaces --model)")
    a.add_argument("--api-key-env", default="OPENAI_API_KEY",
                   help="environment variable holding the key (default OPENAI_API_KEY; the key is never "
                        "written anywhere; a loopback server may go without one)")
    a.add_argument("--concurrency", type=pos_int, default=8, help="requests in flight (default 8)")
    a.add_argument("--rpm", type=pos_float, default=None, help="at most this many requests started per minute")
    a.add_argument("--timeout", type=pos_float, default=600.0, help="seconds per request (default 600)")
    a.add_argument("--max-retries", type=nonneg_int, default=6,
                   help="retries per request on 429, 5xx, timeouts and dropped connections, with exponential "
                        "backoff, jitter and the server's Retry-After (default 6)")
    a.add_argument("--token-param", choices=["max_tokens", "max_completion_tokens"], default="max_tokens",
                   help="how --max-new-tokens is sent (default max_tokens; OpenAI reasoning models need "
                        "max_completion_tokens, which also counts their hidden reasoning tokens)")
    a.add_argument("--no-temperature", action="store_true",
                   help="send no temperature/top_p/seed (for models that only accept their own, e.g. OpenAI "
                        "o-series and gpt-5)")


def warn_invalid(res: dict) -> None:
    from ..runner import invalid_note

    note = invalid_note(res)
    if note:
        print(note, file=sys.stderr)


def summary(res: dict) -> str:
    if not res["n"]:  # "overall 0.00" would read as a scored run that got everything wrong (issue 36)
        return f"nothing scored yet (n=0 of {res.get('n_expected', '?')} rows): no accuracy to report"
    tasks = " ".join(f"{k} {v:.1f}" for k, v in res["by_task"].items())
    line = f"overall {res['overall']:.2f} (micro {res['micro']['overall']:.2f}, n={res['n']}) | {tasks}"
    files = res.get("files_scored") or []
    if files and (res.get("subset") or len(files) <= 3):  # which files these numbers are of, when not the whole data
        line += f"\nfiles: {', '.join(files)}" if len(files) <= 6 else \
            f"\nfiles: {len(files)} ({', '.join(files[:3])}, ...; all in results.json files_scored)"
    if "strict" in res:  # the official verdict without its loopholes, and the rows that passed only through one
        line += f"\nstrict {res['strict']['overall']:.2f} (micro {res['strict']['micro']:.2f}) | " \
                f"{res['loophole']['n']} rows passed the official verdict only through a loophole"
    return line


def pass_summary(res: dict) -> str:
    """One line of pass@k (runs with --num-samples K): overall pass@1 and pass@K, official and (where stored) strict."""
    pk = res["pass_at_k"]
    k = pk["k"]
    line = f"pass@1 {pk['pass@1']['overall']:.2f} | pass@{k} {pk[f'pass@{k}']['overall']:.2f} ({k} samples per row)"
    st = res.get("strict_pass_at_k")
    if st:
        line += f"\nstrict pass@1 {st['pass@1']['overall']:.2f} | strict pass@{k} {st[f'pass@{k}']['overall']:.2f}"
    return line
