"""`python -m eval robustness`: accuracy under answer-preserving prompt perturbations (see `eval.perturb`).

One data file holds every canonical row and, for each perturbation kind, a perturbed copy of each row
that kind can change (id `<id>@<kind>`), so a single resumable `eval run` (one model load, one progress
bar) or `eval score` covers all of them. The report pairs each perturbed row with its canonical row
and gives, per kind, the relative accuracy drop (canonical - perturbed) / canonical with a paired
bootstrap interval, for each model, and the difference of drops against the first model.
"""
from __future__ import annotations

import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np

from common.errors import TaseError
from common.readers import DataError
from synth.readers import load_data

from .aggregate import ci95
from .compare import check_boot_memory
from .perturb import KINDS, perturbed_sets
from .runner import SAMPLES, iter_samples, select

DATA = "robustness_data.jsonl"
MANIFEST = "manifest.json"
REPORT = "robustness"
SEP = "@"


class RobustnessError(TaseError, RuntimeError):
    """Bad input for the robustness commands (one clear line for the CLI)."""


def parse_kinds(spec: str) -> list[str]:
    kinds = list(KINDS) if spec == "all" else [k.strip() for k in spec.split(",") if k.strip()]
    bad = [k for k in kinds if k not in KINDS]
    if bad or not kinds:
        raise RobustnessError(f"unknown perturbation kind(s) {', '.join(bad) or spec!r}; choose from "
                              f"{', '.join(KINDS)} or 'all'")
    return kinds


def make_data(data: str, out: str | Path, kinds: list[str], seed: int = 0, rate: float = 0.3,
              limit: int | None = None) -> dict[str, Any]:
    """Write OUT/robustness_data.jsonl (canonical rows + perturbed copies) and OUT/manifest.json."""
    if not 0 < rate <= 1:
        raise RobustnessError(f"--rate must be in (0, 1], got {rate}")
    records = select(load_data(data), limit)
    bad = [r["id"] for r in records if SEP in r["id"]]
    if bad:
        raise DataError(f"id {bad[0]!r} contains {SEP!r}, which robustness uses to name perturbed copies")
    canonical, sets, skipped = perturbed_sets(records, kinds, seed, rate)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    tmp = out / (DATA + ".tmp")
    with tmp.open("w", encoding="utf-8") as f:
        for r in canonical:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")
        for kind, rows in sets.items():
            for r in rows:
                f.write(json.dumps({**r, "id": f"{r['id']}{SEP}{kind}"}, ensure_ascii=False) + "\n")
    os.replace(tmp, out / DATA)
    manifest = {"data": data, "limit": limit, "seed": seed, "rate": rate, "n_canonical": len(canonical),
                "kinds": {k: {"n": len(sets[k]), "not_applicable": skipped[k], "what": KINDS[k].doc} for k in kinds}}
    (out / MANIFEST).write_text(json.dumps(manifest, ensure_ascii=False, indent=2), encoding="utf-8")
    return manifest


def paired(samples: Iterable[dict[str, Any]], metric: str = "coarse") -> dict[str, dict[str, tuple[float, float, str]]]:
    """kind -> {canonical id -> (canonical score, perturbed score, task)} over rows both scored validly."""
    canon: dict[str, dict[str, Any]] = {}
    pert: dict[str, list[tuple[str, dict[str, Any]]]] = {}
    for s in samples:
        if not s.get("valid", True):
            continue
        base, sep, kind = s["id"].rpartition(SEP)
        if sep:
            pert.setdefault(kind, []).append((base, s))
        else:
            canon[s["id"]] = s
    out: dict[str, dict[str, tuple[float, float, str]]] = {}
    for kind, rows in pert.items():
        out[kind] = {b: (float(canon[b][metric]), float(s[metric]), s["task"]) for b, s in rows if b in canon}
    return out


def _drop(c: np.ndarray, p: np.ndarray) -> np.ndarray:
    """Relative drop in percent per replicate row; NaN where canonical accuracy is 0."""
    cm, pm = c.mean(axis=-1), p.mean(axis=-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(cm > 0, 100 * (cm - pm) / np.where(cm > 0, cm, 1), np.nan)


def _num(x: float) -> float | None:
    return None if np.isnan(x) else round(float(x), 2) + 0.0


def report(runs: dict[str, list[dict[str, Any]]], metric: str = "coarse", n_boot: int = 1000,
           seed: int = 0) -> dict[str, Any]:
    """Per kind and model: n, canonical and perturbed accuracy, relative drop with a 95% paired
    bootstrap interval; for every model after the first, its drop minus the first model's, resampled
    jointly over the rows both scored."""
    pairs = {name: paired(s, metric) for name, s in runs.items()}
    names = list(runs)
    kinds = [k for k in KINDS if any(k in p for p in pairs.values())]
    rng = np.random.default_rng(seed)
    table: dict[str, Any] = {}
    for kind in kinds:
        row: dict[str, Any] = {}
        for name in names:
            rows = pairs[name].get(kind, {})
            if not rows:
                continue
            check_boot_memory(n_boot, 2 * len(rows))
            c = np.array([v[0] for v in rows.values()])
            p = np.array([v[1] for v in rows.values()])
            idx = rng.integers(0, len(c), (n_boot, len(c)))
            row[name] = {"n": len(c), "canonical": round(100 * c.mean(), 2), "perturbed": round(100 * p.mean(), 2),
                         "drop_pct": _num(_drop(c, p)), "ci95": ci95(_drop(c[idx], p[idx]))}
        base = names[0]
        for name in names[1:]:
            shared = sorted(set(pairs[base].get(kind, {})) & set(pairs[name].get(kind, {})))
            if not shared:
                continue
            a = np.array([pairs[base][kind][i][:2] for i in shared])
            b = np.array([pairs[name][kind][i][:2] for i in shared])
            idx = rng.integers(0, len(shared), (n_boot, len(shared)))
            d_point = _drop(b[:, 0], b[:, 1]) - _drop(a[:, 0], a[:, 1])
            d_boot = _drop(b[idx, 0], b[idx, 1]) - _drop(a[idx, 0], a[idx, 1])
            row[name]["vs_" + base] = {"n_shared": len(shared), "delta_drop": _num(d_point), "ci95": ci95(d_boot)}
        table[kind] = row
    return {"metric": metric, "n_boot": n_boot, "seed": seed, "models": names, "kinds": table}


def markdown(rep: dict[str, Any]) -> str:
    names = rep["models"]
    head = ["kind"] + [f"{n}: canonical -> perturbed (n)" for n in names] + [f"{n}: drop % [95% CI]" for n in names]
    head += [f"{n} - {names[0]}: drop diff [95% CI]" for n in names[1:]]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]

    def ci(v: dict[str, Any] | None, key: str) -> str:
        if not v or v.get(key) is None:
            return "n/a"
        lo_hi = v.get("ci95")
        star = "*" if lo_hi and (lo_hi[0] > 0 or lo_hi[1] < 0) else ""
        return f"{v[key]:+.1f}{star}" + (f" [{lo_hi[0]:+.1f}, {lo_hi[1]:+.1f}]" if lo_hi else "")

    for kind, row in rep["kinds"].items():
        cells = [kind]
        cells += [f"{row[n]['canonical']:.1f} -> {row[n]['perturbed']:.1f} ({row[n]['n']})" if n in row else "–"
                  for n in names]
        cells += [ci(row.get(n), "drop_pct") for n in names]
        cells += [ci(row.get(n, {}).get("vs_" + names[0]), "delta_drop") for n in names[1:]]
        lines.append("| " + " | ".join(cells) + " |")
    lines.append("")
    lines.append(f"Relative drop = (canonical - perturbed) / canonical, in percent of the canonical "
                 f"{rep['metric']} accuracy on the rows each kind changes; n/a where the canonical accuracy is 0. "
                 f"* = the 95% paired bootstrap interval ({rep['n_boot']} resamples) excludes 0.")
    return "\n".join(lines) + "\n"


def plot(rep: dict[str, Any], path: Path) -> Path | None:
    """Horizontal bars: relative drop per kind and model, with 95% intervals."""
    from matplotlib.figure import Figure  # no pyplot: no backend to choose, no global figure state

    kinds = list(rep["kinds"])
    names = rep["models"]
    if not kinds:
        return None
    fig = Figure(figsize=(7, 0.45 * len(kinds) * max(1, len(names)) + 1.5))
    ax = fig.subplots()
    h = 0.8 / len(names)
    for j, name in enumerate(names):
        ys, xs, err = [], [], [[], []]
        for i, kind in enumerate(kinds):
            v = rep["kinds"][kind].get(name)
            if not v or v["drop_pct"] is None:
                continue
            ys.append(i + j * h)
            xs.append(v["drop_pct"])
            lo, hi = v["ci95"] or (v["drop_pct"], v["drop_pct"])
            err[0].append(max(0.0, v["drop_pct"] - lo))
            err[1].append(max(0.0, hi - v["drop_pct"]))
        ax.barh(ys, xs, height=h, xerr=err, capsize=2, label=name)
    ax.set_yticks([i + h * (len(names) - 1) / 2 for i in range(len(kinds))], kinds)
    ax.invert_yaxis()
    ax.axvline(0, color="black", lw=0.8)
    ax.set_xlabel(f"relative accuracy drop, % of canonical ({rep['metric']}); 95% bootstrap CI")
    ax.legend(loc="best", fontsize=8)
    ax.set_title("Robustness to answer-preserving perturbations")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    return path


def load_samples(d: str | Path) -> list[dict[str, Any]]:
    """Samples of a robustness folder (DIR/run/samples.jsonl), or of any `eval run`/`score` folder."""
    d = Path(d)
    for p in (d / "run" / SAMPLES, d / SAMPLES):
        if p.exists():
            rows = list(iter_samples(p))
            if not any(SEP in s.get("id", "") for s in rows):
                raise RobustnessError(f"{p}: holds no perturbed rows (ids ending in {SEP}<kind>); "
                                      f"was it scored on {DATA}?")
            return rows
    raise RobustnessError(f"{d}: no run/{SAMPLES} or {SAMPLES} (run `python -m eval robustness run` first)")


def write_report(dirs: list[str], out: str | Path, metric: str = "coarse", n_boot: int = 1000,
                 seed: int = 0, names: list[str] | None = None) -> dict[str, Any]:
    names = names or [Path(d).name or str(d) for d in dirs]
    if len(set(names)) != len(names):
        names = [f"{n}-{i}" for i, n in enumerate(names)]
    rep = report({n: load_samples(d) for n, d in zip(names, dirs, strict=False)}, metric, n_boot, seed)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    md = markdown(rep)
    png = plot(rep, out / f"{REPORT}.png")
    if png:
        md += f"\n![robustness]({png.name})\n"
    (out / f"{REPORT}.json").write_text(json.dumps(rep, ensure_ascii=False, indent=2), encoding="utf-8")
    (out / f"{REPORT}.md").write_text(md, encoding="utf-8")
    rep["markdown"] = md
    return rep
