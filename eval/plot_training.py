"""Training curves of one or more GRPO runs in one PNG, from each run folder's metrics.jsonl (the log the recipes
write: TRL's metrics and the tase/ metrics of recipes/features/tracking/metrics.py): total reward, official and strict
accuracy, the share of official passes that are loopholes, and the share of zero-variance groups, against the step; for
runs with guided groups (recipes/features/guidance/hints.py's tase/guide/ metrics) also the guided share with hinted and
unhinted success and the hint level.

Runs older than the tase/ metrics fall back where the log allows it: accuracies from `rewards/accuracy_coarse/mean`
and `rewards/accuracy_strict/mean` when the run trained on them, zero variance from TRL's `frac_reward_zero_std`
(which misses all-equal groups whose total reward is not exactly representable: docs/results.md); a curve the log
cannot give is left out and the legend says so.
"""
from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

from common.errors import TaseError
from common.paths import OutputBusy, blocker_line, file_refusal, followed, hold_output
from common.readers import JSON_ERRORS, json_problem
from rewards.levels import COARSE, STRICT, accuracy_reward_name

METRICS = "metrics.jsonl"
# panel title -> curves: (label, keys tried in order, line style)
PANELS: tuple[tuple[str, tuple[tuple[str, tuple[str, ...], str], ...]], ...] = (
    ("total reward (TRL)", (("reward", ("reward",), "-"),)),
    ("accuracy", (("official", ("tase/official_acc", f"rewards/{accuracy_reward_name(COARSE)}/mean"), "-"),
                  ("strict", ("tase/strict_acc", f"rewards/{accuracy_reward_name(STRICT)}/mean"), "--"))),
    ("loophole share of official passes (steps without one left out)", (("loophole", ("tase/loophole_share",), "-"),)),
    ("zero-variance groups", (("trained accuracy", ("tase/zero_var_groups",), "-"),
                              ("TRL frac_reward_zero_std", ("frac_reward_zero_std",), ":"),
                              ("trained batch, after dynamic sampling's filter",
                               ("tase/dynamic/trained_uniform_share",), "-."))),
)


# drawn when a run logs guided GRPO's metrics (recipes/features/guidance/hints.py, tase/guide/...): two more panels
GUIDE_PANELS: tuple[tuple[str, tuple[tuple[str, tuple[str, ...], str], ...]], ...] = (
    ("guidance (all-fail groups hinted / given a gold member)",
     (("guided groups", ("tase/guide/guided_share",), "-"),
      ("unhinted strict success", ("tase/guide/success_unhinted",), "--"),
      ("hinted strict success", ("tase/guide/success_hinted",), "-."),
      ("gold share of completions", ("tase/guide/gold_share",), ":"))),
    ("hint level (0: the strongest hint)", (("hint level", ("tase/guide/hint_level",), "-"),)),
)
UNSCALED = ("total reward", "hint level")  # panels not drawn as shares in [0, 1]


class PlotError(TaseError, ValueError):
    """A run folder without a readable metrics.jsonl, or one with no logged step: one line, exit 2."""


def read_run(run: str | Path) -> list[dict[str, Any]]:
    """The training log lines of a run (a run folder or its metrics.jsonl) that carry a step; a torn last line
    (a run killed mid-write) is skipped, other lines that are not JSON objects are an error."""
    path = Path(run)
    if path.is_dir():
        path = path / METRICS
    if not path.is_file():
        raise PlotError(f"{run}: no {METRICS} (a run folder of recipes/grpo.py is expected)")
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as e:
        raise PlotError(f"{path}: cannot read ({getattr(e, 'strerror', None) or e})") from None
    rows = []
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except JSON_ERRORS as e:
            if i == len(lines) - 1:
                continue
            raise PlotError(f"{path}: line {i + 1}: {json_problem(e)}") from None
        if isinstance(row, dict) and isinstance(row.get("step"), int) and "reward" in row:
            if not 0 <= row["step"] < 2**53:  # no float holds it: matplotlib raised OverflowError
                shown = str(row["step"]) if abs(row["step"]) < 10**20 else f"{str(row['step'])[:20]}..."
                raise PlotError(f"{path}: line {i + 1}: step {shown} is not a training step")
            rows.append(row)
    if not rows:
        raise PlotError(f"{path}: no logged training step with a reward (a GRPO run's log is expected)")
    return rows


# a share is drawn only at steps where its denominator is not zero: the loophole share of official passes is
# logged as 0 at a step without any official pass (recipes/features/tracking/metrics.py), where it is undefined
NEEDS = {"tase/loophole_share": "tase/official_acc"}


def finite(v: Any) -> float | None:
    """`v` as a finite float, or None: not a number, NaN, infinite, or an integer too large for a float (a
    401-digit reward raised OverflowError)."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    try:
        f = float(v)
    except OverflowError:
        return None
    return f if math.isfinite(f) else None


def curve(rows: list[dict[str, Any]], keys: tuple[str, ...]) -> tuple[str | None, list[int], list[float]]:
    """(the key used, steps, values) of the first key the log has with finite numbers; (None, [], []) if none."""
    for key in keys:
        pts = [(r["step"], finite(r.get(key))) for r in rows
               if finite(r.get(key)) is not None and (key not in NEEDS or r.get(NEEDS[key], 1) != 0)]
        if pts:
            return key, [s for s, _ in pts], [v for _, v in pts]
    return None, [], []


def run_names(runs: list[str | Path]) -> list[str]:
    """Short legend names: each run folder's name, with its parent where two runs share a name."""
    paths = [Path(r).resolve() for r in runs]
    paths = [p.parent if p.name == METRICS else p for p in paths]
    names = [p.name for p in paths]
    return [f"{p.parent.name}/{p.name}" if names.count(p.name) > 1 else p.name for p in paths]


# the PNG's own marker (a tEXt chunk, before the image data): the one output rule (common/paths.py) lets the
# command replace only a PNG it wrote itself, never a user's photo.png
PNG_TAG = "tase-grpo eval plot-training"


def is_plot(path: Path) -> bool:
    """Whether `path` is a PNG this command wrote (its tEXt tag within the first 64 KiB)."""
    try:
        with path.open("rb") as f:
            head = f.read(65536)
    except OSError:
        return False
    return head.startswith(b"\x89PNG") and PNG_TAG.encode() in head


def check_out(out: Path) -> None:
    """The one output rule for --out: a writable place, not a folder, not a file inside another command's output
    (a training run is where the plot belongs), and never a file this command did not write."""
    why = blocker_line(out, "--out")
    if why:
        raise PlotError(why)
    if out.is_dir():
        raise PlotError(f"--out {out} is a folder; a .png file is expected")
    why = file_refusal(out, "plot-training", own=is_plot, inside=("training",))
    if why:
        raise PlotError(f"--out {why}; write elsewhere")


def plot_training(runs: list[str | Path], out: str | Path, names: list[str] | None = None) -> Path:
    """Draw the four panels (six for runs with guidance) for every run into `out` (PNG, written whole or not at all,
    under its write lock, and only over a PNG of its own: `check_out`); returns its path. A bare Figure renders itself,
    so no caller has to choose matplotlib's backend."""
    from matplotlib.figure import Figure  # no pyplot: no backend to choose, no global figure state

    out = followed(out)  # a symlinked --out: its target is replaced, the link stays
    check_out(out)
    logs = [read_run(r) for r in runs]
    names = names or run_names(runs)
    from matplotlib import rcParams

    guided = any(k.startswith("tase/guide/") for rows in logs for r in rows for k in r)
    panels = PANELS + GUIDE_PANELS if guided else PANELS
    fig = Figure(figsize=(12, 3.75 * (len(panels) // 2)))
    axes = fig.subplots(len(panels) // 2, 2, sharex=True)
    colors = rcParams["axes.prop_cycle"].by_key()["color"]
    markers = "os^D"
    all_steps: set[int] = set()
    for ax, (title, curves) in zip(axes.flat, panels, strict=False):
        drawn = 0
        for k, (name, rows) in enumerate(zip(names, logs, strict=False)):
            for j, (label, keys, style) in enumerate(curves):
                key, steps, vals = curve(rows, keys)
                if key is None:
                    continue
                all_steps.update(steps)
                full = name if len(curves) == 1 else f"{name}: {label}"
                if key != keys[0]:
                    full += f" ({key})"
                # one run: a colour per curve (a line style alone does not show on a few points); several runs: a
                # colour per run, and each curve its own marker and style
                c = colors[(j if len(logs) == 1 else k) % len(colors)]
                ax.plot(steps, vals, style, color=c, marker=markers[j % len(markers)] if len(steps) < 30 else None,
                        markersize=4, label=full)
                drawn += 1
        ax.set_title(title)
        ax.grid(alpha=0.3)
        if not title.startswith(UNSCALED):
            ax.set_ylim(-0.03, 1.03)
            ax.set_ylabel("share")
        else:
            ax.set_ylabel("mean reward" if title.startswith("total reward") else "level")
        if drawn:
            ax.legend(fontsize=7, loc="best", framealpha=0.8)
        else:
            logged = any(k in r for _, keys, _ in curves for k in keys for rows in logs for r in rows)
            ax.text(0.5, 0.5, "no step with an official pass" if logged else "not logged by these runs",
                    ha="center", va="center", transform=ax.transAxes, color="gray")
    for ax in axes[-1]:
        ax.set_xlabel("step")
        ax.xaxis.get_major_locator().set_params(integer=True)
    if all_steps and max(all_steps) - min(all_steps) < 2:  # one or two steps: whole steps either side, not 0.96-1.04
        axes[-1][0].set_xlim(min(all_steps) - 1, max(all_steps) + 1)
    fig.suptitle("GRPO training: " + ", ".join(names), fontsize=11)
    fig.tight_layout()
    try:
        with hold_output(out):
            check_out(out)  # again under the lock: another writer may have put its file there meanwhile
            out.parent.mkdir(parents=True, exist_ok=True)
            tmp = out.with_name(f".{out.name}.tmp-{os.getpid()}")
            try:
                fig.savefig(tmp, dpi=110, format="png", metadata={"Software": PNG_TAG})
                os.replace(tmp, out)
            finally:
                if tmp.exists():
                    tmp.unlink()
    except OutputBusy as e:
        raise PlotError(str(e)) from None
    return out
