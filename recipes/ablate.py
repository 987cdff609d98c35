"""Reward-granularity ablation: train one GRPO arm per granularity (same seed, same data), evaluate the
base model and every arm with `eval run`, and write the comparison (`eval compare`).

    python recipes/ablate.py --config recipes/configs/grpo_smollm2_cpu.yaml --granularity coarse fine \\
        --out runs/ablate --eval-data official:/path/to/Tase --eval-limit 100 [-- extra grpo.py options]

Both arms share the config, hence the seed and the training data; only reward_granularity differs.
Each step is skipped when its output already exists (a killed arm resumes from its last checkpoint,
evaluations continue where they stopped), so rerunning the same command finishes a killed ablation.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

from common.process import die_with_parent
from recipes.errors import StepFailed, one_line_exit

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent


def sh(cmd: list[str]) -> None:
    """Print and run a step; a failed one (it printed its own error) raises StepFailed: `main` prints its line and
    returns the step's exit code."""
    print("+ " + " ".join(cmd), flush=True)
    res = subprocess.run(cmd, cwd=ROOT, preexec_fn=die_with_parent())  # a step dies with the ablation
    if res.returncode != 0:
        raise StepFailed(f"step failed with exit code {res.returncode}: {' '.join(cmd[:4])} ...", res.returncode)


@one_line_exit
def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    extra: list[str] = []
    if "--" in argv:
        i = argv.index("--")
        argv, extra = argv[:i], argv[i + 1 :]
    p = argparse.ArgumentParser(prog="python recipes/ablate.py", description=__doc__.splitlines()[0])
    p.add_argument("--config", required=True, help="GRPO YAML config (recipes/configs/...)")
    p.add_argument("--granularity", nargs="+", default=["coarse", "fine"], choices=["coarse", "strict", "fine"])
    p.add_argument("--out", required=True)
    p.add_argument("--base", default=None, help="model every arm starts from (default: the config's model)")
    p.add_argument("--eval-data", action="append", required=True, help="official:DIR or FILE.jsonl (repeatable)")
    p.add_argument("--eval-limit", type=int, default=None, help="rows per file in evaluation")
    p.add_argument("--max-new-tokens", type=int, default=256)
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument("--eval-backend", choices=["hf", "vllm"], default=None,
                   help="eval run's --backend (default: eval's own, vllm where installed, else hf)")
    args = p.parse_args(argv)
    if not Path(args.config).is_file():
        print(f"error: no such config file: {args.config}", file=sys.stderr)
        return 2
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    py = sys.executable
    base_args = ["--model_name_or_path", args.base] if args.base else []
    models = {"base": args.base or "default"}
    if not args.base:
        from recipes.parser import read_yaml

        cfg = read_yaml(args.config)  # one line for invalid YAML or a key given twice, not a traceback
        models["base"] = str((cfg if isinstance(cfg, dict) else {}).get("model_name_or_path") or "default")
    for g in args.granularity:
        arm = out / g
        if not (arm / "model.safetensors").exists() and not (arm / "adapter_model.safetensors").exists():
            resume = ["--resume_from_checkpoint", "true"]  # a killed run continues; a fresh folder starts at step 0
            sh([py, str(HERE / "grpo.py"), "--config", args.config, "--reward_granularity", g,
                "--output_dir", str(arm), *base_args, *extra, *resume])
        exported = out / "export" / g  # plain bf16 folder (LoRA merged) that eval loads as is
        if not (exported / "config.json").exists():
            sh([py, str(HERE / "export.py"), str(arm), "--out", str(exported), "--force"])
        models[g] = str(exported)
    summary = {}
    for k, spec in enumerate(args.eval_data):
        runs = []
        for name, model in models.items():
            d = out / "eval" / f"data{k}" / name
            cmd = [py, "-m", "eval", "run", "--model", model, "--data", spec, "--out", str(d),
                   "--max-new-tokens", str(args.max_new_tokens), "--batch-size", str(args.batch_size), "--no-progress"]
            if args.eval_limit:
                cmd += ["--limit", str(args.eval_limit)]
            if args.eval_backend:
                cmd += ["--backend", args.eval_backend]
            sh(cmd)
            runs.append(str(d))
        cmp_dir = out / "comparison" / f"data{k}"
        sh([py, "-m", "eval", "compare", *runs, "--out", str(cmp_dir)])
        summary[spec] = json.loads((cmp_dir / "comparison.json").read_text())["markdown"]
    (out / "ablation.json").write_text(json.dumps({"models": models, "comparisons": summary}, indent=2))
    for spec, md in summary.items():
        print(f"\n# {spec}\n{md}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
