"""Readers for benchmark data: the official TASE release layout and our generated JSON lines.

This is the shared data layer (with `synth.record`, the record type and task catalogue): synth/, eval/
and recipes/ read data through it; `eval.data` re-exports it for the documented `eval.data.load_official`.

`load_official(root)` walks `tasks/<group>/<task>/<file>.csv` and yields contract records whose `id` is
`<task>/<file stem>/<row index>` (0-based over data rows). Each file's scoring type comes from the
release's `data/final_token_*.json` when present (cross-checked against the built-in table), else from
the built-in table, which mirrors those files. Malformed input raises `DataError` with one line naming
the file and row.
"""
from __future__ import annotations

import csv
import json
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from rewards.types import get_type, type_names

from .record import LANG_OF_STEM, LANGS, TASKS, make_record  # noqa: F401


EVAL_TO_TYPE = {
    "number": "NUMBER",
    "length": "LENGTH",
    "shuffle": "SHUFFLE",
    "split": "SPLIT",
    "diff": "DIFF",
    "match_answer": "MATCH_ANSWER",
}
REQUIRED_JSONL_KEYS = ("id", "task", "lang", "type", "prompt", "answer")
CSV_FIELD_LIMIT = min(sys.maxsize, 2**31 - 1)


class DataError(ValueError):
    """Unreadable or malformed benchmark data (the message is one line naming file and row)."""


@dataclass(frozen=True)
class FileInfo:
    """What one official CSV file holds."""

    task: str
    subtask: str
    lang: str
    type: str
    has_answer: bool


def classify_file(task: str, stem: str) -> FileInfo | None:
    """Task/subtask/language/type of an official file, or None when the name is unknown. The task module
    declares its file names and answer types (`synth.core.Generator.official_file`, `answer_types`)."""
    from .core import spec

    gen = spec(task)
    found = gen.official_file(stem) if gen is not None else None
    if found is None or found[0] not in gen.answer_types:  # a task with no official files (execute)
        return None
    sub, lang = found
    typ = gen.answer_type(sub)
    t = get_type(typ)
    return FileInfo(task, sub, lang, typ, not (t is not None and t.unlabelled))


def open_text(path: Path, name: str | Path | None = None, newline: str | None = None) -> TextIO:
    """`path` opened as UTF-8 text, or DataError "<name>: cannot read (<reason>)" (name defaults to path)."""
    try:
        return open(path, encoding="utf-8", newline=newline)
    except OSError as e:
        raise DataError(f"{path if name is None else name}: cannot read ({e.strerror})") from None


def _official_types(root: Path) -> dict[str, str]:
    """file path (relative, 'tasks/...csv') -> TYPE from data/final_token_*.json, when present."""
    out: dict[str, str] = {}
    for cfg in sorted((root / "data").glob("final_token_*.json")):
        try:
            entries = json.loads(cfg.read_text(encoding="utf-8"))
            for e in entries:
                for f in e["files"]:
                    out[f] = EVAL_TO_TYPE[e["evaluation"]]
        except (OSError, ValueError, KeyError, TypeError) as e:
            raise DataError(f"{cfg}: not a valid TASE task config ({type(e).__name__}: {e})") from None
    return out


def official_files(root: str | Path) -> list[tuple[Path, FileInfo]]:
    """The CSV files of an official release (sorted), each with its FileInfo."""
    root = Path(root)
    tasks_dir = root / "tasks"
    if not tasks_dir.is_dir():
        raise DataError(f"{root}: no tasks/ folder (expected the official layout tasks/<group>/<task>/<file>.csv)")
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


def _read_csv(path: Path, rel: str) -> Iterator[tuple[int, dict[str, str]]]:
    csv.field_size_limit(CSV_FIELD_LIMIT)  # official rows can be long; set when reading, not at import
    f = open_text(path, rel, newline="")
    with f:
        reader = csv.reader(f)
        try:
            header = next(reader)
        except StopIteration:
            raise DataError(f"{rel}: empty file (no header)") from None
        except (csv.Error, UnicodeDecodeError) as e:
            raise DataError(f"{rel}: header: {e}") from None
        header = [h.lstrip("\ufeff").strip() for h in header]
        i = -1
        while True:
            try:
                row = next(reader)
            except StopIteration:
                return
            except (csv.Error, UnicodeDecodeError) as e:
                raise DataError(f"{rel}: row {i + 1}: bad CSV ({e})") from None
            i += 1
            if not row:
                continue
            if len(row) != len(header):
                raise DataError(f"{rel}: row {i}: expected {len(header)} fields ({','.join(header)}), got {len(row)}")
            yield i, dict(zip(header, row))


def load_official(root: str | Path) -> Iterator[dict[str, Any]]:
    """Stream every row of an official TASE release (or a sample with the same layout) as records."""
    root = Path(root)
    for path, info in official_files(root):
        rel = path.relative_to(root / "tasks").as_posix()
        rows = _read_csv(path, rel)
        first = True
        for i, row in rows:
            if first:
                need = ["input"] + (["answer"] if info.has_answer else [])
                if info.type == "DIFF":
                    need.append("variation")
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
                variation=row.get("variation", "") if info.type == "DIFF" else "",
                meta=meta,
            )


def load_jsonl(path: str | Path) -> Iterator[dict[str, Any]]:
    """Stream records from a JSON-lines file (e.g. written by `python -m synth`)."""
    path = Path(path)
    with open_text(path) as f:
        for ln, line in text_lines(f, path):
            try:
                rec = json.loads(line)
            except ValueError as e:
                raise DataError(f"{path}: line {ln}: not JSON ({e.msg})") from None
            except RecursionError:
                raise DataError(f"{path}: line {ln}: JSON nested too deeply to read") from None
            check_record(rec, f"{path}: line {ln}")
            rec.setdefault("subtask", "")
            rec.setdefault("variation", "")
            rec.setdefault("meta", {})
            rec.setdefault("category", TASKS[rec["task"]].category if rec["task"] in TASKS else "")
            yield rec


def text_lines(f: TextIO, where: str | Path, line_in_error: bool = True) -> Iterator[tuple[int, str]]:
    """(line number, text) of every non-blank line of an open text file. A byte that is not UTF-8 raises
    DataError naming the file and the line (with `line_in_error`; else the file only)."""
    ln = 0
    try:
        for ln, line in enumerate(f, 1):
            if line.strip():
                yield ln, line
    except UnicodeDecodeError as e:
        if line_in_error:
            raise DataError(f"{where}: line {ln + 1}: not UTF-8 text (byte {e.object[e.start]:#04x})") from None
        raise DataError(f"{where}: not UTF-8 text") from None


def _has_surrogate(s: str) -> bool:
    """Lone surrogates (JSON "\\ud800") decode into str but cannot be encoded, tokenized or written."""
    try:
        s.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def check_record(rec: Any, where: str) -> None:
    """Refuse, in one line naming the row, a record the scorers and models would choke on later: not an
    object, a missing key, a non-string field, text that is not encodable, an unknown `type` (which
    would otherwise score every row as invalid, silently), an unknown `task` or a `lang` the task does not
    have (en/zh/ko; `mul` for a language-free task). The known types are the registered scoring
    types (`rewards.types`, the router's keys)."""
    if not isinstance(rec, dict):
        raise DataError(f"{where}: not a JSON object")
    missing = [k for k in REQUIRED_JSONL_KEYS if k not in rec]
    if missing:
        raise DataError(f"{where}: missing key(s) {', '.join(missing)}")
    for k in (*REQUIRED_JSONL_KEYS, "subtask", "variation", "category"):
        v = rec.get(k, "")
        if not isinstance(v, str):
            raise DataError(f"{where}: {k} must be a string, got {type(v).__name__} {json.dumps(v)[:40]}")
        if _has_surrogate(v):
            raise DataError(f"{where}: {k} holds a lone surrogate (text that cannot be encoded as UTF-8)")
    if get_type(rec["type"]) is None:
        raise DataError(f"{where}: unknown type {rec['type']!r}; expected one of {', '.join(type_names())}")
    # an unknown task would become a task of its own in the overall score, an unknown language would be left
    # out of the language table without a word (issue 36): the tables know these, nothing else
    info = TASKS.get(rec["task"])
    if info is None:
        raise DataError(f"{where}: unknown task {rec['task']!r}; expected one of {', '.join(TASKS)}")
    langs = ("mul",) if info.no_lang else LANGS
    if rec["lang"] not in langs:
        raise DataError(f"{where}: unknown lang {rec['lang']!r} for task {rec['task']}; expected "
                        f"{' or '.join(langs)}")
    if rec.get("meta") is not None and not isinstance(rec["meta"], dict):
        raise DataError(f"{where}: meta must be an object")


def load_data(spec: str) -> Iterator[dict[str, Any]]:
    """`official:DIR` (official release layout) or a `.jsonl` file of records."""
    if spec.startswith("official:"):
        return load_official(spec[len("official:") :])
    p = Path(spec)
    if p.is_dir():
        raise DataError(f"{spec}: is a folder; use official:{spec} for the official release layout")
    if not p.exists():
        raise DataError(f"{spec}: no such file")
    return load_jsonl(p)
