"""The `tase/*` metrics under `trainer: async`. TRL's AsyncGRPOTrainer scores rewards in its rollout
worker and passes reward functions no `log_metric`, so recipes/features/tracking/metrics.WatchedReward logs nothing
there. What it does carry is one metrics dict per training sample (`rewards/<name>`, `reward`), which its collator
averages key by key over the samples that have the key and the trainer logs. So each sample gets its share of the batch
view that tracking.batch_metrics computes for sync runs, written so that those per-key averages give the same
quantities:

    tase/official_acc, strict_acc, fine_credit   the sample's own verdicts
    tase/loophole_share                          only on official passes: 1 when the strict verdict fails
    tase/zero_var_groups, tase/distinct_answers  the sample's group's value (every group has num_generations samples)
    tase/task/<task>/..., tase/lang/<lang>/...   only on samples of that task / language

The averages are per micro-batch, then per logging step (TRL's), so per-task values weigh micro-batches equally."""
from __future__ import annotations

import functools
import inspect
import sys
from collections.abc import Sequence
from typing import Any

from recipes.features.tracking import PREFIX, Verdict, verdicts
from rewards.levels import FINE


def sample_metrics(group: Sequence[Verdict], level: str = FINE) -> list[dict[str, float]]:
    """The per-sample share of tracking.batch_metrics for the completions of one GRPO group."""
    if not group:
        return []
    zero_var = 1.0 if len({getattr(v, level) for v in group}) == 1 else 0.0
    distinct = len({v.answer for v in group}) / len(group)
    out = []
    for v in group:
        m = {"official_acc": v.coarse, "strict_acc": v.strict, "fine_credit": v.fine, "zero_var_groups": zero_var,
             "distinct_answers": distinct}
        if v.coarse == 1.0:
            m["loophole_share"] = 1.0 if v.strict != 1.0 else 0.0
        for kind, key in (("task", v.task), ("lang", v.lang)):
            if key:
                m[f"{kind}/{key}/official_acc"] = v.coarse
                m[f"{kind}/{key}/strict_acc"] = v.strict
        out.append({PREFIX + k: float(x) for k, x in m.items()})
    return out


class TaseMetricsLoop:
    """Mixin for TRL's `_AsyncRolloutLoop` (in the rollout child): after TRL scores a group, each of its training
    samples carries its `tase/*` share. A group that cannot be scored as TASE rows (no `type` column) turns the
    metrics off with one line, as in sync runs. Then the features' rollout hooks (`tase_hooks`, recipes/features/
    `rollout`) run in order on the group's samples: each may add metrics, count into the worker's counters, drop
    the group (an empty list: nothing of it reaches the trainer's queue), or, as a coroutine, put a group it generated
    again in its place (a `(group, samples)` pair: the hooks after it see that group; guidance's hinted retry)."""

    tase_level: str = FINE
    tase_off: str | None = None
    tase_hooks: Sequence[Any] = ()

    def __init__(self, **kwargs: Any) -> None:
        data, start = kwargs.get("dataset"), kwargs.get("dataset_start_index", 0)
        if start and data is not None and not hasattr(data, "__len__"):
            # a streaming dataset (synth drawn as read): TRL's start index needs len(); skip that many rows instead
            kwargs["dataset"], kwargs["dataset_start_index"] = data.skip(start), 0
        super().__init__(**kwargs)

    async def _score_group(self, group: Any) -> list:
        samples = await self.tase_score(group)
        for hook in self.tase_hooks:
            out = hook(self, group, samples)
            if inspect.isawaitable(out):
                out = await out
            if isinstance(out, tuple):  # the hook put another group in this one's place (guidance's hinted retry)
                group, samples = out
            else:
                samples = out
        return samples

    async def tase_score(self, group: Any) -> list:
        """TRL's scoring of `group` (rewards, advantages, per-sample metrics) with each sample's tase/ share; no
        rollout hook runs (a hook that generates a group again scores it with this)."""
        samples = await super()._score_group(group)  # type: ignore[misc]
        if self.tase_off is None:
            self._add_tase_metrics(group, samples)
        return samples

    async def tase_prompt_logprobs(self, prompt_ids: list[int], completion_ids: list[int]) -> list[float]:
        """The serving engine's log-probabilities of `completion_ids` after `prompt_ids` (a completion it did not
        sample: guidance's gold member), asked of `vllm serve` as prompt log-probs over HTTP (TRL's own client
        call); the CPU engine's loop asks its in-process engine (recipes/async_grpo/cpu_engine.py)."""
        payload = prompt_logprobs_request(self._request_model, prompt_ids, completion_ids)
        out = await self._retry(lambda: self._post("/v1/completions", payload, self.request_timeout),  # type: ignore
                                max_attempts=30, label="vllm /v1/completions prompt_logprobs")
        return completion_logprobs(out["choices"][0]["prompt_logprobs"], len(prompt_ids), completion_ids)

    def _add_tase_metrics(self, group: Any, samples: list) -> None:
        from rewards.trl import RewardInputError

        columns = {k: v for k, v in group.reward_kwargs.items() if k not in ("prompts", "completions")}
        try:
            got = verdicts(group.prompts, group.completions, columns)
        except RewardInputError as e:
            self.tase_off = str(e)
            print(f"tase/ metrics off for this run: {e}", file=sys.stderr)
            return
        per = sample_metrics(got, self.tase_level)
        # a conversation: 1+ rows
        rows = [m for m, seqs in zip(per, group.completions_sequences, strict=False) for _ in seqs]
        for sample, m in zip(samples, rows, strict=False):
            sample.metrics.update(m)


def prompt_logprobs_request(model: str, prompt_ids: list[int], completion_ids: list[int]) -> dict[str, Any]:
    """A `/v1/completions` body asking for the log-probabilities of the prompt's own tokens (vLLM's `prompt_logprobs`:
    0, the token itself and no alternatives); one token generated and ignored."""
    return {"model": model, "prompt": [*prompt_ids, *completion_ids], "max_tokens": 1, "temperature": 0.0,
            "prompt_logprobs": 0}


def completion_logprobs(prompt_logprobs: Sequence[Any], prompt_len: int, completion_ids: list[int]) -> list[float]:
    """The log-probabilities of `completion_ids` from vLLM's per-position prompt log-probs over prompt + completion
    (each position a {token id: Logprob} mapping, the first None; keys are strings over HTTP)."""
    out = []
    for t, lp in zip(completion_ids, prompt_logprobs[prompt_len:], strict=True):
        got = lp.get(t) if t in lp else lp[str(t)]
        out.append(float(got["logprob"] if isinstance(got, dict) else got.logprob))
    return out


@functools.cache
def _server_loop_class() -> type:
    """TRL's own rollout loop (HTTP to `vllm serve`, the GPU path) with the tase/ sample metrics."""
    from trl.experimental.async_grpo.async_rollout_worker import _AsyncRolloutLoop

    class ServerRolloutLoop(TaseMetricsLoop, _AsyncRolloutLoop):
        def __init__(self, *, tase_level: str = FINE, tase_hooks: Sequence[Any] = (), **kwargs: Any) -> None:
            super().__init__(**kwargs)
            self.tase_level, self.tase_hooks = tase_level, list(tase_hooks)

    ServerRolloutLoop.__module__, ServerRolloutLoop.__qualname__ = __name__, "ServerRolloutLoop"
    return ServerRolloutLoop


def __getattr__(name: str) -> Any:
    """ServerRolloutLoop, built on first use (importing TRL's async worker loads vLLM's client side); named at module
    level so that the spawned rollout child unpickles it by reference."""
    if name == "ServerRolloutLoop":
        cls = _server_loop_class()
        globals()[name] = cls
        return cls
    raise AttributeError(name)


def carry_tase_metrics(worker: Any, level: str, hooks: Sequence[Any] = ()) -> bool:
    """Make the AsyncRolloutWorker that AsyncGRPOTrainer built for the server path spawn ServerRolloutLoop (its
    child is started at train begin, after this) with the features' rollout `hooks`; False where the worker runs
    another loop (the CPU engine's carries the metrics and hooks already) or there is none (ranks other than 0)."""
    from trl.experimental.async_grpo.async_rollout_worker import _AsyncRolloutLoop

    if worker is None or getattr(worker, "_loop_cls", None) is not _AsyncRolloutLoop:
        return False
    worker._loop_cls = _server_loop_class()
    worker._loop_kwargs["tase_level"] = level
    worker._loop_kwargs["tase_hooks"] = list(hooks)
    return True
