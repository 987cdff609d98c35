"""recipes/proof.py's units: the proof runs seed by seed (each (file, seed) unit to its end before the next seed), and
each finished unit leaves a manifest (OUT/manifest_s<seed>.json; OUT/manifest.json without seeds:) that says it is
complete and what it ran on: the CPU's flags, the thread count, the precision, the library versions, its models and
wall times. A finished unit is skipped whole on a rerun, and the pooled table refuses, in one line, to pool units of
different precision (a seed trained under bf16 autocast on one CPU and float32 on another measure different
things)."""
from __future__ import annotations

import json
import os
import platform
import shutil
import subprocess
from pathlib import Path
from typing import Any

from common.errors import TaseError
from common.state import read_state
from recipes.proof_stages.inputs import Proof, shown

PROOF_PRECISION = "float32"  # what the shipped proof configs pin (training and evaluation), so seeds pool anywhere


def manifest_path(out: Path, seed: int | None) -> Path:
    """OUT/manifest_s<seed>.json (OUT/manifest.json for a proof without seeds:)."""
    return out / ("manifest.json" if seed is None else f"manifest_s{seed}.json")


def _shape(value: Any) -> str | None:
    if not isinstance(value, dict):
        return "not a JSON object"
    if not isinstance(value.get("complete"), bool) or not isinstance(value.get("precision"), str):
        return "no complete (true/false) or precision (text)"
    if not isinstance(value.get("models"), list) or not all(isinstance(m, str) for m in value["models"]):
        return "no models (a list of names)"
    return None


def read_manifest(out: Path, seed: int | None) -> dict[str, Any] | None:
    """A unit's manifest (None when absent), read through the one checked reader of state files; of another shape:
    one line."""
    return read_state(manifest_path(out, seed), _shape, "; remove it to run that seed's unit again")


def finished(out: Path, seed: int | None) -> bool:
    """Whether a unit finished: its manifest says complete."""
    m = read_manifest(out, seed)
    return bool(m and m["complete"])


def cpu_flags() -> list[str]:
    """The CPU's flags as lscpu gives them (sorted), else from /proc/cpuinfo; [] where neither can be read."""
    text = ""
    if shutil.which("lscpu"):
        try:
            text = subprocess.run(["lscpu"], capture_output=True, text=True, timeout=30,
                                  env={**os.environ, "LC_ALL": "C"}).stdout
        except (OSError, subprocess.SubprocessError):
            text = ""
    for line in text.splitlines():
        if line.startswith("Flags:"):
            return sorted(set(line.split(":", 1)[1].split()))
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8").splitlines():
            if line.startswith("flags"):
                return sorted(set(line.split(":", 1)[1].split()))
    except OSError:
        pass
    return []


def versions() -> dict[str, str]:
    """The versions of Python and the libraries a unit's numbers depend on (absent ones left out)."""
    from importlib.metadata import PackageNotFoundError, version

    out = {"python": platform.python_version()}
    for name in ("torch", "transformers", "trl", "accelerate", "vllm", "datasets", "numpy"):
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            continue
    return out


def precision(pr: Proof) -> str:
    """The proof's precision: "float32" when no training part runs under bf16 autocast (cpu_bf16 resolved on this
    CPU, or bf16 true) and the evaluations are pinned to float32; else what differs, e.g. "train bf16 autocast
    (grpo), eval float32"."""
    from recipes.features.cpu_speed import trains_bf16

    bf16 = [part for part, parsed in pr.parsed.items() if trains_bf16(parsed)]
    ev = pr.cfg.eval.dtype or "the CPU's default"
    if not bf16 and ev == "float32":
        return PROOF_PRECISION
    return (f"train bf16 autocast ({', '.join(bf16)})" if bf16 else "train float32") + f", eval {ev}"


def environment(pr: Proof) -> dict[str, Any]:
    """What a unit ran on: CPU flags, thread count, precision, versions."""
    import torch

    return {"precision": precision(pr), "threads": torch.get_num_threads(), "cpu_count": os.cpu_count(),
            "cpu_flags": cpu_flags(), "versions": versions()}


def write_manifest(pr: Proof, seed: int | None, models: list[str], runs: list[str], env: dict[str, Any]) -> Path:
    """The unit's manifest, written last (complete: true): its seed, models, training runs, environment and its own
    wall times (the steps of this unit over every invocation)."""
    unit = pr.step.unit
    times = {k.removeprefix(unit): round(v, 1) for k, v in pr.step.times.items() if k.startswith(unit)}
    path = manifest_path(pr.out, seed)
    body = {"complete": True, "seed": seed, "models": models, "runs": runs, **env, "wall_times": times,
            "wall_time_total": round(sum(times.values()), 1)}
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(body, indent=1) + "\n", encoding="utf-8")
    os.replace(tmp, path)
    return path


def check_pooling(out: Path, seeds: list[int | None]) -> None:
    """The finished units pooled in one table must share one precision; else one line naming two that differ."""
    seen: dict[str, int | None] = {}
    for s in seeds:
        m = read_manifest(out, s)
        if m is not None:
            seen.setdefault(m["precision"], s)
    if len(seen) > 1:
        (p1, s1), (p2, s2) = list(seen.items())[:2]
        raise TaseError(f"cannot pool seeds of different precision: seed {s1} ran {p1}, seed {s2} {p2} "
                        f"({shown(manifest_path(out, s1))}, {shown(manifest_path(out, s2))}); rerun one of them "
                        "with the other's precision")


def delete_checkpoints(out: Path, runs: list[str]) -> int:
    """A finished unit's checkpoint-N folders (arms and controls; about 1 GB each for a 135M model with its
    optimizer state), once selected, evaluated and its manifest written; returns how many were removed."""
    n = 0
    for run in runs:
        for ckpt in sorted((out / run).glob("checkpoint-*")):
            if ckpt.is_dir() and not ckpt.is_symlink():
                shutil.rmtree(ckpt)
                n += 1
    return n
