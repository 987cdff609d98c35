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
from dataclasses import dataclass, field as dc_field
from pathlib import PurePosixPath
from typing import Any

from common.languages import codes
from common.record import TASKS


def lang_table() -> tuple[str, ...]:
    """The languages of the language table (`by_lang`): the catalogue's, in its order (`common.languages`)."""
    return codes()

# The official aggregation rules are declarations on the tasks (common.record.TaskInfo): `no_lang` (rows
# without a language, outside the language table and the file-name language rule), `off_table_subtasks`
# (files outside the language table) and `official_ratio` (merge_result.py's ratio score, e.g. DOT's).
RATIO_TASKS = tuple(t for t, info in TASKS.items() if info.official_ratio is not None)


def file_key(rec: dict[str, Any]) -> str:
    """The file a record belongs to (official rows: `<group>/<task>/<file>.csv`) or its generated cell."""
    meta = rec.get("meta") or {}
    if isinstance(meta, dict) and meta.get("file"):
        return str(meta["file"])
    sub = rec.get("subtask") or ""
    return f"{rec['task']}/{sub + '/' if sub else ''}{rec['lang']}"


def is_language_free(task: str) -> bool:
    """The task's rows carry no language (`mul`): the catalogue's `no_lang`."""
    info = TASKS.get(task)
    return info is not None and info.no_lang


def in_lang_table(s: dict[str, Any]) -> bool:
    """Whether a sample's file counts in the language table: a table language, not a language-free task,
    not a subtask its task declares outside the table."""
    if s.get("lang") not in lang_table():
        return False
    info = TASKS.get(s.get("task"))  # type: ignore[arg-type]
    return info is None or not (info.no_lang or s.get("subtask") in info.off_table_subtasks)


def off_table_text() -> str:
    """What the language table leaves out, in words, from the declarations ("A and B's digital file")."""
    parts = [t for t, info in TASKS.items() if info.no_lang]
    parts += [f"{t}'s {sub} file" for t, info in TASKS.items() for sub in info.off_table_subtasks]
    return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]


def ratio_scores(file_acc: dict[str, float], info: dict[str, dict[str, Any]]) -> dict[str, float]:
    """merge_result.py's ratio score of each task that declares one (`TaskInfo.official_ratio`): mean of the
    numerator subtasks' file accuracies / the denominator subtask's; left out when that is 0 or no
    numerator file was scored."""
    out: dict[str, float] = {}
    for t in RATIO_TASKS:
        rule = TASKS[t].official_ratio
        assert rule is not None
        by_sub = {info[f]["subtask"]: a for f, a in file_acc.items() if info[f]["task"] == t}
        nums = [by_sub[k] for k in rule.numerator if k in by_sub]
        if by_sub.get(rule.denominator) and nums:
            out[t] = _mean(nums) / by_sub[rule.denominator]
    return out


def quirks_note() -> str:
    """results.json's `official.note`, from the declarations."""
    ratios = [f"{TASKS[t].code} = mean({TASKS[t].official_ratio.label}) / {TASKS[t].official_ratio.denominator}"
              for t in RATIO_TASKS]  # type: ignore[union-attr]
    return ("merge_result.py quirks: " + "".join(r + "; " for r in ratios)
            + "language from file-name substrings (korean_generate.csv counts as English)")


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
    table = lang_table()
    return (_ORDER.get(t, len(_ORDER)), t, table.index(lang) if lang in table else 9, lang)


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
            "by_lang": {lang: mean(lang_files[lang]) for lang in lang_table() if lang_files.get(lang)}}


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


@dataclass
class _Files:
    """Per-file verdict lists gathered from the samples (valid rows only) and each file's task facts."""

    coarse: dict[str, list[float]] = dc_field(default_factory=lambda: defaultdict(list))
    fine: dict[str, list[float]] = dc_field(default_factory=lambda: defaultdict(list))
    strict: dict[str, list[float]] = dc_field(default_factory=lambda: defaultdict(list))
    loophole: dict[str, int] = dc_field(default_factory=lambda: defaultdict(int))
    invalid: dict[str, int] = dc_field(default_factory=lambda: defaultdict(int))
    info: dict[str, dict[str, Any]] = dc_field(default_factory=dict)
    n: int = 0
    n_invalid: int = 0


def _collect(samples: Iterable[dict[str, Any]]) -> _Files:
    """Group the verdicts by file; invalid rows are counted, not scored."""
    fs = _Files()
    for s in samples:
        fs.n += 1
        f = s["file"]
        fs.info.setdefault(f, {"task": s["task"], "lang": s["lang"], "subtask": s.get("subtask", ""),
                               "in_lang_table": in_lang_table(s)})
        fs.coarse.setdefault(f, [])
        if not s.get("valid", True):
            fs.n_invalid += 1
            fs.invalid[f] += 1
            continue
        fs.coarse[f].append(float(s["coarse"]))
        fs.fine[f].append(float(s["fine"]))
        strict = float(s.get("strict", s["coarse"]))  # samples written before the strict verdict: = coarse
        fs.strict[f].append(strict)
        fs.loophole[f] += float(s["coarse"]) == 1.0 and strict != 1.0
    return fs


def _micro(fs: _Files) -> dict[str, Any]:
    """Instance-weighted accuracies: all valid rows pooled, per task and per table language."""
    micro_task: dict[str, list[float]] = defaultdict(list)
    micro_lang: dict[str, list[float]] = defaultdict(list)
    for f, v in fs.coarse.items():
        micro_task[fs.info[f]["task"]] += v
        if fs.info[f]["in_lang_table"]:
            micro_lang[fs.info[f]["lang"]] += v
    all_c = [c for v in fs.coarse.values() for c in v]
    return {"overall": _pct(_mean(all_c)),
            "by_task": {code_of(t): _pct(_mean(v)) for t, v in sorted(micro_task.items(), key=_task_order)},
            "by_lang": {lang: _pct(_mean(micro_lang[lang])) for lang in lang_table() if micro_lang.get(lang)}}


def _official_quirks(file_acc: dict[str, float], by_task: dict[str, float],
                     info: dict[str, dict[str, Any]]) -> tuple[dict[str, float], dict[str, Any]]:
    """merge_result.py's own numbers (module docstring): the declared ratio scores, the overall with them
    in place of those tasks' plain means, and the language table by its file-name rule."""
    ratios = ratio_scores(file_acc, info)
    official_tasks = {t: a for t, a in by_task.items() if t not in RATIO_TASKS}
    official_tasks.update(ratios)
    fname_lang: dict[str, list[float]] = defaultdict(list)
    for f, acc in file_acc.items():
        lang = official_filename_lang(f) if f.endswith(".csv") and not is_language_free(info[f]["task"]) else None
        if lang:
            fname_lang[lang].append(acc)
    return ratios, {
        "note": quirks_note(),
        "overall_dot_adjusted": _pct(_mean(list(official_tasks.values()))) if official_tasks else None,
        "by_lang_filename_rule": {lang: _pct(_mean(fname_lang[lang])) for lang in lang_table() if fname_lang.get(lang)},
    }


def _strict_and_loopholes(fs: _Files) -> tuple[dict[str, Any], dict[str, Any]]:
    """The official verdict without its loopholes (rewards.Score.strict), aggregated the same way, and the
    rows the official verdict passed only through a loophole (a hedge, an echo, extra words)."""
    strict_acc = {f: round(_mean(fs.strict.get(f, [])), 4) for f in fs.coarse}
    st = macro(strict_acc, fs.info)
    all_s = [c for v in fs.strict.values() for c in v]
    strict = {"overall": _pct(st["overall"]),
              "by_task": {code_of(t): _pct(a) for t, a in sorted(st["by_task"].items(), key=_task_order)},
              "by_lang": {lang: _pct(a) for lang, a in st["by_lang"].items()},
              "micro": _pct(_mean(all_s)),
              "by_file": {f: _pct(a) for f, a in sorted(strict_acc.items())}}
    loophole = {"n": sum(fs.loophole.values()),
                "by_task": {code_of(t): k for t, k in sorted(_count_by_task(fs.loophole, fs.info).items(),
                                                             key=_task_order)},
                "by_file": {f: fs.loophole.get(f, 0) for f in sorted(fs.coarse)}}
    return strict, loophole


def _ratio_key(ratios: dict[str, float]) -> float | dict[str, float] | None:
    """`dot_official_adjusted`: the ratio score of the catalogue's one ratio task (None when undefined);
    with several such tasks, a map code -> score."""
    if len(RATIO_TASKS) <= 1:
        return next((_pct(v) for v in ratios.values()), None)
    return {code_of(t): _pct(v) for t, v in ratios.items()} or None


def aggregate(samples: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """Tables from sample dicts carrying task, subtask, lang, file, coarse, fine, valid and strict (read as
    coarse where absent: samples written before the strict verdict existed)."""
    fs = _collect(samples)
    info = fs.info
    file_acc = {f: round(_mean(v), 4) for f, v in fs.coarse.items()}  # batch_eval.py: 0 when no valid row
    stats = macro(file_acc, info)
    by_task = stats["by_task"]
    by_tl_files: dict[tuple[str, str], list[float]] = defaultdict(list)
    for f, acc in file_acc.items():
        by_tl_files[(info[f]["task"], info[f]["lang"])].append(acc)
    by_cat: dict[str, list[float]] = defaultdict(list)
    for t, acc in by_task.items():
        by_cat[TASKS[t].category if t in TASKS else "other"].append(acc)
    all_f = [c for v in fs.fine.values() for c in v]
    ratios, official = _official_quirks(file_acc, by_task, info)
    strict, loophole = _strict_and_loopholes(fs)
    return {
        "overall": _pct(stats["overall"]),
        "by_task": {code_of(t): _pct(a) for t, a in sorted(by_task.items(), key=_task_order)},
        "by_lang": {lang: _pct(a) for lang, a in stats["by_lang"].items()},
        "by_lang_avg": _pct(_mean(list(stats["by_lang"].values()))),
        "by_task_lang": {f"{code_of(t)}/{lang}": _pct(_mean(v))
                         for (t, lang), v in sorted(by_tl_files.items(), key=_task_order)},
        "by_category": {c: _pct(_mean(v)) for c, v in sorted(by_cat.items())},
        "by_file": {f: {"accuracy": _pct(a), "n": len(fs.coarse[f]), "n_invalid": fs.invalid.get(f, 0),
                        "fine": _pct(_mean(fs.fine[f])), "task": code_of(info[f]["task"]),
                        "lang": info[f]["lang"]}
                    for f, a in sorted(file_acc.items())},
        "micro": _micro(fs),
        "fine": {"overall": _pct(_mean(all_f))},
        "strict": strict,
        "loophole": loophole,
        "dot_official_adjusted": _ratio_key(ratios),
        "official": official,
        "n": fs.n,
        "n_invalid": fs.n_invalid,
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


def pass_at(samples: Iterable[dict[str, Any]], key: str = "coarse") -> dict[str, Any] | None:
    """pass@k tables for runs that drew several samples per row (`eval run --num-samples K`), else None.

    `key` is the verdict counted: `coarse` (the official one, loopholes included) or `strict` (without them: can the
    model sample a right answer at all, the question RL asks); None when a sample lacks it (an older file).

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
            if any(key not in e for e in every):
                return None
            rows[f].append((len(every), int(sum(float(e[key]) for e in every))))
        else:
            if key not in s:
                return None
            rows[f].append((1, int(float(s[key]))))
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
