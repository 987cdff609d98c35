"""vLLM rollouts of a sync run, CPU included: a `vllm serve` without CUDA gets its weights as a safetensors file
(recipes/features/vllm_cpu/server.py), a colocated CPU engine through vLLM's reload API
(recipes/features/vllm_cpu/colocate.py); one line says how the run generates and syncs. A colocated CPU engine runs
eager (recipes/features/vllm_cpu/colocate.eager_on_cpu): TRL would have it compile the model at the first rollout."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from recipes.features.contract import ASYNC, SYNC, Feature, Run, TrainerKind
from recipes.features.vllm_cpu.colocate import reload_sync as reload_sync  # public: the async trainer's weight transfer


@dataclass
class VllmCpuOptions:
    vllm_reload_sync: str = field(default="auto", metadata={
        "help": "colocated vLLM weight sync through vLLM's reload API (recipes/features/vllm_cpu/colocate.py): auto "
                "(CPU engines, where TRL's load_weights sync fails), always, never",
        "choices": ["auto", "always", "never"]})


class VllmCpu(Feature):
    name = "vllm_cpu"
    options = VllmCpuOptions
    after = "min_gpus"
    trainers = frozenset({SYNC, ASYNC})
    hooks = {ASYNC: ()}
    native = {ASYNC: "weights reach vLLM by the trainer's own path: over gloo into vLLM's reload API on the CPU engine "
                     "(recipes/async_grpo/gloo_transfer.py), over NCCL to a server"}

    def check_enabled(self, args: Any, kind: TrainerKind | None) -> None:
        if kind and kind.rollout_worker and args.vllm_reload_sync != "auto":
            raise ValueError(f"vllm_reload_sync {args.vllm_reload_sync}: trainer: async picks its weight path "
                             "itself (gloo into vLLM's reload API on the CPU engine, NCCL to a server); the option is "
                             "sync's (remove it)")

    def setup(self, run: Run) -> Any:
        from recipes.features.vllm_cpu import server as vllm_server_cpu

        cfg = run.cfg
        return (cfg.use_vllm and cfg.vllm_mode == "server"
                and vllm_server_cpu.install(Path(cfg.output_dir) / "vllm-sync"))

    def trainer_class(self, base: type, run: Run) -> type:
        if not (run.cfg.use_vllm and run.cfg.vllm_mode == "colocate"):
            return base
        from recipes.features.vllm_cpu.colocate import eager_on_cpu

        class EagerCpuEngine(base):  # type: ignore[misc, valid-type]
            """The trainer whose colocated engine (built in TRL's __init__) runs eager on CPU."""

            def __init__(self, *args: Any, **kwargs: Any) -> None:
                with eager_on_cpu():
                    super().__init__(*args, **kwargs)

        return EagerCpuEngine

    def after_build(self, trainer: Any, run: Run) -> None:
        """One line: how a sync run generates and syncs weights (choosing vLLM's reload API where it applies)."""
        if run.state.get(self.name):
            trainer.accelerator.print("rollouts: vLLM server without CUDA; weight sync every step: safetensors file + "
                                      "/collective_rpc tase_reload_weights (recipes/features/vllm_cpu/server.py)")
        elif run.cfg.use_vllm:
            from recipes.features.vllm_cpu.colocate import use_reload_sync

            how = "vLLM reload API" if use_reload_sync(trainer, run.args.vllm_reload_sync) else "TRL load_weights"
            llm = getattr(getattr(trainer, "vllm_generation", None), "llm", None)
            eager = ", eager" if llm is not None and llm.llm_engine.model_config.enforce_eager else ""
            trainer.accelerator.print(f"rollouts: vLLM {run.cfg.vllm_mode}{eager}; weight sync every step: {how}")
        else:
            trainer.accelerator.print("rollouts: transformers generate")

    def after_train(self, trainer: Any, run: Run) -> None:
        if run.state.get(self.name):  # TRL syncs before each generation; the server gets the last step's weights too
            trainer.vllm_generation.sync_weights()


FEATURE = VllmCpu()
