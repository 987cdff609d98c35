"""Aggregation of per-sample verdicts into the paper's tables (accuracies in percent, 0-100).

Macro (the headline numbers), as the official release aggregates (evaluate/batch_eval.py, then
evaluate/merge_result.py; Apache-2.0, logic re-implemented here):
- a file's accuracy = correct / valid rows (rows whose official scorer raises, `valid=False`, leave the
  denominator; a file with no valid row scores 0), rounded to 4 decimals as batch_eval.py writes it;
- a task's score = unweighted mean of its files' accuracies (e.g. LENOP = mean of 3 count + 3 generate files);
- a language's score = unweighted mean of the accuracies of its files, dot_matrix (`mul`) and
  variant_normalize's `digital` file left out;
- `overall` = unweighted mean of the task scores; `by_category` = mean of the task scores in it;
  `by_lang_avg` = mean of the language scores (Table 2's average column).
`micro` is the instance-weighted accuracy (all valid rows pooled), reported beside it.

Official quirks, reported separately and labelled, never mixed into the plain tables:
- DOT: merge_result.py scores DOT as mean(bitmap files) / char_classification accuracy (skipped when the
  latter is 0). We report the plain file mean as DOT, the ratio as `dot_official_adjusted`, and the
  overall with that ratio in place of DOT as `official.overall_dot_adjusted`.
- Language by file name: merge_result.py guesses the language from substrings of the file name, checking
  "zh" before "en" before "kor", so `korean_generate.csv` ("gen" contains "en") lands in English. We use
  each record's `lang`; `official.by_lang_filename_rule` reproduces the file-name rule for official data.
"""
from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable
from pathlib import PurePosixPath
from typing import Any

from synth.record import TASKS

LANG_TABLE = ("en", "zh", "ko")
# The catalogue's task without a language slot (DOT, rows `mul`), whose official aggregation has quirks
# (see the module docstring), and the task whose `digital` file sits outside the language table.
DOT_TASK = next(t for t, info in TASKS.items() if info.no_lang)
DIGITAL_TASK = next(t for t, info in TASKS.items() if "digital" in info.subtasks)
DOT_BITMAP = ("bitmap_classification", "bitmap_type_classification")


def file_key(rec: dict[str, Any]) -> str:
    """The file a record belongs to (official rows: `<group>/<task>/<file>.csv`) or its generated cell."""
    meta = rec.get("meta") or {}
    if isinstance(meta, dict) and meta.get("file"):
        return str(meta["file"])
    sub = rec.get("subtask") or ""
    return f"{rec['task']}/{sub + '/' if sub else ''}{rec['lang']}"


def in_lang_table(s: dict[str, Any]) -> bool:
    return s.get("lang") in LANG_TABLE and s.get("subtask") != "digital" and s.get("task") != DOT_TASK


def official_filename_lang(file: str) -> str | None:
    """merge_result.py's language guess from a file name (substring tests in its order), or None."""
    stem = PurePosixPath(file).name.removesuffix(".csv")
    if "chinese" in stem or "zh" in stem:
        return "zh"
    if "english" in stem or "en" in stem:
        return "en"
    if "korean" in stem or "kor" in stem:
        return "ko"
    return None


def code_of(task: str) -> str:
    return TASKS[task].code if task in TASKS else task


_ORDER = {t: k for k, t in enumerate(TASKS)}


def _task_order(item: tuple) -> tuple:
    """Paper order (FREQ, LENOP, ..., VAR), then language / anything else."""
    key = item[0]
    t, lang = key if isinstance(key, tuple) else (key, "")
    return (_ORDER.get(t, len(_ORDER)), t, LANG_TABLE.index(lang) if lang in LANG_TABLE else 9, lang)


def _pct(x: float) -> float:
    return round(100.0 * x, 2)


def _mean(xs: list[float]) -> float:
    return sum(xs) / len(xs) if xs else 0.0


def macro(file_values: dict[str, Any], info: dict[str, dict[str, Any]],
          mean: Callable[[list[Any]], Any] = _mean) -> dict[str, Any]:
    """The official macro statistic, written once: file values -> task means -> overall (unweighted), and
    file values -> language means over the language-table files. `info[file]` holds `task`, `lang` and
    `in_lang_table`; `mean` averages a list of file values (floats here, for results.json; numpy
    replicate columns in `compare.bootstrap_delta`, which resamples through this same function)."""
    task_files: dict[str, list[Any]] = defaultdict(list)
    lang_files: dict[str, list[Any]] = defaultdict(list)
    for f, v in file_values.items():
        task_files[info[f]["task"]].append(v)
        if info[f]["in_lang_table"]:
            lang_files[info[f]["lang"]].append(v)
    by_task = {t: mean(v) for t, v in task_files.items()}
    return {"overall": mean(list(by_task.values())), "by_task": by_task,
            "by_lang": {lang: mean(lang_files[lang]) for lang in LANG_TABLE if lang_files.get(lang)}}


def ci95(x: Any) -> list[float] | None:
    """95% percentile interval of bootstrap replicates, rounded to 2 places (NaNs dropped; None if empty)."""
    import numpy as np

    x = x[~np.isnan(x)]
    if len(x) == 0:
        return None
    lo, hi = np.percentile(x, [2.5, 97.5])
    return [round(float(lo), 2) + 0.0, round(float(hi), 2) + 0.0]  # + 0.0: no "-0.0"


def _count_by_task(counts: dict[str, int], info: dict[str, dict[str, Any]]) -> dict[str, int]:
    out: dict[str, int] = defaultdict(int)
    for f, i in info.items():
        out[i["task"]] += counts.get(f, 0)
    return dict(out)


def aggregate(samples: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """Tables from sample dicts carrying task, subtask, lang, file, coarse, fine, valid and strict (read as
    coarse where absent: samples written before the strict verdict existed)."""
    per_file: dict[str, list[float]] = defaultdict(list)
    per_file_fine: dict[str, list[float]] = defaultdict(list)
    per_file_strict: dict[str, list[float]] = defaultdict(list)
    loophole_by_file: dict[str, int] = defaultdict(int)
    info: dict[str, dict[str, Any]] = {}
    invalid_by_file: dict[str, int] = defaultdict(int)
    n = n_invalid = 0
    for s in samples:
        n += 1
        f = s["file"]
        info.setdefault(f, {"task": s["task"], "lang": s["lang"], "subtask": s.get("subtask", ""),
                            "in_lang_table": in_lang_table(s)})
        per_file.setdefault(f, [])
        if not s.get("valid", True):
            n_invalid += 1
            invalid_by_file[f] += 1
            continue
        per_file[f].append(float(s["coarse"]))
        per_file_fine[f].append(float(s["fine"]))
        strict = float(s.get("strict", s["coarse"]))  # samples written before the strict verdict: = coarse
        per_file_strict[f].append(strict)
        loophole_by_file[f] += float(s["coarse"]) == 1.0 and strict != 1.0
    file_acc = {f: round(_mean(v), 4) for f, v in per_file.items()}  # batch_eval.py: 0 when no valid row

    stats = macro(file_acc, info)
    by_task = stats["by_task"]
    by_tl_files: dict[tuple[str, str], list[float]] = defaultdict(list)
    for f, acc in file_acc.items():
        by_tl_files[(info[f]["task"], info[f]["lang"])].append(acc)
    by_cat: dict[str, list[float]] = defaultdict(list)
    for t, acc in by_task.items():
        by_cat[TASKS[t].category if t in TASKS else "other"].append(acc)
    micro_task: dict[str, list[float]] = defaultdict(list)
    micro_lang: dict[str, list[float]] = defaultdict(list)
    for f, v in per_file.items():
        micro_task[info[f]["task"]] += v
        if info[f]["in_lang_table"]:
            micro_lang[info[f]["lang"]] += v
    all_c = [c for v in per_file.values() for c in v]
    all_f = [c for v in per_file_fine.values() for c in v]

    # official quirks (see the module docstring)
    dot = {info[f]["subtask"]: a for f, a in file_acc.items() if info[f]["task"] == DOT_TASK}
    dot_adj = None
    bitmaps = [dot[k] for k in DOT_BITMAP if k in dot]
    if dot.get("char_classification") and bitmaps:
        dot_adj = _mean(bitmaps) / dot["char_classification"]
    official_tasks = {t: a for t, a in by_task.items() if t != DOT_TASK}
    if dot_adj is not None:
        official_tasks[DOT_TASK] = dot_adj
    fname_lang: dict[str, list[float]] = defaultdict(list)
    for f, acc in file_acc.items():
        lang = official_filename_lang(f) if f.endswith(".csv") and info[f]["task"] != DOT_TASK else None
        if lang:
            fname_lang[lang].append(acc)

    strict_acc = {f: round(_mean(per_file_strict.get(f, [])), 4) for f in per_file}
    strict_stats = macro(strict_acc, info)
    all_s = [c for v in per_file_strict.values() for c in v]

    return {
        "overall": _pct(stats["overall"]),
        "by_task": {code_of(t): _pct(a) for t, a in sorted(by_task.items(), key=_task_order)},
        "by_lang": {lang: _pct(a) for lang, a in stats["by_lang"].items()},
        "by_lang_avg": _pct(_mean(list(stats["by_lang"].values()))),
        "by_task_lang": {f"{code_of(t)}/{lang}": _pct(_mean(v))
                         for (t, lang), v in sorted(by_tl_files.items(), key=_task_order)},
        "by_category": {c: _pct(_mean(v)) for c, v in sorted(by_cat.items())},
        "by_file": {f: {"accuracy": _pct(a), "n": len(per_file[f]), "n_invalid": invalid_by_file.get(f, 0),
                        "fine": _pct(_mean(per_file_fine[f])), "task": code_of(info[f]["task"]),
                        "lang": info[f]["lang"]}
                    for f, a in sorted(file_acc.items())},
        "micro": {"overall": _pct(_mean(all_c)),
                  "by_task": {code_of(t): _pct(_mean(v)) for t, v in sorted(micro_task.items(), key=_task_order)},
                  "by_lang": {lang: _pct(_mean(micro_lang[lang])) for lang in LANG_TABLE if micro_lang.get(lang)}},
        "fine": {"overall": _pct(_mean(all_f))},
        # the official verdict without its loopholes (rewards.Score.strict), aggregated the same way, and
        # the rows the official verdict passed only through a loophole (a hedge, an echo, extra words)
        "strict": {"overall": _pct(strict_stats["overall"]),
                   "by_task": {code_of(t): _pct(a) for t, a in sorted(strict_stats["by_task"].items(), key=_task_order)},
                   "by_lang": {lang: _pct(a) for lang, a in strict_stats["by_lang"].items()},
                   "micro": _pct(_mean(all_s)),
                   "by_file": {f: _pct(a) for f, a in sorted(strict_acc.items())}},
        "loophole": {"n": sum(loophole_by_file.values()),
                     "by_task": {code_of(t): k for t, k in sorted(_count_by_task(loophole_by_file, info).items(),
                                                                   key=_task_order)},
                     "by_file": {f: loophole_by_file.get(f, 0) for f in sorted(per_file)}},
        "dot_official_adjusted": None if dot_adj is None else _pct(dot_adj),
        "official": {
            "note": "merge_result.py quirks: DOT = mean(bitmap files) / char_classification; language from "
                    "file-name substrings (korean_generate.csv counts as English)",
            "overall_dot_adjusted": _pct(_mean(list(official_tasks.values()))) if official_tasks else None,
            "by_lang_filename_rule": {lang: _pct(_mean(fname_lang[lang])) for lang in LANG_TABLE
                                      if fname_lang.get(lang)},
        },
        "n": n,
        "n_invalid": n_invalid,
    }


def pass_at_k_estimate(n: int, c: int, k: int) -> float:
    """Unbiased pass@k of one row from n samples with c correct (Chen et al. 2021, "Evaluating Large Language
    Models Trained on Code", eq. 1): 1 - C(n-c, k) / C(n, k), as a stable product. Needs 1 <= k <= n."""
    if not 1 <= k <= n:
        raise ValueError(f"pass@{k} needs 1 <= k <= n (n={n})")
    if n - c < k:
        return 1.0
    prod = 1.0
    for i in range(n - c + 1, n + 1):
        prod *= 1.0 - k / i
    return 1.0 - prod


def pass_at(samples: Iterable[dict[str, Any]]) -> dict[str, Any] | None:
    """pass@k tables for runs that drew several samples per row (`eval run --num-samples K`), else None.

    K = the fewest samples any valid row has (a row without `samples` counts as one). Reported for k = 1, the
    powers of 2 below K, and K, each as the official macro statistic of the per-file means of the per-row
    estimates (`pass_at_k_estimate`), so pass@1 is the expected accuracy of one sample and sits on the same
    scale as `overall`. Per file also `mixed`: the share of rows with some but not all samples correct, the
    prompts whose GRPO groups have a non-zero advantage."""
    rows: dict[str, list[tuple[int, int]]] = defaultdict(list)
    info: dict[str, dict[str, Any]] = {}
    multi = False
    for s in samples:
        f = s["file"]
        info.setdefault(f, {"task": s["task"], "lang": s["lang"], "in_lang_table": in_lang_table(s)})
        rows.setdefault(f, [])
        if not s.get("valid", True):
            continue
        every = s.get("samples")
        if isinstance(every, list) and every:
            multi = True
            rows[f].append((len(every), int(sum(float(e["coarse"]) for e in every))))
        else:
            rows[f].append((1, int(float(s["coarse"]))))
    if not multi:
        return None
    big_k = min(n for v in rows.values() for n, _ in v)
    ks = sorted({1, big_k} | {2**j for j in range(1, 16) if 2**j < big_k})
    out: dict[str, Any] = {"k": big_k, "ks": ks, "estimator": "unbiased pass@k (Chen et al. 2021)"}
    by_file: dict[str, dict[str, Any]] = {f: {"task": code_of(info[f]["task"]), "lang": info[f]["lang"], "n": len(v),
                                              "mixed": _pct(_mean([float(0 < c < n) for n, c in v]))}
                                          for f, v in sorted(rows.items())}
    for k in ks:
        file_vals = {f: _mean([pass_at_k_estimate(n, c, k) for n, c in v]) for f, v in rows.items()}
        stats = macro(file_vals, info)
        out[f"pass@{k}"] = {"overall": _pct(stats["overall"]),
                            "by_task": {code_of(t): _pct(a) for t, a in sorted(stats["by_task"].items(),
                                                                                 key=_task_order)},
                            "by_lang": {lang: _pct(a) for lang, a in stats["by_lang"].items()}}
        for f, v in file_vals.items():
            by_file[f][f"pass@{k}"] = _pct(v)
    out["by_file"] = by_file
    return out
