"""recipes/proof.py's selection stage (with a `select:` section): `recipes/select_checkpoint.py` on every GRPO arm and
on the control, on held-out rows only (its own set from the sets stage, or the proof's held-out set), so that the
evaluation stage evaluates each run's chosen checkpoint, not its final model (issue 49: the 300-step en_combine
result was chosen this way by hand). The official files are never shown to the selection."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from common.errors import TaseError
from recipes.proof_config import CONTROL, HERE, ROOT
from recipes.proof_inputs import Proof, shown


def selected_runs(pr: Proof) -> dict[str, Path]:
    """The runs the selection chooses a checkpoint of, by model name: every GRPO arm, then the control."""
    runs = {arm: pr.out / arm for arm in pr.arms}
    if pr.control:
        runs[CONTROL] = pr.out / "control"
    return runs


def select_dir(pr: Proof, run: Path) -> Path:
    """OUT/select_<run folder>: select_checkpoint.py's --out for that run (its evaluations, selection.json/.md)."""
    return pr.out / f"select_{run.name}"


def selection_problem(sel: Any) -> str | None:
    """What is wrong with a selection.json (select_checkpoint.py's: chosen with a path, step and held-out score;
    candidates, when there, a list of such steps and scores), or None."""
    from common.state import mapping_problem, number, whole

    step = {"step": whole, "heldout": number}
    why = mapping_problem(sel, {"chosen": lambda c: mapping_problem(c, {**step, "path": lambda p: isinstance(p, str)})
                                 is None,
                                 "candidates": lambda cs: isinstance(cs, list) and all(mapping_problem(c, step) is None
                                                                                       for c in cs)},
                          optional=("candidates",))
    return f"cannot read the chosen checkpoint ({why})" if why else None


def read_selection(folder: Path) -> dict[str, Any]:
    """selection.json as select_checkpoint.py writes it (candidates, chosen: step, path, heldout), read through the
    one checked reader of state files (common/state.py); missing, unreadable or of another shape: one line."""
    from common.state import read_state

    path = folder / "selection.json"
    sel = read_state(path, selection_problem, "; remove the folder to select again")
    if sel is None:
        raise TaseError(f"{shown(path)}: no such file; remove the folder to select again")
    return sel


def chosen_model(path: str) -> str:
    """The chosen checkpoint as the evaluation's --model: select_checkpoint.py ran from the repository root (the
    steps' cwd), so a relative path is relative to it; shown like every other path of the plan."""
    p = Path(path)
    return shown(p if p.is_absolute() else ROOT / p)


def stage_select(pr: Proof) -> dict[str, str]:
    """The selection stage: for each run, select_checkpoint.py RUN --heldout <selection rows> --out
    OUT/select_<run>, with the evaluation's backend, new tokens and dtype; skipped where its selection.json
    exists. Returns the model the evaluation stage takes for each run, by model name: the chosen checkpoint's
    folder, or under --dry-run (nothing chosen yet) a placeholder naming the file it will come from."""
    k, ev, sel = pr.k("select"), pr.cfg["eval"], pr.cfg["select"]
    heldout = pr.select_heldout
    chosen = {}
    for name, run in selected_runs(pr).items():
        out = select_dir(pr, run)
        cmd = [pr.py, shown(HERE / "select_checkpoint.py"), shown(run), "--heldout", shown(heldout), "--out",
               shown(out), "--backend", pr.backend, "--max-new-tokens", str(ev["max_new_tokens"])]
        cmd += ["--dtype", ev["dtype"]] if ev.get("dtype") else []
        cmd += ["--metric", sel["metric"]] if sel.get("metric") else []
        done = out / "selection.json"
        title = f"checkpoint selection for {name} on {heldout.name} (held-out rows only)"
        if not pr.skip(k, f"checkpoint selection for {name}", done, cmd, f"{k} checkpoint selection"):
            pr.step(k, title, cmd, stage=f"{k} checkpoint selection")
        if done.is_file():
            chosen[name] = chosen_model(read_selection(out)["chosen"]["path"])
        else:  # only under --dry-run: the step above wrote it otherwise
            chosen[name] = f"<chosen checkpoint in {shown(done)}>"
    return chosen


def selection_lines(pr: Proof) -> list[str]:
    """The summary's account of the selection: per run, the chosen step and folder, its held-out score and the
    last step's (what the final model would have scored), from each selection.json."""
    heldout = pr.select_heldout
    lines = ["", f"checkpoint selection on {shown(heldout)} (held-out rows only; select_checkpoint.py's rule); "
                 "the rows above evaluate each selected run's chosen checkpoint:", "",
             "| run | chosen step | checkpoint | held-out (chosen) | last step | held-out (last) |", "|---|---:|---|---:|---:|---:|"]
    for name, run in selected_runs(pr).items():
        sel = read_selection(select_dir(pr, run))
        c, last = sel["chosen"], max(sel.get("candidates") or [sel["chosen"]], key=lambda x: x["step"])
        lines.append(f"| {name} | {c['step']} | {chosen_model(c['path'])} | {c['heldout']:.2f} | {last['step']} | "
                     f"{last['heldout']:.2f} |")
    if heldout == pr.out / "heldout.jsonl":
        lines += ["", "the selection used the proof's held-out set: the held-out column of a selected run is the score "
                      "it was chosen by, not an independent measure"]
    return lines
