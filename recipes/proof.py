"""`make proof TASE=DIR`: the proof that GRPO teaches token awareness, on whole official files, on CPU.

    python recipes/proof.py --config recipes/configs/proof_cpu.yaml --official /path/to/Tase [--out DIR] [--dry-run]
        [--completions DIR] [--in-process]

The stages, in order (numbered as they run: an optional stage exists only with its config section, and the
numbers of the later ones close up):
- subset: the config's official files linked into OUT/official (evaluated whole, with the release's ids);
- sft: the SFT warm-up;
- start (with `start:`): fixed-step SFT from the warm-up on the GRPO data drawn with its own synth_seed (and slice:
  num_train_examples, skip_examples); the arms and the control train from it and are measured against it (SFT then
  GRPO, issue 49); a list of such sections is that many stages (start1 .. start), each from the one before;
- grpo: one arm per accuracy reward (coarse, fine), nothing else differing; or named arms with options of their
  own (`{name, accuracy, options}`);
- control (with `control:`): the more-SFT control, gold answers on the GRPO arms' data, for the fine arm's (or
  `follows:` arm's) train_runtime (--max_train_seconds), or for `steps:` fixed steps (reproducible on any machine;
  the shipped configs use it);
  with `control: learning_rates: [...]`, one run per rate (the selection chooses, per seed, the rate and step);
- rft (with `control: rft: true`): rejection-sampling SFT, the origin's own strict-correct samples of the GRPO arms'
  first prompts, as many completions as the followed arm generated, trained like the control;
- sets: the training sets written out, and a generated held-out set guarded against them and the release (with
  `select: n, seed`, a second one for the selection, guarded against those too; with `transfer: harder`, harder
  rows beyond the official range, `synth --harder`, guarded likewise);
- select (with `select:`): each arm's and the control's checkpoint chosen on held-out rows only
  (recipes/select_checkpoint.py); the evaluations take the chosen checkpoints;
- evaluate: greedy evaluations of every model on OUT/official and on the held-out set;
- compare: `eval compare` per data set; completions: per-row completion files, re-scored with `eval score` (must
  match);
- summary: accuracy per model, paired gains with 95% CIs, wall time per stage; with `seeds: [...]` (every arm and
  control once per seed) each seed's gains and the gains pooled over seeds (mean of the seeds' gains, 95% bootstrap
  over seeds and rows); with `transfer:` (harder rows; `files:` untrained official files, `rows:` a stratified slice
  of each) a table of in-distribution, harder, untrained accuracy and retention (the mean change on the untrained
  files against the origin), with paired gains on those sets. `grpo: lr_matched: ARM` adds ARM_lr_matched: ARM at
  its rate divided by its share of groups with a learning signal (what dynamic sampling does to the dapo loss).
Each step is printed as the command it runs and timed; a stage whose output exists is skipped, so rerunning the
same command resumes. Relative paths in the config are relative to the repository root. Nothing is written outside
OUT unless named for the run (--completions DIR). OUT is a new or empty folder, or an earlier proof's (its
.tase-output.json marker): the one output rule of common/paths.py, which a dry run checks too.
"""
from __future__ import annotations

import argparse
import time

from common.errors import TaseError, one_line_exit
from common.paths import OutputBusy, hold_output, out_folder_refusal, write_marker
from common.process import apply as process_settings
from recipes.proof_stages.config import HERE
from recipes.proof_stages.evaluate import stage_evaluate, stage_sets
from recipes.proof_stages.inputs import Proof, setup, shown
from recipes.proof_stages.report import completions_stage, summary
from recipes.proof_stages.selection import selection_lines, stage_select
from recipes.proof_stages.train import stage_control, stage_rft, stage_subset, stage_train
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
                   "unless named here, e.g. --completions docs/results/component_count_proof_cpu to refresh the committed files")
    p.add_argument("--dry-run", action="store_true", help="print every stage's commands, run nothing")
    p.add_argument("--in-process", action="store_true", help="run each step's entry point (the recipes, python -m "
                   "eval/synth) in this process, importing torch and TRL once instead of once a step: for tiny runs "
                   "(the suite's tiny proof), where that import is most of a step's time; the commands, outputs and "
                   "resuming are the same. A step's memory and its run folder's lock stay until the proof ends")
    one_line_errors(p)
    return p.parse_args(argv)


@one_line_exit
def main(argv: list[str] | None = None) -> int:
    """The stages in order (eight, one more each with a start, a control, a selection; docs/proof.md); 1 when a re-scored file disagrees."""
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
    """The stages in order; 1 when a re-scored file disagrees."""
    t0 = time.time()
    stage_subset(pr)
    stage_train(pr)
    if pr.control:
        stage_control(pr)
    if pr.rft:
        stage_rft(pr)
    heldout = stage_sets(pr)
    chosen = stage_select(pr) if pr.select else None  # each selected run's chosen checkpoint, by model name
    models, data = stage_evaluate(pr, heldout, chosen)
    # completion files, re-scored by `eval score`
    if completions_stage(pr.step, pr.out, pr.cfg.files, list(models), pr.completions,
                         data["official"], k=pr.k("completions")):
        return 1
    pr.step.header(pr.k("summary"), "summary")
    out = pr.out
    if pr.dry:
        print(f"# accuracy per model on {shown(out / 'official')} and the held-out set; paired gains from "
              f"{shown(out / 'eval')}; wall time per stage; written to {shown(out / 'summary.md')}"
              + ("; per selected run, the chosen checkpoint and its held-out score" if pr.select else ""))
        return 0
    text = summary(out, pr.cfg, list(models), pr.cfg.compare.n_boot, pr.step, time.time() - t0,
                   selection_lines(pr) if pr.select else None)
    print(text)
    (out / "summary.md").write_text(text + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
