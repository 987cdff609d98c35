"""Prompts/second of the evaluator's backends on the same model and prompts, side by side.

    python bench/eval_throughput.py [--model default] [--n 48] [--max-new-tokens 64] [--batch-size 8]

Runs the hf backend (CPU or GPU) and, when vllm and a CUDA GPU are present, the vllm backend on the
same prompts, and prints prompts/s, generated tokens/s and the vllm/hf ratio.
"""
from __future__ import annotations

import argparse
import platform
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import synth  # noqa: E402
from eval.backends import BackendError, GenConfig, make_backend  # noqa: E402
from eval.models import resolve_model  # noqa: E402
from eval.prompts import build_messages  # noqa: E402


def measure(backend: str, model: Path, convs: list, cfg: GenConfig) -> tuple[float, float]:
    be = make_backend(backend, model, cfg)
    be.generate(convs[: cfg.batch_size])  # warm-up
    t = time.perf_counter()
    outs = []
    for i in range(0, len(convs), cfg.batch_size):
        outs += be.generate(convs[i : i + cfg.batch_size])
    dt = time.perf_counter() - t
    tok = getattr(be, "tok", None)
    n_tok = sum(len(tok.encode(o)) for o in outs) if tok else float("nan")
    return len(convs) / dt, n_tok / dt


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="default")
    p.add_argument("--n", type=int, default=48)
    p.add_argument("--max-new-tokens", type=int, default=64)
    p.add_argument("--batch-size", type=int, default=8)
    args = p.parse_args()
    import torch

    model = resolve_model(args.model)
    recs = list(synth.generate("all", "en", args.n, 0))
    convs = [build_messages(r) for r in recs]
    cfg = GenConfig(max_new_tokens=args.max_new_tokens, batch_size=args.batch_size)
    dev = torch.cuda.get_device_name(0) if torch.cuda.is_available() else f"CPU x{torch.get_num_threads()} threads"
    print(f"# eval throughput: {model.name}, {args.n} prompts (synth en, all tasks), greedy, "
          f"max_new_tokens={args.max_new_tokens}, batch {args.batch_size}; {dev}; {platform.machine()}")
    rates = {}
    for name in ("hf", "vllm"):
        try:
            rates[name] = measure(name, model, convs, cfg)
            print(f"{name:<5} {rates[name][0]:8.2f} prompts/s  {rates[name][1]:9.1f} generated tokens/s", flush=True)
        except BackendError as e:
            print(f"{name:<5} skipped: {e}")
    if "vllm" in rates:
        print(f"vllm/hf ratio: {rates['vllm'][0] / rates['hf'][0]:.2f}x prompts/s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
