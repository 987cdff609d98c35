"""The few numbers a checkpoint is judged by on a held-out set, from scored samples (`eval.runner.sample_line`
lines, as `eval run` writes them to samples.jsonl): the evaluator's macro official accuracy, its strict accuracy,
the fine credit, the loophole share of official passes and the accuracies per task.

Written once for both ways of choosing a checkpoint: during training (recipes/features/heldout/evaluation.py logs them
as `tase/heldout/...`) and after it (recipes/select_checkpoint.py reads them from each evaluation's samples.jsonl).
Shares are in [0, 1], as the `tase/` training metrics (recipes/features/tracking/metrics.py) are; results.json keeps
percent.
"""
from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from common.record import TASKS
from rewards.levels import METRICS

from .aggregate import aggregate

# the keys of every headline (per-task keys come on top: task/<task>/official_acc, task/<task>/strict_acc)
KEYS = (*METRICS.values(), "loophole_share")  # official_acc, strict_acc, fine_credit (rewards/levels.py)


def headline(samples: Iterable[dict[str, Any]]) -> dict[str, float]:
    """official_acc / strict_acc: the results.json headline (`overall`, `strict.overall`: macro over files, then
    tasks, invalid rows out of the denominators) / 100; fine_credit: `fine.overall` / 100; loophole_share: valid
    rows the official verdict passes and the strict one fails, over the official passes (0 with none: the
    definition of recipes/features/tracking/metrics.py's training metric); task/<task>/...: the task's macro accuracies;
    n: rows."""
    samples = list(samples)
    if not samples:
        return {}
    res = aggregate(samples)
    passes = [s for s in samples if s.get("valid", True) and float(s["coarse"]) == 1.0]
    loopholes = [s for s in passes if float(s.get("strict", s["coarse"])) != 1.0]
    out = {"official_acc": res["overall"] / 100, "strict_acc": res["strict"]["overall"] / 100,
           "fine_credit": res["fine"]["overall"] / 100,
           "loophole_share": len(loopholes) / len(passes) if passes else 0.0, "n": float(len(samples))}
    name = {info.code: t for t, info in TASKS.items()}  # results.json keys tasks by paper code
    for code, acc in res["by_task"].items():
        t = name.get(code, code)
        out[f"task/{t}/official_acc"] = acc / 100
        out[f"task/{t}/strict_acc"] = res["strict"]["by_task"].get(code, 0.0) / 100
    return {k: round(v, 6) for k, v in out.items()}
