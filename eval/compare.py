"""`eval compare A B [C...]`: the paper's Table 1 (tasks) and Table 2 (languages) side by side, deltas
against the first run with paired 95% bootstrap intervals, and a grouped bar chart."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from common.errors import TaseError
from common.paths import output_refusal, write_marker
from common.record import TASKS

from .aggregate import RATIO_TASKS, ci95, code_of, in_lang_table, lang_table, macro, off_table_text
from .runner import RESULTS, SAMPLES, RunError, iter_samples

TASK_ORDER = [t.code for t in TASKS.values()]


class CompareError(TaseError, ValueError):
    pass


def load_run(d: str | Path) -> tuple[str, dict[str, Any], dict[str, dict[str, Any]]]:
    d = Path(d)
    try:
        res = json.loads((d / RESULTS).read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        raise CompareError(f"{d}: no readable {RESULTS} (run `python -m eval run` or `score` first)") from None
    missing = [k for k in ("overall", "by_task", "by_lang", "micro", "n") if not isinstance(res, dict) or k not in res]
    if missing:
        raise CompareError(f"{d / RESULTS}: not an `eval` results file (missing {', '.join(missing)})")
    try:
        all_samples = list(iter_samples(d / SAMPLES))
        samples = {s["id"]: s for s in all_samples if s.get("valid", True)}
    except (KeyError, TypeError, AttributeError):
        raise CompareError(f"{d / SAMPLES}: not an `eval` samples file") from None
    except RunError as e:
        raise CompareError(str(e)) from None
    if not all_samples and res.get("n"):
        raise CompareError(f"{d / SAMPLES}: missing or empty, but {RESULTS} counts {res['n']} rows")
    if len(all_samples) != res["n"]:  # Table 1 would show results.json's n, the deltas the samples' rows
        raise CompareError(f"{d / SAMPLES} holds {len(all_samples)} rows but {RESULTS} counts {res['n']}: the folder "
                           f"was cut short or changed after scoring; rerun the command that wrote it (eval run "
                           f"resumes and rewrites both; eval score --force)")
    if not res["n"]:
        failed = d / "failures.jsonl"
        why = f" (every request failed: see {failed})" if failed.exists() else ""
        raise CompareError(f"{d}: no scored rows{why}; its accuracies would read 0.00 as if it had been scored")
    return d.name, res, samples


def available_memory() -> int:
    """Bytes of memory available now (MemAvailable), or 4 GiB where /proc/meminfo is missing."""
    try:
        for line in open("/proc/meminfo", encoding="ascii"):
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 4 << 30


def check_boot_memory(n_boot: int, rows: int) -> None:
    """A bootstrap draws an (n_boot x rows) index array and gathers as many values: refuse, in one line, a
    --n-boot that would need more than half the memory available, before it fails with MemoryError."""
    need = n_boot * max(rows, 1) * 24  # int64 indices + float64 gather + temporaries
    have = available_memory() // 2
    if need > have:
        raise CompareError(f"--n-boot {n_boot} needs about {need / 2**30:.1f} GiB for {rows} rows, more than half "
                           f"the memory available ({have / 2**30:.1f} GiB); use at most "
                           f"{max(have // (24 * max(rows, 1)), 1)}")


def bootstrap_delta(a: dict[str, dict[str, Any]], b: dict[str, dict[str, Any]], n_boot: int = 1000,
                    seed: int = 0, key: str = "coarse") -> dict[str, Any]:
    """Paired bootstrap of (B - A) in points over the sample ids both runs scored as valid, on each sample's `key`
    (coarse: the official verdict; strict: without its loopholes, bench/strict_gains.py).

    The statistic is the macro aggregate itself (file means -> task means -> overall; file means ->
    language means), so resampling is stratified by file: each file's paired differences are
    resampled with replacement at the file's own size, which keeps every file in every replicate.
    Deterministic for a seed."""
    ids = sorted(set(a) & set(b))
    if not ids:
        return {"n_shared": 0}
    by_file: dict[str, list[float]] = {}
    info: dict[str, dict[str, Any]] = {}
    for i in ids:
        f = a[i]["file"]
        by_file.setdefault(f, []).append(float(b[i][key]) - float(a[i][key]))
        info.setdefault(f, {"task": a[i]["task"], "lang": a[i]["lang"], "in_lang_table": in_lang_table(a[i])})
    files = sorted(by_file)
    check_boot_memory(n_boot, max(len(v) for v in by_file.values()))
    rng = np.random.default_rng(seed)
    point = np.array([np.mean(by_file[f]) for f in files])
    boot = np.empty((n_boot, len(files)))
    for k, f in enumerate(files):
        d = np.asarray(by_file[f])
        boot[:, k] = d[rng.integers(0, len(d), (n_boot, len(d)))].mean(axis=1)

    # the same macro statistic as results.json (aggregate.macro), on the point deltas and on every replicate
    def mean(xs: list[Any]) -> Any:
        return np.stack(xs, axis=-1).mean(axis=-1)

    pt = macro({f: point[k] for k, f in enumerate(files)}, info, mean)
    bs = macro({f: boot[:, k] for k, f in enumerate(files)}, info, mean)

    def stat(p: Any, reps: np.ndarray) -> dict[str, Any]:
        return {"delta": round(100 * float(p), 2), "ci95": ci95(100 * reps)}

    order = sorted(pt["by_task"], key=lambda t: TASK_ORDER.index(code_of(t)) if code_of(t) in TASK_ORDER else 99)
    return {
        "n_shared": len(ids),
        "overall": stat(pt["overall"], bs["overall"]),
        "by_task": {code_of(t): stat(pt["by_task"][t], bs["by_task"][t]) for t in order},
        "by_lang": {lang: stat(pt["by_lang"][lang], bs["by_lang"][lang]) for lang in pt["by_lang"]},
        "micro": {"delta": round(100 * float(np.mean([x for f in files for x in by_file[f]])), 2)},
    }


def _row(name: str, values: dict[str, float], cols: list[str], extra: list[float | None]) -> str:
    cells = [f"{values[c]:.2f}" if c in values else "–" for c in cols]
    cells += ["–" if v is None else f"{v:.2f}" for v in extra]
    return f"| {name} | " + " | ".join(cells) + " |"


def _delta_cell(d: dict[str, Any] | None) -> str:
    if not d:
        return "–"
    lo, hi = d["ci95"]
    star = "*" if lo > 0 or hi < 0 else ""
    return f"{d['delta']:+.2f}{star} [{lo:+.2f}, {hi:+.2f}]"


def _unique(names: list[str]) -> list[str]:
    out: list[str] = []
    for n in names:
        k, cand = 2, n
        while cand in out:
            cand, k = f"{n}-{k}", k + 1
        out.append(cand)
    return out


def _ratio_scores(res: dict[str, Any]) -> dict[str, float]:
    """The ratio scores a results.json reports (`dot_official_adjusted`: one value, or code -> value)."""
    v = res.get("dot_official_adjusted")
    if isinstance(v, dict):
        return v
    return {} if v is None or len(RATIO_TASKS) != 1 else {code_of(RATIO_TASKS[0]): v}


def _ratio_notes(names: list[str], results: list[dict[str, Any]]) -> list[str]:
    """One note per task with an official ratio score (TaskInfo.official_ratio), under Table 1."""
    lines: list[str] = []
    for t in RATIO_TASKS:
        rule, code = TASKS[t].official_ratio, code_of(t)
        assert rule is not None
        adj = [(n, _ratio_scores(r)[code]) for n, r in zip(names, results, strict=False) if code in _ratio_scores(r)]
        if adj:
            lines += ["", f"{code} above is the plain mean of the {t} files. The release's merge_result.py instead "
                          f"divides the {rule.label}' mean by {rule.denominator} accuracy: "
                      + ", ".join(f"{n} {v:.2f}" for n, v in adj)
                      + (f" (undefined where {rule.denominator} is 0)." if len(adj) < len(results) else ".")]
    return lines


def compare(dirs: list[str], out: str | Path, n_boot: int = 1000, seed: int = 0) -> dict[str, Any]:
    """Paper-style tables for several result folders (the first is the baseline), paired bootstrap
    deltas against it, a plot; writes comparison.md/.json/.png under `out`."""
    if len(dirs) < 2:
        raise CompareError("compare needs at least two result folders")
    why = output_refusal(Path(out), "compare", replace=False)  # common/paths.py: the one rule for every output
    if why:
        raise CompareError(f"--out {why}; compare into another --out")
    runs = [load_run(d) for d in dirs]
    names = _unique([n for n, _, _ in runs])
    results = [r for _, r, _ in runs]
    task_cols = [c for c in TASK_ORDER if any(c in r["by_task"] for r in results)]
    lang_cols = [lang for lang in lang_table() if any(lang in r["by_lang"] for r in results)]
    lines = ["## Table 1: accuracy (%) by task", "",
             "Avg = unweighted mean of the task scores (each the mean of its files' accuracies, as the official "
             "release aggregates); micro = accuracy over all rows pooled.", "",
             "| model | " + " | ".join(task_cols) + " | Avg | micro | n |",
             "|---|" + "---:|" * (len(task_cols) + 3)]
    for n, r in zip(names, results, strict=False):
        lines.append(_row(n, r["by_task"], task_cols, [r["overall"], r["micro"]["overall"]]) + f" {r['n']} |")
    lines += _ratio_notes(names, results)
    lines += files_scored_lines(names, results)
    lines += ["", "## Table 2: accuracy (%) by language", "",
              f"{off_table_text()} are left out, as in the official table; "
              "Avg = mean of the language scores.", "",
              "| model | " + " | ".join(lang_cols) + " | Avg |", "|---|" + "---:|" * (len(lang_cols) + 1)]
    for n, r in zip(names, results, strict=False):
        vals = [r["by_lang"][c] for c in lang_cols if c in r["by_lang"]]
        avg = r.get("by_lang_avg", sum(vals) / len(vals) if vals else None)
        lines.append(_row(n, r["by_lang"], lang_cols, [avg if vals else None]))
    deltas = {n: bootstrap_delta(runs[0][2], run[2], n_boot, seed) for n, run in zip(names[1:], runs[1:], strict=False)}
    lines += ["", f"## Differences against {names[0]} (points; paired, file-stratified bootstrap, 95% CI, "
                  f"{n_boot} resamples, seed {seed}; * = interval excludes 0)", "",
              "| model | shared | Avg | " + " | ".join(task_cols) + " |", "|---|" + "---:|" * (len(task_cols) + 2)]
    for n, d in deltas.items():
        if not d["n_shared"]:
            lines.append(f"| {n} | 0 | no shared sample ids |" + " |" * len(task_cols))
            continue
        lines.append(f"| {n} | {d['n_shared']} | {_delta_cell(d['overall'])} | "
                     + " | ".join(_delta_cell(d["by_task"].get(c)) for c in task_cols) + " |")
    if lang_cols and any(d.get("by_lang") for d in deltas.values()):
        lines += ["", "| model | " + " | ".join(lang_cols) + " |", "|---|" + "---:|" * len(lang_cols)]
        for n, d in deltas.items():
            if d["n_shared"]:
                lines.append(f"| {n} | " + " | ".join(_delta_cell(d["by_lang"].get(c)) for c in lang_cols) + " |")
    notes = coverage_notes(names, runs, deltas)
    if notes:
        lines += ["", *notes]
    lines += strict_table(names, results, task_cols)
    lines += pass_at_k_lines(names, results)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    levels = [bootstrap_level(samples, n_boot, seed) for _, _, samples in runs]
    plot = plot_tasks(names, results, task_cols, lang_cols, out / "comparison.png", levels)
    md = "\n".join(lines) + f"\n\nPlot: {plot}\n"
    (out / "comparison.md").write_text(md, encoding="utf-8")
    summary = {"runs": dict(zip(names, dirs, strict=False)),
               "by_task": {n: r["by_task"] for n, r in zip(names, results, strict=False)},
               "by_lang": {n: r["by_lang"] for n, r in zip(names, results, strict=False)},
               "overall": {n: r["overall"] for n, r in zip(names, results, strict=False)},
               "micro": {n: r["micro"]["overall"] for n, r in zip(names, results, strict=False)},
               "strict": {n: r.get("strict") for n, r in zip(names, results, strict=False)},
               "loophole": {n: r.get("loophole") for n, r in zip(names, results, strict=False)},
               "pass_at_k": {n: r["pass_at_k"] for n, r in zip(names, results, strict=False) if r.get("pass_at_k")},
               "strict_pass_at_k": {n: r["strict_pass_at_k"] for n, r in zip(names, results, strict=False)
                                    if r.get("strict_pass_at_k")},
               "deltas": deltas, "warnings": notes, "ci95": {n: lv for n, lv in zip(names, levels, strict=False)},
               "n_boot": n_boot, "seed": seed, "plot": str(plot), "markdown": md}
    (out / "comparison.json").write_text(json.dumps(summary, ensure_ascii=False, indent=2), encoding="utf-8")
    write_marker(out, "compare", ["comparison.md", "comparison.json", "comparison.png"])
    return summary


def files_scored_lines(names: list[str], results: list[dict[str, Any]]) -> list[str]:
    """Which files the runs scored, under Table 1, when a run scored a subset (`eval run --tasks/--files`, a single
    CSV): the tables' columns alone do not say that a task's score is one of its files."""
    if not any(r.get("subset") or str(r.get("data", "")).lower().endswith(".csv") for r in results):
        return []
    files = [r.get("files_scored") or sorted(r.get("by_file") or {}) for r in results]
    if all(f == files[0] for f in files):
        return ["", f"Files scored (every run): {', '.join(files[0])}."]
    return ["", "Files scored: " + "; ".join(f"{n}: {', '.join(f)}" for n, f in zip(names, files, strict=True)) + "."]


def coverage_notes(names: list[str], runs: list[tuple[str, dict[str, Any], dict[str, dict[str, Any]]]],
                   deltas: dict[str, dict[str, Any]]) -> list[str]:
    """Warnings (also shown under the differences) for runs that did not score the same rows as the baseline:
    Tables 1-3 give each run's accuracy over its own rows, the differences only the rows both scored validly,
    so the two need not agree; say so, with the counts, rather than let a reader take one for the other."""
    base = set(runs[0][2])
    out = []
    for n, (_, _res, samples) in zip(names[1:], runs[1:], strict=False):
        if set(samples) != base:
            out.append(f"warning: {n} and {names[0]} scored different rows ({len(samples)} and {len(base)} valid; "
                       f"{deltas[n]['n_shared']} shared): Tables 1-3 show each run over its own rows, the "
                       f"differences only the {deltas[n]['n_shared']} shared ones")
    return out


def strict_table(names: list[str], results: list[dict[str, Any]], task_cols: list[str]) -> list[str]:
    """Official beside strict accuracy, and the rows that passed the official verdict only through a
    loophole (a list holding the label, the unsplit word, an echo, extra words around the label): a model
    that learnt to hedge shows a strict accuracy far below its official one. Runs scored before the
    strict verdict existed have no `strict` key and show dashes."""
    lines = ["", "## Table 3: official and strict accuracy (%)", "",
             "strict = the official verdict without its loopholes (docs/rewards.md, \"Loopholes\"); loophole "
             "passes = rows the official verdict passed only through one. Task cells: official / strict.", "",
             "| model | " + " | ".join(task_cols) + " | Avg official | Avg strict | micro official | micro strict "
             "| loophole passes | n |", "|---|" + "---:|" * (len(task_cols) + 6)]
    for n, r in zip(names, results, strict=False):
        st = r.get("strict")
        if not st:
            lines.append(f"| {n} | " + " | ".join("–" for _ in task_cols) + f" | {r['overall']:.2f} | – | "
                         f"{r['micro']['overall']:.2f} | – | – | {r['n']} |")
            continue
        cells = [f"{r['by_task'][c]:.1f} / {st['by_task'][c]:.1f}" if c in st["by_task"] else "–" for c in task_cols]
        lines.append(f"| {n} | " + " | ".join(cells) + f" | {r['overall']:.2f} | {st['overall']:.2f} | "
                     f"{r['micro']['overall']:.2f} | {st['micro']:.2f} | {r['loophole']['n']} | {r['n']} |")
    hit = [(n, {f: k for f, k in r["loophole"]["by_file"].items() if k}) for n, r in zip(names, results, strict=False)
           if r.get("loophole")]
    if any(files for _, files in hit):
        lines += ["", "Loophole passes by file: " + "; ".join(
            f"{n}: " + ", ".join(f"{f} {k}" for f, k in files.items()) for n, files in hit if files) + "."]
    return lines


def pass_at_k_lines(names: list[str], results: list[dict[str, Any]]) -> list[str]:
    """The pass@k table of the runs sampled k times (`eval run --num-samples K`), per file and overall: pass@1,
    pass@K, their gap (what RL can sharpen) and the share of mixed rows; [] when no run has one."""
    runs = [(n, r["pass_at_k"], r.get("strict_pass_at_k")) for n, r in zip(names, results, strict=False)
            if r.get("pass_at_k")]
    if not runs:
        return []
    strict = any(st for _, _, st in runs)  # strict columns where a run stored strict verdicts per sample
    lines = ["", "## pass@k (unbiased estimator, Chen et al. 2021; K samples per row)", "",
             "A task worth RL: a large pass@K - pass@1 gap, pass@1 neither near 0 nor near 1; mixed = rows with some "
             "but not all samples correct (the GRPO groups with a gradient)."
             + (" strict: the same without the official verdict's loopholes (docs/rewards.md)." if strict else ""), "",
             "| model | file | rows | K | pass@1 | pass@K | gap | mixed |"
             + (" strict pass@1 | strict pass@K |" if strict else ""),
             "|---|---|---:|---:|---:|---:|---:|---:|" + ("---:|---:|" if strict else "")]
    for n, pk, st in runs:
        k = pk["k"]
        items = [(f, v) for f, v in pk["by_file"].items()]
        items.append(("overall (macro)", {"n": sum(v["n"] for _, v in items), "pass@1": pk["pass@1"]["overall"],
                                          f"pass@{k}": pk[f"pass@{k}"]["overall"], "mixed": None}))
        st_file = dict(st["by_file"]) if st else {}
        if st:
            st_file["overall (macro)"] = {"pass@1": st["pass@1"]["overall"], f"pass@{k}": st[f"pass@{k}"]["overall"]}
        for f, v in items:
            p1, pk_ = v["pass@1"], v[f"pass@{k}"]
            mixed = "–" if v["mixed"] is None else f"{v['mixed']:.1f}"
            line = f"| {n} | {f} | {v['n']} | {k} | {p1:.2f} | {pk_:.2f} | {pk_ - p1:+.2f} | {mixed} |"
            if strict:
                sv = st_file.get(f)
                line += f" {sv['pass@1']:.2f} | {sv[f'pass@{k}']:.2f} |" if sv else " – | – |"
            lines.append(line)
    return lines


def bootstrap_level(samples: dict[str, dict[str, Any]], n_boot: int = 1000, seed: int = 0) -> dict[str, Any]:
    """95% intervals of one run's own accuracies (overall, by task, by language): the paired bootstrap
    against an all-wrong copy of itself, so the interval comes from the same file-stratified aggregation
    as the deltas."""
    zero = {i: {**s, "coarse": 0.0} for i, s in samples.items()}
    return bootstrap_delta(zero, samples, n_boot, seed)


def plot_tasks(names: list[str], results: list[dict[str, Any]], cols: list[str], lang_cols: list[str],
               path: Path, levels: list[dict[str, Any]] | None = None) -> Path:
    """Grouped bars: tasks + Avg (left), languages + Avg (right); each bar labelled with its value and,
    where `levels` (bootstrap_level of each run) are given, whiskers for its 95% interval."""
    from matplotlib.figure import Figure  # no pyplot: no backend to choose, no global figure state

    panels = [("by task", cols, "by_task", "overall")]
    if lang_cols:
        panels.append(("by language", lang_cols, "by_lang", None))
    widths = [max(len(c) + 1, 3) for _, c, _, _ in panels]
    fig = Figure(figsize=(max(8, 0.9 * sum(widths) * max(1, len(names) / 3) + 2), 4.6))
    axes = fig.subplots(1, len(panels), gridspec_kw={"width_ratios": widths}, squeeze=False)
    w = 0.8 / len(names)
    top = 0.0
    for ax, (title, cs, key, avg_key) in zip(axes[0], panels, strict=False):
        x = np.arange(len(cs) + 1)
        for k, (n, r) in enumerate(zip(names, results, strict=False)):
            vals = [r[key].get(c, 0.0) for c in cs]
            vals.append(r[avg_key] if avg_key else r.get("by_lang_avg", sum(vals) / len(vals) if vals else 0.0))
            err, hi = None, [0.0] * len(vals)
            if levels and levels[k].get("n_shared"):
                lv = levels[k]
                cis = [lv[key].get(c, {}).get("ci95") for c in cs] + [lv["overall"]["ci95"] if avg_key else None]
                lo = [v - ci[0] if ci else 0.0 for v, ci in zip(vals, cis, strict=False)]
                hi = [ci[1] - v if ci else 0.0 for v, ci in zip(vals, cis, strict=False)]
                err = np.clip(np.array([lo, hi]), 0, None)
                top = max(top, max(v + h for v, h in zip(vals, hi, strict=False)))
            top = max(top, max(vals))
            xs = x + (k - (len(names) - 1) / 2) * w
            ax.bar(xs, vals, w, label=n, yerr=err, capsize=2, error_kw={"elinewidth": 0.8, "alpha": 0.6})
            for xi, v, h in zip(xs, vals, hi, strict=False):  # the value above its whisker, so neither hides the other
                ax.text(xi, v + h + 1, f"{v:.1f}", ha="center", va="bottom", fontsize=6, rotation=90)
        ax.set_xticks(x, cs + ["Avg"], fontsize=8)
        ax.set_title(title, fontsize=10)
        ax.set_ylabel("accuracy (%)")
    for ax in axes[0]:
        ax.set_ylim(0, min(100.0, top) * 1.15 + 6)
    axes[0][0].legend(fontsize=8, loc="upper left")
    fig.suptitle("TASE accuracy (%), coarse verdict" + (", 95% bootstrap intervals" if levels else ""), fontsize=11)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    return path
