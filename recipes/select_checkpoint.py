"""Pick a run's checkpoint on held-out rows only: greedy `eval run` of every `checkpoint-N` (and the final model)
on a held-out file, then the one with the highest held-out accuracy (ties: the earlier step). The official file
is never looked at, so the choice does not peek at the test set (issue 41's longer en_combine run).

    python recipes/select_checkpoint.py runs/x/fine --heldout runs/x/heldout.jsonl --out runs/x/select_fine

Writes OUT/<step>/ (each evaluation; a rerun resumes them), OUT/best_checkpoint.json (the choice and every
candidate's held-out accuracy as a 0-1 share, the rule: the fields a run with `held_out_rows` writes, see
recipes/shared/best_checkpoint.py; a former selection.json is still read), OUT/selection.md and
OUT/heldout_curve.png. Prints the chosen folder last.
OUT follows the one output rule (common/paths.py): never a file, another command's output or a folder holding
one; the files above only where this command wrote them (its marker), the user's other files kept; one writer
at a time.
Each candidate also carries the numbers a run with `held_out_rows` logs while it trains (eval.headline: official and
strict accuracy, loophole share, per task); `--metric strict_acc` chooses by the strict one. For runs made without
evaluation during training: a run with it writes the same best_checkpoint.json itself
(recipes/features/heldout/evaluation.py).
"""
from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any

from common.errors import TaseError, one_line_exit
from common.paths import OutputBusy, file_refusal, hold_output, is_own, out_folder_refusal, read_marker, write_marker
from eval.headline import headline
from eval.runner import iter_samples
from recipes.shared import best_checkpoint
from recipes.shared.run_dir import final_state, weights_problem
from recipes.steps.pipeline import Steps

RULE = "highest held-out accuracy (overall, official verdict); ties go to the earlier step"
OWN_FILES = (best_checkpoint.NAME, "selection.md", "heldout_curve.png")


def check_out(out: Path) -> None:
    """The one output rule for --out (common/paths.py): a folder that can be written, that is not and does not hold
    another command's output (a training run, an `eval score` folder, ...), and whose selection files, where they
    exist, are this command's own (its marker lists them): a user's selection.md is never replaced."""
    why = out_folder_refusal(out, "select")
    if why:
        raise TaseError(why)
    own = is_own(out, "select")  # its marker, or selection.json/.md from before markers (then those files)
    listed = set((read_marker(out) or {"files": (*OWN_FILES, best_checkpoint.FORMER)})["files"]) if own else set()
    for name in OWN_FILES:
        why = file_refusal(out / name, "select", own=lambda f: f.name in listed, inside=("select",))
        if why:
            raise TaseError(f"--out {why}; write elsewhere")


def mark(out: Path, names: list[str]) -> None:
    """The marker of OUT: what this command wrote there (the earlier runs' too), nothing of the user's."""
    old = (read_marker(out) or {}).get("files", []) if is_own(out, "select") else []
    write_marker(out, "select", sorted(set(old) | set(names)))
RULES = {"official_acc": RULE, "strict_acc": "highest held-out strict accuracy (overall, strict verdict: loopholes "
         "fail); ties go to the earlier step"}


def candidates(run: Path, include_final: bool = True) -> list[tuple[int, Path]]:
    """(global step, folder) of every saved model in a training run, by step: `checkpoint-N`, and the run folder
    itself (its trainer_state.json's global_step) when it holds a final model not equal to a checkpoint's step.
    A folder whose weights are missing or torn (a save cut short: run_dir.weights_problem) is no candidate, and
    one with a torn file is named on stderr, so a crash mid-save costs a candidate, not the selection."""
    if not run.is_dir():
        raise TaseError(f"{run}: no such run folder")
    found = {}
    for d in run.iterdir():
        m = re.fullmatch(r"checkpoint-(\d+)", d.name)
        if m and d.is_dir():
            why = weights_problem(d)
            if why is None:
                found[int(m.group(1))] = d
            elif why != "no safetensors weights":
                print(f"note: {d.name} skipped: {why}", file=sys.stderr)
    state = run / "trainer_state.json"
    if include_final and state.is_file() and weights_problem(run) is None:
        final = final_state(run)
        if final is None:
            raise TaseError(f"{state}: unreadable or without global_step")
        found.setdefault(final["global_step"], run)
    if not found:
        lora = "; it holds LoRA adapters, which select_checkpoint does not merge: export each checkpoint (recipes/" \
            "export.py) and compare the exports with eval run" if any(run.glob("**/adapter_config.json")) else ""
        raise TaseError(f"{run}: no checkpoint-N folder with whole safetensors weights and no final model{lora}")
    return sorted(found.items())


def choose(scores: list[dict[str, Any]]) -> dict[str, Any]:
    """The candidate with the highest held-out accuracy; among equals the earliest step (less training, same
    evidence)."""
    if not scores:
        raise TaseError("no candidate was evaluated")
    return max(scores, key=lambda c: (c["value"], -c["step"]))


def plot(scores: list[dict[str, Any]], chosen: dict[str, Any], path: Path, title: str) -> None:
    """Held-out accuracy per step, the choice marked."""
    from matplotlib.figure import Figure  # no pyplot: no backend to choose, no global figure state

    fig = Figure(figsize=(6, 3.5))
    ax = fig.subplots()
    ax.plot([c["step"] for c in scores], [100 * c["value"] for c in scores], marker="o")
    ax.scatter([chosen["step"]], [100 * chosen["value"]], s=120, facecolors="none", edgecolors="red", label="chosen")
    ax.set_xlabel("training step")
    ax.set_ylabel("held-out accuracy (%)")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python recipes/select_checkpoint.py", allow_abbrev=False,
                                description=__doc__.split("\n\n")[0])
    p.add_argument("run", help="a training run's output_dir (holds checkpoint-N folders)")
    p.add_argument("--heldout", required=True, help="held-out records (JSONL), disjoint from training and the release")
    p.add_argument("--out", help="output folder (default: RUN/select)")
    from eval.backends import VLLMBackend, backend_names

    p.add_argument("--backend", default=VLLMBackend.name, choices=backend_names(local=True))
    p.add_argument("--dtype", default="float32", help="eval dtype (pinned: numbers must not depend on the CPU)")
    p.add_argument("--max-new-tokens", type=int, default=32)
    p.add_argument("--no-final", action="store_true", help="checkpoints only, not the run's final model")
    p.add_argument("--metric", default="official_acc", choices=sorted(RULES),
                   help="choose by the official (default) or the strict held-out accuracy (eval.headline)")
    p.add_argument("--dry-run", action="store_true", help="print the evaluations, run nothing")
    return p.parse_args(argv)


@one_line_exit
def main(argv: list[str] | None = None) -> int:
    a = parse_args(argv)
    run, heldout = Path(a.run), Path(a.heldout)
    if not heldout.is_file():
        raise TaseError(f"--heldout {heldout}: no such file")
    out = Path(a.out) if a.out else run / "select"
    cands = candidates(run, include_final=not a.no_final)
    check_out(out)
    if a.dry_run:
        return _select(a, run, heldout, out, cands)
    try:
        with hold_output(out):  # one writer per --out, before any evaluation
            check_out(out)
            out.mkdir(parents=True, exist_ok=True)
            mark(out, [])  # known as this command's folder from the start: a rerun resumes its evaluations
            return _select(a, run, heldout, out, cands)
    except OutputBusy as e:
        raise TaseError(str(e)) from None


def _select(a: argparse.Namespace, run: Path, heldout: Path, out: Path, cands: list[tuple[int, Path]]) -> int:
    """Evaluate every candidate into OUT/step-N, then write the choice (nothing with --dry-run)."""
    steps = Steps("select", len(cands), Path.cwd(), dry_run=a.dry_run)
    scores = []
    for k, (step, folder) in enumerate(cands, 1):
        dest = out / f"step-{step}"
        cmd = [sys.executable, "-m", "eval", "run", "--model", str(folder), "--data", str(heldout), "--out",
               str(dest), "--backend", a.backend, "--max-new-tokens", str(a.max_new_tokens), "--dtype", a.dtype,
               "--no-progress"]
        steps(k, f"step {step}: {folder} on {heldout.name}", cmd, stage="evaluate on held-out")
        if not a.dry_run:
            res = json.loads((dest / "results.json").read_text(encoding="utf-8"))
            head = headline(iter_samples(dest / "samples.jsonl"))  # the numbers training logs as tase/heldout/
            percent = res["overall"] if a.metric == "official_acc" else res["strict"]["overall"]
            scores.append({"step": step, "value": round(percent / 100, 6), "path": str(folder), "n": res.get("n"),
                           "headline": head})  # a share, as the headline and the training log (eval.headline)
    if a.dry_run:
        return 0
    chosen = choose(scores)
    out.mkdir(parents=True, exist_ok=True)
    rule = RULES[a.metric]
    best_checkpoint.write(out, {"metric": best_checkpoint.PREFIX + a.metric, "value": chosen["value"],
                                "step": chosen["step"], "path": chosen["path"], "greater_is_better": True,
                                "run": str(run), "heldout": str(heldout), "rule": rule, "evaluations": scores})
    lines = [f"# Checkpoint selection: {run}", "", f"Held-out file: `{heldout}`. Rule: {rule}.", "",
             f"| step | held-out {'strict ' if a.metric == 'strict_acc' else ''}accuracy | |", "|---:|---:|---|"]
    lines += [f"| {c['step']} | {100 * c['value']:.2f} | {'chosen' if c is chosen else ''} |" for c in scores]
    (out / "selection.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    plot(scores, chosen, out / "heldout_curve.png", f"{run.name}: held-out accuracy by step")
    mark(out, [*OWN_FILES, *(f"step-{c['step']}" for c in scores)])
    print("\n".join(lines[4:]))
    print(f"chosen: step {chosen['step']} ({100 * chosen['value']:.2f} held-out): {chosen['path']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
