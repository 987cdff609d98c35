"""Asynchronous GRPO (TRL's `AsyncGRPOTrainer`) on machines without CUDA: three small, replaceable parts.

TRL 1.16's async trainer assumes a CUDA box: its rollout worker talks HTTP to a `vllm serve` that receives weights
over NCCL, and its training forward packs samples into a prefix tree run by a FlashAttention-3 kernel fetched from the
Hub. Its constructor takes `rollout_worker=` and `weight_transfer=`, so the CPU path plugs in there and changes
nothing in TRL or vLLM:

* `EngineRolloutWorker`: TRL's own `AsyncRolloutWorker` (spawned child, tokenization, reward scoring, group
  advantages, queue, heartbeat, metrics) with one override, `_generate_one_turn`: instead of `POST
  /v1/completions` it micro-batches the concurrent requests into an in-process `vllm.LLM` living in the child. The
  child is a separate process, so generation runs beside training, not in turns with it.
* `GlooWeightTransfer` / `GlooWeightReceiver`: the trainer's rank 0 broadcasts every parameter over a two-member gloo
  process group (its own TCPStore, apart from any training process group) into the child, which loads them with
  vLLM's in-place reload API (`recipes/vllm_sync.reload_sync`, the same call the colocated CPU path uses) between two
  generation batches and acknowledges. The broadcast blocks until the child reaches a batch boundary, so no batch
  mixes two policies, and the trainer bumps the policy version only after the acknowledgement: a sample is never
  tagged newer than the weights that produced it. Gloo is TCP, so the same two classes would also serve a CPU
  engine on another host.
* `cpu_tree_attention`: the tree-packed attention TRL computes with FA3's `flash_attn_varlen_func`, written with
  `torch.nn.functional.scaled_dot_product_attention`, one segment at a time (registered only without CUDA).

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
import socket
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from typing import Any

import torch
from trl.experimental.async_grpo.async_rollout_worker import AsyncRolloutWorker, _AsyncRolloutLoop

# --------------------------------------------------------------------------------------------- rewards (picklable)


class WeightedReward:
    """A reward function times a constant weight. TRL's async worker sums its reward functions with weight 1 (it has
    no `reward_weights`), so weights other than 1 are folded in here; the logged name says so (`format*0.2`)."""

    def __init__(self, func: Any, weight: float):
        self.func, self.weight = func, float(weight)
        name = getattr(func, "__name__", type(func).__name__)
        self.__name__ = name if self.weight == 1.0 else f"{name}*{self.weight:g}"

    def __call__(self, *args: Any, **kwargs: Any) -> list[float | None]:
        return [None if r is None else self.weight * r for r in self.func(*args, **kwargs)]


def plain_chatml_response(tok: Any) -> bool:
    """TRL's rollout worker parses each completion with `tokenizer.parse_response` and refuses a chat template it
    does not know (SmolLM2's: `ValueError: Unrecognized chat template, failed to add response schema`). For a
    ChatML template without a response template, set one that reads the whole reply as `content` (no tool calls,
    no reasoning block: the TASE tasks have neither). Returns whether it set one."""
    from trl.chat_template_utils import add_response_schema, qwen3_template

    if getattr(tok, "response_template", None) or getattr(tok, "response_schema", None):
        return False
    try:
        add_response_schema(tok)
        return False  # a template TRL knows
    except ValueError:
        pass
    if "<|im_start|>" not in (tok.chat_template or ""):
        return False  # TRL's own error will name the problem
    tok.response_template = {**qwen3_template, "fields": {"content": qwen3_template["fields"]["content"]}}
    return True


# --------------------------------------------------------------------------------------------- tree attention on CPU


def cpu_tree_attention(module, query, key, value, attention_mask, *, tree_kv_index, tree_cu_seqlens_q,
                       tree_cu_seqlens_k, tree_max_seqlen_q=None, tree_max_seqlen_k=None, scaling=None,
                       sliding_window=None, softcap=None, **kwargs):
    """Same contract as `trl.experimental.async_grpo.packing.tree_attention`: segment s of the packed row attends,
    causally aligned to the end (flash-attn's convention for seqlen_q <= seqlen_k), to the K/V rows
    `tree_kv_index[cu_k[s]:cu_k[s+1]]`, its root-to-segment path. Query (1, H, N, D), key/value (1, Hkv, N, D);
    returns (1, N, H, D)."""
    if softcap:
        raise NotImplementedError("cpu_tree_attention: attention softcapping is not implemented")
    q = query[0]  # (H, N, D)
    k, v = key[0], value[0]
    if k.shape[0] != q.shape[0]:  # grouped-query attention
        rep = q.shape[0] // k.shape[0]
        k, v = k.repeat_interleave(rep, dim=0), v.repeat_interleave(rep, dim=0)
    out = torch.empty(q.shape[1], q.shape[0], q.shape[2], dtype=q.dtype, device=q.device)
    cu_q, cu_k = tree_cu_seqlens_q.tolist(), tree_cu_seqlens_k.tolist()
    for s in range(len(cu_q) - 1):
        qs, qe, ks, ke = cu_q[s], cu_q[s + 1], cu_k[s], cu_k[s + 1]
        if qe <= qs:
            continue
        idx = tree_kv_index[ks:ke]
        ks_, vs_ = k.index_select(1, idx), v.index_select(1, idx)
        lq, lk = qe - qs, ke - ks
        i = torch.arange(lq, device=q.device)[:, None]
        j = torch.arange(lk, device=q.device)[None, :]
        allowed = j <= i + (lk - lq)
        if sliding_window:
            allowed &= j > i + (lk - lq) - sliding_window
        o = torch.nn.functional.scaled_dot_product_attention(q[:, qs:qe], ks_, vs_, attn_mask=allowed, scale=scaling)
        out[qs:qe] = o.transpose(0, 1)
    return out.unsqueeze(0), None


def cpu_safe_peak_flops() -> bool:
    """TRL 1.16's AsyncGRPOTrainer.__init__ calls `get_peak_flops_per_device`, which calls
    `torch.cuda.get_device_name` unconditionally (`AssertionError: Torch not compiled with CUDA enabled` on CPU).
    Without CUDA, the name the trainer module imported is replaced by one that returns None (MFU metrics off,
    which is what TRL does for an unknown device). Upstream fix: return None when the device is not CUDA."""
    if torch.cuda.is_available():
        return False
    from trl.experimental.async_grpo import async_grpo_trainer

    async_grpo_trainer.get_peak_flops_per_device = lambda accelerator, dtype: None
    return True


def use_cpu_tree_attention() -> bool:
    """Route TRL's tree attention to `cpu_tree_attention` when CUDA is absent; returns whether it did."""
    if torch.cuda.is_available():
        return False
    from transformers import AttentionInterface
    from trl.experimental.async_grpo.packing import TREE_ATTENTION

    AttentionInterface.register(TREE_ATTENTION, cpu_tree_attention)
    return True


# --------------------------------------------------------------------------------------------- weights over gloo


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _gloo(store: Any, rank: int, timeout_s: float) -> Any:
    from torch.distributed import PrefixStore, ProcessGroupGloo

    return ProcessGroupGloo(PrefixStore("weights", store), rank, 2, timedelta(seconds=timeout_s))


class GlooWeightTransfer:
    """Trainer side (`WeightTransferProtocol` of TRL's AsyncGRPOTrainer), rank 0 only.

    `manifest`: (names, dtypes, shapes) of the parameters, in the order `send_weights` streams them.
    `start_peer`: called once before the rendezvous (starts the rollout child, which joins the group)."""

    def __init__(self, manifest: dict[str, list], start_peer: Any = None, host: str = "127.0.0.1",
                 port: int | None = None, timeout_s: float = 600.0):
        self.manifest, self.start_peer = manifest, start_peer
        self.host, self.port, self.timeout_s = host, port or free_port(), timeout_s
        self.store = self.pg = None
        self.version = 0
        self.send_s: list[float] = []  # seconds per sync, for logs and the bench

    def peer_info(self) -> dict[str, Any]:
        """What the receiving side needs (picklable)."""
        return {"host": self.host, "port": self.port, "timeout_s": self.timeout_s, **self.manifest}

    def init_weight_transfer(self) -> None:
        from torch.distributed import TCPStore

        self.store = TCPStore(self.host, self.port, 2, True, timedelta(seconds=self.timeout_s),
                              wait_for_workers=False)
        if self.start_peer is not None:
            self.start_peer()
        self.pg = _gloo(self.store, 0, self.timeout_s)

    def pause(self) -> None:  # the receiver applies weights between two generation batches: no pause needed
        pass

    def resume(self) -> None:
        pass

    def send_weights(self, iterator: Any) -> None:
        t0 = time.time()
        self.version += 1
        self.store.set("sync_request", str(self.version))
        names = self.manifest["names"]
        n = 0
        for name, tensor in iterator:
            if n >= len(names) or name != names[n]:
                raise RuntimeError(f"weight stream out of order: got {name!r}, manifest expects "
                                   f"{names[n] if n < len(names) else 'nothing'!r}")
            t = tensor.detach().to("cpu").contiguous()
            self.pg.broadcast(t, 0).wait()
            n += 1
        if n != len(names):
            raise RuntimeError(f"weight stream ended after {n} of {len(names)} parameters")
        self.store.wait([f"ack_{self.version}"], timedelta(seconds=self.timeout_s))
        self.send_s.append(time.time() - t0)

    def destroy(self) -> None:
        self.pg = None
        self.store = None


class GlooWeightReceiver:
    """Engine side: joins the trainer's group and, when a sync is pending, receives every parameter and loads it."""

    def __init__(self, info: dict[str, Any]):
        from torch.distributed import TCPStore

        self.info = info
        self.store = TCPStore(info["host"], info["port"], 2, False, timedelta(seconds=info["timeout_s"]))
        self.pg = _gloo(self.store, 1, info["timeout_s"])
        self.buffers = [torch.empty(shape, dtype=getattr(torch, dt))
                        for dt, shape in zip(info["dtypes"], info["shapes"])]
        self.version = 0  # weights in the engine: 0 = the checkpoint it was started from

    def pending(self) -> int:
        if not self.store.check(["sync_request"]):
            return 0
        return int(self.store.get("sync_request"))

    def receive_into(self, llm: Any) -> bool:
        """Apply a pending sync to `llm` (vllm.LLM in this process); returns whether there was one."""
        want = self.pending()
        if want <= self.version:
            return False
        for buf in self.buffers:
            self.pg.broadcast(buf, 0).wait()
        from recipes.vllm_sync import reload_sync

        reload_sync(llm, zip(self.info["names"], self.buffers))
        self.version = want
        self.store.set(f"ack_{want}", "1")
        return True


# --------------------------------------------------------------------------------------------- rollout worker


class EngineRolloutLoop(_AsyncRolloutLoop):
    """TRL's rollout loop with generation in an in-process `vllm.LLM` instead of HTTP to `vllm serve`."""

    def __init__(self, *, engine_kwargs: dict, transfer_info: dict, trace_path: str | None = None, **kwargs):
        super().__init__(**kwargs)
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
        super().run()

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
            for (_, f), r in zip(batch, results):
                if not f.done():
                    f.set_result(r)

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
            res.append((ids, [lp[t].logprob for t, lp in zip(ids, c.logprobs)]))
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


def cpu_engine_parts(path: str, cfg: Any, tase: Any, dataset: Any, funcs: list, tok: Any) -> tuple[dict, Any]:
    """`rollout_worker=` and `weight_transfer=` for AsyncGRPOTrainer on CPU; `finish_cpu_setup` completes them
    from the built trainer (parameter manifest, eos ids, in-flight limit)."""
    transfer = GlooWeightTransfer(manifest={})
    worker = EngineRolloutWorker(
        transfer=transfer, queue_maxsize=cfg.queue_maxsize,
        engine_kwargs={"model": path, "dtype": cfg.dtype, "enforce_eager": True, "seed": cfg.seed,
                       "max_model_len": tase.async_max_model_len, "enable_prefix_caching": True},
        trace_path=tase.async_trace, model_name=path, lora_name=None, dataset=dataset, reward_funcs=funcs,
        processing_class=tok, eos_token_ids=[tok.eos_token_id], tools=None, environment_factory=None,
        num_generations=cfg.num_generations, max_inflight_tasks=max(cfg.max_inflight_tasks, 1),
        vllm_server_url="http://unused (in-process engine)", max_tokens=cfg.max_completion_length,
        temperature=cfg.temperature, top_p=cfg.top_p, top_k=cfg.top_k, min_p=cfg.min_p,
        repetition_penalty=cfg.repetition_penalty, request_timeout=cfg.request_timeout,
        chat_template_kwargs=cfg.chat_template_kwargs, max_tool_calling_iterations=cfg.max_tool_calling_iterations,
        log_completions=cfg.log_completions, num_completions_to_print=cfg.num_completions_to_print,
        fork_threshold_tokens=cfg.fork_threshold_tokens)
    transfer.start_peer = worker.start
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
