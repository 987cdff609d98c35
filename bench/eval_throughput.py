"""Prompts/second of the evaluator's backends on the same model and prompts, side by side.

    python bench/eval_throughput.py [--model default] [--n 48] [--max-new-tokens 64] [--batch-size 8]
                                    [--threads N] [--dtype bfloat16]

Runs the hf backend (CPU or GPU) and, when vllm and a CUDA GPU are present, the vllm backend on the
same prompts (synth, all ten tasks, English, greedy), and prints prompts/s, generated tokens/s and the
vllm/hf ratio. Without vllm or a GPU the vllm row says why it was skipped.
"""
from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from pathlib import Path

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # as `python -m eval` does (see eval/__main__.py)

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import synth  # noqa: E402
from eval.backends import BackendError, GenConfig, make_backend  # noqa: E402
from eval.models import resolve_model  # noqa: E402
from eval.prompts import build_messages  # noqa: E402


def cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def measure(backend: str, model: Path, convs: list, cfg: GenConfig, tok, **opts) -> tuple[float, float]:
    be = make_backend(backend, model, cfg, quiet=True, **opts)
    be.generate(convs[: cfg.batch_size])  # warm-up
    t = time.perf_counter()
    outs = []
    for i in range(0, len(convs), cfg.batch_size):
        outs += be.generate(convs[i : i + cfg.batch_size])
    dt = time.perf_counter() - t
    n_tok = sum(len(tok.encode(o, add_special_tokens=False)) for o in outs)
    return len(convs) / dt, n_tok / dt


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="default")
    p.add_argument("--n", type=int, default=48)
    p.add_argument("--max-new-tokens", type=int, default=64)
    p.add_argument("--batch-size", type=int, default=8, help="hf batch; vllm gets all prompts at once")
    p.add_argument("--threads", type=int, default=None, help="hf on CPU: torch threads")
    p.add_argument("--dtype", default=None, help="hf dtype (default bfloat16)")
    args = p.parse_args()
    import torch

    model = resolve_model(args.model)
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(model)
    recs = sorted(synth.generate("all", "en", args.n, 0), key=lambda r: -len(r["prompt"]))  # as `eval run` orders
    convs = [build_messages(r) for r in recs]
    cfg = GenConfig(max_new_tokens=args.max_new_tokens, batch_size=args.batch_size)
    if args.threads:
        torch.set_num_threads(args.threads)
    dev = (torch.cuda.get_device_name(0) if torch.cuda.is_available()
           else f"{cpu_name()}, {os.cpu_count()} cores, torch {torch.get_num_threads()} threads")
    print(f"# eval throughput: {model.name}, {args.n} prompts (synth en, all tasks), greedy, "
          f"max_new_tokens={args.max_new_tokens}, hf batch {args.batch_size}, dtype {args.dtype or 'bfloat16'}; "
          f"{dev}; torch {torch.__version__}")
    rates = {}
    for name in ("hf", "vllm"):
        try:
            c = cfg if name == "hf" else GenConfig(max_new_tokens=args.max_new_tokens, batch_size=len(convs))
            opts = {"dtype": args.dtype} if name == "hf" and args.dtype else {}
            rates[name] = measure(name, model, convs, c, tok, **opts)
            print(f"{name:<5} {rates[name][0]:8.2f} prompts/s  {rates[name][1]:9.1f} generated tokens/s", flush=True)
        except BackendError as e:
            print(f"{name:<5} skipped: {e}")
    if "vllm" in rates:
        print(f"vllm/hf ratio: {rates['vllm'][0] / rates['hf'][0]:.2f}x prompts/s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
