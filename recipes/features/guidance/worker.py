"""Guidance under trainer: async: the rollout worker's hinted retry of a group whose strict verdicts all fail, its gold
member, and the trainer's side of the hint schedule (the sync trainer's guidance is in trainer.py)."""
from __future__ import annotations

import asyncio
import uuid
from typing import Any

from recipes.features.guidance.hints import PREFIX, HintSchedule, gold_text, plan_hints
from recipes.shared.worker_state import WorkerStateQueue


def group_row(group: Any) -> dict[str, Any]:
    """A TRL RolloutGroup's row: its reward columns (every dataset column but the prompt and completion, one value per
    completion, all equal) and its plain prompt."""
    row = {k: v[0] for k, v in group.reward_kwargs.items() if v}
    row["prompt"] = group.prompts[0]
    return row


def guided_kwargs(group: Any) -> dict[str, Any]:
    """The reward columns of a guided group (hinted or with a gold member): the group's, with curriculum level -1 on
    every member, so the curriculum judges the unguided pass only."""
    from recipes.shared.data import LEVEL_COLUMN

    kwargs = dict(group.reward_kwargs)
    if LEVEL_COLUMN in kwargs:
        kwargs[LEVEL_COLUMN] = [-1] * len(group.completions)
    return kwargs


def _replaced(values: list, k: int, value: Any) -> list:
    """`values` with item `k` replaced; an empty list stays empty (TRL leaves `env_rewards` empty without env
    rewards)."""
    out = list(values)
    if out:
        out[k] = value
    return out


async def gold_group(loop: Any, group: Any, row: dict[str, Any], prompt: Any) -> Any | None:
    """`group` with its last member replaced by the row's gold completion under the plain `prompt` (as sync's gold
    member), or None where the row has no gold completion or it does not fit max_tokens (a cut gold answer is no gold
    answer). Its behaviour log-probabilities are the engine's own log-probabilities of the gold tokens after the
    prompt (vLLM prompt log-probs, `loop.tase_prompt_logprobs`: the same raw log-probs a sampled token carries), so
    TRL's importance ratio treats it like any sample of the engine's current weights."""
    from trl.experimental.async_grpo.async_rollout_worker import TurnRecord, _chain_to_sequences

    text = gold_text(row)
    if text is None:
        return None
    tok = loop.tokenizer
    ids = [*tok(text, add_special_tokens=False)["input_ids"], tok.eos_token_id]
    if len(ids) > loop.max_tokens:
        return None
    prompt_ids = list(tok.apply_chat_template(prompt, return_dict=False, add_generation_prompt=True,
                                              chat_template=loop.chat_template, **loop.chat_template_kwargs))
    logprobs = await loop.tase_prompt_logprobs(prompt_ids, ids)
    seqs, _ = _chain_to_sequences([TurnRecord(prompt_ids, ids, logprobs)], uuid.uuid4().hex,
                                  loop._fork_threshold_tokens)
    k = len(group.completions) - 1
    return type(group)(
        prompts=_replaced(group.prompts, k, prompt), reward_kwargs=guided_kwargs(group),
        completions=_replaced(group.completions, k, [{"role": "assistant", "content": text}]),
        completions_ids=_replaced(group.completions_ids, k, ids),
        completions_sequences=_replaced(group.completions_sequences, k, seqs),
        tool_call_counts=_replaced(group.tool_call_counts, k, 0),
        tool_failure_counts=_replaced(group.tool_failure_counts, k, 0), model_version=group.model_version,
        group_id=group.group_id, env_rewards=_replaced(group.env_rewards, k, None),
        rollout_rewards=_replaced(group.rollout_rewards, k, None))


class WorkerGuidance:
    """`guidance` (hint, gold, both) in the async rollout worker (a rollout hook, recipes/async_grpo/metrics.py; it
    runs before reward logging and dynamic sampling, recipes/features/guidance/__init__.py `rollout_before`). After
    TRL scores a group, a group whose strict verdicts all fail and whose synth row has a hint at its task's level is
    generated again (TRL's own `_generate_one`, num_generations times, so the completions carry the engine's
    behaviour log-probs like any other) with the hint appended to its user turn, and scored again (TRL's
    `_score_group`, the tase/ sample metrics); the hinted group and its samples take the failed ones' place, so the
    hooks after this one (dynamic sampling) judge the hinted group. The hinted samples carry the policy version the
    worker held when it generated them: the hint was built for that version, and the version gap to the failed group
    is logged. `gold` (and `both`, after the hinted retry, on a group that still fails) puts the row's gold
    completion in the group as its last member under the plain prompt (`gold_group`) and scores the group again, as
    sync does; the group keeps its policy version (its other members' behaviour policy; the gold tokens' log-probs
    are the engine's at the time).

    The schedule (`sched`, a HintSchedule) lives here, like the curriculum's levels: `success` moves on each group's
    unhinted strict accuracy (after the group was guided at the level in force, as sync); `step` reads the trainer's
    optimizer step from `step` (a spawn-context Value the trainer sets at every step end). After each group the state
    goes back over `updates` (a spawn-context queue; WorkerSchedule) for the checkpoints. Counters and rates go out
    through the worker's metrics queue under sync's tase/guide/ names where they mean the same."""

    def __init__(self, sched: HintSchedule, updates: Any = None, step: Any = None, mode: str = "hint") -> None:
        self.sched, self.updates, self.step, self.mode = sched, updates, step, mode

    def __getstate__(self) -> dict[str, Any]:
        from multiprocessing.context import get_spawning_popen

        state = dict(self.__dict__)
        if get_spawning_popen() is None:  # a plain pickle (TRL's picklability check): the channels go to the child only
            state["updates"] = state["step"] = None
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        if self.updates is not None:  # in the child: its exit must not wait on states the trainer no longer reads
            self.updates.cancel_join_thread()

    async def __call__(self, loop: Any, group: Any, samples: list) -> Any:
        from recipes.features.tracking.metrics import verdicts

        size, sched = len(group.completions), self.sched
        if self.step is not None:
            sched.step = int(self.step.value)
        columns = {k: v for k, v in group.reward_kwargs.items() if k not in ("prompts", "completions")}
        strict = [float(v.strict) for v in verdicts(group.prompts, group.completions, columns)]
        row = group_row(group)
        plan = plan_hints([row] * size, strict, size, sched.level) if self.mode in ("hint", "both") else {}
        task = row.get("task")
        if task is not None:  # the schedule moves after the group was guided at the level in force
            sched.record(str(task), sum(strict) / size)
        counters, rates = loop._counters, loop._rates
        failed = not any(strict)
        counters[PREFIX + "groups_total"] += 1
        counters[PREFIX + "groups_failed_total"] += failed
        rates[PREFIX + "success_unhinted"][0] += sum(strict)
        rates[PREFIX + "success_unhinted"][1] += size
        rates[PREFIX + "guided_share"][1] += 1
        gauges: dict[str, float] = {}
        out: Any = samples
        if plan:
            prompt, level = plan[0]
            version = loop.model_version  # the policy the hint is built for: the one that generates the retry
            tools = list(getattr(loop, "_standalone_tools", None) or [])
            made = await asyncio.gather(*[loop._generate_one(prompt, tool_dict={t.__name__: t for t in tools},
                                                             tools=tools, group_id=group.group_id)
                                          for _ in range(size)])
            hinted = type(group)(
                prompts=[prompt] * size, reward_kwargs=guided_kwargs(group), completions=[m[0] for m in made],
                completions_ids=[m[1] for m in made], completions_sequences=[m[2] for m in made],
                tool_call_counts=[m[3] for m in made], tool_failure_counts=[m[4] for m in made],
                model_version=version, group_id=group.group_id, env_rewards=[None] * size,
                rollout_rewards=[m[5] for m in made])
            h_samples = await loop.tase_score(hinted)
            h_strict = [float(v.strict) for v in verdicts(hinted.prompts, hinted.completions, columns)]
            counters[PREFIX + "groups_hinted_total"] += 1
            counters[PREFIX + "groups_guided_total"] += 1
            rates[PREFIX + "guided_share"][0] += 1
            rates[PREFIX + "success_hinted"][0] += sum(h_strict)
            rates[PREFIX + "success_hinted"][1] += size
            gauges[PREFIX + "hint_level"] = float(level)
            gauges[PREFIX + "version_gap"] = float(version - group.model_version)
            out = (hinted, h_samples)
            strict = h_strict
        gold = None
        if self.mode in ("gold", "both") and not any(strict):
            now = out[0] if isinstance(out, tuple) else group
            gold = await gold_group(loop, now, row, group.prompts[0])
            if gold is not None:
                out = (gold, await loop.tase_score(gold))
                counters[PREFIX + "groups_gold_total"] += 1
                if not plan:
                    counters[PREFIX + "groups_guided_total"] += 1
                    rates[PREFIX + "guided_share"][0] += 1
        rates[PREFIX + "gold_share"][0] += gold is not None
        rates[PREFIX + "gold_share"][1] += size
        for t in sched.cur.levels:
            lv = sched.level(t)
            if lv is not None:
                gauges[f"{PREFIX}{t}/hint_level"] = float(lv)
        if self.updates is not None:
            self.updates.put(sched.state())
        loop._push_metrics(gauges)
        return out


class WorkerSchedule(WorkerStateQueue):
    """Trainer side of WorkerGuidance (async): `sched` is the trainer's copy (started, or restored from the resumed
    checkpoint, before the worker spawns with it), `queue` the states the worker sends, `step` the optimizer step the
    worker's `step` schedule reads. `drain` loads the latest state into `sched`, which GuidanceCallback saves."""

    def __init__(self, sched: HintSchedule) -> None:
        import multiprocessing as mp

        super().__init__(sched)
        self.sched = sched
        self.step = mp.get_context("spawn").Value("i", int(sched.step))  # spawn: as the queue

    def at_step(self, step: int) -> None:
        """The trainer's optimizer step, for the worker's `step` schedule and the saved state."""
        self.step.value = int(step)
        self.sched.step = int(step)


def schedule_callback(ws: WorkerSchedule) -> Any:
    """A TrainerCallback that passes the optimizer step to the worker and takes its schedule state at every step end
    and at the end of training, before GuidanceCallback saves it (it is listed first)."""
    from transformers import TrainerCallback

    class DrainGuidance(TrainerCallback):
        def on_train_begin(self, args, state, control, **kw):  # noqa: ANN001, ANN003, ANN201
            ws.at_step(state.global_step)  # a resumed run: the step it restarts at

        def on_step_end(self, args, state, control, **kw):  # noqa: ANN001, ANN003, ANN201
            ws.drain()
            ws.at_step(state.global_step)

        def on_train_end(self, args, state, control, **kw):  # noqa: ANN001, ANN003, ANN201
            ws.drain()
            ws.at_step(state.global_step)

    return DrainGuidance()
