"""An adaptive curriculum over synth's difficulty levels (signal where GRPO has none), opt-in with
`--curriculum true` (sync GRPO, `streaming: true`).

Each task module declares its levels (`levels` in synth/tasks/<task>.py, easiest first, the last one the official
files' range; read through the registry, `recipes.shared.streams.level_counts`); a task without levels stays static.
Every task of the run starts at `curriculum_start_level` (capped at its top level) and moves as reasoning-gym moves its
datasets: over the last `curriculum_window` GRPO groups of the task drawn at its current level, a mean strict
accuracy >= `curriculum_up` moves it one level up, <= `curriculum_down` one level down; a move empties the window.

Parts: `Curriculum` (the levels and windows, pure Python), `CurriculumReward` (wraps a reward function: every
completion's strict verdict, per group, through `recipes.features.tracking.metrics.verdicts`, then logs
`tase/curriculum/<task>/level` through TRL's `log_metric` hook), `CurriculumCallback` (the state in every checkpoint:
`curriculum.json`, and in trainer_state.json's `stateful_callbacks`, written before the checkpoint is complete) and
`start` (what recipes/grpo.py calls: the curriculum, restored from the checkpoint a run resumes). The data stream
reads `Curriculum.level` at every draw (`synth.generate(level=...)`, recipes/shared/data.py); each row carries the level
it was drawn at (`LEVEL_COLUMN`), and a group drawn at another level than its task's current one (rows drawn before
a move, still in flight) does not count.
"""
from __future__ import annotations

import json
import os
import sys
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any

from common.errors import TaseError
from recipes.shared.data import LEVEL_COLUMN
from recipes.shared.worker_state import WorkerStateQueue

STATE_FILE = "curriculum.json"
PREFIX = "tase/curriculum/"


class Curriculum:
    """The current level of every task that has levels, and the strict accuracies of its last `window` groups."""

    def __init__(self, counts: dict[str, int], start: int = 0, window: int = 20, up: float = 0.70,
                 down: float = 0.10) -> None:
        self.counts = {t: n for t, n in counts.items() if n > 0}
        self.window, self.up, self.down = window, up, down
        self.levels = {t: min(start, n - 1) for t, n in self.counts.items()}
        self.scores: dict[str, deque[float]] = {t: deque(maxlen=window) for t in self.counts}
        self.moves = 0

    def level(self, task: str) -> int | None:
        """The level the data stream draws `task` at (None: a task without levels, drawn as configured)."""
        return self.levels.get(task)

    def record(self, task: str, level: int, accuracy: float) -> int | None:
        """One group's strict accuracy for `task`, drawn at `level`; the new level when it moves, else None. A group
        of a stale level (drawn before the last move) or of a task without levels is ignored."""
        if task not in self.levels or level != self.levels[task]:
            return None
        window = self.scores[task]
        window.append(float(accuracy))
        if len(window) < self.window:
            return None
        mean = sum(window) / len(window)
        lv = self.levels[task]
        if mean >= self.up and lv < self.counts[task] - 1:
            lv += 1
        elif mean <= self.down and lv > 0:
            lv -= 1
        else:
            return None
        self.levels[task] = lv
        window.clear()
        self.moves += 1
        return lv

    def state(self) -> dict[str, Any]:
        """JSON-ready: the levels, the windows' accuracies and the settings they were gathered under."""
        return {"levels": dict(self.levels), "scores": {t: list(s) for t, s in self.scores.items()},
                "window": self.window, "up": self.up, "down": self.down, "moves": self.moves}

    def load(self, state: dict[str, Any]) -> None:
        """Levels and windows from `state` for the tasks this run has (a saved level past a task's top is capped;
        a task the state lacks keeps its start level); the thresholds stay this run's."""
        for t, lv in (state.get("levels") or {}).items():
            if t in self.levels and isinstance(lv, int) and not isinstance(lv, bool) and lv >= 0:
                self.levels[t] = min(lv, self.counts[t] - 1)
                self.scores[t].clear()
                self.scores[t].extend(float(x) for x in (state.get("scores") or {}).get(t, []))
        self.moves = int(state.get("moves") or 0)


def describe(cur: Curriculum) -> str:
    """One line: the tasks and their levels (and the tasks left static are named by the caller)."""
    return ", ".join(f"{t} {lv}/{cur.counts[t] - 1}" for t, lv in sorted(cur.levels.items()))


def state_problem(state: Any) -> str | None:
    """What is wrong with a curriculum state (`Curriculum.state()`'s shape: levels a mapping of task to a level >= 0;
    scores, moves and the settings optional), or None."""
    from common.state import mapping_problem, number, whole

    why = mapping_problem(state, {"levels": lambda v: isinstance(v, dict) and all(whole(x) for x in v.values()),
                                  "scores": lambda v: isinstance(v, dict) and all(
                                      isinstance(x, list) and all(number(y) for y in x) for x in v.values()),
                                  "moves": whole, "window": whole, "up": number, "down": number},
                          optional=("scores", "moves", "window", "up", "down"))
    return f"not a curriculum state ({why})" if why else None


def saved_state(ckpt: str | Path) -> dict[str, Any] | None:
    """The curriculum state of a checkpoint, in common/state.FALLBACK's order: its curriculum.json, else the copy in
    trainer_state.json (written with the checkpoint itself, so a kill between the checkpoint and curriculum.json
    loses nothing); None for a checkpoint of a run without a curriculum. A curriculum.json of the wrong shape (`[]`,
    `null`, a level "x") falls back to the copy, saying so; with no usable copy either, one line."""
    from common.state import read_saved

    return read_saved(Path(ckpt), STATE_FILE, "CurriculumCallback", state_problem, "curriculum levels")


def start(tase: Any, cfg: Any, resume: str | None) -> Curriculum | None:
    """The run's curriculum (None without `--curriculum`), restored from `resume`'s state when resuming. TRL's buffered
    shuffle of a streaming dataset (1,000 rows read ahead) would hold every level change back by that many rows, so it
    is turned off: synth draws in random order already."""
    if not tase.curriculum:
        return None
    from recipes.shared.streams import data_streams, level_counts

    if getattr(cfg, "restore_callback_states_from_checkpoint", False):
        raise TaseError("curriculum restores its own state on resume; set restore_callback_states_from_checkpoint "
                        "false")
    counts = level_counts(data_streams(tase.tasks, tase.langs, tase.subtasks))
    cur = Curriculum(counts, tase.curriculum_start_level, tase.curriculum_window, tase.curriculum_up,
                     tase.curriculum_down)
    note = "start"
    if resume:
        saved = saved_state(resume)
        if saved:
            cur.load(saved)
            note = f"restored from {resume}"
        else:
            note = f"start ({resume} holds no curriculum state)"
    if getattr(cfg, "shuffle_dataset", False):
        cfg.shuffle_dataset = False
    static = sorted(t for t, n in counts.items() if n == 0)
    print(f"curriculum ({note}): {describe(cur)}" + (f"; static: {', '.join(static)}" if static else "")
          + f"; window {cur.window} groups, up >= {cur.up}, down <= {cur.down}", file=sys.stderr)
    return cur


class CurriculumReward:
    """A reward function that also feeds the curriculum: it returns exactly what the wrapped function returns (and
    keeps its name), then takes every completion's strict verdict over the whole generation batch (all processes, in
    rank order, as recipes/features/tracking/metrics.py does), moves the levels by each GRPO group's mean and logs
    them."""

    def __init__(self, func: Callable[..., Any], curriculum: Curriculum) -> None:
        self.func, self.cur = func, curriculum
        self.__name__ = getattr(func, "__name__", type(func).__name__)
        self.__doc__ = getattr(func, "__doc__", None)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        out = self.func(*args, **kwargs)
        # TRL passes keywords
        metrics = self.update({**dict(zip(("prompts", "completions"), args, strict=False)), **kwargs})
        log = kwargs.get("log_metric")
        if callable(log):
            for k, v in metrics.items():
                log(k, v)
        return out

    def update(self, kwargs: dict[str, Any]) -> dict[str, float]:
        """Feed the batch's groups to the curriculum; the metrics to log: each task's level after the batch and the mean
        level its rows in this batch were drawn at (they differ for a batch drawn before a move)."""
        from recipes.features.tracking.metrics import _gather, groups, verdicts

        columns = {k: v for k, v in kwargs.items() if k not in ("prompts", "completions")}
        vs = verdicts(kwargs.get("prompts"), kwargs.get("completions"), columns)
        levels = list(kwargs.get(LEVEL_COLUMN) or [-1] * len(vs))
        parts = _gather([(v, lv) for v, lv in zip(vs, levels, strict=False)])
        rows = [x for p in parts for x in p]
        by_group = groups([v for v, _ in rows])
        drawn: dict[str, list[int]] = {}
        i = 0
        for g in by_group:
            lv = int(rows[i][1])
            i += len(g)
            task = g[0].task
            if task is None or lv < 0:
                continue
            drawn.setdefault(task, []).append(lv)
            self.cur.record(task, lv, sum(v.strict for v in g) / len(g))
        m = {f"{PREFIX}{t}/level": float(lv) for t, lv in self.cur.levels.items()}
        m.update({f"{PREFIX}{t}/drawn_level": sum(x) / len(x) for t, x in drawn.items()})
        return m


def watch(funcs: list[Any], cur: Curriculum | None) -> list[Any]:
    """The run's reward functions with the first synchronous one wrapped in CurriculumReward (unchanged without a
    curriculum). TRL runs async ones concurrently, outside the order the gather across processes needs."""
    if cur is None:
        return funcs
    from trl.trainer.utils import is_async_callable

    out = list(funcs)
    for i, f in enumerate(out):
        if not is_async_callable(f):
            out[i] = CurriculumReward(f, cur)
            return out
    raise TaseError("curriculum needs a synchronous reward function to read the verdicts from; every one is async")


def state_callback(name: str, file: str, snapshot: Callable[[], dict[str, Any]]) -> Any:
    """A trainer callback, its class named `name` (its key in trainer_state.json's stateful_callbacks), that keeps
    `snapshot()` with every checkpoint and the final model: `state()` goes into trainer_state.json as the Trainer
    writes the checkpoint (before it is complete); on_save and on_train_end write `file` beside it, replaced atomically
    (a kill leaves the old file or the new one). The curriculum's and guidance's schedules both use it."""
    from transformers import TrainerCallback
    from transformers.trainer_callback import ExportableState

    def write(folder: str | Path) -> None:
        tmp = Path(folder) / f".{file}.tmp"
        tmp.write_text(json.dumps(snapshot(), indent=2), encoding="utf-8")
        os.replace(tmp, Path(folder) / file)

    class StateCallback(TrainerCallback, ExportableState):
        def state(self) -> dict[str, Any]:
            return {"args": {}, "attributes": {"saved": snapshot()}}

        def on_train_begin(self, args, state, control, **kw):  # noqa: ANN001, ANN003, ANN201
            # a run resumed from a checkpoint made without this callback: its state has no entry of ours, which
            # transformers' _save_checkpoint indexes (KeyError: 'CurriculumCallback' at the first save)
            state.stateful_callbacks.setdefault(type(self).__name__, self.state())

        def on_save(self, args, state, control, **kw):  # noqa: ANN001, ANN003, ANN201
            ckpt = Path(args.output_dir) / f"checkpoint-{state.global_step}"
            if state.is_world_process_zero and ckpt.is_dir():
                write(ckpt)

        def on_train_end(self, args, state, control, **kw):  # noqa: ANN001, ANN003, ANN201
            if state.is_world_process_zero:
                write(args.output_dir)

    return type(name, (StateCallback,), {})()


def callbacks(cur: Curriculum | None) -> list[Any]:
    """The trainer callback that saves the curriculum with every checkpoint and the final model (none without one)."""
    return [] if cur is None else [state_callback("CurriculumCallback", STATE_FILE, cur.state)]


# --------------------------------------------------------------------------------------------- trainer: async


class WorkerCurriculum:
    """The curriculum in the async rollout worker (a rollout hook, recipes/async_grpo/metrics.py): the worker draws the
    prompts, so the level lives there. `cur` reaches the spawned worker in the same pickle as the dataset whose
    stream reads `cur.level` at every draw (both are the worker's loop arguments), so the child's copy is one object:
    this hook moves it from each group's strict verdicts (the group's own policy version scored them), the stream
    draws at its levels, and the metrics go out through the worker's metrics queue under sync's names. After each
    group its state goes back to the trainer over `updates` (a spawn-context queue; WorkerLevels), which saves it with
    every checkpoint. The hook runs on every group scored, also those dynamic sampling drops afterwards (as sync's
    reward wrapper sees every generation batch)."""

    def __init__(self, cur: Curriculum, updates: Any = None) -> None:
        self.cur, self.updates = cur, updates

    def __getstate__(self) -> dict[str, Any]:
        from multiprocessing.context import get_spawning_popen

        state = dict(self.__dict__)
        if get_spawning_popen() is None:  # a plain pickle (TRL's picklability check): the queue goes to the child only
            state["updates"] = None
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        if self.updates is not None:  # in the child: its exit must not wait on states the trainer no longer reads
            self.updates.cancel_join_thread()

    def __call__(self, loop: Any, group: Any, samples: list) -> list:
        from recipes.features.tracking.metrics import verdicts

        columns = {k: v for k, v in group.reward_kwargs.items() if k not in ("prompts", "completions")}
        got = verdicts(group.prompts, group.completions, columns)
        level = int((group.reward_kwargs.get(LEVEL_COLUMN) or [-1])[0])
        task = got[0].task if got else None
        metrics: dict[str, float] = {}
        if task is not None and level >= 0:
            self.cur.record(task, level, sum(v.strict for v in got) / len(got))
            metrics[f"{PREFIX}{task}/drawn_level"] = float(level)
            if self.updates is not None:
                self.updates.put(self.cur.state())
        metrics.update({f"{PREFIX}{t}/level": float(lv) for t, lv in self.cur.levels.items()})
        loop._push_metrics(metrics)
        return samples


class WorkerLevels(WorkerStateQueue):
    """Trainer side of WorkerCurriculum (async): `cur` is the trainer's copy (started, or restored from the resumed
    checkpoint, before the worker spawns with it), `queue` the states the worker sends. `drain` loads the latest into
    `cur`, which CurriculumCallback saves: a checkpoint holds the levels and windows as of the groups the worker had
    scored by its step end (a few groups ahead of the trained ones: those still queued or in flight)."""

    def __init__(self, cur: Curriculum) -> None:
        super().__init__(cur)
        self.cur = cur


def drain_callback(levels: WorkerLevels) -> Any:
    """A TrainerCallback that takes the worker's curriculum state at every step end and at the end of training, before
    CurriculumCallback saves it (it is listed first)."""
    from transformers import TrainerCallback

    class DrainLevels(TrainerCallback):
        def on_step_end(self, args, state, control, **kw):  # noqa: ANN001, ANN003, ANN201
            levels.drain()

        def on_train_end(self, args, state, control, **kw):  # noqa: ANN001, ANN003, ANN201
            levels.drain()

    return DrainLevels()
