"""Readers for benchmark data, the part every layer shares: the record checks, JSON lines, CSV rows.

Part of the floor (`common/`, with `common.record`, the record type and task catalogue). The official
release layout (`load_official`, which asks each task module which files it owns) and `load_data` are in
`synth.readers`, above the task registry (`eval.data.load_official`, the contract's name, is its alias).
Malformed input raises `DataError` with one line naming the file and row. `check_record` reads the
catalogue of scoring types (`common.types`), in the floor too: it needs nothing imported above it.
"""
from __future__ import annotations

import csv
import json
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from common.errors import TaseError, bounded
from common.languages import codes
from common.record import TASKS
from common.types import type_info, type_names

REQUIRED_JSONL_KEYS = ("id", "task", "lang", "type", "prompt", "answer")
CSV_FIELD_LIMIT = min(sys.maxsize, 2**31 - 1)


class DataError(TaseError, ValueError):
    """Unreadable or malformed benchmark data (the message is one line naming file and row)."""


@dataclass(frozen=True)
class FileInfo:
    """What one official CSV file holds."""

    task: str
    subtask: str
    lang: str
    type: str
    has_answer: bool


def open_text(path: Path, name: str | Path | None = None, newline: str | None = None) -> TextIO:
    """`path` opened as UTF-8 text, or DataError "<name>: cannot read (<reason>)" (name defaults to path)."""
    try:
        return open(path, encoding="utf-8", newline=newline)
    except OSError as e:
        raise DataError(f"{path if name is None else name}: cannot read ({e.strerror})") from None


def read_csv(path: Path, rel: str) -> Iterator[tuple[int, dict[str, str]]]:
    """(row index, row by header) of a CSV file, 0-based over data rows; DataError names `rel` and the row."""
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
            yield i, dict(zip(header, row, strict=False))


JSON_ERRORS = (ValueError, RecursionError)  # what json.loads raises on any input (RecursionError is no ValueError)


def json_problem(e: BaseException) -> str:
    """Why a text is not JSON, in the words every reader uses: "not JSON (<json's reason>)", "not JSON (an
    integer of more than N digits)" (a plain ValueError from int(), which has no `.msg`: reading `e.msg` crashed
    every reader on a 4,301-digit number), or "JSON nested too deeply to read" (RecursionError)."""
    if isinstance(e, RecursionError):
        return "JSON nested too deeply to read"
    if isinstance(e, json.JSONDecodeError):
        return f"not JSON ({e.msg})"
    if "integer string conversion" in str(e):
        return f"not JSON (an integer of more than {sys.get_int_max_str_digits()} digits)"
    return f"not JSON ({' '.join(str(e).split())[:200] or type(e).__name__})"


def loads_json(text: str | bytes, where: str | Path) -> Any:
    """`json.loads(text)`, or DataError "<where>: <json_problem>" (one line) for any text that is not JSON."""
    try:
        return json.loads(text)
    except JSON_ERRORS as e:
        raise DataError(f"{where}: {json_problem(e)}") from None


def load_jsonl(path: str | Path) -> Iterator[dict[str, Any]]:
    """Stream records from a JSON-lines file (e.g. written by `python -m synth`)."""
    path = Path(path)
    with open_text(path) as f:
        for ln, line in text_lines(f, path):
            rec = loads_json(line, f"{path}: line {ln}")
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
    types (`common.types`' catalogue, which the router's scorers match)."""
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
    if type_info(rec["type"]) is None:
        raise DataError(f"{where}: unknown type {bounded(rec['type'])}; expected one of {', '.join(type_names())}")
    # an unknown task would become a task of its own in the overall score, an unknown language would be left
    # out of the language table without a word (issue 36): the tables know these, nothing else
    info = TASKS.get(rec["task"])
    if info is None:
        raise DataError(f"{where}: unknown task {bounded(rec['task'])}; expected one of {', '.join(TASKS)}")
    langs = ("mul",) if info.no_lang else codes()
    if rec["lang"] not in langs:
        raise DataError(f"{where}: unknown lang {bounded(rec['lang'])} for task {rec['task']}; expected "
                        f"{' or '.join(langs)}")
    if rec.get("meta") is not None and not isinstance(rec["meta"], dict):
        raise DataError(f"{where}: meta must be an object")


