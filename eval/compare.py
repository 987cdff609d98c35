"""`eval compare A B [C...]`: the paper's Table 1 (tasks) and Table 2 (languages) side by side, deltas
against the first run with paired 95% bootstrap intervals, and a grouped bar chart."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from synth.record import TASKS

from .aggregate import LANG_TABLE
from .runner import RESULTS, SAMPLES, iter_samples

TASK_ORDER = [t.code for t in TASKS.values()]


class CompareError(ValueError):
    pass


def load_run(d: str | Path) -> tuple[str, dict[str, Any], dict[str, dict[str, Any]]]:
    d = Path(d)
    try:
        res = json.loads((d / RESULTS).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        raise CompareError(f"{d}: no readable {RESULTS} (run `python -m eval run` or `score` first)") from None
    samples = {s["id"]: s for s in iter_samples(d / SAMPLES) if s.get("valid", True)}
    return d.name, res, samples


def _macro(file_idx: np.ndarray, task_of_file: np.ndarray, n_files: int, n_tasks: int, vals: np.ndarray,
           idx: np.ndarray) -> tuple[np.ndarray, float]:
    """Per-task macro accuracy (mean over files) and the overall mean over tasks, for a resample."""
    fi = file_idx[idx]
    cnt = np.bincount(fi, minlength=n_files)
    acc = np.bincount(fi, weights=vals[idx], minlength=n_files) / np.maximum(cnt, 1)
    present = cnt > 0
    tsum = np.bincount(task_of_file, weights=np.where(present, acc, 0), minlength=n_tasks)
    tcnt = np.bincount(task_of_file, weights=present.astype(float), minlength=n_tasks)
    task_acc = tsum / np.maximum(tcnt, 1)
    return task_acc, float(task_acc[tcnt > 0].mean()) if (tcnt > 0).any() else 0.0


def bootstrap_delta(a: dict[str, dict[str, Any]], b: dict[str, dict[str, Any]], n_boot: int = 1000,
                    seed: int = 0) -> dict[str, Any]:
    """Paired bootstrap over shared sample ids of (B - A) in points: overall and per task."""
    ids = sorted(set(a) & set(b))
    if not ids:
        return {"n_shared": 0}
    files = sorted({a[i]["file"] for i in ids})
    fpos = {f: k for k, f in enumerate(files)}
    tasks = sorted({a[i]["task"] for i in ids})
    tpos = {t: k for k, t in enumerate(tasks)}
    file_idx = np.array([fpos[a[i]["file"]] for i in ids])
    task_of_file = np.zeros(len(files), dtype=int)
    for i in ids:
        task_of_file[fpos[a[i]["file"]]] = tpos[a[i]["task"]]
    va = np.array([float(a[i]["coarse"]) for i in ids])
    vb = np.array([float(b[i]["coarse"]) for i in ids])
    full = np.arange(len(ids))
    ta, oa = _macro(file_idx, task_of_file, len(files), len(tasks), va, full)
    tb, ob = _macro(file_idx, task_of_file, len(files), len(tasks), vb, full)
    rng = np.random.default_rng(seed)
    d_over, d_task = [], []
    for _ in range(n_boot):
        idx = rng.integers(0, len(ids), len(ids))
        xa, sa = _macro(file_idx, task_of_file, len(files), len(tasks), va, idx)
        xb, sb = _macro(file_idx, task_of_file, len(files), len(tasks), vb, idx)
        d_over.append(sb - sa)
        d_task.append(xb - xa)
    d_over_a, d_task_a = 100 * np.array(d_over), 100 * np.array(d_task)
    ci = lambda x: [round(float(np.percentile(x, 2.5)), 2), round(float(np.percentile(x, 97.5)), 2)]  # noqa: E731
    return {
        "n_shared": len(ids),
        "overall": {"delta": round(100 * (ob - oa), 2), "ci95": ci(d_over_a)},
        "by_task": {TASKS[t].code if t in TASKS else t: {"delta": round(100 * float(tb[k] - ta[k]), 2),
                                                         "ci95": ci(d_task_a[:, k])} for t, k in tpos.items()},
    }


def _row(name: str, values: dict[str, float], cols: list[str], avg: float) -> str:
    cells = [f"{values[c]:.2f}" if c in values else "–" for c in cols]
    return f"| {name} | " + " | ".join(cells) + f" | {avg:.2f} |"


def compare(dirs: list[str], out: str | Path, n_boot: int = 1000, seed: int = 0) -> dict[str, Any]:
    if len(dirs) < 2:
        raise CompareError("compare needs at least two result folders")
    runs = [load_run(d) for d in dirs]
    names = []
    for n, _, _ in runs:  # unique column names
        k, base = 2, n
        while n in names:
            n, k = f"{base}-{k}", k + 1
        names.append(n)
    task_cols = [c for c in TASK_ORDER if any(c in r["by_task"] for _, r, _ in runs)]
    lang_cols = [lang for lang in LANG_TABLE if any(lang in r["by_lang"] for _, r, _ in runs)]
    lines = ["## Table 1: accuracy (%) by task", "", "| model | " + " | ".join(task_cols) + " | Avg |",
             "|---|" + "---:|" * (len(task_cols) + 1)]
    lines += [_row(n, r["by_task"], task_cols, r["overall"]) for n, (_, r, _) in zip(names, runs)]
    lines += ["", "## Table 2: accuracy (%) by language", "", "| model | " + " | ".join(lang_cols) + " | Avg |",
              "|---|" + "---:|" * (len(lang_cols) + 1)]
    for n, (_, r, _) in zip(names, runs):
        vals = [r["by_lang"][c] for c in lang_cols if c in r["by_lang"]]
        lines.append(_row(n, r["by_lang"], lang_cols, sum(vals) / len(vals) if vals else 0.0))
    deltas = {}
    lines += ["", f"## Differences against {names[0]} (points, paired bootstrap 95% CI, {n_boot} resamples)", ""]
    for n, run in zip(names[1:], runs[1:]):
        d = bootstrap_delta(runs[0][2], run[2], n_boot, seed)
        deltas[n] = d
        if not d["n_shared"]:
            lines.append(f"- {n}: no shared sample ids with {names[0]}")
            continue
        lo, hi = d["overall"]["ci95"]
        sig = "significant" if lo > 0 or hi < 0 else "not significant"
        lines.append(f"- **{n}**: overall {d['overall']['delta']:+.2f} [{lo:+.2f}, {hi:+.2f}] ({sig}; "
                     f"{d['n_shared']} shared samples)")
        for code in task_cols:
            if code in d["by_task"]:
                t = d["by_task"][code]
                lines.append(f"  - {code}: {t['delta']:+.2f} [{t['ci95'][0]:+.2f}, {t['ci95'][1]:+.2f}]")
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    plot = plot_tasks(names, [r for _, r, _ in runs], task_cols, out / "comparison.png")
    md = "\n".join(lines) + f"\n\nPlot: {plot}\n"
    (out / "comparison.md").write_text(md, encoding="utf-8")
    summary = {"runs": dict(zip(names, dirs)), "by_task": {n: r["by_task"] for n, (_, r, _) in zip(names, runs)},
               "overall": {n: r["overall"] for n, (_, r, _) in zip(names, runs)}, "deltas": deltas,
               "plot": str(plot), "markdown": md}
    (out / "comparison.json").write_text(json.dumps(summary, ensure_ascii=False, indent=2), encoding="utf-8")
    return summary


def plot_tasks(names: list[str], results: list[dict[str, Any]], cols: list[str], path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cols_all = cols + ["Avg"]
    x = np.arange(len(cols_all))
    w = 0.8 / len(names)
    fig, ax = plt.subplots(figsize=(max(6, 0.9 * len(cols_all) + 2), 4))
    for k, (n, r) in enumerate(zip(names, results)):
        vals = [r["by_task"].get(c, 0.0) for c in cols] + [r["overall"]]
        ax.bar(x + (k - (len(names) - 1) / 2) * w, vals, w, label=n)
    ax.set_xticks(x, cols_all)
    ax.set_ylabel("accuracy (%)")
    ax.set_title("TASE accuracy by task")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
