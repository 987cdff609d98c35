"""`eval export-lm-eval`: an lm-evaluation-harness task folder that scores with our `rewards`.

One task per benchmark file (`tase_<task>_<file stem>`), grouped as `tase`; the rows are written as JSON
lines under `data/`; `utils.py` calls `rewards.score`, so lm-eval's `acc` is the official verdict. Run:

    lm_eval --model hf --model_args pretrained=PATH --include_path DIR --tasks tase \\
        --apply_chat_template --system_instruction "You need to put the final result inside <answer></answer>."
"""
from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from .aggregate import file_key
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


def _slug(s: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", s.lower()).strip("_")


def export(data: str, out: str | Path, max_tokens: int = 1024) -> list[str]:
    out = Path(out)
    (out / "data").mkdir(parents=True, exist_ok=True)
    groups: dict[str, list[dict[str, Any]]] = {}
    for r in load_data(data):
        groups.setdefault(file_key(r), []).append(r)
    names = []
    for key, rows in sorted(groups.items()):
        name = "tase_" + _slug(key.removesuffix(".csv"))
        names.append(name)
        data_file = out / "data" / f"{name}.jsonl"
        with data_file.open("w", encoding="utf-8") as f:
            for r in rows:
                f.write(json.dumps(dict(r, meta=json.dumps(r.get("meta", {}), ensure_ascii=False)), ensure_ascii=False) + "\n")
        (out / f"{name}.yaml").write_text(
            TASK_YAML.format(name=name, data=f"data/{name}.jsonl", max_tokens=max_tokens, system=SYSTEM_PROMPT),
            encoding="utf-8")
    (out / "utils.py").write_text(UTILS, encoding="utf-8")
    group = "group: tase\ntask:\n" + "".join(f"  - {n}\n" for n in names) + (
        "aggregate_metric_list:\n  - metric: acc\n    aggregation: mean\n    weight_by_size: false\n"
        "metadata:\n  version: 1.0\n")
    (out / "tase.yaml").write_text(group, encoding="utf-8")
    return names
