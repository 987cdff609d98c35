"""GRPO options: TrlParser over TaseArgs, TRL's GRPOConfig (AsyncGRPOConfig with `trainer: async`) and
ModelConfig, with the checks that run before it (GPU count, integer ranges TRL divides by, options the async
trainer lacks) and after it (model, data, benchmarks to exclude, output folder), each a one-line error."""
from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

from recipes.config import TaseArgs, parse_config, read_yaml
from recipes.errors import fail
from recipes.run_dir import check_output_dir


def parse(argv: list[str] | None = None, default_config: str | None = None):
    from trl import GRPOConfig, ModelConfig

    argv = list(sys.argv[1:] if argv is None else argv)
    if default_config and "--config" not in argv:
        argv = ["--config", default_config, *argv]
    dry = any(a in ("--dry-run", "--dry_run") for a in argv)
    if dry:  # validation of bf16/GPU settings would stop a dry run on a CPU machine
        argv += ["--use_cpu", "true"]
    else:
        need = int(peek(argv, "min_gpus") or 0)
        if str(peek(argv, "trainer") or "sync") == "async":  # the vLLM server's GPUs are not the trainer's
            need -= int(peek(argv, "vllm_gpus") or 0)
        import torch

        if torch.cuda.device_count() < need:
            fail(f"this recipe needs {need} CUDA GPUs and {torch.cuda.device_count()} are visible; use --dry-run to "
                 "inspect the configuration, or a smaller recipe (recipes/configs/grpo_smollm2_*.yaml)")
        if not torch.cuda.is_available() and "use_cpu" not in given_options(argv):
            argv += ["--use_cpu", "true"]  # gloo for several processes (recipes/distributed.py says why)
    check_ranges(argv)
    trainer = str(peek(argv, "trainer") or "sync")
    if trainer not in ("sync", "async"):
        fail(f"trainer must be sync or async, got {trainer!r}")
    if trainer == "async":
        from trl.experimental.async_grpo import AsyncGRPOConfig

        check_async_options(argv)
        tase, cfg, model_args = parse_config((TaseArgs, AsyncGRPOConfig, async_model_config()), argv)
    else:
        tase, cfg, model_args = parse_config((TaseArgs, GRPOConfig, ModelConfig), argv)
    return tase, cfg, model_args


ASYNC_REFUSED = {  # ModelConfig options AsyncGRPOTrainer does not take (why, in one line)
    "attn_implementation": "AsyncGRPOTrainer always packs samples into a prefix tree run by its own tree attention "
                           "(FlashAttention-3 on CUDA, recipes/async_patches.py on CPU)",
}


def async_model_config() -> type:
    """TRL's ModelConfig without `dtype`, which AsyncGRPOConfig owns (both in one TrlParser clash on --dtype)."""
    import dataclasses

    from trl import ModelConfig

    fields = []
    for f in dataclasses.fields(ModelConfig):
        if f.name == "dtype":
            continue
        kw = {"metadata": f.metadata}
        if f.default is not dataclasses.MISSING:
            kw["default"] = f.default
        elif f.default_factory is not dataclasses.MISSING:
            kw["default_factory"] = f.default_factory
        fields.append((f.name, f.type, dataclasses.field(**kw)))
    return dataclasses.make_dataclass("AsyncModelConfig", fields)


def config_mapping(argv: list[str]) -> dict:
    """The --config YAML as a mapping, read before full parsing; a file that is not UTF-8, not YAML or not
    a mapping (a list) is one line naming it, as recipes.config.check_config_types says it later."""
    if argv.index("--config") + 1 >= len(argv):
        fail("--config needs a file")
    path = argv[argv.index("--config") + 1]
    data = read_yaml(path) or {}
    if not isinstance(data, dict):
        fail(f"--config {path}: must be a YAML mapping of option: value")
    return data


RANGES = {"num_generations": 2, "per_device_train_batch_size": 1, "gradient_accumulation_steps": 1,
          "generation_batch_size": 1, "steps_per_generation": 1}  # option -> lowest value


def check_ranges(argv: list[str]) -> None:
    """Integer options that GRPOConfig divides by (num_generations 0 was a ZeroDivisionError inside TRL),
    checked in one line before TrlParser builds the config; values that are not integers are left to it."""
    for key, low in RANGES.items():
        v = peek(argv, key)
        try:
            v = int(v) if v is not None and not isinstance(v, bool) else None
        except (TypeError, ValueError):
            continue
        if v is not None and v < low:
            why = " (GRPO compares completions of one prompt)" if key == "num_generations" else ""
            fail(f"{key} must be >= {low}{why}, got {v}")


def given_options(argv: list[str]) -> set[str]:
    """Option names set on the command line or in the --config YAML."""
    keys = {a[2:].split("=")[0].replace("-", "_") for a in argv if a.startswith("--")}
    if "--config" in argv:
        data = config_mapping(argv)
        keys |= {str(k) for k in data}
    return keys


def check_async_options(argv: list[str]) -> None:
    """trainer: async takes TRL's AsyncGRPOConfig: a GRPOConfig option it lacks is one line, not argparse's usage."""
    import dataclasses

    from trl import GRPOConfig
    from trl.experimental.async_grpo import AsyncGRPOConfig

    only_sync = {f.name for f in dataclasses.fields(GRPOConfig)} - {f.name for f in dataclasses.fields(AsyncGRPOConfig)}
    bad = sorted(given_options(argv) & (only_sync | set(ASYNC_REFUSED)))
    if bad:
        why = "; ".join(f"{k}: {ASYNC_REFUSED[k]}" for k in bad if k in ASYNC_REFUSED)
        fail(f"trainer: async does not support {', '.join(bad)} (TRL's AsyncGRPOConfig has no such option"
             + (f"; {why}" if why else "") + "); remove it or use trainer: sync. Reward weights: use format_weight")


def peek(argv: list[str], key: str) -> Any:
    """A value from the command line or the --config YAML, before full parsing."""
    for flag in (f"--{key}", f"--{key.replace('_', '-')}"):
        if flag in argv and argv.index(flag) + 1 < len(argv):
            return argv[argv.index(flag) + 1]
        for a in argv:  # --key=value
            if a.startswith(flag + "="):
                return a.split("=", 1)[1]
    if "--config" in argv:
        data = config_mapping(argv)
        return data.get(key)
    return None


HUB_ID = re.compile(r"^[\w.-]+/[\w.-]+$")


def check_inputs(tase: TaseArgs, cfg: Any, model_args: Any) -> None:
    """What a run (and a dry run, which otherwise validates nothing) needs, checked before any work, in one
    line each: GRPO's group size, a model that exists, the training data and benchmarks to exclude, and a
    writable output folder."""
    model = model_args.model_name_or_path
    if model and str(model) not in ("default", "smollm2", "SmolLM2-135M-Instruct"):
        p = Path(model).expanduser()
        if not p.exists() and not (HUB_ID.match(str(model)) and not str(model).startswith((".", "/"))):
            fail(f"model_name_or_path {model}: no such model folder or GGUF file")
        if p.is_dir() and not (p / "config.json").is_file():
            fail(f"model_name_or_path {model}: not a Hugging Face model folder (no config.json)")
    if tase.train_data != "synth" and not Path(tase.train_data).is_file():
        fail(f"train_data {tase.train_data}: no such file (use 'synth' or a .jsonl of records)")
    for spec in tase.exclude:
        if not Path(spec.removeprefix("official:")).exists():
            fail(f"exclude {spec}: no such file or folder")
    check_output_dir(cfg.output_dir)
    check_training_inputs(tase, cfg)


def check_training_inputs(tase: TaseArgs, cfg: Any) -> None:
    """What the trainer would otherwise find out once it started (issue 36), so that a dry run checks it too:
    streaming without max_steps, reward names, weights and their count, sampling settings transformers rejects
    with a traceback and values it takes without a word (config.TRAINER_RANGES), and a train_data file's rows (the ones the run reads: up to num_train_examples), each
    one line."""
    import math

    from recipes.config import check_trainer_ranges, reward_names

    if tase.streaming and cfg.max_steps <= 0:
        fail("streaming: true needs --max_steps (an endless dataset has no epochs)")
    from recipes.reward_funcs import load_reward_funcs

    names = reward_names(tase)
    load_reward_funcs(names)  # ours by name or any import path; an unknown one: one line
    given = getattr(cfg, "reward_weights", None)
    if given:
        if len(given) != len(names):
            fail(f"reward_weights has {len(given)} values for {len(names)} reward functions ({', '.join(names)})")
        if not all(math.isfinite(w) for w in given):
            fail(f"reward_weights must be finite numbers, got {given}")
    check_trainer_ranges(tase, cfg)
    if tase.train_data != "synth":
        from common.readers import DataError
        from synth.readers import load_data

        n = 0
        try:
            for _ in load_data(tase.train_data):
                n += 1
                if n >= tase.num_train_examples:
                    break
        except DataError as e:
            fail(f"train_data: {e}")
        if not n:
            fail(f"train_data {tase.train_data}: holds no records")
