"""Readers for the official TASE release layout, and `load_data` (that layout or a JSON-lines file).

`load_official(root)` walks `tasks/<group>/<task>/<file>.csv` and yields contract records whose `id` is
`<task>/<file stem>/<row index>` (0-based over data rows). Each file's scoring type is the one its task
module declares (`answer_types`); the release's `data/final_token_*.json`, when present, is cross-checked
against it, each evaluator's name read through the types' catalogue (`common.types.official_types`).
Malformed input raises `DataError` with one line naming the file and row. It lives in synth/ because each
task module declares its official files (`synth.core.Generator.official_file`); what every layer shares
(the record checks, JSON lines, CSV rows) is in the floor, `common.readers`. `eval.data.load_official` (the
contract's name) is an alias of `load_official`.
"""
from __future__ import annotations

import itertools
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from common.readers import DataError, FileInfo, load_jsonl, loads_json, read_csv
from common.record import TASKS, make_record
from common.types import VARIATION, official_types, type_info

from .core import spec


def classify_file(task: str, stem: str) -> FileInfo | None:
    """Task/subtask/language/type of an official file, or None when the name is unknown. The task module
    declares its file names and answer types (`synth.core.Generator.official_file`, `answer_types`)."""
    gen = spec(task)
    found = gen.official_file(stem) if gen is not None else None
    if found is None or found[0] not in gen.answer_types:  # a task with no official files (execute)
        return None
    sub, lang = found
    typ = gen.answer_type(sub)
    t = type_info(typ)
    return FileInfo(task, sub, lang, typ, not (t is not None and t.unlabelled))


def _official_types(root: Path) -> dict[str, str]:
    """file path (relative, 'tasks/...csv') -> TYPE from data/final_token_*.json, when present."""
    out: dict[str, str] = {}
    eval_to_type = official_types()  # the official evaluator's name -> TYPE (each type's catalogue row)
    for cfg in sorted((root / "data").glob("final_token_*.json")):
        try:
            text = cfg.read_text(encoding="utf-8")
        except (OSError, ValueError) as e:  # ValueError: UnicodeDecodeError
            raise DataError(f"{cfg}: not a valid TASE task config ({type(e).__name__}: {e})") from None
        entries = loads_json(text, cfg)  # not JSON: one line in every reader's words
        try:
            for e in entries:
                for f in e["files"]:
                    out[f] = eval_to_type[e["evaluation"]]
        except (ValueError, KeyError, TypeError) as e:
            raise DataError(f"{cfg}: not a valid TASE task config ({type(e).__name__}: {e})") from None
    return out


def one_file_release(path: Path) -> tuple[Path, str]:
    """(release root, 'group/task/file.csv') of one official CSV given as a release of one file: its folder names the
    task (`.../<task>/<file>.csv`), so its ids and file key are those the whole release gives it and runs of the file
    and of the release compare row by row. The root is the folder holding tasks/ when the CSV sits in the official
    layout (its task config is then cross-checked), else the CSV's folder."""
    task = path.parent.name
    if task not in TASKS:
        raise DataError(f"{path}: a single official CSV must sit in its task's folder (.../<task>/<file>.csv, a task "
                        f"of {', '.join(TASKS.names())}); its folder is {task!r}")
    group = TASKS[task].group
    rel = f"{group}/{task}/{path.name}"
    layout = len(path.parents) > 3 and path.parents[1].name == group and path.parents[2].name == "tasks"
    return (path.parents[3] if layout else path.parent), rel


def official_files(root: str | Path) -> list[tuple[Path, FileInfo]]:
    """The CSV files of an official release (sorted), each with its FileInfo; a path to one of its CSV files is a
    release of that one file (`one_file_release`)."""
    root = Path(root)
    if root.suffix.lower() == ".csv" and not root.is_dir():
        return [_one_file(root)]
    tasks_dir = root / "tasks"
    if not tasks_dir.is_dir():
        raise DataError(f"{root}: no tasks/ folder (expected the official layout tasks/<group>/<task>/<file>.csv, "
                        "or one such .csv file)")
    cfg_types = _official_types(root)
    files = []
    for path in sorted(tasks_dir.glob("*/*/*.csv")):
        group, task = path.parent.parent.name, path.parent.name
        rel = path.relative_to(root).as_posix()
        if task not in TASKS or TASKS[task].group != group:
            raise DataError(f"{rel}: unknown task folder {group}/{task}")
        info = classify_file(task, path.stem)
        if info is None:
            raise DataError(f"{rel}: unknown file name for task {task}")
        if rel in cfg_types and cfg_types[rel] != info.type:
            raise DataError(f"{rel}: task config says {cfg_types[rel]}, expected {info.type}")
        files.append((path, info))
    if not files:
        raise DataError(f"{root}: no CSV files under tasks/")
    return files


def _one_file(path: Path) -> tuple[Path, FileInfo]:
    """One official CSV (a release of one file), checked as official_files checks each of a release's files."""
    if not path.is_file():
        raise DataError(f"{path}: no such file")
    root, rel = one_file_release(path)
    info = classify_file(path.parent.name, path.stem)
    if info is None:
        raise DataError(f"{rel}: unknown file name for task {path.parent.name}")
    cfg_type = _official_types(root).get(f"tasks/{rel}") if root != path.parent else None
    if cfg_type is not None and cfg_type != info.type:
        raise DataError(f"{rel}: task config says {cfg_type}, expected {info.type}")
    return path, info


def file_rel(root: Path, path: Path) -> str:
    """A CSV's key ('group/task/file.csv'): its path under root/tasks, or the key one_file_release gives it."""
    if root == path:
        return one_file_release(path)[1]
    return path.relative_to(root / "tasks").as_posix()


_NOTED: set[str] = set()  # header-only files already named in this process (a command may read the release twice)


def header_only(rel: str) -> None:
    """Say once per process, on stderr, that an official file has a header and no rows: it gives no record, so it is
    left out of its task's mean (a file mean of nothing is no number), which a table would otherwise not show."""
    if rel not in _NOTED:
        _NOTED.add(rel)
        print(f"note: {rel}: header only, no rows; left out of its task's mean", file=sys.stderr)


def load_official(root: str | Path) -> Iterator[dict[str, Any]]:
    """Stream every row of an official TASE release (or a sample with the same layout, or one of its CSV files) as
    records."""
    root = Path(root)
    for path, info in official_files(root):
        rel = file_rel(root, path)
        t = type_info(info.type)
        reads_variation = t is not None and VARIATION in t.needs  # DIFF: the variation column, read as is
        rows = read_csv(path, rel)
        first = True
        for i, row in itertools.chain(rows, [(None, None)]):
            if i is None:  # the end of the file
                if first:
                    header_only(rel)
                break
            if first:
                need = ["input"] + (["answer"] if info.has_answer else [])
                if reads_variation:
                    need.append(VARIATION)
                missing = [c for c in need if c not in row]
                if missing:
                    raise DataError(f"{rel}: missing column(s) {', '.join(missing)}")
                first = False
            meta: dict[str, Any] = {"file": rel, "row": i}
            if "explanation" in row:
                meta["explanation"] = row["explanation"]
            yield make_record(
                id=f"{info.task}/{path.stem}/{i}",
                task=info.task,
                subtask=info.subtask,
                lang=info.lang,
                type=info.type,
                prompt=row["input"],
                answer=(row.get("answer") or "").strip(),
                variation=row.get(VARIATION, "") if reads_variation else "",
                meta=meta,
            )


def load_data(spec: str) -> Iterator[dict[str, Any]]:
    """`official:DIR` (official release layout), `official:FILE.csv` (one file of it) or a `.jsonl` file of records."""
    if spec.startswith("official:"):
        return load_official(spec[len("official:") :])
    p = Path(spec)
    if p.is_dir():
        raise DataError(f"{spec}: is a folder; use official:{spec} for the official release layout")
    if not p.exists():
        raise DataError(f"{spec}: no such file")
    return load_jsonl(p)
