"""recipes/proof.py's report stages: per-row completion files re-scored with `eval score` (must match the eval run),
and the summary (accuracy per model, paired gains, per-class tables, wall times)."""
from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from common.errors import TaseError
from recipes.pipeline import Steps, gain_line, paired_gains
from recipes.proof_config import ARMS, CONTROL, START, arm_specs, control_follows, start_stages
from recipes.proof_inputs import shown
from rewards.levels import COARSE, FINE


def completion_files(samples: Path, files: list[str], folder: Path, dry_run: bool) -> list[Path]:
    """<folder>/<task>/<file stem>.jsonl for every official file: one {"id", "completion"} line per row, in
    row order, from an eval run's samples.jsonl. A file is rewritten only when its content changes."""
    out = {f: folder / f.split("/", 1)[1].removesuffix(".csv") for f in files}
    if dry_run:
        return [p.with_suffix(".jsonl") for p in out.values()]
    res = json.loads((samples.parent / "results.json").read_text(encoding="utf-8"))
    if not res.get("complete"):
        raise TaseError(f"{shown(samples.parent)}: the evaluation is not complete ({res.get('n')} of {res.get('n_expected')} rows)")
    rows: dict[str, list[tuple[int, str]]] = {f: [] for f in files}
    with samples.open(encoding="utf-8") as fh:
        for line in fh:
            s = json.loads(line)
            if s["file"] in rows:
                rows[s["file"]].append((int(s["id"].rsplit("/", 1)[1]), json.dumps(
                    {"id": s["id"], "completion": s["completion"]}, ensure_ascii=False) + "\n"))
    written = []  # the run is complete: every row of every file has its sample
    for f, path in out.items():
        path = path.with_suffix(".jsonl")
        text = "".join(line for _, line in sorted(rows[f]))
        if not path.is_file() or path.read_text(encoding="utf-8") != text:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
        written.append(path)
    return written


def accuracy_of(run: Path, file: str) -> float:
    return json.loads((run / "results.json").read_text(encoding="utf-8"))["by_file"][file]["accuracy"]


def completions_stage(step: Steps, out: Path, files: list[str], models: list[str], completions: Path,
                      official: str, k: int = 7) -> list[str]:
    """The completions stage (number k): write each model's completion files, re-score each with `eval score`
    (skipped while its scores are newer than the file) and check its accuracy equals the eval run's; returns
    the mismatches."""
    step.header(k, f"completion files under {shown(completions)}, re-scored with `eval score`")
    checks = []
    for name in models:
        samples = out / "eval" / "official" / name / "samples.jsonl"
        print(f"# writes {shown(completions / name)}/<task>/<file>.jsonl (id, completion) from {shown(samples)}")
        paths = completion_files(samples, files, completions / name, step.dry_run)
        for f, path in zip(files, paths):
            rescored = out / "rescore" / name / path.relative_to(completions / name).with_suffix("")
            checks.append((name, f, rescored))
            cmd = [sys.executable, "-m", "eval", "score", "--data", official, "--predictions", shown(path),
                   "--out", shown(rescored), "--force"]
            res = rescored / "results.json"
            if not step.dry_run and res.is_file() and res.stat().st_mtime >= path.stat().st_mtime:
                print(f"   skipped: {shown(res)} is newer than {shown(path)}")
            else:
                step.run(f"re-score {name} {f}", cmd, stage=f"{k} completion files + re-score")
    bad = []
    for name, f, rescored in [] if step.dry_run else checks:
        a, b = accuracy_of(out / "eval" / "official" / name, f), accuracy_of(rescored, f)
        width = max(8, *map(len, models))
        print(f"   {name:<{width}} {f}: eval run {a:.2f}, re-scored {b:.2f}" + ("" if a == b else "  MISMATCH"))
        if a != b:
            bad.append(f"{name} {f}")
    if bad:
        print(f"error: re-scored completions differ from the eval run: {', '.join(bad)}", file=sys.stderr)
    return bad


def summary_pairs(cfg: dict[str, Any], models: list[str]) -> tuple[tuple[str, str, str], ...]:
    """The summary's paired gains, (label, baseline model, model): every arm against the baseline (the start where
    the models have one, else the warm-up), fine vs coarse with both level arms, every arm against the control (the
    arm it is timed against first), the control against the baseline, then each stage before it against the one
    before (start vs warm-up, or start vs start<k-1> ... start1 vs warm-up; warm-up vs base)."""
    arms, base = list(arm_specs(cfg)), START if START in models else "warm-up"
    pairs = tuple((f"GRPO {arm} vs {base}", base, arm) for arm in reversed(arms))
    pairs += ((f"{FINE} vs {COARSE}", COARSE, FINE),) if set(arms) == set(ARMS) else ()
    if CONTROL in models:
        follows = control_follows(cfg)
        pairs += tuple((f"GRPO {arm} vs control", CONTROL, arm) for arm in [follows, *(a for a in arms if a != follows)])
        pairs += ((f"control vs {base}", base, CONTROL),)
    chain = ["warm-up", *(name for name, _ in start_stages(cfg))] if START in models else []
    pairs += tuple((f"{b} vs {a}", a, b) for a, b in reversed(list(zip(chain, chain[1:]))))  # start vs start1 ...
    return pairs + (("warm-up vs base", "base", "warm-up"),)


def summary(out: Path, cfg: dict[str, Any], models: list[str], n_boot: int, step: Steps, total: float,
            selection: list[str] | None = None) -> str:
    """The summary's text; `selection`: the selection stage's lines (proof_select.selection_lines), after the
    accuracy table; the paired gains: summary_pairs."""
    files = cfg["files"]
    lines = ["official subset (whole files), accuracy % (coarse = the official verdict):", "",
             "| model | " + " | ".join(f.split("/", 1)[1].removesuffix(".csv") for f in files)
             + " | files' average | held-out (overall) |", "|---|" + "---:|" * (len(files) + 2)]
    for name in models:
        res = json.loads((out / "eval" / "official" / name / "results.json").read_text(encoding="utf-8"))
        held = json.loads((out / "eval" / "heldout" / name / "results.json").read_text(encoding="utf-8"))
        accs = [res["by_file"][f]["accuracy"] for f in files]
        lines.append(f"| {name} | " + " | ".join(f"{a:.2f}" for a in accs)
                     + f" | {sum(accs) / len(accs):.2f} | {held['overall']:.2f} |")
    lines += selection or []
    pairs = summary_pairs(cfg, models)
    for dname in ("official", "heldout"):
        lines += ["", f"gains on {dname} (overall as `eval compare`: file means -> task means; points; paired 95% "
                      f"bootstrap, {n_boot} resamples):"]
        g = paired_gains(out / "eval" / dname, pairs, n_boot)
        lines += ["  the evaluations share no rows"] if g is None else [gain_line(k, x, 22) for k, x in g.items()]
    lines += answer_class_lines(out / "eval" / "official", models, files)
    lines += ["", "wall time per stage (this invocation; skipped stages count 0):", "", step.table(),
              "", f"proof finished in {total:.0f} s; comparisons: {shown(out / 'comparison')}"]
    return "\n".join(lines)


MAX_CLASSES = 12  # a file whose gold answers take at most this many values is a classification: per-class table


def answer_class_lines(evals: Path, models: list[str], files: list[str]) -> list[str]:
    """Per-class accuracy (the class is the row's gold answer, e.g. kana or greek in char_classification) for
    every file whose gold answers take at most MAX_CLASSES values: correct/rows per model from each eval run's
    samples.jsonl (`coarse`, the official verdict). Why: a whole-file gain can hide where it comes from (one
    class learnt, another lost)."""
    per: dict[str, dict[str, dict[str, list[int]]]] = {}  # file -> model -> answer -> [correct, rows]
    for name in models:
        with (evals / name / "samples.jsonl").open(encoding="utf-8") as fh:
            for line in fh:
                s = json.loads(line)
                if s.get("file") in files:
                    c = per.setdefault(s["file"], {}).setdefault(name, {}).setdefault(str(s.get("answer")), [0, 0])
                    c[0] += bool(s.get("coarse"))
                    c[1] += 1
    lines: list[str] = []
    for f in files:
        classes = sorted({a for m in per.get(f, {}).values() for a in m},
                         key=lambda a: (-max(m.get(a, [0, 0])[1] for m in per[f].values()), a))
        if not classes or len(classes) > MAX_CLASSES:
            continue
        lines += ["", f"{f.split('/', 1)[1].removesuffix('.csv')}: correct / rows per class (the gold answer; "
                      "official verdict):", "", "| model | " + " | ".join(classes) + " |",
                  "|---|" + "---:|" * len(classes)]
        for name in models:
            got = per[f].get(name, {})
            lines.append(f"| {name} | " + " | ".join("{}/{}".format(*got.get(a, [0, 0])) for a in classes) + " |")
    return lines
