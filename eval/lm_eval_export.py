"""`eval export-lm-eval`: an lm-evaluation-harness task folder that gives the project's numbers in lm-eval.

Layout (all paths relative, so the folder can be moved or copied to another machine):
- one `generate_until` task per benchmark file (`tase_<task>_<file stem>.yaml`, rows in `data/`, read by
  `utils.load_rows` relative to utils.py, not to lm-eval's working directory);
- one group per task (`tase_freq`, ...): lm-eval's unweighted mean over its files, which is the project's
  task score (`by_task`);
- the group `tase`, the headline. lm-eval 0.4 averages a group over its *leaf* tasks only (nested group
  scores are not used: lm_eval/api/group.py), so the mean over 36 files would weigh LENOP and COMPM (6 files
  each) double. The `tase` row therefore reports its own metric `overall`: each file contributes its
  accuracy times `n_files / (n_tasks * files of its task)`, so lm-eval's unweighted leaf mean of it is the
  unweighted mean of the ten task scores, i.e. `results.json`'s `overall`. The row's `en`, `zh`, `ko` are
  `by_lang`, built the same way: every file reports every language metric, its accuracy times
  `n_files / files of that language` for its own language and 0 for the others (dot_matrix and
  variant_normalize's digital file, outside the official language table, report 0 for all), so the
  unweighted leaf mean is the mean over that language's files. Every leaf has every metric the group
  aggregates, so lm-eval warns of no missing metric. A leaf cannot sit in two groups of one lm-eval run,
  which is why languages are metrics, not groups.

Per file, `acc` and `fine` use custom aggregations that reproduce `eval.aggregate`: rows the official
evaluator skips (`valid=False`) leave the denominator and a file's accuracy is rounded to 4 decimals as the
official batch_eval.py writes it. Scores are lm-eval's 0-1; the project's tables are those times 100.

The official system prompt is the task's `description`, which lm-eval sends as the system message under
`--apply_chat_template`; the prompt is then byte-identical to `eval run`'s. Without that flag lm-eval sends
plain text, the system prompt directly followed by the question, with no chat markup.
"""
from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from common.languages import codes
from common.prompts import SYSTEM_PROMPT
from common.readers import DataError
from common.record import TASE_TASKS, TASKS
from synth.readers import load_data

from .aggregate import code_of, file_key, in_lang_table
from .runner import RunError, select

TASK_ORDER = [TASKS[t].code for t in TASE_TASKS]  # the catalogue's order: FREQ, LENOP, ..., VAR
INSTALL_HINT = ("the TASE lm-eval tasks score with tase-grpo's `rewards`: install tase-grpo in lm-eval's "
                "environment (pip install -e /path/to/tase-grpo)")

UTILS = f'''"""lm-evaluation-harness hooks for the TASE tasks written by `python -m eval export-lm-eval` (tase-grpo).

Scoring is tase-grpo's own `rewards.score` (the official verdict), so tase-grpo must be installed where
lm-eval runs. Rows are read from data/ next to this file, so the folder can be moved.
"""
import json
from pathlib import Path

try:
    from rewards import score
except ImportError as e:  # lm-eval would only say "No module named 'rewards'"
    raise ImportError("{INSTALL_HINT}") from e

HERE = Path(__file__).resolve().parent


def load_rows(data_file, weight, lang_metric="", lang_weight=0.0, langs="", **_):
    """The task's rows (lm-eval's custom_dataset hook); `weight` is the file's share of `overall`,
    `lang_metric` the file's language in the language table ("" for none), `lang_weight` its share of that
    language's metric, `langs` every language metric the export reports (each file reports them all, 0 for
    the languages it is not in, so the `tase` group finds every metric in every leaf: no warning)."""
    import datasets

    with open(HERE / "data" / data_file, encoding="utf-8") as f:
        rows = [dict(json.loads(line), tase_weight=float(weight), tase_lang=lang_metric,
                     tase_lang_weight=float(lang_weight), tase_langs=langs)
                for line in f if line.strip()]
    return datasets.DatasetDict({{"test": datasets.Dataset.from_list(rows)}})


def doc_to_text(doc):
    return doc["prompt"]


def process_results(doc, results):
    """Per row: (value, valid) pairs; the aggregations below drop rows the official evaluator skips."""
    rec = {{k: v for k, v in doc.items() if not k.startswith("tase_")}}
    rec["meta"] = json.loads(rec.get("meta") or "{{}}")
    s = score(rec, results[0])
    out = {{"acc": [s.coarse, s.valid], "fine": [round(s.fine, 6), s.valid],
           "overall": [s.coarse, s.valid, doc["tase_weight"]]}}
    for lang in filter(None, doc.get("tase_langs", "").split(",")):
        out[lang] = [s.coarse, s.valid, doc["tase_lang_weight"] if lang == doc["tase_lang"] else 0.0]
    return out


def _valid_mean(items):
    vals = [v for v, ok, *_ in items if ok]
    return sum(vals) / len(vals) if vals else 0.0


def file_accuracy(items):
    """correct / valid rows, rounded to 4 decimals (official batch_eval.py); 0 when no row is valid."""
    return round(_valid_mean(items), 4)


def file_fine(items):
    return _valid_mean(items)


def overall_share(items):
    """This file's share of the `tase` row's `overall` (its accuracy times its weight)."""
    return file_accuracy(items) * items[0][2] if items else 0.0
'''

TASK_YAML = """# {file} ({n} rows), exported by tase-grpo. Scored by rewards.score; see utils.py.
task: {name}
custom_dataset: !function utils.load_rows
dataset_kwargs:
  data_file: {name}.jsonl
  weight: {weight!r}
  lang_metric: "{lang}"
  lang_weight: {lang_weight!r}
  langs: "{langs}"
test_split: test
output_type: generate_until
description: {system}
doc_to_text: !function utils.doc_to_text
doc_to_target: answer
generation_kwargs:
  until: []
  max_gen_toks: {max_tokens}
  do_sample: false
process_results: !function utils.process_results
metric_list:
  - metric: acc
    aggregation: !function utils.file_accuracy
    higher_is_better: true
  - metric: fine
    aggregation: !function utils.file_fine
    higher_is_better: true
  - metric: overall
    aggregation: !function utils.overall_share
    higher_is_better: true
{lang_metric}metadata:
  version: 2.0
"""

LANG_METRIC = """  - metric: {0}
    aggregation: !function utils.overall_share
    higher_is_better: true
"""

GROUP_YAML = """# {what}, exported by tase-grpo.
group: {name}
{alias}task:
{tasks}aggregate_metric_list:
{metrics}metadata:
  version: 2.0
"""


def _slug(s: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", str(s).lower()).strip("_")


def _comment(s: str) -> str:
    """Text from the data for a YAML `#` comment: JSON-escaped, so a newline in it (a file name in
    `meta.file`) cannot end the comment and inject keys such as `include:`."""
    return json.dumps(str(s), ensure_ascii=False)[1:-1]


def _check_yaml(text: str, path: str) -> str:
    """Every YAML file is parsed back before it is written: a value from the data that changed the
    document's keys would be caught here rather than by lm-eval, or not at all."""
    import yaml

    class _Loader(yaml.SafeLoader):
        pass

    _Loader.add_constructor("!function", lambda loader, node: loader.construct_scalar(node))
    doc = yaml.load(text, Loader=_Loader)  # noqa: S506 - SafeLoader plus one scalar tag
    allowed = {"task", "custom_dataset", "dataset_kwargs", "test_split", "output_type", "description",
               "doc_to_text", "doc_to_target", "generation_kwargs", "process_results", "metric_list", "metadata",
               "group", "group_alias", "aggregate_metric_list"}
    if not isinstance(doc, dict) or set(doc) - allowed:
        raise RunError(f"{path}: a value from the data changed the task YAML (keys {sorted(set(doc or {}) - allowed)})")
    return text


def task_name(key: str) -> str:
    """lm-eval task name of a file key (`token_awareness/freq_count/english.csv` -> `tase_freq_count_english`)."""
    parts = key.removesuffix(".csv").split("/")
    return "tase_" + _slug("_".join(parts[1:] if parts[0].startswith("token_") else parts))


def _group(out: Path, name: str, members: Iterable[str], what: str, metrics: Iterable[str] = ("acc",),
           alias: str = "") -> None:
    agg = "".join(f"  - metric: {m}\n    aggregation: mean\n    weight_by_size: false\n" for m in metrics)
    text = GROUP_YAML.format(name=name, what=_comment(what), metrics=agg,
                             tasks="".join(f"  - {m}\n" for m in members),
                             alias=f"group_alias: {json.dumps(alias)}\n" if alias else "")
    (out / f"{name}.yaml").write_text(_check_yaml(text, f"{name}.yaml"), encoding="utf-8")


def export(data: str, out: str | Path, max_tokens: int = 1024, limit: int | None = None,
           force: bool = False) -> dict[str, Any]:
    """Write the task folder for `data` (at most `limit` rows per file, spread as `eval run --limit` takes
    them); returns the names written: `files`, `tasks` (groups per task), `langs` (groups per language).

    Atomic: everything is written into a temp folder beside `out` and swapped in whole, so a failure (a full
    disk) leaves the previous export as it was, and a replaced export leaves none of its task files behind.
    A non-empty `out` is replaced only with `force`, and only when it is an earlier export holding nothing
    else (common/paths.py, `output_refusal`: never the data, the current directory, another command's output
    or the user's own files, at any depth)."""
    import shutil
    import tempfile

    from common.paths import followed, output_refusal, recover_replace, replace_folder, write_marker

    out = followed(out)  # a symlinked --out: its target is replaced, the link stays
    if out.name in ("", ".", ".."):
        out = Path(os.path.abspath(out))
    recover_replace(out)
    if out.exists() and not out.is_dir():
        raise RunError(f"--out {out} is a file, not a folder")
    if out.is_dir() and any(out.iterdir()):
        if not force:
            raise RunError(f"--out {out} is not empty; pass --force to replace an earlier export")
        why = output_refusal(out, "export-lm-eval", reading=(Path(data.removeprefix("official:")),))
        if why:
            raise RunError(f"--out {why}; --force only replaces an earlier export")
    files: dict[str, list[dict[str, Any]]] = {}
    for r in select(load_data(data), limit):  # file order of the data, as eval.aggregate sees it
        files.setdefault(file_key(r), []).append(r)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.tmp-", dir=out.parent))
    try:
        names = _write(files, tmp, max_tokens)
        write_marker(tmp, "export-lm-eval")  # what a later --force may replace: this folder, these files
        replace_folder(tmp, out)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return names


def _write(files: dict[str, list[dict[str, Any]]], out: Path, max_tokens: int) -> dict[str, Any]:
    names = {key: task_name(key) for key in files}
    if len(set(names.values())) != len(names):
        raise DataError("two files of the data map to the same lm-eval task name; rename one")
    by_task: dict[str, list[str]] = {}
    by_lang: dict[str, list[str]] = {}
    for key, rows in files.items():
        by_task.setdefault(code_of(rows[0]["task"]), []).append(names[key])
        if in_lang_table(rows[0]) and rows[0]["lang"] in codes():
            by_lang.setdefault(rows[0]["lang"], []).append(names[key])
    n_files, n_tasks = len(files), len(by_task)
    langs = [lang for lang in codes() if lang in by_lang]
    (out / "data").mkdir(parents=True, exist_ok=True)
    for key, rows in files.items():
        name = names[key]
        lang = rows[0]["lang"] if in_lang_table(rows[0]) and rows[0]["lang"] in codes() else ""
        with (out / "data" / f"{name}.jsonl").open("w", encoding="utf-8") as f:
            for r in rows:  # meta as a JSON string: one schema per column for datasets
                f.write(json.dumps(dict(r, meta=json.dumps(r.get("meta", {}), ensure_ascii=False)),
                                   ensure_ascii=False) + "\n")
            f.flush()
            os.fsync(f.fileno())
        weight = n_files / (n_tasks * len(by_task[code_of(rows[0]["task"])]))
        text = TASK_YAML.format(file=_comment(key), n=len(rows), name=name, weight=float(weight),
                                max_tokens=int(max_tokens), lang=lang, langs=",".join(langs),
                                lang_weight=float(n_files / len(by_lang[lang])) if lang else 0.0,
                                lang_metric="".join(LANG_METRIC.format(x) for x in langs),
                                system=json.dumps(SYSTEM_PROMPT, ensure_ascii=False))
        (out / f"{name}.yaml").write_text(_check_yaml(text, f"{name}.yaml"), encoding="utf-8")
    (out / "utils.py").write_text(UTILS, encoding="utf-8")
    order = [c for c in TASK_ORDER if c in by_task] + [c for c in by_task if c not in TASK_ORDER]
    for code in order:
        _group(out, f"tase_{_slug(code)}", by_task[code], f"{code}: unweighted mean of its files' accuracy")
    _group(out, "tase", [f"tase_{_slug(c)}" for c in order],
           f"TASE: `overall` = unweighted mean of the {n_tasks} task scores; {', '.join(langs)} = by_lang",
           metrics=["overall", *langs], alias=f"tase (overall = mean of {n_tasks} task scores)")
    return {"files": list(names.values()), "tasks": [f"tase_{_slug(c)}" for c in order], "langs": langs}
