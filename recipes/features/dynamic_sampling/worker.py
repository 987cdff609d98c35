"""Dynamic sampling under trainer: async: the rollout worker's group filter and the trainer's record of the groups it
dropped (the sync trainer's re-draws are in sampling.py)."""
from __future__ import annotations

import sys
from typing import Any

from .sampling import (
    PREFIX,  # the package's metric prefix; this module never reads the options (the adapter passes them)
)


class WorkerFilter:
    """Dynamic sampling in the async rollout worker (a rollout hook, recipes/features/dynamic_sampling.py): after TRL
    scores a group, a group whose verdicts (at `level`) are all equal is dropped there, so the trainer never sees it
    (no log-probability, no queue slot). The round cap keeps sync's meaning in a stream: at most `rounds` uniform
    groups dropped per group delivered, with one step's worth (`rounds` x `per_step` groups) of slack; past it a
    uniform group is delivered with its advantages zeroed (it carries no gradient), counted as padded, and the first
    time says so in one line. So a policy whose every group is uniform slows the trainer by rounds + 1, never stalls
    it. `dropped` (a spawn-context queue, or None) receives each dropped group's id: the trainer counts its prompt as
    used, so a resume starts after it (recipes/features/dynamic_sampling.py). Counters go out through the worker's
    metrics queue (TRL sums the `_total` ones per logging window)."""

    def __init__(self, level: str, rounds: int, per_step: int, dropped: Any = None) -> None:
        self.level, self.rounds, self.per_step = level, int(rounds), max(int(per_step), 1)
        self.credit = self.rounds * self.per_step
        self.dropped, self.drawn, self.warned = dropped, 0, False

    def __getstate__(self) -> dict[str, Any]:
        from multiprocessing.context import get_spawning_popen

        state = dict(self.__dict__)
        if get_spawning_popen() is None:  # a plain pickle (TRL's picklability check): the queue goes to the child only
            state["dropped"] = None
        return state

    def __call__(self, loop: Any, group: Any, samples: list) -> list:
        from recipes.features.tracking.metrics import verdicts

        columns = {k: v for k, v in group.reward_kwargs.items() if k not in ("prompts", "completions")}
        got = verdicts(group.prompts, group.completions, columns)
        self.drawn += 1
        counters, rates = loop._counters, loop._rates
        counters[PREFIX + "groups_drawn_total"] += 1
        loop._push_metrics({PREFIX + "prompts_consumed": float(self.drawn)})
        mixed = len({getattr(v, self.level) for v in got}) > 1
        if not mixed and self.credit >= 1:
            self.credit -= 1
            counters[PREFIX + "groups_dropped_total"] += 1
            if self.dropped is not None:
                self.dropped.put(group.group_id)
            return []
        self.credit = min(self.credit + self.rounds, self.rounds * self.per_step)
        rates[PREFIX + "trained_uniform_share"][1] += 1
        if mixed:
            counters[PREFIX + "groups_kept_total"] += 1
            return samples
        counters[PREFIX + "groups_dropped_total"] += 1
        counters[PREFIX + "groups_padded_total"] += 1
        rates[PREFIX + "trained_uniform_share"][0] += 1
        if not self.warned:
            self.warned = True
            print(f"dynamic sampling: {self.rounds} uniform group(s) dropped per group delivered, and still uniform: "
                  "uniform groups now reach the trainer with zero advantage (tase/dynamic/groups_padded_total "
                  "counts them)", file=sys.stderr, flush=True)
        for s in samples:
            s.advantage = 0.0
        return samples


class DroppedGroups:
    """Trainer side of WorkerFilter's `dropped` queue (async): the ids of groups the worker dropped. Each optimizer
    step (before a checkpoint is saved) they join the trainer's trained groups, from which TRL's checkpoint computes
    the first prompt a resume restarts at (rollout_state.json's prompt_index): a dropped prompt is used, not owed."""

    def __init__(self) -> None:
        import multiprocessing as mp

        self.queue = mp.get_context("spawn").Queue()  # spawn: handed to the rollout child with its loop kwargs
        self.trainer: Any = None

    def drain(self) -> int:
        import queue

        n = 0
        while True:
            try:
                gid = self.queue.get_nowait()
            except queue.Empty:
                return n
            if self.trainer is not None:
                self.trainer._trained_groups.add(int(gid))
            n += 1


def dropped_groups_callback(dropped: DroppedGroups) -> Any:
    """A TrainerCallback that drains `dropped` at every step end (transformers saves a checkpoint after it)."""
    from transformers import TrainerCallback

    class DrainDropped(TrainerCallback):
        def on_step_end(self, args, state, control, **kwargs):
            dropped.drain()

    return DrainDropped()
