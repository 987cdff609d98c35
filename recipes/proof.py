"""`make proof TASE=DIR`: the proof that GRPO teaches token awareness, on whole official files, on CPU.

    python recipes/proof.py --config recipes/configs/proof_cpu.yaml --official /path/to/Tase [--out DIR] [--dry-run]
        [--completions DIR] [--in-process]

The stages, numbered in this order (an optional stage exists only with its config section, and the numbers of the
later ones close up). They run seed-major: subset, sft, start, sets and baseline (the evaluations of base, warm-up
and start) once, then each seed's unit (grpo .. summary) to its end before the next seed starts, printing "seed k of
n"; each finished unit writes its manifest (OUT/manifest_s<seed>.json: CPU flags, threads, precision, versions, wall
times) and the summaries (OUT/summary_s<seed>.md, and OUT/summary.md pooled over the seeds finished so far):
- subset: the config's official files linked into OUT/official (evaluated whole, with the release's ids);
- sft: the SFT warm-up;
- start (with `start:`): fixed-step SFT from the warm-up on the GRPO data drawn with its own synth_seed (and slice:
  num_train_examples, skip_examples); the arms and the control train from it and are measured against it (SFT then
  GRPO); a list of such sections is that many stages (start1 .. start), each from the one before;
- grpo: one arm per accuracy reward (coarse, fine), nothing else differing; or named arms with options of their
  own (`{name, accuracy, options}`);
- control (with `control:`): the more-SFT control, gold answers on the GRPO arms' data, for the fine arm's (or
  `follows:` arm's) train_runtime (--max_train_seconds), or for `steps:` fixed steps (reproducible on any machine;
  the shipped configs use it);
  with `control: learning_rates: [...]`, one run per rate (the selection chooses, per seed, the rate and step);
- rft (with `control: rft: true`): rejection-sampling SFT, the origin's own strict-correct samples of the GRPO arms'
  first prompts, as many completions as the followed arm generated, trained like the control;
- sets (before any arm: it depends on no seed): the training sets written out, and a generated held-out set guarded
  against them and the release (with `select: n, seed`, a second one for the selection, guarded against those too; with
  `transfer: harder`, harder rows beyond the official range, `synth --harder`, guarded likewise);
- baseline: greedy evaluations of base, warm-up and the start stages on every data set, once;
- select (with `select:`): each arm's and the control's checkpoint chosen on held-out rows only
  (recipes/select_checkpoint.py); the evaluations take the chosen checkpoints;
- evaluate: greedy evaluations of the unit's models on OUT/official, the held-out set (and the transfer sets);
- compare: `eval compare` per data set; completions: per-row completion files, re-scored with `eval score` (must
  match);
- summary: accuracy per model, paired gains with 95% CIs, wall time per stage; with `seeds: [...]` (every arm and
  control once per seed) each seed's gains and the gains pooled over seeds (mean of the seeds' gains, 95% bootstrap
  over seeds and rows); with `transfer:` (harder rows; `files:` untrained official files, `rows:` a stratified slice
  of each) a table of in-distribution, harder, untrained accuracy and retention (the mean change on the untrained
  files against the origin), with paired gains on those sets. `grpo: lr_matched: ARM` adds ARM_lr_matched: ARM at
  its rate divided by its share of groups with a learning signal (what dynamic sampling does to the dapo loss).
Each step is printed as the command it runs and timed (OUT/wall_times.json: the table adds up across invocations);
a training stage is skipped once its run finished (the proof's marker proof_trained.json, written when the step
returned 0, or a whole trainer_state.json at max_steps), any other once its output exists, and a seed once its
manifest says complete, so rerunning the same command resumes. `control: sweep_once`, a named arm's `seeds:` and
`delete_checkpoints:` are the cuts toward a seed within 90 minutes (docs/proof.md). Relative paths in the config are
relative to the repository root. Nothing is written outside OUT unless named for the run (--completions DIR). OUT is a
new or empty folder, or an earlier proof's (its .tase-output.json marker): the one output rule of common/paths.py, which
a dry run checks too.
"""
from __future__ import annotations

import argparse
import dataclasses
import time
from pathlib import Path

from common.errors import TaseError, one_line_exit
from common.paths import OutputBusy, hold_output, out_folder_refusal, write_marker
from common.process import apply as process_settings
from recipes.proof_stages.config import HERE, RFT, control_runs, seed_list
from recipes.proof_stages.evaluate import (
    data_sets,
    stage_baseline,
    stage_compare,
    stage_evaluate,
    stage_kl,
    stage_sets,
)
from recipes.proof_stages.inputs import Proof, setup, shown
from recipes.proof_stages.report import completions_stage, summary
from recipes.proof_stages.selection import selection_lines, sft_runs, stage_select
from recipes.proof_stages.train import stage_arms, stage_control, stage_rft, stage_subset, stage_train, trained
from recipes.proof_stages.units import (
    check_pooling,
    delete_checkpoints,
    environment,
    finished,
    manifest_path,
    read_manifest,
    write_manifest,
)
from recipes.shared.parser import one_line_errors
from recipes.steps.pipeline import run_in_process


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python recipes/proof.py", description=__doc__.splitlines()[0],
                                epilog="Stages and outputs: docs/results.md, \"make proof\".")
    p.add_argument("--config", default=str(HERE / "configs" / "proof_cpu.yaml"), help="proof YAML (default: "
                   "recipes/configs/proof_cpu.yaml)")
    p.add_argument("--official", required=True, help="the official TASE release folder (tasks/<group>/<task>/*.csv)")
    p.add_argument("--out", default=None, help="output folder (default: the config's out, runs/proof)")
    p.add_argument("--completions", default=None, metavar="DIR", help="where the per-row completion files go "
                   "(default: OUT/completions, or OUT/<the config's completions:>); nothing is written outside OUT "
                   "unless named here, e.g. --completions docs/results/component_count_proof_cpu to refresh the "
                   "committed files")
    p.add_argument("--dry-run", action="store_true", help="print every stage's commands, run nothing")
    p.add_argument("--in-process", action="store_true", help="run each step's entry point (the recipes, python -m "
                   "eval/synth) in this process, importing torch and TRL once instead of once a step: for tiny runs "
                   "(the suite's tiny proof), where that import is most of a step's time; the commands, outputs and "
                   "resuming are the same. A step's memory and its run folder's lock stay until the proof ends")
    one_line_errors(p)
    return p.parse_args(argv)


@one_line_exit
def main(argv: list[str] | None = None) -> int:
    """The stages in order (nine, one more each with a start, a control, an RFT control, a selection; docs/proof.md);
    1 when a re-scored file disagrees."""
    args = parse_args(argv)
    if args.in_process:  # process settings, before setup imports torch: the steps' own come too late in-process
        process_settings()
        run_in_process()
    pr = setup(args)
    why = out_folder_refusal(pr.out, "proof", new_or_own=True)  # common/paths.py: the one output rule, a dry run's too
    if why:
        raise TaseError(why)
    if pr.dry:
        return stages(pr)
    try:
        with hold_output(pr.out):  # one writer per OUT: two proofs into one folder would train the same models
            if why := out_folder_refusal(pr.out, "proof", new_or_own=True):
                raise TaseError(why)
            pr.out.mkdir(parents=True, exist_ok=True)
            write_marker(pr.out, "proof", [])  # known as this command's folder from the start: a rerun resumes
            return stages(pr)
    except OutputBusy as e:
        raise TaseError(str(e)) from None


def stages(pr: Proof) -> int:
    """The stages shared by every seed, then each seed's unit to its end (run_unit), the summary over the seeds
    finished so far written after each; 1 when a re-scored file disagrees."""
    t0 = time.time()
    if not pr.dry:
        pr.step.load(pr.out / "wall_times.json")  # the table adds up across invocations
    stage_subset(pr)
    stage_train(pr)
    heldout = stage_sets(pr)
    shared = stage_baseline(pr, heldout)
    if pr.cfg.delete_checkpoints and not pr.dry:  # the warm-up's and starts' resume points, once they finished
        gone = delete_checkpoints(pr.out, [r for r in ("sft", *(st.name for st in pr.starts)) if trained(pr.out / r)])
        print(f"   deleted {gone} checkpoint folders of the warm-up and start (delete_checkpoints)" if gone else "",
              end="\n" if gone else "")
    seeds = seed_list(pr.cfg)
    env = None if pr.dry else environment(pr)
    done: list[int | None] = []
    models = list(shared)
    for i, seed in enumerate(seeds):
        unit = pr.unit(seed)
        pr.step.unit = "" if seed is None else f"s{seed} "
        if pr.cfg.seeds is not None:
            print(f"\n#### seed {i + 1} of {len(seeds)}: seed {seed}", flush=True)
        if not pr.dry and finished(pr.out, seed):
            names = read_manifest(pr.out, seed)["models"]
            print(f"   skipped: {shown(manifest_path(pr.out, seed))} says this seed finished")
        else:
            names = run_unit(unit, seed, heldout, shared, models, env)
            if names is None:
                return 1
        done.append(seed)
        models += [m for m in names if m not in models]
        if not pr.dry:
            write_summaries(pr, seed, done, shared, names, models, time.time() - t0)
    if pr.dry:
        pr.step.header(pr.k("summary"), "summary")
        print(f"# {'after each seed' if pr.cfg.seeds is not None else 'at the end'}: accuracy per model on "
              f"{shown(pr.out / 'official')} and the held-out set; paired gains from {shown(pr.out / 'eval')}; wall "
              f"time per stage over every invocation; written to {shown(pr.out / 'summary.md')}"
              + (" (the seeds finished so far, pooled) and OUT/summary_s<seed>.md (that seed)"
                 if pr.cfg.seeds is not None else "")
              + ("; per selected run, the chosen checkpoint and its held-out score" if pr.select else ""))
    return 0


def run_unit(pr: Proof, seed: int | None, heldout: Path, shared: dict[str, str], models: list[str],
             env: dict | None) -> list[str] | None:
    """One seed's unit to its end: its arms, controls and RFT control, their selection and evaluations, the
    comparisons and completion files of every model so far, its manifest (written last: the unit is complete) and,
    with delete_checkpoints, its checkpoint folders removed. Returns the unit's model names; None when a re-scored
    completion file disagrees."""
    stage_arms(pr)
    if pr.control:
        stage_control(pr)
    if pr.rft:
        stage_rft(pr)
    chosen = stage_select(pr) if pr.select else None  # each selected run's chosen checkpoint, by model name
    mine = stage_evaluate(pr, heldout, chosen)
    stage_kl(pr, mine)  # with transfer: files, the KL from the start on the untrained files (RL's Razor)
    names = [*models, *(m for m in mine if m not in models)]
    stage_compare(pr, heldout, names)
    if completions_stage(pr.step, pr.out, pr.cfg.files, [*shared, *mine], pr.completions,
                         data_sets(pr, heldout)["official"], k=pr.k("completions")):
        return None
    runs = [*pr.arms, *(r.folder for r in sft_runs(pr))] if pr.select else \
        [*pr.arms, *(r.folder for r in control_runs(pr.cfg) + control_runs(pr.cfg, RFT))]
    if pr.dry:
        print(f"# writes {shown(manifest_path(pr.out, seed))}: complete, models, runs, CPU flags, threads, precision, "
              "versions, wall times" + ("; then deletes the runs' checkpoint-N folders (delete_checkpoints)"
                                        if pr.cfg.delete_checkpoints else ""))
        return list(mine)
    assert env is not None
    write_manifest(pr, seed, list(mine), runs, env)
    if pr.cfg.delete_checkpoints:
        n = delete_checkpoints(pr.out, runs)
        print(f"   deleted {n} checkpoint folders of {len(runs)} runs (delete_checkpoints)")
    return list(mine)


def write_summaries(pr: Proof, seed: int | None, done: list[int | None], shared: dict[str, str], mine: list[str],
                    models: list[str], took: float) -> None:
    """After a unit: OUT/summary_s<seed>.md (that seed against the shared models) and OUT/summary.md, pooled over
    the seeds finished so far (refused in one line when their precisions differ)."""
    check_pooling(pr.out, done)
    pr.step.header(pr.k("summary"), "summary" + ("" if pr.cfg.seeds is None else
                                               f" over {len(done)} finished seed(s): {', '.join(map(str, done))}"))
    if pr.cfg.seeds is not None:
        one = pr.unit(seed)
        units = [f"s{seed} "]
        text = summary(pr.out, one.cfg, [*shared, *mine], pr.cfg.compare.n_boot, pr.step, took,
                       selection_lines(one) if pr.select else None, units)
        (pr.out / f"summary_s{seed}.md").write_text(text + "\n", encoding="utf-8")
    view = dataclasses.replace(pr, cfg=dataclasses.replace(pr.cfg, seeds=list(done))) if pr.cfg.seeds else pr
    text = summary(pr.out, view.cfg, models, pr.cfg.compare.n_boot, pr.step, took,
                   selection_lines(view) if pr.select else None,
                   [f"s{s} " for s in done] if pr.cfg.seeds is not None else None)
    print(text)
    (pr.out / "summary.md").write_text(text + "\n", encoding="utf-8")


if __name__ == "__main__":
    raise SystemExit(main())
