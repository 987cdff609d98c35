"""GRPO's options, read once (recipes/shared/parser.py): TaseArgs beside TRL's GRPOConfig (AsyncGRPOConfig with
`trainer: async`) and ModelConfig, as open-r1 sets its script options beside TRL's. The config classes are TRL's own
with one addition, a __post_init__ that checks the integers GRPOConfig divides by; everything a run needs from its
inputs is `validate`, called by a dry run exactly as by a real start. Every problem is one TaseError line."""
from __future__ import annotations

import functools
import sys
from pathlib import Path
from typing import Any

from common.errors import TaseError
from recipes import features
from recipes.grpo_core.reward_funcs import ResolvedRewards, resolve_rewards
from recipes.shared.config import TaseArgs, check_trainer_ranges
from recipes.shared.parser import ConfigFile, RecipeParser
from recipes.shared.run_dir import check_output_dir


def parse(argv: list[str] | None = None, default_config: str | None = None) -> tuple[TaseArgs, Any, Any]:
    """(TaseArgs, the trainer's config, ModelConfig) from the command line and its --config YAML. Three options
    are looked up before the parser exists, as a launcher would: `trainer` picks the config class (a route, like
    a subcommand), and a real start checks `min_gpus` (less `vllm_gpus` under async) against the machine. A dry
    run, or a machine without CUDA where use_cpu is not set, parses with use_cpu true (GRPOConfig would refuse
    bf16 on CPU)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if default_config and "--config" not in argv:
        argv = ["--config", default_config, *argv]
    dry = any(a in ("--dry-run", "--dry_run") for a in argv)
    if dry:  # validation of bf16/GPU settings would stop a dry run on a CPU machine
        argv += ["--use_cpu", "true"]
    config = ConfigFile(argv)
    route = functools.partial(_route, config)
    features.overlay(config, route)  # a preset's options over the YAML's, under the command line
    if not dry:
        import torch

        if not {"-h", "--help"} & set(argv):
            check_gpus(config)  # before the parser imports TRL: the refusal is the only line on stderr
        if not torch.cuda.is_available() and "use_cpu" not in config.given():
            # gloo for several processes (recipes/grpo_core/distributed.py says why)
            config.argv += ["--use_cpu", "true"]
    trainer = str(_route(config, "trainer") or features.SYNC)
    if trainer not in features.GRPO_TRAINERS:
        raise TaseError(f"trainer must be {' or '.join(features.GRPO_TRAINERS)}, got {trainer!r}")
    if features.trainer_kind(trainer).rollout_worker:
        from recipes.async_grpo.options import check_async_options
        from recipes.async_grpo.trl_checks import check_trl_version

        check_trl_version()  # outside the tested TRL range: one line (older refused, newer warned)
        check_async_options(config.given())
    if line := features.given_problem(config.given(), trainer):  # a feature's option the trainer would not use
        raise TaseError(line)
    config.argv += features.argv(config, route, trainer)  # e.g. cpu_bf16's resolved --bf16
    from recipes.shared.config import option_section

    return RecipeParser(config_types(trainer), prog="python recipes/grpo.py", section=option_section,
                        description=HELP).parse(config)


HELP = ("GRPO on TASE tasks with TRL's GRPOTrainer (trainer: async, TRL's AsyncGRPOTrainer). Options: ours (data, "
        "rewards, run, each feature's), then TRL's and transformers' own (docs/training.md).")


def _route(config: ConfigFile, key: str) -> Any:
    """One option's value (command line over YAML) before the parser exists (parse says which and why)."""
    import argparse

    p = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    p.add_argument(f"--{key}", f"--{key.replace('_', '-')}", dest=key, default=config.values.get(key))
    return p.parse_known_args(config.argv)[0].__dict__[key]


RANGES = {"num_generations": 2, "per_device_train_batch_size": 1, "gradient_accumulation_steps": 1,
          "generation_batch_size": 1, "steps_per_generation": 1}  # option -> lowest value


def check_ranges(cfg: Any) -> None:
    """Integer options that GRPOConfig divides by (num_generations 0 was a ZeroDivisionError inside TRL), checked
    before its own __post_init__ runs; a ValueError, which the parser turns into its one line."""
    for key, low in RANGES.items():
        v = getattr(cfg, key, None)
        if isinstance(v, int) and not isinstance(v, bool) and v < low:
            why = " (GRPO compares completions of one prompt)" if key == "num_generations" else ""
            raise ValueError(f"{key} must be >= {low}{why}, got {v}")


CONFIG_CLASSES = {k: features.trainer_kind(k).config_class for k in features.GRPO_TRAINERS}


def config_types(trainer: str) -> tuple[type, type, type]:
    """The dataclasses TrlParser fills: TaseArgs, TRL's config with check_ranges first, and ModelConfig."""
    from trl import ModelConfig

    if features.trainer_kind(trainer).rollout_worker:
        from recipes.async_grpo.options import async_model_config

        return TaseArgs, __getattr__(CONFIG_CLASSES[trainer]), async_model_config()
    return TaseArgs, __getattr__(CONFIG_CLASSES[trainer]), ModelConfig


@functools.cache
def __getattr__(name: str) -> type:
    """TaseGRPOConfig / TaseAsyncGRPOConfig: TRL's GRPOConfig / AsyncGRPOConfig whose __post_init__ runs
    check_ranges first, and nothing else (no fields of their own: the same options, help and to_dict()). Built
    on first use, as importing TRL loads torch (entry points set process settings before that); named here so
    that the Trainer's pickled training_args.bin loads again."""
    if name not in CONFIG_CLASSES.values():
        raise AttributeError(name)
    if name == CONFIG_CLASSES[features.ASYNC]:
        from trl.experimental.async_grpo import AsyncGRPOConfig as base
    else:
        from trl import GRPOConfig as base

    def __post_init__(self) -> None:
        check_ranges(self)
        base.__post_init__(self)

    return type(name, (base,), {"__post_init__": __post_init__, "__doc__": base.__doc__, "__module__": __name__,
                                "__qualname__": name})


def check_gpus(config: ConfigFile) -> None:
    """Enough CUDA GPUs for a real start (a dry run inspects the configuration on any machine); a value that is
    not an integer is left to the parser's own line."""
    import torch

    try:
        need = int(_route(config, "min_gpus") or 0)
        kind = features.TRAINERS.get(str(_route(config, "trainer") or features.SYNC))
        if kind is not None and kind.rollout_worker:  # the vLLM server's GPUs are not the trainer's
            need -= int(_route(config, "vllm_gpus") or 0)
    except (TypeError, ValueError):
        return
    if torch.cuda.device_count() < need:
        raise TaseError(f"this recipe needs {need} CUDA GPUs and {torch.cuda.device_count()} are visible; use "
                        "--dry-run to inspect the configuration, or a smaller recipe "
                        "(recipes/configs/grpo_smollm2_*.yaml)")


def validate(tase: TaseArgs, cfg: Any, model_args: Any) -> ResolvedRewards:
    """What a run needs from its inputs, checked before any work and by a dry run alike (one line, not a failure after
    loading): a model that exists, the training data and benchmarks to exclude, a writable output folder, streaming with
    max_steps, reward names, weights and their count, sampling settings transformers rejects with a traceback and values
    it takes without a word (config.TRAINER_RANGES), a train_data file's rows (the ones the run reads: up to
    num_train_examples), installed trackers and QLoRA options that can be honoured. Returns the run's rewards, resolved
    here once (recipes/grpo_core/reward_funcs.resolve_rewards) for the dry run and the trainer alike."""
    from recipes.shared import adapters

    check_model_and_paths(tase, cfg, model_args)
    if tase.streaming and cfg.max_steps <= 0:
        raise TaseError("streaming: true needs --max_steps (an endless dataset has no epochs)")
    rewards = resolve_rewards(tase, cfg)  # ours by name or any import path; an unknown one, bad weights: one line
    check_trainer_ranges(tase, cfg)
    check_clip(cfg)
    if not features.trainer_kind(tase.trainer).rollout_worker:  # TRL's buffered generation batch (sync GRPO)
        from recipes.grpo_core.generation_batch import check_save_steps

        check_save_steps(cfg)
    from recipes.grpo_core.plan import world_size

    # each feature's checks, with the resolved rewards (the curriculum reads verdicts from a synchronous one)
    features.check(features.Run(tase, cfg, model_args, trainer=tase.trainer, processes=world_size(), rewards=rewards))
    if tase.train_data != "synth":
        check_train_data(tase)
    why = adapters.quantization_problem(model_args, tase.trainer, cfg.use_cpu, hardware=not tase.dry_run)
    if why:  # a dry run checks the QLoRA options, not this machine
        raise TaseError(why)
    return rewards


def check_model_and_paths(tase: TaseArgs, cfg: Any, model_args: Any) -> None:
    """A model that exists (a folder, a GGUF file, a hub id or `default`), train_data and --exclude paths, and
    a writable output folder."""
    model = model_args.model_name_or_path
    if model is not None and not str(model).strip():  # a start would refuse it (common/models.resolve_model)
        raise TaseError(f"model_name_or_path {str(model)!r}: an empty name; give a folder, a .gguf file, a hub id or "
                        "'default'")
    if model and str(model) not in ("default", "smollm2", "SmolLM2-135M-Instruct"):
        from common.models import hub_refusal, hub_snapshot, is_hub_id
        from recipes.grpo_core.model_shapes import fallback_note, known_config

        p: Path | None = Path(model).expanduser()
        if not p.exists() and is_hub_id(str(model)):  # as a real start resolves it (common/models.py): the local cache
            snap = hub_snapshot(str(model))
            if snap is None and tase.dry_run and known_config(str(model)):  # a fresh machine: plan from the shape
                print(fallback_note(str(model)))
                p = None
            elif snap is None and not tase.dry_run and not tase.local_files_only:
                from common.models import hub_offline

                if hub_offline():  # the start would download it: say now that it cannot
                    raise TaseError(f"model_name_or_path {model}: not in the local Hugging Face cache ($HF_HOME/hub) "
                                    f"and HF_HUB_OFFLINE is set: download it where the hub is reachable (`hf download "
                                    f"{model}`) or unset HF_HUB_OFFLINE")
                p = None  # the real start downloads it (common/models.download_hub_model)
            elif snap is None:
                raise TaseError(f"model_name_or_path {hub_refusal(str(model))}")
            else:
                p = snap
        if p is None:  # planned from the known shape: no folder to check
            pass
        elif not p.exists():
            raise TaseError(f"model_name_or_path {model}: no such model folder or GGUF file")
        elif p.is_dir() and not (p / "config.json").is_file():
            raise TaseError(f"model_name_or_path {model}: not a Hugging Face model folder (no config.json)")
        elif p.is_dir():
            # the real start's checks of a folder (recipes/shared/model.py): safetensors weights, whole files
            from recipes.shared.model import resolve

            resolve(str(p), tase.allow_pickle_weights)
    if tase.train_data != "synth" and not Path(tase.train_data).is_file():
        raise TaseError(f"train_data {tase.train_data}: no such file (use 'synth' or a .jsonl of records)")
    for spec in tase.exclude:
        if not Path(spec.removeprefix("official:")).exists():
            raise TaseError(f"exclude {spec}: no such file or folder")
        check_exclude(spec)
    check_output_dir(cfg.output_dir)


def check_exclude(spec: str) -> None:
    """An --exclude the real start's guard can read (synth.guard.guard_from_specs reads it whole there): its first
    record read now, as load_data reads it, so a dry run refuses `official:/etc` (no tasks/ folder) or a
    conversational JSONL (no records) as the real start does."""
    from common.readers import DataError
    from synth.readers import load_data

    try:
        next(iter(load_data(spec)), None)
    except DataError as e:
        raise TaseError(f"exclude {spec}: {e}") from None


def check_clip(cfg: Any) -> None:
    """epsilon_high (clip-higher, DAPO) below epsilon is no clip range: a preset's epsilon_high with an explicit
    --epsilon (gspo's 4e-4 under --epsilon 1e-3) left the upper bound below the lower one, with no word."""
    eps, high = getattr(cfg, "epsilon", None), getattr(cfg, "epsilon_high", None)
    if isinstance(eps, (int, float)) and isinstance(high, (int, float)) and high < eps:
        raise TaseError(f"epsilon_high {high:g} is below epsilon {eps:g} (a preset may have set one of them): give "
                        "--epsilon_high >= epsilon too")


def check_train_data(tase: TaseArgs) -> None:
    """The rows of a train_data file that the run reads (up to num_train_examples) are records."""
    from common.readers import DataError
    from synth.readers import load_data

    n = 0
    try:
        for _ in load_data(tase.train_data):
            n += 1
            if n >= tase.num_train_examples:
                break
    except DataError as e:
        raise TaseError(f"train_data: {e}") from None
    if not n:
        raise TaseError(f"train_data {tase.train_data}: holds no records")
