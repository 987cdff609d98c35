"""The chosen checkpoint, one file for both ways of choosing it (one name per idea).

A run with evaluation during training (recipes/features/heldout/evaluation.py: OUTPUT_DIR/best_checkpoint.json) and the
selection after training (recipes/select_checkpoint.py: OUT/best_checkpoint.json) write the same file with the same
fields:

- `metric`: what was compared, a held-out accuracy as the training log names it (`tase/heldout/strict_acc`,
  `tase/heldout/official_acc`: eval.headline's numbers); greater is better;
- `value`: the chosen step's value, a share in [0, 1] as every `tase/` metric (results.json keeps percent);
- `step`, `path`: the chosen step and its folder (None while a training run has no checkpoint of it);
- `evaluations`: every evaluated step, `{"step", "value"}` and what the writer adds (the selection: `path`, `n`,
  `headline`);
- what each writer adds: the training run its trainer's view (`greater_is_better`, `load_best_model_at_end`,
  `trainer_best_model_checkpoint`); the selection its `run`, `heldout` file and `rule`.

select_checkpoint.py wrote OUT/selection.json until then (the choice under `chosen`, a percent under `heldout`). That
file is still read for one more release (`read`), as the new shape, with one deprecation line on stderr.
"""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

NAME = "best_checkpoint.json"
FORMER = "selection.json"  # select_checkpoint.py's former file (a percent under `heldout`): still read, with a note
PREFIX = "tase/heldout/"  # the training log's names of the held-out accuracies (recipes/features/heldout/evaluation.py)
_warned: set[Path] = set()


def write(folder: Path, rec: dict[str, Any]) -> Path:
    """FOLDER/best_checkpoint.json, replaced whole (a crash mid-write leaves the previous one)."""
    path = Path(folder) / NAME
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(rec, indent=2) + "\n", encoding="utf-8")
    os.replace(tmp, path)
    return path


def problem(rec: Any, need_path: bool = True) -> str | None:
    """What is wrong with a best_checkpoint.json (the fields above: metric, value, step, path, evaluations of steps
    and values), or None. `need_path`: the chosen step must have a folder (what the proof evaluates)."""
    from common.state import mapping_problem, number, whole

    step = {"step": whole, "value": number}
    why = mapping_problem(rec, {"metric": lambda m: isinstance(m, str), **step,
                                "path": lambda p: isinstance(p, str) or (p is None and not need_path),
                                "evaluations": lambda es: isinstance(es, list) and all(mapping_problem(e, step) is None
                                                                                       for e in es)})
    return f"cannot read the chosen checkpoint ({why})" if why else None


def former_problem(sel: Any) -> str | None:
    """What is wrong with a former selection.json (chosen with a path, step and held-out percent; candidates, when
    there, a list of such steps and percents), or None."""
    from common.state import mapping_problem, number, whole

    step = {"step": whole, "heldout": number}
    why = mapping_problem(sel, {"chosen": lambda c: mapping_problem(c, {**step, "path": lambda p: isinstance(p, str)})
                                 is None,
                                 "candidates": lambda cs: isinstance(cs, list) and all(mapping_problem(c, step) is None
                                                                                       for c in cs)},
                          optional=("candidates",))
    return f"cannot read the chosen checkpoint ({why})" if why else None


def from_former(sel: dict[str, Any]) -> dict[str, Any]:
    """A former selection.json as best_checkpoint.json's fields: percents to shares, `chosen` to the top level,
    `candidates` to `evaluations`."""
    def share(c: dict[str, Any]) -> dict[str, Any]:
        return {"step": c["step"], "value": round(c["heldout"] / 100, 6), **{k: v for k, v in c.items()
                                                                             if k not in ("step", "heldout")}}

    chosen = share(sel["chosen"])
    rule = sel.get("rule")
    metric = PREFIX + ("strict_acc" if isinstance(rule, str) and "strict" in rule else "official_acc")
    extra = {k: sel[k] for k in ("run", "heldout", "rule") if k in sel}
    return {"metric": metric, "value": chosen["value"], "step": chosen["step"], "path": chosen["path"],
            "greater_is_better": True, **extra,
            "evaluations": [share(c) for c in sel.get("candidates") or [sel["chosen"]]]}


def found(folder: Path) -> Path | None:
    """The chosen-checkpoint file of FOLDER: best_checkpoint.json, else a former selection.json; None without
    either."""
    for name in (NAME, FORMER):
        if (Path(folder) / name).exists():
            return Path(folder) / name
    return None


def read(folder: Path, advice: str = "", shown: Any = str) -> dict[str, Any] | None:
    """FOLDER's chosen checkpoint in best_checkpoint.json's fields, read through the one checked reader of state files
    (common/state.py); a former selection.json where only it exists, converted, with one deprecation line on stderr
    (once per file and process). None without either; unreadable or of another shape: one StateError line."""
    from common.state import read_state

    path = found(folder)
    if path is None:
        return None
    if path.name == NAME:
        return read_state(path, problem, advice)
    rec = from_former(read_state(path, former_problem, advice))
    if path not in _warned:
        _warned.add(path)
        print(f"{shown(path)} is deprecated: select_checkpoint.py writes {NAME} (a 0-1 share under `value`) since "
              "issue 61 (the old file is read for one more release)", file=sys.stderr)
    return rec
