"""recipes/proof.py's report stages: per-row completion files re-scored with `eval score` (must match the eval run),
and the summary (accuracy per model, paired gains, per-class tables, wall times)."""
from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from common.errors import TaseError
from recipes.proof_stages.config import (
    ARMS,
    CONTROL,
    RFT,
    START,
    arm_specs,
    control_follows,
    seed_list,
    seeded,
)
from recipes.proof_stages.inputs import shown
from recipes.proof_stages.sections import ProofConfig
from recipes.steps.pipeline import Steps, gain_line, paired_gains
from rewards.levels import COARSE, FINE


def completion_files(samples: Path, files: list[str], folder: Path, dry_run: bool) -> list[Path]:
    """<folder>/<task>/<file stem>.jsonl for every official file: one {"id", "completion"} line per row, in
    row order, from an eval run's samples.jsonl. A file is rewritten only when its content changes."""
    out = {f: folder / f.split("/", 1)[1].removesuffix(".csv") for f in files}
    if dry_run:
        return [p.with_suffix(".jsonl") for p in out.values()]
    res = json.loads((samples.parent / "results.json").read_text(encoding="utf-8"))
    if not res.get("complete"):
        raise TaseError(f"{shown(samples.parent)}: the evaluation is not complete ({res.get('n')} of "
                        f"{res.get('n_expected')} rows)")
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
        for f, path in zip(files, paths, strict=False):
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


def summary_pairs(cfg: ProofConfig, models: list[str]) -> tuple[tuple[str, str, str], ...]:
    """The summary's paired gains, (label, baseline model, model): every arm against the baseline (the start where
    the models have one, else the warm-up), fine vs coarse with both level arms, every arm against the control (the
    arm it is timed against first), the control against the baseline, (control: rft) every arm against the RFT
    control, RFT against the baseline and the control; with seeds: all of these seed by seed (each arm against its
    own seed's controls); then each stage before it against the one before (start vs warm-up, or start vs
    start<k-1> ... start1 vs warm-up; warm-up vs base)."""
    base = START if START in models else "warm-up"
    pairs: tuple[tuple[str, str, str], ...] = ()
    for s in seed_list(cfg):
        specs = [a for a in arm_specs(cfg).values() if a.seed == s]
        arms = [a.name for a in specs]
        pairs += tuple((f"GRPO {arm} vs {base}", base, arm) for arm in reversed(arms))
        if {a.base for a in specs if a.lr_from is None} == set(ARMS):
            fine, coarse = seeded(FINE, s), seeded(COARSE, s)
            pairs += ((f"{fine} vs {coarse}", coarse, fine),)
        control, rft = seeded(CONTROL, s), seeded(RFT, s)
        if control in models:
            follows = seeded(control_follows(cfg), s)
            ctl = seeded("control", s)
            pairs += tuple((f"GRPO {arm} vs {ctl}", control, arm)
                           for arm in [follows, *(a for a in arms if a != follows)])
            pairs += ((f"{ctl} vs {base}", base, control),)
        if rft in models:
            pairs += tuple((f"GRPO {arm} vs {rft}", rft, arm) for arm in arms)
            pairs += ((f"{rft} vs {base}", base, rft),) + (((f"{rft} vs {seeded('control', s)}", control, rft),)
                                                           if control in models else ())
    chain = ["warm-up", *(st.name for st in cfg.start)] if START in models else []
    # start vs start1 ...
    pairs += tuple((f"{b} vs {a}", a, b) for a, b in reversed(list(zip(chain, chain[1:], strict=False))))
    return pairs + (("warm-up vs base", "base", "warm-up"),)


def pooled_pairs(cfg: ProofConfig, models: list[str]) -> list[tuple[str, list[tuple[str, str]]]]:
    """With seeds:, the comparisons pooled over seeds: (label, [(baseline, model) per seed]) for every arm of the
    config against the baseline, the control and the RFT control, and the controls against the baseline."""
    if cfg.seeds is None:
        return []
    base = START if START in models else "warm-up"
    seeds = seed_list(cfg)
    out = []
    specs = arm_specs(cfg).values()  # the arms trained on every seed (a named arm's seeds: may leave some out)
    names = [n for n in dict.fromkeys(a.base for a in specs) if sum(a.base == n for a in specs) == len(seeds)]
    for other, label in ((None, base), (CONTROL, "control"), (RFT, RFT)):
        if other is not None and seeded(other, seeds[0]) not in models:
            continue
        for arm in names:
            out.append((f"GRPO {arm} vs {label}", [(base if other is None else seeded(other, s), seeded(arm, s))
                                                   for s in seeds]))
    for other, label in ((CONTROL, "control"), (RFT, RFT)):
        if seeded(other, seeds[0]) in models:
            out.append((f"{label} vs {base}", [(base, seeded(other, s)) for s in seeds]))
    return out


def pooled_gain(evals: Path, pairs: list[tuple[str, str]], n_boot: int, seed: int = 0) -> dict[str, Any] | None:
    """The mean over seeds of a paired gain (B - A, points, the overall macro of `eval compare`) with a 95% interval
    from a bootstrap over seeds and rows: each replicate draws the seeds with replacement and, within each drawn
    seed, that seed's paired rows with replacement, file by file (eval compare's resampling), and averages the
    seeds' macro gains. Why: "GRPO beats SFT" should hold on average over training seeds, not for the best one,
    and the seeds' spread belongs in the interval. None when a pair shares no rows."""
    import numpy as np

    from eval.compare import bootstrap_delta, load_run

    rng = np.random.default_rng(seed)
    per_seed = []
    for a, b in pairs:
        ra, rb = load_run(evals / a)[2], load_run(evals / b)[2]
        d = bootstrap_delta(ra, rb, n_boot, seed)
        if not d["n_shared"]:
            return None
        per_seed.append(d)
    # each seed's n_boot row replicates (the same resampling eval compare does), then seeds drawn per replicate
    reps = np.stack([np.asarray(row_replicates(evals, a, b, n_boot, seed + j)) for j, (a, b) in enumerate(pairs)])
    pick = rng.integers(0, len(pairs), (n_boot, len(pairs)))
    boot = reps[pick, np.arange(n_boot)[:, None]].mean(axis=1)
    lo, hi = (round(float(x), 2) for x in np.percentile(boot, [2.5, 97.5]))
    delta = round(float(np.mean([d["overall"]["delta"] for d in per_seed])), 2)
    return {"delta": delta, "lo": lo, "hi": hi, "n": sum(d["n_shared"] for d in per_seed),
            "beyond": "gain" if lo > 0 else "loss" if hi < 0 else None,
            "seeds": [d["overall"]["delta"] for d in per_seed]}


def row_replicates(evals: Path, a: str, b: str, n_boot: int, seed: int) -> list[float]:
    """n_boot bootstrap replicates (points) of run b's overall gain over run a: eval compare's file-stratified
    paired resampling of the shared rows, its macro statistic."""
    import numpy as np

    from eval.aggregate import macro
    from eval.compare import in_lang_table, load_run

    ra, rb = load_run(evals / a)[2], load_run(evals / b)[2]
    by_file: dict[str, list[float]] = {}
    info: dict[str, dict[str, Any]] = {}
    for i in sorted(set(ra) & set(rb)):
        f = ra[i]["file"]
        by_file.setdefault(f, []).append(float(rb[i]["coarse"]) - float(ra[i]["coarse"]))
        info.setdefault(f, {"task": ra[i]["task"], "lang": ra[i]["lang"], "in_lang_table": in_lang_table(ra[i])})
    rng = np.random.default_rng(seed)
    boot = {}
    for f in sorted(by_file):
        d = np.asarray(by_file[f])
        boot[f] = d[rng.integers(0, len(d), (n_boot, len(d)))].mean(axis=1)
    return list(100 * macro(boot, info, lambda xs: np.stack(xs, axis=-1).mean(axis=-1))["overall"])


def transfer_lines(out: Path, cfg: ProofConfig, models: list[str], n_boot: int) -> list[str]:
    """transfer: every model in distribution (the files' average), on the harder rows and on the untrained files'
    slice (overall), and its retention: the mean change, file by file, on the untrained files against the model the
    arms train from (the start, else the warm-up); then the paired gains on those sets, per seed and pooled."""
    from recipes.proof_stages.evaluate import HARDER, UNTRAINED
    from recipes.steps.pipeline import paired_gains

    tr = cfg.transfer
    assert tr is not None
    sets = [d for d in (HARDER, UNTRAINED) if (tr.harder if d == HARDER else tr.files)]
    origin = START if START in models else "warm-up"

    def res(dname: str, name: str) -> dict[str, Any]:
        return json.loads((out / "eval" / dname / name / "results.json").read_text(encoding="utf-8"))

    from recipes.proof_stages.evaluate import kl_file
    from recipes.proof_stages.kl import read_kl

    head = ["in distribution", *(("harder rows",) if HARDER in sets else ()),
            *(("untrained files", f"retention (vs {origin})", f"KL from {origin} (nats/token)")
              if UNTRAINED in sets else ())]
    lines = ["", "transfer, accuracy % (in distribution: the files' average; harder rows: synth --harder, beyond the "
                 "official range; untrained files: a stratified slice of each; retention: the mean change on the "
                 "untrained files, file by file; KL: the mean per-token KL of each tuned model from the model it "
                 "trained from on its own completions of the untrained files' rows, RL's Razor):", "",
             "| model | " + " | ".join(head) + " |", "|---|" + "---:|" * len(head)]
    files = cfg.files
    for name in models:
        o = res("official", name)
        cells = [f"{sum(o['by_file'][f]['accuracy'] for f in files) / len(files):.2f}"]
        if HARDER in sets:
            cells.append(f"{res(HARDER, name)['overall']:.2f}")
        if UNTRAINED in sets:
            u, base = res(UNTRAINED, name)["by_file"], res(UNTRAINED, origin)["by_file"]
            change = sum(u[f]["accuracy"] - base[f]["accuracy"] for f in tr.files) / len(tr.files)
            kl = kl_file(out, name)
            cells += [f"{res(UNTRAINED, name)['overall']:.2f}", f"{change:+.2f}",
                      f"{read_kl(kl)['kl_per_token']:.4f}" if kl.is_file() else "-"]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    lines += pooled_table(out, cfg, models, n_boot)
    pairs = summary_pairs(cfg, models)
    pooled = pooled_pairs(cfg, models)
    for dname in sets:
        lines += ["", f"gains on {dname} (points; paired 95% bootstrap, {n_boot} resamples):"]
        g = paired_gains(out / "eval" / dname, pairs, n_boot)
        lines += ["  the evaluations share no rows"] if g is None else [gain_line(k, x, 22) for k, x in g.items()]
        lines += pooled_lines(out / "eval" / dname, pooled, n_boot, dname)
    return lines


def pooled_table(out: Path, cfg: ProofConfig, models: list[str], n_boot: int) -> list[str]:
    """With seeds: and transfer:, RL against SFT pooled over the seeds finished (cfg.seeds): a row for each GRPO arm
    trained on every seed, the SFT control (per seed its held-out best rate) and the RFT control; a column for each
    set: the gain over the model they train from (the start, else the warm-up) in distribution (the official
    files), on the harder rows and on the untrained files (retention), each the mean of the seeds' gains with its
    95% bootstrap over seeds and rows (pooled_gain); then the KL from the start on the untrained files (RL's Razor,
    pooled_kl), "not measured" where a seed has no KL file."""
    from recipes.proof_stages.evaluate import HARDER, UNTRAINED

    tr = cfg.transfer
    if cfg.seeds is None or tr is None:
        return []
    seeds = seed_list(cfg)
    origin = START if START in models else "warm-up"
    specs = list(arm_specs(cfg).values())
    arms = [n for n in dict.fromkeys(a.base for a in specs) if sum(a.base == n for a in specs) == len(seeds)]
    rows = [(f"GRPO {a}", a) for a in arms] + [("best SFT (control)", CONTROL), ("RFT", RFT)]
    rows = [(label, base) for label, base in rows if all(seeded(base, s) in models for s in seeds)]
    from recipes.proof_stages.evaluate import kl_file
    from recipes.proof_stages.kl import pooled_kl

    sets = [("in distribution", "official"), *((("harder rows", HARDER),) if tr.harder else ()),
            *((("untrained files (retention)", UNTRAINED),) if tr.files else ())]
    lines = ["", f"RL against SFT pooled over {len(seeds)} seed(s) ({', '.join(map(str, seeds))}): the gain over "
                 f"{origin} in points, the mean of the seeds' gains [95% bootstrap over seeds and rows, {n_boot} "
                 "resamples]; eval compare's overall (file means, then task means):", "",
             "| method | " + " | ".join(c for c, _ in sets) + " | KL from start |", "|---|" + "---:|" * (len(sets) + 1)]
    for label, base in rows:
        cells = []
        for _, dname in sets:
            g = pooled_gain(out / "eval" / dname, [(origin, seeded(base, s)) for s in seeds], n_boot)
            cells.append("no shared rows" if g is None else f"{g['delta']:+.2f} [{g['lo']:+.2f}, {g['hi']:+.2f}]")
        files = [kl_file(out, seeded(base, s)) for s in seeds]
        kl = pooled_kl(files, n_boot) if tr.files and all(f.is_file() for f in files) else None
        cells.append("not measured" if kl is None else f"{kl[0]:.4f} [{kl[1]:.4f}, {kl[2]:.4f}]")
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return lines


def pooled_lines(evals: Path, pooled: list[tuple[str, list[tuple[str, str]]]], n_boot: int, dname: str) -> list[str]:
    """The pooled comparisons on one data set, each with its per-seed gains."""
    if not pooled:
        return []
    lines = ["", f"pooled over seeds on {dname} (mean of the seeds' gains; 95% bootstrap over seeds and rows, "
                 f"{n_boot} resamples):"]
    for label, pairs in pooled:
        g = pooled_gain(evals, pairs, n_boot)
        if g is None:
            lines.append(f"  {label}: the evaluations share no rows")
            continue
        lines.append(gain_line(label, g, 22) + "; per seed " + ", ".join(f"{x:+.2f}" for x in g["seeds"]))
    return lines


def summary(out: Path, cfg: ProofConfig, models: list[str], n_boot: int, step: Steps, total: float,
            selection: list[str] | None = None, units: list[str] | None = None) -> str:
    """The summary's text; `selection`: the selection stage's lines (selection.selection_lines), after the
    accuracy table; the paired gains: summary_pairs; `units`: the seeds' prefixes whose wall times it gives (with
    the shared stages'; ProofSteps.table_of), else every stage's."""
    files = cfg.files
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
        lines += pooled_lines(out / "eval" / dname, pooled_pairs(cfg, models), n_boot, dname)
    if cfg.transfer is not None:
        lines += transfer_lines(out, cfg, models, n_boot)
    lines += answer_class_lines(out / "eval" / "official", models, files)
    table = step.table_of(units) if units is not None and hasattr(step, "table_of") else step.table()
    lines += ["", WALL_TITLE, "", table,
              "", f"this invocation: {total:.0f} s; comparisons: {shown(out / 'comparison')}"]
    return "\n".join(lines)


# the summary's wall-time heading: what follows it differs between an interrupted and an uninterrupted proof
WALL_TITLE = ("wall time per stage (every invocation into this OUT added up; skipped stages count 0, a killed step's "
              "partial time is not counted):")
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
