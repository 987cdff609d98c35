"""`eval run` and `eval score`: generate (or read) completions, score them with `rewards`, write
`samples.jsonl` (one line per example, appended and fsync'ed per batch) and `results.json` (rebuilt from
the samples, so a killed run loses nothing and a rerun of the same command resumes)."""
from __future__ import annotations

import json
import os
import platform
import sys
import time
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
    """At most `limit` rows per file, spread evenly (the official runner's max_eval stride)."""
    by_file: dict[str, list[dict[str, Any]]] = {}
    for r in records:
        by_file.setdefault(file_key(r), []).append(r)
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
    for pkg in ("tase-grpo", "torch", "transformers", "trl", "vllm"):
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
    tmp = out / (RESULTS + ".tmp")
    tmp.write_text(json.dumps(res, ensure_ascii=False, indent=2), encoding="utf-8")
    os.replace(tmp, out / RESULTS)
    return res


def _check_config(out: Path, cfg: dict[str, Any]) -> None:
    p = out / RUN_CONFIG
    if p.exists():
        old = json.loads(p.read_text(encoding="utf-8"))
        keys = ("model", "data", "cot", "limit", "max_new_tokens", "temperature", "system_prompt")
        diff = [k for k in keys if old.get(k) != cfg.get(k)]
        if diff:
            raise RunError(f"{out} holds a run with different {', '.join(diff)}; use another --out to keep it")
    else:
        p.write_text(json.dumps(cfg, indent=2), encoding="utf-8")


def run(model: str, data: str, out: str | Path, backend: str = "hf", limit: int | None = None, cot: bool = False,
        gen: Any = None, system_prompt: str = SYSTEM_PROMPT, progress: bool = True) -> dict[str, Any]:
    """Generate, score and aggregate; resumes from `out/samples.jsonl`."""
    from .backends import GenConfig, make_backend
    from .models import resolve_model

    gen = gen or GenConfig()
    records = select(load_data(data), limit)
    out = Path(out)
    model_path = resolve_model(model)
    out.mkdir(parents=True, exist_ok=True)
    cfg = {"model": str(model), "model_path": str(model_path), "data": data, "backend": backend, "cot": cot,
           "limit": limit, "max_new_tokens": gen.max_new_tokens, "temperature": gen.temperature,
           "top_p": gen.top_p, "top_k": gen.top_k, "seed": gen.seed, "system_prompt": system_prompt}
    _check_config(out, cfg)
    path = out / SAMPLES
    done = read_samples(path)
    todo = [r for r in records if r["id"] not in done]
    header = {"model": str(model), "data": data, "backend": backend, "seed": gen.seed, "generation": cfg}
    if todo:
        be = make_backend(backend, model_path, gen)
        # longest prompts first: similar lengths share a batch (less padding), OOM shows up early
        todo.sort(key=lambda r: -len(r["prompt"]))
        bar = None
        if progress:
            from tqdm import tqdm

            bar = tqdm(total=len(todo), unit="ex", desc=f"eval {Path(str(model)).name}", file=sys.stderr)
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
    return write_results(out, records, done, header)


def score_predictions(data: str, predictions: str | Path, out: str | Path) -> dict[str, Any]:
    """Score completions made elsewhere: JSON lines with `id` and `completion`."""
    records = {r["id"]: r for r in load_data(data)}
    preds: list[tuple[str, str]] = []
    p = Path(predictions)
    try:
        fh = p.open(encoding="utf-8")
    except OSError as e:
        raise DataError(f"{p}: cannot read ({e.strerror})") from None
    with fh:
        for ln, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
                pid, comp = obj["id"], obj["completion"]
            except (ValueError, KeyError, TypeError):
                raise DataError(f"{p}: line {ln}: expected a JSON object with id and completion") from None
            if pid not in records:
                raise DataError(f"{p}: line {ln}: unknown id {pid!r} (not in {data})")
            preds.append((pid, comp if isinstance(comp, str) else json.dumps(comp)))
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    lines = [sample_line(records[pid], comp) for pid, comp in preds]
    tmp = out / (SAMPLES + ".tmp")
    with tmp.open("w", encoding="utf-8") as f:
        for s in lines:
            f.write(json.dumps(s, ensure_ascii=False) + "\n")
    os.replace(tmp, out / SAMPLES)
    done = {s["id"]: s for s in lines}
    scored = [records[pid] for pid in dict.fromkeys(pid for pid, _ in preds)]
    header = {"model": str(predictions), "data": data, "backend": "predictions", "seed": None}
    return write_results(out, scored, done, header)


def iter_samples(path: Path) -> Iterator[dict[str, Any]]:
    yield from read_samples(path, repair=False).values()
