"""`eval export-lm-eval`: an lm-evaluation-harness task folder that scores with our `rewards`.

One task per benchmark file (`tase_<task>_<file stem>`), one group per task (`tase_freq`, ...:
mean over its files) and the group `tase` (mean over tasks), which is the official macro average. The
rows are written as JSON lines under `data/`; `utils.py` calls `rewards.score`, so lm-eval's `acc` is
the official verdict. One difference remains: lm-eval cannot drop a row from the denominator, so a row
the official evaluator would skip (`valid=False`) counts as wrong there. Run:

    lm_eval --model hf --model_args pretrained=PATH --include_path DIR --tasks tase \\
        --apply_chat_template --system_instruction "You need to put the final result inside <answer></answer>."
"""
from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from .aggregate import code_of, file_key
from .data import load_data
from .prompts import SYSTEM_PROMPT

UTILS = '''"""lm-evaluation-harness hooks for TASE: scoring comes from tase-grpo's `rewards` package."""
import json

from rewards import score


def doc_to_text(doc):
    return doc["prompt"]


def process_results(doc, results):
    rec = dict(doc)
    rec["meta"] = json.loads(rec.get("meta") or "{}") if isinstance(rec.get("meta"), str) else rec.get("meta", {})
    s = score(rec, results[0])
    return {"acc": s.coarse, "fine": s.fine}
'''

TASK_YAML = """task: {name}
dataset_path: json
dataset_kwargs:
  data_files:
    test: {data}
test_split: test
output_type: generate_until
doc_to_text: !function utils.doc_to_text
doc_to_target: answer
generation_kwargs:
  until: []
  max_gen_toks: {max_tokens}
  do_sample: false
process_results: !function utils.process_results
metric_list:
  - metric: acc
    aggregation: mean
    higher_is_better: true
  - metric: fine
    aggregation: mean
    higher_is_better: true
metadata:
  version: 1.0
  system_prompt: "{system}"
"""


GROUP_YAML = """group: {name}
task:
{tasks}aggregate_metric_list:
  - metric: acc
    aggregation: mean
    weight_by_size: false
  - metric: fine
    aggregation: mean
    weight_by_size: false
metadata:
  version: 1.0
"""


def _slug(s: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", s.lower()).strip("_")


def export(data: str, out: str | Path, max_tokens: int = 1024) -> list[str]:
    """Write the task folder; returns the file-level task names. Data files are referenced by absolute
    path (lm-eval resolves `data_files` against its working directory, not the YAML's folder)."""
    out = Path(out).resolve()
    groups: dict[str, list[dict[str, Any]]] = {}
    for r in load_data(data):
        groups.setdefault(file_key(r), []).append(r)
    (out / "data").mkdir(parents=True, exist_ok=True)
    names: list[str] = []
    by_task: dict[str, list[str]] = {}
    for key, rows in sorted(groups.items()):
        parts = key.removesuffix(".csv").split("/")
        name = "tase_" + _slug("_".join(parts[1:] if parts[0].startswith("token_") else parts))
        names.append(name)
        by_task.setdefault(code_of(rows[0]["task"]), []).append(name)
        data_file = out / "data" / f"{name}.jsonl"
        with data_file.open("w", encoding="utf-8") as f:
            for r in rows:  # meta as a JSON string: datasets' json loader wants one schema per column
                f.write(json.dumps(dict(r, meta=json.dumps(r.get("meta", {}), ensure_ascii=False)),
                                   ensure_ascii=False) + "\n")
        (out / f"{name}.yaml").write_text(
            TASK_YAML.format(name=name, data=json.dumps(str(data_file)), max_tokens=max_tokens,
                             system=SYSTEM_PROMPT), encoding="utf-8")
    (out / "utils.py").write_text(UTILS, encoding="utf-8")
    # task groups (mean over their files) under `tase` (mean over tasks): the official macro average
    for code, members in by_task.items():
        (out / f"tase_{code.lower()}.yaml").write_text(
            GROUP_YAML.format(name=f"tase_{code.lower()}", tasks="".join(f"  - {n}\n" for n in members)),
            encoding="utf-8")
    order = [c for c in TASK_ORDER if c in by_task] + sorted(set(by_task) - set(TASK_ORDER))
    (out / "tase.yaml").write_text(
        GROUP_YAML.format(name="tase", tasks="".join(f"  - tase_{c.lower()}\n" for c in order)), encoding="utf-8")
    return names


TASK_ORDER = ["FREQ", "LENOP", "DIFF", "SORT", "REORD", "COMPC", "COMPM", "DOT", "RIDL", "VAR"]
