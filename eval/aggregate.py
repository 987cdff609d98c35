"""Aggregation of per-sample verdicts into the paper's tables (accuracies in percent).

As the official release aggregates (evaluate/merge_result.py): accuracy per file over valid rows; a
task's score is the unweighted mean of its files' accuracies; a language's score the mean of its files'
accuracies (dot_matrix files, lang `mul`, and variant_normalize's `digital` file are left out of the
language table); the overall average is the mean of the task scores. `micro` is the instance-weighted
accuracy over all valid rows, reported beside it. The release's own DOT number divides the mean of the
two bitmap files by the char_classification accuracy; we report the plain file mean as DOT and that
ratio separately as `dot_official_adjusted`.
"""
from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from typing import Any

from synth.record import TASKS

LANG_TABLE = ("en", "zh", "ko")


def file_key(rec: dict[str, Any]) -> str:
    """The file a record belongs to (official rows) or its generated cell."""
    meta = rec.get("meta") or {}
    if meta.get("file"):
        return str(meta["file"])
    sub = rec.get("subtask") or ""
    return f"{rec['task']}/{sub + '/' if sub else ''}{rec['lang']}"


def in_lang_table(s: dict[str, Any]) -> bool:
    return s.get("lang") in LANG_TABLE and s.get("subtask") != "digital" and s.get("task") != "dot_matrix"


def _pct(x: float) -> float:
    return round(100.0 * x, 2)


def _mean(xs: list[float]) -> float:
    return sum(xs) / len(xs) if xs else 0.0


def aggregate(samples: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """Tables from sample dicts carrying task, subtask, lang, category, file, coarse, fine, valid."""
    per_file: dict[str, list[float]] = defaultdict(list)
    per_file_fine: dict[str, list[float]] = defaultdict(list)
    info: dict[str, dict[str, Any]] = {}
    n = n_invalid = 0
    for s in samples:
        n += 1
        if not s.get("valid", True):
            n_invalid += 1
            continue
        f = s["file"]
        per_file[f].append(float(s["coarse"]))
        per_file_fine[f].append(float(s["fine"]))
        info.setdefault(f, {"task": s["task"], "lang": s["lang"], "subtask": s.get("subtask", ""),
                            "in_lang_table": in_lang_table(s)})
    file_acc = {f: _mean(v) for f, v in per_file.items()}
    by_task_files: dict[str, list[float]] = defaultdict(list)
    by_lang_files: dict[str, list[float]] = defaultdict(list)
    by_tl_files: dict[tuple[str, str], list[float]] = defaultdict(list)
    for f, acc in file_acc.items():
        t, lang = info[f]["task"], info[f]["lang"]
        by_task_files[t].append(acc)
        by_tl_files[(t, lang)].append(acc)
        if info[f]["in_lang_table"]:
            by_lang_files[lang].append(acc)
    by_task = {t: _mean(v) for t, v in by_task_files.items()}
    code = {t: TASKS[t].code if t in TASKS else t for t in by_task}
    by_cat: dict[str, list[float]] = defaultdict(list)
    for t, acc in by_task.items():
        by_cat[TASKS[t].category if t in TASKS else "other"].append(acc)
    all_c = [c for v in per_file.values() for c in v]
    micro_task: dict[str, list[float]] = defaultdict(list)
    for f, v in per_file.items():
        micro_task[info[f]["task"]] += v
    dot = {info[f]["subtask"]: a for f, a in file_acc.items() if info[f]["task"] == "dot_matrix"}
    dot_adj = None
    if dot.get("char_classification") and any(k in dot for k in ("bitmap_classification", "bitmap_type_classification")):
        bm = [dot[k] for k in ("bitmap_classification", "bitmap_type_classification") if k in dot]
        dot_adj = _pct(_mean(bm) / dot["char_classification"])
    return {
        "overall": _pct(_mean(list(by_task.values()))),
        "by_task": {code[t]: _pct(a) for t, a in sorted(by_task.items())},
        "by_lang": {lang: _pct(_mean(by_lang_files[lang])) for lang in LANG_TABLE if by_lang_files.get(lang)},
        "by_task_lang": {f"{code[t]}/{lang}": _pct(_mean(v)) for (t, lang), v in sorted(by_tl_files.items())},
        "by_category": {c: _pct(_mean(v)) for c, v in sorted(by_cat.items())},
        "by_file": {f: {"accuracy": _pct(a), "n": len(per_file[f]), "fine": _pct(_mean(per_file_fine[f]))}
                    for f, a in sorted(file_acc.items())},
        "micro": {"overall": _pct(_mean(all_c)),
                  "by_task": {code[t]: _pct(_mean(v)) for t, v in sorted(micro_task.items())}},
        "fine": {"overall": _pct(_mean([c for v in per_file_fine.values() for c in v]))},
        "dot_official_adjusted": dot_adj,
        "n": n,
        "n_invalid": n_invalid,
    }
