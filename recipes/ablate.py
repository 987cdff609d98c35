"""Ablation over any recipes/grpo.py option: one GRPO arm per point of a grid, evaluated and compared.

Every arm trains from the same config (hence the same data and seed) and the same warm-up `--base`; evaluate the
base model and every arm with `eval run` (whole files, or at most `--eval-limit N` rows of each), and write one
comparison table (paired intervals against the base model, each arm's wall time) beside `eval compare`'s tables.

    python recipes/ablate.py --config recipes/configs/grpo_combine_cpu.yaml --out runs/ablate \
        --vary loss_type=dapo,dr_grpo --vary importance_sampling_level=token,sequence \
        --base runs/warmup --eval-data official:/path/to/Tase [-- extra grpo.py options]
    python recipes/ablate.py --config C --reward_granularity coarse fine --out DIR --eval-data SPEC   # one axis

`--vary KEY=V1,V2` is repeatable (the arms are the cartesian product; `--reward_granularity A B` is the axis
reward_granularity=A,B; its former name `--granularity` still works, with a deprecation line); every arm's options
are parsed before the first one trains. Each step is skipped when its output already exists (a killed arm resumes
from its last checkpoint, evaluations continue where they stopped), so rerunning the same command finishes a killed
ablation. `--dry-run` checks every arm (its options as grpo.py's real
start checks them), the evaluation options and --out, and trains nothing. --out is a new or empty folder, or an
earlier ablation's (common/paths.py: the one output rule, with its marker); an arm's name is checked as every name
that becomes a path, and options ablate sets itself (--output_dir, --config, ...) cannot follow `--`. Each step is a
fresh interpreter running its printed command (a user can rerun it by hand); `--in-process` runs them in this one
(recipes/steps/pipeline.py `run_in_process`: torch, transformers and TRL imported once, for tiny arms such as the
suite's).
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from common.errors import StepFailed, TaseError, one_line_exit
from common.paths import OutputBusy, hold_output, out_folder_refusal, write_marker
from common.process import apply as process_settings
from recipes.steps.pipeline import in_process, run_command, run_in_process
from rewards.levels import COARSE, FINE, LEVELS

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent


def sh(cmd: list[str], fresh: bool = False) -> None:
    """Print and run a step (a subprocess that dies with the ablation; with --in-process its entry point's
    `main(argv)` here, unless `fresh`: a step that starts vLLM); a failed one (it printed its own error) raises
    StepFailed: `main` prints its line and returns the step's exit code."""
    print("+ " + " ".join(cmd), flush=True)
    code = run_command(cmd, ROOT, fresh=fresh)
    if code != 0:
        raise StepFailed(f"step failed with exit code {code}: {' '.join(cmd[:4])} ...", code)


@one_line_exit
def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    extra: list[str] = []
    if "--" in argv:
        i = argv.index("--")
        argv, extra = argv[:i], argv[i + 1 :]
    from eval._cli.common import pos_int
    from recipes.shared.parser import one_line_errors, rename_flags

    p = argparse.ArgumentParser(prog="python recipes/ablate.py", description=__doc__.splitlines()[0])
    p.add_argument("--config", required=True, help="GRPO YAML config (recipes/configs/...)")
    p.add_argument("--reward_granularity", nargs="+", default=None, choices=list(LEVELS),
                   help="the axis reward_granularity (default coarse fine when no --vary is given)")
    p.add_argument("--vary", action="append", default=[], metavar="OPTION=V1,V2",
                   help="an axis of the grid over any grpo.py option (repeatable: every combination is an arm)")
    p.add_argument("--out", required=True)
    p.add_argument("--base", default=None, help="model every arm starts from (default: the config's model)")
    p.add_argument("--eval-data", action="append", required=True, help="official:DIR or FILE.jsonl (repeatable)")
    p.add_argument("--eval-limit", type=pos_int, default=None, help="rows per file in evaluation")
    p.add_argument("--max-new-tokens", type=pos_int, default=256)
    p.add_argument("--batch-size", type=pos_int, default=8)
    from eval.backends import backend_names

    p.add_argument("--eval-backend", choices=backend_names(local=True), default=None,
                   help="eval run's --backend (default: eval's own, vllm where installed, else hf)")
    p.add_argument("--dry-run", action="store_true", help="check every arm and option as the real start does, "
                   "print the arms, train nothing")
    p.add_argument("--in-process", action="store_true", help="run each step's entry point (grpo.py, export.py, "
                   "python -m eval) in this process, importing torch and TRL once instead of once a step: for tiny "
                   "arms (the suite's ablation), where that import is most of a step's time; the commands, outputs and "
                   "resuming are the same. An arm's memory and its run folder's lock stay until the ablation ends; a "
                   "step that starts vLLM (use_vllm, trainer async, --eval-backend vllm or its default where vllm is "
                   "installed) still runs in its own process")
    one_line_errors(p)
    args = p.parse_args(rename_flags(argv, {"granularity": "reward_granularity"}))
    was = in_process()
    if args.in_process:  # process settings, before check_arms imports torch: the steps' own come too late in-process
        process_settings()
        run_in_process()
    try:
        return ablate(args, extra)
    finally:
        run_in_process(was)  # main called from Python (the tests) leaves its caller's steps as they were


def ablate(args: argparse.Namespace, extra: list[str]) -> int:
    """Check the config, the grid, every arm, the evaluation files and --out; then print the arms (--dry-run) or
    run the ablation under --out's write lock."""
    if not Path(args.config).is_file():
        print(f"error: no such config file: {args.config}", file=sys.stderr)
        return 2
    from recipes.steps.ablate_grid import arms_with_vllm, check_arms, check_extra, expand, parse_vary

    check_extra(extra)
    axes = parse_vary(args.vary)
    if args.reward_granularity or not axes:  # granularity stays one axis among others
        if "reward_granularity" in (k for k, _ in axes):
            raise TaseError("--reward_granularity and --vary reward_granularity=... name the same axis; give one")
        axes.insert(0, ("reward_granularity", args.reward_granularity or [COARSE, FINE]))
    arms = expand(axes)
    out = Path(args.out)
    check_out(out)
    parsed = check_arms(args.config, arms, [*(["--model_name_or_path", args.base] if args.base is not None else []),
                                            *extra], out)
    vllm_arms = arms_with_vllm(arms, parsed)
    for spec in args.eval_data:  # before anything trains: a missing file would fail after every arm has trained
        path = Path(spec.removeprefix("official:"))
        if not (path.is_dir() if spec.startswith("official:") else path.is_file()):
            raise TaseError(f"--eval-data {spec}: no such " + ("folder" if spec.startswith("official:") else "file"))
    if args.dry_run:
        for a in arms:
            print(f"arm {a.name}: {' '.join(a.argv())} -> {out / a.name}")
        print(f"{len(arms)} arm(s) checked; nothing trained (--dry-run)")
        return 0
    try:
        with hold_output(out):  # one writer per --out: two ablations into one folder would train the same arms
            check_out(out)
            out.mkdir(parents=True, exist_ok=True)
            write_marker(out, "ablate", [])  # known as this command's folder from the start: a rerun resumes
            return _run(args, arms, extra, out, vllm_arms)
    except OutputBusy as e:
        raise TaseError(str(e)) from None


def check_out(out: Path) -> None:
    """The one output rule for --out (common/paths.py): a folder that can be written, that is not and does not hold
    another command's output; an earlier ablation (its marker) resumes, its arms' runs and evaluations its own."""
    why = out_folder_refusal(out, "ablate", new_or_own=True)
    if why:
        raise TaseError(why)


def _run(args: argparse.Namespace, arms: list, extra: list[str], out: Path, vllm_arms: set[str]) -> int:
    """Train, export and evaluate every arm into OUT (each step resumes), then write the comparison. A step that
    starts vLLM (the arms in `vllm_arms`, evaluations on the vllm backend) runs in its own process."""
    from eval.backends import default_backend
    from recipes.steps.ablate_grid import comparison_table, load_times

    vllm_eval = (args.eval_backend or default_backend()) == "vllm"

    times_file = out / "times.json"
    times = load_times(times_file)
    py = sys.executable
    base_args = ["--model_name_or_path", args.base] if args.base is not None else []  # "" is checked, as a model
    models = {"base": args.base or "default"}
    if args.base is None:
        from recipes.shared.parser import read_yaml

        cfg = read_yaml(args.config)  # one line for invalid YAML or a key given twice, not a traceback
        models["base"] = str((cfg if isinstance(cfg, dict) else {}).get("model_name_or_path") or "default")
    for a in arms:
        arm = out / a.name
        t0 = time.time()
        ran = False
        if not (arm / "model.safetensors").exists() and not (arm / "adapter_model.safetensors").exists():
            resume = ["--resume_from_checkpoint", "true"]  # a killed run continues; a fresh folder starts at step 0
            sh([py, str(HERE / "grpo.py"), "--config", args.config, *a.argv(),
                "--output_dir", str(arm), *base_args, *extra, *resume], fresh=a.name in vllm_arms)
            ran = True
        exported = out / "export" / a.name  # plain bf16 folder (LoRA merged) that eval loads as is
        if not (exported / "config.json").exists():
            sh([py, str(HERE / "export.py"), str(arm), "--out", str(exported), "--force"])
            ran = True
        if ran:  # a rerun that skips finished steps keeps the time they took
            times.setdefault(a.name, {})["train_s"] = time.time() - t0
        models[a.name] = str(exported)
        times_file.write_text(json.dumps(times, indent=2))
    summary, tables = {}, {}
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
            t0 = time.time()
            sh(cmd, fresh=vllm_eval)  # eval run resumes: a finished evaluation returns at once
            entry = times.setdefault(name, {})
            entry[f"eval_s_data{k}"] = max(entry.get(f"eval_s_data{k}", 0.0), time.time() - t0)
            entry["eval_s"] = sum(v for key, v in entry.items() if key.startswith("eval_s_data"))
            times_file.write_text(json.dumps(times, indent=2))
            runs.append(str(d))
        cmp_dir = out / "comparison" / f"data{k}"
        sh([py, "-m", "eval", "compare", *runs, "--out", str(cmp_dir)])
        summary[spec] = json.loads((cmp_dir / "comparison.json").read_text())["markdown"]
        tables[spec] = comparison_table(out / "eval" / f"data{k}", arms, times, limit=args.eval_limit)
    (out / "ablation.json").write_text(json.dumps(
        {"models": models, "arms": {a.name: a.options for a in arms}, "times": times, "tables": tables,
         "comparisons": summary}, indent=2))
    md = "".join(f"# Ablation on {spec}\n\n{table}\n" for spec, table in tables.items())
    (out / "ablation.md").write_text(md)
    for spec, table in tables.items():
        print(f"\n# {spec}\n{table}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
