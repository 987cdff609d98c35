"""PEFT options of the recipes (TRL's ModelConfig): LoRA with `use_peft` (TRL's get_peft_config) in GRPO and SFT,
and QLoRA with `load_in_4bit` / `load_in_8bit`, handed to the trainers' `quantization_config` (TRL's
get_quantization_config: bitsandbytes) where it can work, and refused in one line where it cannot (no CUDA, no
bitsandbytes, no adapter to train, the async trainer): never silently trained in full precision instead."""
from __future__ import annotations

import importlib.util
from typing import Any


def quantization_problem(model_args: Any, trainer: str = "sync", use_cpu: bool = False,
                         hardware: bool = True) -> str | None:
    """Why the run's load_in_4bit / load_in_8bit cannot be honoured (one line), or None. `hardware` False (a dry
    run, which inspects a GPU recipe on any machine) checks the options only."""
    q4, q8 = bool(getattr(model_args, "load_in_4bit", False)), bool(getattr(model_args, "load_in_8bit", False))
    if not (q4 or q8):
        return None
    opt = "load_in_4bit" if q4 else "load_in_8bit"
    if q4 and q8:
        return "load_in_4bit and load_in_8bit: choose one"
    if not getattr(model_args, "use_peft", False):
        return (f"{opt} (QLoRA) trains LoRA adapters on frozen quantized weights: add --use_peft true, or remove "
                f"{opt} for a full fine-tune")
    from recipes.features import trainer_kind

    if not trainer_kind(trainer).quantization:
        return (f"trainer: {trainer} does not take {opt} (TRL's AsyncGRPOTrainer has no quantization_config); use "
                "trainer: sync")
    if not hardware:
        return None
    import torch

    if use_cpu or not torch.cuda.is_available():
        return (f"{opt} needs a CUDA GPU (bitsandbytes quantized layers) and this run has none"
                f"{' (use_cpu: true)' if use_cpu and torch.cuda.is_available() else ''}: remove {opt} to train the "
                "LoRA adapter on unquantized weights (--use_peft true alone)")
    if importlib.util.find_spec("bitsandbytes") is None:
        return f"{opt} needs bitsandbytes: pip install bitsandbytes (or remove {opt})"
    return None


def quantization_config(model_args: Any) -> Any:
    """The BitsAndBytesConfig for the trainer (None without load_in_4bit/8bit); quantization_problem has already
    refused what cannot run."""
    if not (getattr(model_args, "load_in_4bit", False) or getattr(model_args, "load_in_8bit", False)):
        return None
    from trl import get_quantization_config

    return get_quantization_config(model_args)
