"""What a GRPO run would do, printed by --dry-run without loading weights: the resolved configuration, the
effective batch, the training length, the async generation/training split and the per-GPU memory estimate."""
from __future__ import annotations

import math
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from recipes import features
from recipes.shared.config import TaseArgs

if TYPE_CHECKING:
    from recipes.grpo_core.reward_funcs import ResolvedRewards

# nvidia-smi peak minus DeepSpeed's no-offload model-state estimate, sync paper recipe with transformers generation of
# 16 x 256 tokens, one H200 (docs/results/gpu_memory_table.json): +5.9 (0.5B), +9.8 (1.5B), +5.6 (3B), -0.9 GiB (7B)
MEASURED_OVERHEAD_GIB = 6.0


def zero3_model_states(total: int, largest: int, n_gpus: int, optimizer_offload: bool) -> tuple[float, float]:
    """DeepSpeed's ZeRO-3 model-state estimate in GiB, (host, per GPU), for parameters on the GPU with zero_init: the
    row `--dry_run` builds its planning figure on, and bench/gpu_memory_table.py's offload plan. ImportError
    without deepspeed."""
    from deepspeed.runtime.zero.stage3 import estimate_zero3_model_states_mem_needs

    cpu, gpu, _ = estimate_zero3_model_states_mem_needs(int(total), int(largest), num_gpus_per_node=n_gpus, num_nodes=1,
                                                        cpu_offload=optimizer_offload, cpu_offload_params=False,
                                                        zero_init=True)
    return cpu / 2**30, gpu / 2**30


def world_size() -> int:
    return int(os.environ.get("WORLD_SIZE", "1"))


def memory_estimate(model: str, n_gpus: int) -> str:
    """Per-GPU ZeRO-3 model-state memory: DeepSpeed's own estimator when installed, else 18 B/param."""
    from common.models import hub_snapshot, is_hub_id
    from recipes.grpo_core.model_shapes import known_config, param_counts

    total, largest = None, None
    if is_hub_id(model) and not Path(model).exists():  # the cache's config.json, else the known shape (no weights)
        snap, shape = hub_snapshot(model), known_config(model)
        if snap is not None:
            model = str(snap)
        elif shape is not None:
            total, largest = param_counts(shape)
    if total is None and (model == "default" or model.endswith(".gguf")):
        from common.models import ModelError, resolve_model

        try:  # the embedded GGUF is rebuilt once into a cached folder (~30 s the first time)
            model = str(resolve_model(model))
        except ModelError as e:
            return f"memory estimate unavailable ({e})"
    if total is None and Path(model).is_dir():
        try:
            import torch
            from accelerate import init_empty_weights
            from transformers import AutoConfig, AutoModelForCausalLM

            with init_empty_weights():
                m = AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(model), dtype=torch.bfloat16)
            m.tie_weights()  # not applied under init_empty_weights; untied counts the embedding twice
            total = sum(p.numel() for p in m.parameters())
            largest = max(p.numel() for p in m.parameters())
        except Exception as e:  # noqa: BLE001
            return f"memory estimate unavailable ({type(e).__name__})"
    if total is None:
        return "memory estimate unavailable (unknown model size)"
    try:
        import io
        from contextlib import redirect_stdout

        from deepspeed.runtime.zero.stage3 import estimate_zero3_model_states_mem_needs_all_cold

        buf = io.StringIO()
        with redirect_stdout(buf):
            estimate_zero3_model_states_mem_needs_all_cold(int(total), int(largest), num_gpus_per_node=n_gpus,
                                                           num_nodes=1)
        _, gpu = zero3_model_states(total, largest, n_gpus, optimizer_offload=False)
        return ("DeepSpeed ZeRO-3 estimator:\n" + buf.getvalue().strip() + "\nrecipes/accelerate/zero3.yaml is the "
                "offload_param=none, offload_optimizer=none, zero_init=1 row; add activations and the vLLM cache\n"
                f"planning figure: ~{gpu + MEASURED_OVERHEAD_GIB:.1f} GiB/GPU at peak (that row + "
                f"{MEASURED_OVERHEAD_GIB:g} GiB for the CUDA context, the allocator's cache and activations: within "
                "12% of nvidia-smi at 0.5B-7B on one H200, docs/results/gpu_memory_table.json); plus the vLLM cache "
                "when colocated; optimizer offload needs the per-CPU column in host RAM")
    except ImportError as e:
        why = ("install .[gpu]" if isinstance(e, ModuleNotFoundError) and e.name == "deepspeed"
               else f"deepspeed unusable: {e}")
        per_gpu = 18 * total / n_gpus / 2**30
        return (f"~{per_gpu:.1f} GiB/GPU of model states on {n_gpus} GPUs (18 bytes/param: bf16 params+grads, "
                f"fp32 Adam states; {why} for DeepSpeed's own estimator), plus activations and vLLM cache")


def batch_line(completions: int, generations: int | None) -> str:
    """TRL counts GRPO batches in completions: G completions of each prompt share a batch."""
    if not generations:
        return f"{completions} completions/step"
    return f"{completions} completions/step ({completions // generations} prompts x {generations} generations)"


def dry_run(tase: TaseArgs, cfg: Any, model_args: Any, rewards: ResolvedRewards) -> None:
    """The plan, printed: the options, the rewards as resolved (grpo_args.validate), batch, length and memory."""
    import yaml

    n = max(world_size(), 1)
    eff = cfg.per_device_train_batch_size * cfg.gradient_accumulation_steps * n
    model = model_args.model_name_or_path or "default"
    out = {
        "tase": {k: getattr(tase, k) for k in tase.__dataclass_fields__},
        "model": {k: getattr(model_args, k, getattr(cfg, k, None))
                  for k in ("model_name_or_path", "dtype", "attn_implementation", "use_peft", "load_in_4bit",
                            "load_in_8bit")},
        "training": {k: getattr(cfg, k) for k in (
            "output_dir", "per_device_train_batch_size", "gradient_accumulation_steps", "num_train_epochs",
            "max_steps", "learning_rate", "lr_scheduler_type", "warmup_steps", "seed", "bf16", "use_liger_kernel",
            "gradient_checkpointing", "save_steps", "logging_steps", "num_generations", "max_completion_length",
            "use_vllm", "vllm_mode", "vllm_max_model_length", "beta", "loss_type", "reward_weights", "temperature",
            "dtype", "vllm_server_base_url", "max_staleness", "weight_sync_steps", "max_inflight_tasks",
            "token_budget", "report_to", "scale_rewards", "importance_sampling_level", "epsilon", "epsilon_high",
            "mask_truncated_completions", "weight_sync_timeout") if hasattr(cfg, k)},
        "rewards": rewards.names,
    }
    def plain(v: Any) -> Any:  # enums (SchedulerType, ...) -> their values
        if isinstance(v, dict):
            return {k: plain(x) for k, x in v.items()}
        if isinstance(v, (list, tuple)):
            return [plain(x) for x in v]
        import enum

        return v.value if isinstance(v, enum.Enum) else v

    print(yaml.safe_dump(plain(out), sort_keys=False, allow_unicode=True).rstrip())
    print(f"effective batch: {cfg.per_device_train_batch_size} per device x {cfg.gradient_accumulation_steps} "
          f"accumulation x {n} process(es) = {batch_line(eff, cfg.num_generations)}")
    kind = features.trainer_kind(tase.trainer)
    gpus = n if n > 1 else max(tase.min_gpus - (tase.vllm_gpus if kind.rollout_worker else 0), 1)
    per_step = cfg.per_device_train_batch_size * cfg.gradient_accumulation_steps * gpus
    if n == 1 and gpus > 1:
        print(f"on {gpus} GPUs ({kind.launcher}): {batch_line(per_step, cfg.num_generations)}")
    if cfg.max_steps > 0:
        print(f"training length: max_steps {cfg.max_steps}")
    elif not tase.streaming and cfg.num_generations:
        prompts = per_step // cfg.num_generations
        # transformers: ceil(epochs x steps per epoch), a fractional epoch included (int() made 0.5 epochs "~0")
        steps = math.ceil(cfg.num_train_epochs * -(-tase.num_train_examples // max(prompts, 1)))
        print(f"training length: ~{steps} optimizer steps on {gpus} GPU(s) ({tase.num_train_examples} prompts x "
              f"{cfg.num_train_epochs:g} epochs / {prompts} prompts per step), a checkpoint every {cfg.save_steps:g}")
    if kind.rollout_worker:
        print(async_split(tase, cfg, n))
        print(memory_estimate(model, max(n, tase.min_gpus - tase.vllm_gpus, 1)).replace(
            "DeepSpeed ZeRO-3 estimator", "DeepSpeed ZeRO-3 estimator (FSDP2 full sharding holds the same model "
            "states)").replace("recipes/accelerate/zero3.yaml is the", "the"))
    else:
        print(memory_estimate(model, max(n, tase.min_gpus, 1)))
    for line in features.dry_run_lines(features.Run(tase, cfg, model_args, trainer=tase.trainer, rewards=rewards,
                                                    processes=n)):
        print(line)  # what each feature would do (recipes/features/: dry_run_line)


def async_split(tase: TaseArgs, cfg: Any, n_procs: int) -> str:
    """Where generation and training run under trainer: async, and how far the policy may lag."""
    total = max(tase.min_gpus, n_procs + tase.vllm_gpus, 1)
    v = tase.vllm_gpus
    train = total - v if n_procs == 1 else n_procs
    gen = ("on CPU: an in-process vLLM engine in the rollout process (recipes/async_grpo/cpu_engine.py), weights over "
           "gloo" if tase.async_generation == "cpu_engine" else
           f"vLLM server at {cfg.vllm_server_base_url} on GPU(s) {_gpu_range(0, v)} of the node (launch/local.sh "
           "--async; launch/slurm/grpo.sbatch --async gives it a node of its own), weights over NCCL "
           "(--weight-transfer-config '{\"backend\":\"nccl\"}')" if v else
           f"vLLM server at {cfg.vllm_server_base_url} (started separately), weights over NCCL")
    return (f"async split: generation {gen}; training on GPU(s) {_gpu_range(v, v + train)} "
            f"({train} FSDP2 process(es), recipes/accelerate/fsdp2.yaml); max_staleness {cfg.max_staleness} "
            f"(a sample more than {cfg.max_staleness} weight syncs old is dropped), weight sync every "
            f"{cfg.weight_sync_steps} optimizer step(s), max_inflight_tasks "
            f"{cfg.max_inflight_tasks if cfg.max_inflight_tasks > 0 else 'auto (max_staleness x samples per step)'}")


def _gpu_range(a: int, b: int) -> str:
    return f"{a}" if b - a == 1 else f"{a}-{b - 1}"
