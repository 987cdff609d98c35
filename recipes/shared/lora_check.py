"""A LoRA adapter checked against its base model before either is loaded (recipes/export.py merges them).

Why: an adapter_config.json whose `base_model_name_or_path` is null was merged onto the default model with exit 0
(and a card saying "merged into `None`"), and `--base` of another shape ended in PEFT's size-mismatch traceback after
the base was loaded. Here the base is named (or one line), resolved like any model (recipes/shared/model.py), and every
`lora_A`/`lora_B` matrix of the adapter is compared with the weight of the module it adapts, from the safetensors
headers of both (no tensor is read): one line names the first mismatch.
"""
from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Any

from common.errors import TaseError

PREFIX = "base_model.model."  # PEFT's key prefix in adapter_model.safetensors


def header_shapes(path: Path) -> dict[str, list[int]]:
    """tensor name -> shape, from a safetensors file's JSON header (8-byte length, then the header)."""
    try:
        with open(path, "rb") as f:
            (n,) = struct.unpack("<Q", f.read(8))
            header = json.loads(f.read(n))
    except (OSError, ValueError, struct.error) as e:
        raise TaseError(f"{path}: cannot read its safetensors header ({e})") from None
    return {k: v["shape"] for k, v in header.items() if k != "__metadata__" and isinstance(v, dict) and "shape" in v}


def base_shapes(folder: Path) -> dict[str, list[int]] | None:
    """Every weight's shape in a model folder (one or sharded safetensors files); None without safetensors weights
    (a pickle-only base taken with --allow-pickle-weights: its shapes are not read without unpickling)."""
    files = sorted(folder.glob("*.safetensors"))
    if not files:
        return None
    out: dict[str, list[int]] = {}
    for f in files:
        out.update(header_shapes(f))
    return out


def adapter_base(ckpt: Path, base: str | None) -> str:
    """The base model an adapter is merged into: `--base`, else adapter_config.json's base_model_name_or_path; one
    line where neither names one."""
    if base:
        return base
    try:
        cfg: Any = json.loads((ckpt / "adapter_config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise TaseError(f"{ckpt / 'adapter_config.json'}: cannot read it ({e})") from None
    named = cfg.get("base_model_name_or_path") if isinstance(cfg, dict) else None
    if not isinstance(named, str) or not named.strip():
        raise TaseError(f"{ckpt / 'adapter_config.json'}: base_model_name_or_path is {json.dumps(named)[:60]}, so the "
                        f"adapter does not say which model it was trained on; pass --base MODEL (that model's folder)")
    return named


def shape_mismatch(adapter: dict[str, list[int]], base: dict[str, list[int]]) -> str | None:
    """The first adapter matrix that does not fit the base weight it adapts, in words, or None. lora_A is (r, in),
    lora_B (out, r); the base Linear weight is (out, in)."""
    for key in sorted(adapter):
        for part, dim, side in ((".lora_A.weight", 1, "input"), (".lora_B.weight", 0, "output")):
            if not key.endswith(part):
                continue
            module = key.removeprefix(PREFIX).removesuffix(part)
            target = base.get(module + ".weight") or base.get(module + ".base_layer.weight")
            if target is None:
                return f"the adapter changes {module}, which the base model has no weight for"
            if len(target) != 2 or target[dim] != adapter[key][dim]:
                return (f"the adapter's {module} has {side} size {adapter[key][dim]}, the base model's "
                        f"{module}.weight has shape {target}")
    return None


def check_adapter(ckpt: Path, base: str | None, allow_pickle_weights: bool) -> tuple[str, str]:
    """(base as named, its local folder) for merging the adapter at `ckpt`; one line where the base is not named, does
    not resolve, or has another shape than the adapter was trained on."""
    from recipes.shared.model import resolve

    named = adapter_base(ckpt, base)
    path = resolve(named, allow_pickle_weights)
    shapes = base_shapes(Path(path))
    adapter_files = sorted(ckpt.glob("adapter_model*.safetensors"))
    if shapes is not None and adapter_files:
        adapter: dict[str, list[int]] = {}
        for f in adapter_files:
            adapter.update(header_shapes(f))
        why = shape_mismatch(adapter, shapes)
        if why:
            raise TaseError(f"{ckpt}: does not fit the base model {named}: {why} (a base of another size; pass --base "
                            f"with the model it was trained on)")
    return named, path
