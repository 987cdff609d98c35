"""Colocated vLLM weight sync through vLLM's public in-place reload API, for CPU engines.

Why: TRL 1.16 pushes the policy into a colocated engine with `model.load_weights([(name, param)])`. vLLM's CPU
backend repacks the linear weights after loading (new Parameters, without `weight_loader`), so the first sync
fails with `AttributeError: 'Parameter' object has no attribute 'weight_loader'`. vLLM's worker method
`reload_weights(weights_iterator, is_checkpoint_format=True)` (reached with the public `LLM.collective_rpc`)
restores the checkpoint-format layers, loads the new tensors and re-runs the post-load processing (the
repacking), which is what an RL weight update needs. It takes ~0.3 s for SmolLM2-135M on 2 CPU cores.

How: `use_reload_sync(trainer)` gives the trainer's `VLLMGeneration` object this subclass, which overrides only
`sync_weights` and still reads the weights through TRL's own iterator (PEFT merge, ZeRO-3 gathering). It is
applied on CPU engines only (`mode="auto"`); CUDA engines keep TRL's path. Upstreamable as-is: the override
is the whole change TRL would need (`sync_weights` calling `collective_rpc("reload_weights", ...)`).
"""
from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any


def refresh_tied_head(worker: Any) -> None:
    """Re-pack a tied LM head after an in-place reload (a vLLM worker method, run through `collective_rpc`).

    On CPU vLLM packs the LM head's weight for its GEMM after loading (`UnquantizedEmbeddingMethod.
    process_weights_after_loading` -> `dispatch_cpu_unquantized_gemm`). With tied embeddings `reload_weights` updates
    `embed_tokens` and skips `lm_head.weight`, so the packed head keeps the old embedding: measured on a 2-layer
    Llama, the served log-probs after a reload were those of the new body with the initial head. Re-running the
    head's post-load step packs the shared, updated weight."""
    model = worker.model_runner.get_model()
    head = getattr(model, "lm_head", None)
    tied = getattr(getattr(model, "config", None), "tie_word_embeddings", False)
    if head is not None and tied and getattr(head, "quant_method", None) is not None:
        head.quant_method.process_weights_after_loading(head)


def reload_sync(llm: Any, named_weights: Any) -> None:
    """Load `(name, tensor)` pairs (checkpoint names) into a colocated `vllm.LLM` and drop its prefix cache.

    The iterator is consumed in this process: colocate engines run their worker in-process
    (`external_launcher`, or `VLLM_ENABLE_V1_MULTIPROCESSING=0`)."""
    llm.collective_rpc("reload_weights", kwargs={"weights_iterator": iter(named_weights),
                                                 "is_checkpoint_format": True})
    llm.collective_rpc(refresh_tied_head)  # a tied LM head keeps its old packed copy otherwise
    llm.reset_prefix_cache()  # cached KV blocks were computed with the old weights


def _reload_class() -> type:
    from trl.generation.vllm_generation import VLLMGeneration

    class ReloadSyncVLLMGeneration(VLLMGeneration):
        """TRL's colocated generator with `sync_weights` going through vLLM's reload API."""

        def sync_weights(self) -> None:
            if self.mode != "colocate":
                return super().sync_weights()
            reload_sync(self.llm, self._iter_named_params())

    return ReloadSyncVLLMGeneration


@contextlib.contextmanager
def eager_on_cpu() -> Iterator[None]:
    """A colocated engine TRL builds inside the block runs eager (`enforce_eager=True`) when the platform is a CPU.

    Why: TRL 1.16 builds its colocated `vllm.LLM` without `enforce_eager`, and on CPU vLLM then compiles the model at
    the first rollout: minutes with inductor, or with `VLLM_CPU_CI_ENV=1` a dynamo trace (first greedy batch 26 s
    instead of 8 s, SmolLM2-135M on 2 cores), for the same tokens and log-probs and no faster batches after (~0.7 s
    either way, tests/vllm_sync_check.py). TRL's own kwargs are kept; the module's `LLM` is restored after."""
    import trl.generation.vllm_generation as vg

    built = getattr(vg, "LLM", None)  # absent where TRL was imported with vLLM hidden (recipes/trl_grpo.py)
    if built is None:
        yield
        return
    from vllm.platforms import current_platform

    if not current_platform.is_cpu():
        yield
        return

    def eager_llm(*args: Any, **kwargs: Any) -> Any:
        kwargs.setdefault("enforce_eager", True)
        return built(*args, **kwargs)

    vg.LLM = eager_llm
    try:
        yield
    finally:
        vg.LLM = built


def use_reload_sync(trainer: Any, mode: str = "auto") -> bool:
    """Switch a GRPOTrainer's colocated vLLM sync to `reload_sync`; returns whether it did.

    mode: `auto` (CPU engines only), `always`, `never`."""
    gen = getattr(trainer, "vllm_generation", None)
    if gen is None or getattr(gen, "mode", None) != "colocate" or mode == "never":
        return False
    if mode == "auto":
        from vllm.platforms import current_platform

        if not current_platform.is_cpu():
            return False
    gen.__class__ = _reload_class()
    return True

