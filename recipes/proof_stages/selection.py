"""recipes/proof.py's selection stage (with a `select:` section): `recipes/select_checkpoint.py` on every GRPO arm and
on the control, on held-out rows only (its own set from the sets stage, or the proof's held-out set), so that the
evaluation stage evaluates each run's chosen checkpoint, not its final model (a long run's
last step is not its best on held-out rows). The official files are never shown to the selection."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from common.errors import TaseError
from recipes.proof_stages.config import HERE, RFT, ROOT, ControlRun, control_runs, rft_empty
from recipes.proof_stages.inputs import Proof, shown
from recipes.shared import best_checkpoint


def selected_runs(pr: Proof) -> dict[str, Path]:
    """The runs the selection chooses a checkpoint of, by run name: every GRPO arm, then the control's runs (one per
    rate and seed: control_runs), then the RFT control's."""
    runs = {arm: pr.out / arm for arm in pr.arms}
    for run in sft_runs(pr):
        runs[run.name] = pr.out / run.folder
    return runs


def sweeps(pr: Proof) -> bool:
    """Whether the control sweeps learning rates (control: learning_rates)."""
    return pr.cfg.control is not None and bool(pr.cfg.control.learning_rates)


def sft_runs(pr: Proof) -> list[ControlRun]:
    """The control's runs, then the RFT control's that trained (not those of a seed without a strict-correct
    sample: rft_empty)."""
    return [r for r in control_runs(pr.cfg) + control_runs(pr.cfg, RFT) if not rft_empty(pr.out, r)]


def sweep_choice(pr: Proof) -> dict[str, str]:
    """With control: learning_rates, the run each control model (per seed, sft_control[_s<seed>], rft[_s<seed>])
    is: the rate whose chosen checkpoint scores best on the selection's held-out rows (the first listed rate on a
    tie); without a sweep, each model is its one run. By model name."""
    best: dict[str, tuple[float, str]] = {}
    for run in sft_runs(pr):
        folder = select_dir(pr, pr.out / run.folder)
        score = read_selection(folder)["value"] if best_checkpoint.found(folder) else float("-inf")
        if run.model not in best or score > best[run.model][0]:
            best[run.model] = (score, run.name)
    return {model: name for model, (_, name) in best.items()}


def first_seed_rate(pr: Proof, model: str) -> Any:
    """control: sweep_once: the learning rate the first seed's selection chose for `model` (sft_control_s<first>,
    rft_s<first>): the rate of its run whose chosen checkpoint scored best on the selection's held-out rows (the
    first listed on a tie); a placeholder under --dry-run before the first seed is selected; none selected (the
    first seed's RFT had no strict-correct sample): one line."""
    first = pr.unit(pr.cfg.first_seed)
    runs = [r for kind in ("control", RFT) for r in control_runs(first.cfg, kind) if r.model == model]
    best: tuple[float, float | None] | None = None
    for run in runs:
        folder = select_dir(pr, pr.out / run.folder)
        if best_checkpoint.found(folder):
            value = read_selection(folder)["value"]
            if best is None or value > best[0]:
                best = (value, run.lr)
    if best is not None:
        return best[1]
    if pr.dry:
        return f"<the rate chosen for {model} on {pr.select_heldout.name}>"
    raise TaseError(f"control: sweep_once: no selection of {model}'s rates in {shown(pr.out)} (did the first seed "
                    f"train them?); the later seeds train at the rate it chose")


def select_dir(pr: Proof, run: Path) -> Path:
    """OUT/select_<run folder>: select_checkpoint.py's --out for that run (its evaluations, best_checkpoint.json,
    selection.md)."""
    return pr.out / f"select_{run.name}"


def read_selection(folder: Path) -> dict[str, Any]:
    """The run's chosen checkpoint as select_checkpoint.py writes it (best_checkpoint.json: metric, value as a 0-1
    share, step, path, evaluations; a former selection.json converted, with one deprecation line), read through the
    one checked reader of state files (common/state.py); missing, unreadable or of another shape: one line."""
    sel = best_checkpoint.read(folder, "; remove the folder to select again", shown)
    if sel is None:
        raise TaseError(f"{shown(folder / best_checkpoint.NAME)}: no such file; remove the folder to select again")
    return sel


def chosen_model(path: str, run: Path | None = None, where: Path | None = None) -> str:
    """The chosen checkpoint as the evaluation's --model: select_checkpoint.py ran from the repository root (the
    steps' cwd), so a relative path is relative to it; shown like every other path of the plan. With `run`, the
    chosen folder must lie inside that run's folder (common/paths.inside_refusal): an old or planted state file
    `where` naming `/etc` is one line, not the evaluated model."""
    p = Path(path)
    p = p if p.is_absolute() else ROOT / p
    if run is not None:
        from common.paths import inside_refusal

        why = inside_refusal(p, run, f"{shown(where or run)}: the chosen checkpoint")
        if why:
            raise TaseError(f"{why}; remove the folder to select again")
    return shown(p)


def stage_select(pr: Proof) -> dict[str, str]:
    """The selection stage: for each run, select_checkpoint.py RUN --heldout <selection rows> --out
    OUT/select_<run>, with the evaluation's backend, new tokens and dtype; skipped where its best_checkpoint.json
    (or a former selection.json) exists. Returns the model the evaluation stage takes for each run, by model name:
    the chosen checkpoint's folder, or under --dry-run (nothing chosen yet) a placeholder naming the file it will
    come from."""
    k, ev, sel = pr.k("select"), pr.cfg.eval, pr.cfg.select
    assert sel is not None
    heldout = pr.select_heldout
    chosen = {}
    for name, run in selected_runs(pr).items():
        out = select_dir(pr, run)
        cmd = [pr.py, shown(HERE / "select_checkpoint.py"), shown(run), "--heldout", shown(heldout), "--out",
               shown(out), "--backend", pr.backend, "--max-new-tokens", str(ev.max_new_tokens)]
        cmd += ["--dtype", ev.dtype] if ev.dtype else []
        cmd += ["--metric", sel.metric] if sel.metric else []
        done = best_checkpoint.found(out) or out / best_checkpoint.NAME
        title = f"checkpoint selection for {name} on {heldout.name} (held-out rows only)"
        if not pr.skip(k, f"checkpoint selection for {name}", done, cmd, f"{k} checkpoint selection"):
            pr.step(k, title, cmd, stage=f"{k} checkpoint selection")
        if done.exists() or not pr.dry:  # a folder of that name, too: one line, not a placeholder as the model
            chosen[name] = chosen_model(read_selection(out)["path"], run, done)
        else:  # only under --dry-run: the step above wrote it otherwise
            chosen[name] = f"<chosen checkpoint in {shown(done)}>"
    if sweeps(pr):  # a sweep: each seed's best rate
        runs = {r.name: r for r in sft_runs(pr)}
        picked = sweep_choice(pr) if not pr.dry else {}
        for model in dict.fromkeys(r.model for r in runs.values()):
            mine = [n for n, r in runs.items() if r.model == model]
            if model in picked or len(mine) == 1:  # one run (a later seed of sweep_once): its own choice
                chosen[model] = chosen[picked.get(model, mine[0])]
            else:  # under --dry-run: the rates' selections are not there yet
                chosen[model] = (f"<best of {', '.join(n for n, r in runs.items() if r.model == model)} on "
                                 f"{heldout.name}>")
        for name in runs:
            del chosen[name]
    else:
        for run in sft_runs(pr):
            chosen[run.model] = chosen.pop(run.name)
    return chosen


def selection_lines(pr: Proof) -> list[str]:
    """The summary's account of the selection: per run, the chosen step and folder, its held-out score and the
    last step's (what the final model would have scored), from each best_checkpoint.json (in percent, as the
    evaluation tables)."""
    heldout = pr.select_heldout
    lines = ["", f"checkpoint selection on {shown(heldout)} (held-out rows only; select_checkpoint.py's rule); "
                 "the rows above evaluate each selected run's chosen checkpoint:", "",
             "| run | chosen step | checkpoint | held-out (chosen) | last step | held-out (last) |",
             "|---|---:|---|---:|---:|---:|"]
    for name, run in selected_runs(pr).items():
        c = read_selection(select_dir(pr, run))
        last = max(c["evaluations"] or [c], key=lambda x: x["step"])
        lines.append(f"| {name} | {c['step']} | {chosen_model(c['path'])} | {100 * c['value']:.2f} | {last['step']} | "
                     f"{100 * last['value']:.2f} |")
    if sweeps(pr):
        runs = {r.name: r for r in sft_runs(pr)}
        lines += ["", "the learning-rate sweep, chosen on the same held-out rows (rate and step):"]
        for model, name in sweep_choice(pr).items():
            c = read_selection(select_dir(pr, pr.out / runs[name].folder))
            run = runs[name]
            lr = run.lr if run.rate_of is None else first_seed_rate(pr, run.rate_of)
            lines.append(f"  {model}: lr {lr:g}{'' if run.rate_of is None else f' (chosen for {run.rate_of})'}, "
                         f"step {c['step']} (held-out {100 * c['value']:.2f}; run {name})")
    if heldout == pr.out / "heldout.jsonl":
        lines += ["", "the selection used the proof's held-out set: the held-out column of a selected run is the score "
                      "it was chosen by, not an independent measure"]
    return lines
