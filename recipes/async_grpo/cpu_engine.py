"""Asynchronous GRPO (TRL's `AsyncGRPOTrainer`) on machines without CUDA: three small, replaceable parts.

TRL 1.16's async trainer assumes a CUDA box: its rollout worker talks HTTP to a `vllm serve` that receives weights
over NCCL, and its training forward packs samples into a prefix tree run by a FlashAttention-3 kernel fetched from the
Hub. Its constructor takes `rollout_worker=` and `weight_transfer=`, so the CPU path plugs in there and changes
nothing in TRL or vLLM:

* `EngineRolloutWorker`: TRL's own `AsyncRolloutWorker` (spawned child, tokenization, reward scoring, group
  advantages, queue, heartbeat, metrics) with one override, `_generate_one_turn`: instead of `POST
  /v1/completions` it micro-batches the concurrent requests into an in-process `vllm.LLM` living in the child. The
  child is a separate process, so generation runs beside training, not in turns with it.
* `GlooWeightTransfer` / `GlooWeightReceiver` (recipes/async_grpo/gloo_transfer.py): the trainer's rank 0 broadcasts
  every parameter over a two-member gloo process group (its own TCPStore, apart from any training process group) into
  the child, which loads them with vLLM's in-place reload API (`recipes/features/vllm_cpu/colocate.reload_sync`, the
  same call the colocated CPU path uses) between two generation batches and acknowledges. The broadcast blocks until the
  child reaches a batch boundary, so no batch mixes two policies, and the trainer bumps the policy version only after
  the acknowledgement: a sample is never tagged newer than the weights that produced it. Gloo is TCP, so the same two
  classes would also serve a CPU engine on another host.
* `cpu_tree_attention` (recipes/async_grpo/patches.py, beside the other CPU patches): the tree-packed attention TRL
  computes with FA3's `flash_attn_varlen_func`, written with `torch.nn.functional.scaled_dot_product_attention`, one
  segment at a time (registered only without CUDA).

Why not a vLLM weight-transfer engine registered with `WeightTransferEngineFactory.register_engine`: the factory
registry lives in the engine process, and a `vllm serve` process (and its engine-core child) would have to import
the registration through a pip-installed vLLM plugin; TRL's `WeightTransferClient` also speaks NCCL only, so a
custom trainer side would be needed anyway. Why not `vllm serve` on CPU at all: one more process and an HTTP hop
per completion on a 2-core machine; the in-process engine keeps the async structure (separate generator process,
policy versions, staleness) with the fewest moving parts.
"""
from __future__ import annotations

import asyncio
import json
import os
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from trl.experimental.async_grpo.async_rollout_worker import AsyncRolloutWorker, _AsyncRolloutLoop

from recipes.async_grpo.gloo_transfer import GlooWeightReceiver, GlooWeightTransfer
from recipes.async_grpo.metrics import TaseMetricsLoop
from recipes.async_grpo.patches import use_cpu_tree_attention
from rewards.levels import FINE

# --------------------------------------------------------------------------------------------- rewards (picklable)


class WeightedReward:
    """A reward function times a constant weight. TRL's async worker sums its reward functions with weight 1 (it has
    no `reward_weights`), so weights other than 1 are folded in here; the logged name says so (`format*0.2`).
    `raw_name` and `last` (the unweighted values of the group scored last: the worker scores one group at a time)
    are what reward logging reads (recipes/features/reward_log/weighted.WorkerRewardLog)."""

    def __init__(self, func: Any, weight: float):
        self.func, self.weight = func, float(weight)
        name = getattr(func, "__name__", type(func).__name__)
        self.raw_name = name
        self.__name__ = name if self.weight == 1.0 else f"{name}*{self.weight:g}"
        self.last: list[float | None] = []

    def __call__(self, *args: Any, **kwargs: Any) -> list[float | None]:
        self.last = list(self.func(*args, **kwargs))
        return [None if r is None else self.weight * r for r in self.last]


# --------------------------------------------------------------------------------------------- rollout worker


def engine_prompt_logprobs(llm: Any, prompt_ids: list[int], completion_ids: list[int]) -> list[float]:
    """A `vllm.LLM`'s log-probabilities of `completion_ids` after `prompt_ids`, as prompt log-probs of the whole
    sequence: the raw log-probs a sampled token carries (vLLM's default logprobs mode; tests/test_vllm.py compares)."""
    from vllm import SamplingParams
    from vllm.inputs import TokensPrompt

    from recipes.async_grpo.metrics import completion_logprobs

    params = SamplingParams(max_tokens=1, temperature=0.0, prompt_logprobs=0)
    out = llm.generate([TokensPrompt(prompt_token_ids=[*prompt_ids, *completion_ids])], params, use_tqdm=False)[0]
    return completion_logprobs(out.prompt_logprobs, len(prompt_ids), completion_ids)


class EngineRolloutLoop(TaseMetricsLoop, _AsyncRolloutLoop):
    """TRL's rollout loop with generation in an in-process `vllm.LLM` instead of HTTP to `vllm serve`; each sample
    carries its `tase/*` metrics (recipes/async_grpo/metrics.py)."""

    def __init__(self, *, engine_kwargs: dict, transfer_info: dict, trace_path: str | None = None,
                 tase_level: str = FINE, tase_hooks: list | None = None, **kwargs):
        super().__init__(**kwargs)
        self.tase_level, self.tase_hooks = tase_level, list(tase_hooks or [])
        from common.process import is_verbose, quiet_libraries

        if not is_verbose():
            # this runs in the spawned rollout process, whose loggers the trainer's filters (common/process.apply)
            # do not reach: vLLM's reload printed two listed lines at every weight sync
            quiet_libraries()
        os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"  # engine core in this process: reload sees it
        from vllm import LLM, SamplingParams

        self.llm = LLM(**engine_kwargs)
        self.sampling = SamplingParams(
            max_tokens=self.max_tokens, temperature=self.temperature, top_p=self.top_p, top_k=self.top_k,
            min_p=self.min_p or 0.0, repetition_penalty=self.repetition_penalty, logprobs=0)
        self.transfer_info, self.trace_path = transfer_info, trace_path
        self.receiver = None
        self._pending: list = []
        self._engine = ThreadPoolExecutor(max_workers=1, thread_name_prefix="vllm-engine")

    def run(self) -> None:
        self.receiver = GlooWeightReceiver(self.transfer_info)  # after the ready signal: the trainer joins now
        try:
            super().run()
        finally:
            # Samples made after the trainer's last read stay in the queue: without this the child's exit waits for
            # its feeder thread to push them into a pipe nobody reads (multiprocessing's Queue._finalize_join), and
            # TRL's stop() terminates it after 15 s ("Child did not exit within 15s"), at the end of every run.
            self.rollout_buffer.cancel_join_thread()

    async def _run_loops(self, stop_event: asyncio.Event) -> None:
        batcher = asyncio.create_task(self._batch_loop(stop_event))
        try:
            await super()._run_loops(stop_event)
        finally:
            batcher.cancel()

    async def _generate_one_turn(self, prompt_ids: list[int]) -> tuple[list[int], list[float]]:
        fut = asyncio.get_running_loop().create_future()
        self._pending.append((list(prompt_ids), fut))
        return await fut

    async def _batch_loop(self, stop_event: asyncio.Event) -> None:
        loop = asyncio.get_running_loop()
        while True:  # until cancelled: on stop, TRL's generate loop still waits for the requests in flight
            if not self._pending:  # idle (e.g. the trainer's queue is full): still answer weight syncs
                await loop.run_in_executor(self._engine, self._sync)
                await asyncio.sleep(0.02)
                continue
            await asyncio.sleep(0.01)  # let the other requests dispatched this tick join the batch
            batch, self._pending = self._pending, []
            try:
                results = await loop.run_in_executor(self._engine, self._generate, [p for p, _ in batch])
            except BaseException as e:  # noqa: BLE001 - surfaced through the waiting tasks
                for _, f in batch:
                    if not f.done():
                        f.set_exception(e)
                continue
            for (_, f), r in zip(batch, results, strict=False):
                if not f.done():
                    f.set_result(r)

    async def tase_prompt_logprobs(self, prompt_ids: list[int], completion_ids: list[int]) -> list[float]:
        """The in-process engine's log-probabilities of `completion_ids` after `prompt_ids` (guidance's gold member),
        on the engine thread between two generation batches: the weights the batches around it use."""
        return await asyncio.get_running_loop().run_in_executor(self._engine, self._prompt_logprobs, prompt_ids,
                                                                completion_ids)

    def _prompt_logprobs(self, prompt_ids: list[int], completion_ids: list[int]) -> list[float]:
        self._sync()
        return engine_prompt_logprobs(self.llm, prompt_ids, completion_ids)

    def _sync(self) -> None:
        t0 = time.time()
        if self.receiver.receive_into(self.llm):
            self._trace({"event": "sync", "t0": t0, "t1": time.time(), "weights": self.receiver.version,
                         "model_version": self.model_version})

    def _generate(self, prompts: list[list[int]]) -> list[tuple[list[int], list[float]]]:
        from vllm.inputs import TokensPrompt

        self._sync()
        t0, version = time.time(), self.model_version
        outs = self.llm.generate([TokensPrompt(prompt_token_ids=p) for p in prompts], self.sampling,
                                 use_tqdm=False)
        res = []
        for o in outs:
            c = o.outputs[0]
            ids = list(c.token_ids)
            res.append((ids, [lp[t].logprob for t, lp in zip(ids, c.logprobs, strict=False)]))
        self._trace({"event": "generate", "t0": t0, "t1": time.time(), "n": len(prompts),
                     "tokens": sum(len(r[0]) for r in res), "weights": self.receiver.version,
                     "model_version": version})
        return res

    def _trace(self, rec: dict) -> None:
        if self.trace_path:
            with open(self.trace_path, "a", encoding="utf-8") as f:
                f.write(json.dumps(rec) + "\n")



class EngineRolloutWorker(AsyncRolloutWorker):
    """TRL's AsyncRolloutWorker whose child runs `EngineRolloutLoop`; `transfer` is read when the child starts."""

    _loop_cls = EngineRolloutLoop

    def __init__(self, *, transfer: GlooWeightTransfer, **kwargs: Any):
        super().__init__(**kwargs)
        self.transfer = transfer

    def exit_code(self) -> int | None:
        """The child's exit code once it has died; None while it runs (or before it starts, after it stops)."""
        proc = self._process
        return None if proc is None or proc.is_alive() else proc.exitcode

    def start(self) -> None:  # started early by the weight transfer (it must join the group); TRL's call: no-op
        if self._process is None:
            self._loop_kwargs["transfer_info"] = self.transfer.peer_info()
            super().start()


class TraceSteps:
    """Trainer side of the async trace: one JSON line per optimizer step (wall times, policy version)."""

    def __new__(cls, path: str, trainer_ref: list):
        from transformers import TrainerCallback

        class _Trace(TrainerCallback):
            def on_step_begin(self, args, state, control, **kw):
                self.t0 = time.time()

            def on_step_end(self, args, state, control, **kw):
                if state.is_world_process_zero:
                    trainer = trainer_ref[0] if trainer_ref else None
                    # TRL appends one staleness value per trained sample and reduces the list when it logs (after
                    # on_step_end): read here, it is this step's distribution (with logging_steps 1)
                    stale = list(trainer._metrics["train"].get("sample/staleness_mean", [])) if trainer else []
                    with open(path, "a", encoding="utf-8") as f:
                        f.write(json.dumps({"event": "train_step", "t0": self.t0, "t1": time.time(),
                                            "step": state.global_step, "staleness": stale,
                                            "model_version": trainer.model_version if trainer else None}) + "\n")

        return _Trace()


def cpu_engine_parts(path: str, cfg: Any, tase: Any, dataset: Any, funcs: list, tok: Any, level: str,
                     hooks: list | None = None) -> tuple[dict, Any]:
    """`rollout_worker=` and `weight_transfer=` for AsyncGRPOTrainer on CPU; `finish_cpu_setup` completes them
    from the built trainer (parameter manifest, eos ids, in-flight limit). `level`: the verdict tase/zero_var_groups
    is counted on (rewards.levels.watched of the run's resolved level); `hooks`: the features' rollout hooks."""
    transfer = GlooWeightTransfer(manifest={}, timeout_s=cfg.weight_sync_timeout)  # a stalled sync: one line
    worker = EngineRolloutWorker(
        transfer=transfer, queue_maxsize=cfg.queue_maxsize,
        engine_kwargs={"model": path, "dtype": cfg.dtype, "enforce_eager": True, "seed": cfg.seed,
                       "max_model_len": tase.async_max_model_len, "enable_prefix_caching": True},
        trace_path=tase.async_trace, tase_level=level, tase_hooks=hooks, model_name=path, lora_name=None,
        dataset=dataset, reward_funcs=funcs,
        processing_class=tok, eos_token_ids=[tok.eos_token_id], tools=None, environment_factory=None,
        num_generations=cfg.num_generations, max_inflight_tasks=max(cfg.max_inflight_tasks, 1),
        vllm_server_url="http://unused (in-process engine)", max_tokens=cfg.max_completion_length,
        temperature=cfg.temperature, top_p=cfg.top_p, top_k=cfg.top_k, min_p=cfg.min_p,
        repetition_penalty=cfg.repetition_penalty, request_timeout=cfg.request_timeout,
        chat_template_kwargs=cfg.chat_template_kwargs, max_tool_calling_iterations=cfg.max_tool_calling_iterations,
        log_completions=cfg.log_completions, num_completions_to_print=cfg.num_completions_to_print,
        fork_threshold_tokens=cfg.fork_threshold_tokens)
    transfer.start_peer = lambda: worker.start()  # noqa: PLW0108 - the start guard_worker sets later, at call time
    transfer.peer_exit = worker.exit_code
    return {"rollout_worker": worker, "weight_transfer": transfer}, transfer


def finish_cpu_setup(trainer: Any, transfer: GlooWeightTransfer) -> None:
    from trl.experimental.async_grpo.async_grpo_trainer import _iter_vllm_named_params

    names, dtypes, shapes = [], [], []
    for name, param in _iter_vllm_named_params(trainer.accelerator.unwrap_model(trainer.model)):
        names.append(name)
        dtypes.append(str(param.dtype).removeprefix("torch."))
        shapes.append(list(param.shape))  # DTensor.shape is the global shape
    transfer.manifest = {"names": names, "dtypes": dtypes, "shapes": shapes}
    if trainer.rollout_worker is not None:
        kw = trainer.rollout_worker._loop_kwargs
        kw["eos_token_ids"] = list(trainer.eos_token_ids)
        kw["max_inflight_tasks"] = trainer.args.max_inflight_tasks
    use_cpu_tree_attention()
