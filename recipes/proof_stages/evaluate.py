"""recipes/proof.py's data and evaluation stages: the training sets written out and the held-out set guarded
against them and the release, greedy evaluations of every model and the comparisons."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from common.errors import TaseError
from recipes.proof_stages.config import RFT, control_runs, rft_empty
from recipes.proof_stages.inputs import Proof, shown
from recipes.proof_stages.sections import Heldout, Transfer
from recipes.shared.streams import data_streams

HARDER, UNTRAINED = "harder", "untrained"  # the transfer data sets' names (eval/<name>/, comparison/<name>/)
ROWS = 200  # transfer: rows per untrained file, by default


def training_set_cmds(py: str, name: str, data: dict[str, Any], guard: str, folder: Path) -> tuple[list, list]:
    """Commands writing what the recipe trains on, and the files to guard the held-out set against.

    The recipes draw their rows on the fly (recipes/shared/data.py iter_records): for each stream in turn (a task x
    lang cell, or with `subtasks` a task x lang x subtask cell: streams.data_streams), the next row of
    `synth.generate(task, lang, ..., synth_seed, subtask)` (the same call `python -m synth --task T --lang L
    [--subtask S]` makes), round-robin, then the contamination guard, up to num_train_examples rows. So the
    first skip_examples + num_train_examples guarded rows of every stream, written by `python -m synth` with the
    same flags, one file per stream, hold every training prompt (a superset: the held-out set may lose a few more rows
    than it must, never fewer)."""
    if data["train_data"] != "synth":
        return [], [Path(data["train_data"])]
    if data["streaming"]:
        raise TaseError(f"{name}: streaming training data has no end; the held-out set cannot be guarded against it")
    try:
        streams = data_streams(data["tasks"], data["langs"], data["subtasks"])
    except ValueError as e:
        raise TaseError(f"{name}: {e}") from e
    cmds, files = [], []
    for task, lang, sub in streams:
        f = folder / (f"{name}_{task}_{lang}.jsonl" if sub is None else f"{name}_{task}_{lang}_{sub}.jsonl")
        cmd = [py, "-m", "synth", "--task", task, "--lang", lang, "-n",
               str(data.get("skip_examples", 0) + data["num_train_examples"]), "--seed", str(data["synth_seed"])]
        cmd += ["--subtask", sub] if sub is not None else []
        cmd += ["--max-len", str(data["max_len"])] if data["max_len"] else []
        cmd += ["--paraphrase"] if data["paraphrase"] else []
        cmd += ["--mixture", str(data["mixture"])] if data["mixture"] and task == "all" else []
        cmds.append((f, [*cmd, "--exclude", guard, "--no-progress", "--out", shown(f)]))
        files.append(f)
    return cmds, files


def heldout_cmd(pr: Proof, ho: Heldout, n: int, seed: int, out: Path, guard_files: list[Path],
                harder: bool = False) -> list[str]:
    """`python -m synth` writing n generated rows of heldout:'s task, lang (subtask, max_len) with `seed`, guarded
    against the release and every file in guard_files; `harder`: beyond the official range (synth --harder, no
    max_len cap)."""
    cmd = [pr.py, "-m", "synth", "--task", ho.task, "--lang", ho.lang, "-n", str(n), "--seed", str(seed)]
    cmd += ["--subtask", ho.subtask] if ho.subtask else []
    cmd += ["--harder"] if harder else ["--max-len", str(ho.max_len)] if ho.max_len else []
    cmd += ["--no-progress", "--out", shown(out), "--exclude", pr.guard]
    for f in guard_files:
        cmd += ["--exclude-exact", shown(f)]
    return cmd


def stage_sets(pr: Proof) -> Path:
    """The sets stage: the training sets (a superset of every prompt the recipes train on, see
    training_set_cmds) and the held-out set guarded against them and the release; with `select: n, seed`, the
    selection's own held-out set, guarded against those and the held-out set (the summary's held-out column stays
    independent of the choice); returns the held-out file."""
    sets, guard_files = [], []
    for name in pr.data:  # sft, (start,) grpo
        cmds, files = training_set_cmds(pr.py, name, pr.data[name], pr.guard, pr.out / "data")
        sets += cmds
        guard_files += files
    ho = pr.cfg.heldout
    heldout = pr.out / "heldout.jsonl"
    sets.append((heldout, heldout_cmd(pr, ho, ho.n, ho.seed, heldout, guard_files)))
    titles = {heldout: f"held-out set ({ho.n} rows)"}
    sel = pr.cfg.select
    if sel is not None and pr.select_heldout != heldout:  # its own rows, guarded against the held-out set's too
        assert sel.n is not None and sel.seed is not None
        sets.append((pr.select_heldout, heldout_cmd(pr, ho, sel.n, sel.seed, pr.select_heldout,
                                                    [*guard_files, heldout])))
        titles[pr.select_heldout] = f"held-out set for checkpoint selection ({sel.n} rows)"
    harder = pr.cfg.transfer.harder if pr.cfg.transfer else None
    if harder:  # beyond the official range, guarded like the held-out set and against the sets before it
        f = pr.out / "transfer_harder.jsonl"
        sets.append((f, heldout_cmd(pr, ho, harder.n, harder.seed, f, [*guard_files, *(x for x, _ in sets)],
                                    harder=True)))
        titles[f] = f"harder rows for transfer ({harder.n} rows, synth --harder)"
    k = pr.k("sets")
    for f, cmd in sets:
        title = titles.get(f) or f"training set {f.stem} (held-out guard)"
        if not pr.skip(k, title, f, cmd, f"{k} training and held-out sets"):
            pr.step(k, title, cmd, stage=f"{k} training and held-out sets")
    return heldout


def shared_models(pr: Proof) -> dict[str, str]:
    """The models every seed shares, by name: base, warm-up and the start stages (start1 .. start)."""
    models = {"base": pr.base_model, "warm-up": shown(pr.out / "sft")}
    models.update({st.name: shown(pr.out / st.name) for st in pr.starts})
    return models


def unit_models(pr: Proof, chosen: dict[str, str] | None = None) -> dict[str, str]:
    """A unit's models (Proof.unit: one seed's), by name: its arms, then its control and RFT control (a sweep's by
    model name; an RFT control without a strict-correct sample is the origin); `chosen`: the model to evaluate for
    a selected run (by model name: its chosen checkpoint) instead of its final model."""
    out = pr.out
    models = {arm: shown(out / arm) for arm in pr.arms}
    for run in control_runs(pr.cfg) + control_runs(pr.cfg, RFT):  # without a sweep, a model is its one run
        models.setdefault(run.model, shown(pr.origin if rft_empty(out, run) else out / run.folder))
    models.update(chosen or {})
    return models


def data_sets(pr: Proof, heldout: Path) -> dict[str, str]:
    """The evaluation data sets, by name: official, heldout, and transfer:'s harder rows and untrained files."""
    out = pr.out
    data = {"official": f"official:{shown(out / 'official')}", "heldout": shown(heldout)}
    tr = pr.cfg.transfer or Transfer()
    if tr.harder:
        data[HARDER] = shown(out / "transfer_harder.jsonl")
    if tr.files:
        data[UNTRAINED] = f"official:{shown(out / 'transfer_official')}"
    return data


def evaluate(pr: Proof, k: int, models: dict[str, str], data: dict[str, str]) -> None:
    """Step k: greedy `eval run` of every model on every data set (each resumes)."""
    out, ev = pr.out, pr.cfg.eval
    tr = pr.cfg.transfer or Transfer()
    for dname, spec in data.items():
        for name, model in models.items():
            cmd = [pr.py, "-m", "eval", "run", "--model", model, "--data", spec, "--out",
                   shown(out / "eval" / dname / name), "--backend", pr.backend, "--max-new-tokens",
                   str(ev.max_new_tokens), "--no-progress"]
            if dname == UNTRAINED:  # a fixed slice of each file, every row kind in proportion
                cmd += ["--limit", str(ROWS if tr.rows is None else tr.rows), "--select", "stratified"]
            cmd += ["--batch-size", str(ev.batch_size)] if ev.batch_size else []
            cmd += ["--dtype", ev.dtype] if ev.dtype else []
            pr.step(k, f"evaluate {name} on {dname} ({pr.backend}, greedy; resumes)", cmd,
                    stage=f"{k} evaluate on {dname}")


def stage_baseline(pr: Proof, heldout: Path) -> dict[str, str]:
    """The baseline stage: the models every seed shares (base, warm-up, start) evaluated once, before any seed's
    unit; returns them by name."""
    models = shared_models(pr)
    evaluate(pr, pr.k("baseline"), models, data_sets(pr, heldout))
    return models


def stage_evaluate(pr: Proof, heldout: Path, chosen: dict[str, str] | None = None) -> dict[str, str]:
    """The evaluate stage of a unit: greedy evaluations of its models (unit_models: the arms, the control, the RFT
    control; a selected run's chosen checkpoint) on every data set. Returns its models by name."""
    models = unit_models(pr, chosen)
    evaluate(pr, pr.k("evaluate"), models, data_sets(pr, heldout))
    return models


def stage_compare(pr: Proof, heldout: Path, models: list[str]) -> None:
    """The compare stage: `eval compare` of the given models (those shared and of every seed finished so far) per
    data set, paired bootstrap intervals (OUT/comparison/<set>, rewritten as seeds finish)."""
    out, k = pr.out, pr.k("compare")
    for dname in data_sets(pr, heldout):
        pr.step(k, f"compare on {dname}", [pr.py, "-m", "eval", "compare",
                                           *(shown(out / "eval" / dname / m) for m in models),
                                           "--out", shown(out / "comparison" / dname), "--n-boot",
                                           str(pr.cfg.compare.n_boot)],
                stage=f"{k} compare")


def kl_file(out: Path, name: str) -> Path:
    """OUT/kl/<model>.json: the model's mean per-token KL from the origin on the untrained files (kl.py)."""
    return out / "kl" / f"{name}.json"


def stage_kl(pr: Proof, models: dict[str, str]) -> None:
    """With transfer: files, the retention explainer (RL's Razor): each of the unit's models scored against the
    model it trained from (the origin) on its own completions of the untrained files' rows (recipes/proof_stages/
    kl.py); skipped where its file exists. Part of the evaluate stage."""
    tr = pr.cfg.transfer
    if tr is None or not tr.files:
        return
    k = pr.k("evaluate")
    for name, model in models.items():
        done = kl_file(pr.out, name)
        cmd = [pr.py, "-m", "recipes.proof_stages.kl", "--model", model, "--reference", shown(pr.origin),
               "--samples", shown(pr.out / "eval" / UNTRAINED / name / "samples.jsonl"), "--out", shown(done)]
        title = f"KL of {name} from {pr.origin.name} on its own untrained-file completions (RL's Razor)"
        if not pr.skip(k, title, done, cmd, f"{k} KL from start"):
            pr.step(k, title, cmd, stage=f"{k} KL from start")
