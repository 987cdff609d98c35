"""The adaptive curriculum (recipes/features/curriculum/levels.py): each task with difficulty levels moves up or down by
the strict accuracy of its last groups; the data stream reads the level at every draw. Synth data streamed; sync (a
reward wrapper reads the verdicts) and async (a rollout hook: the worker draws the prompts, so the level lives there and
its state comes back to the trainer for the checkpoints)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from recipes.features.contract import ASYNC, SYNC, TRAINERS, Feature, Run, TrainerKind


@dataclass
class CurriculumOptions:
    curriculum: bool = field(default=False, metadata={
        "help": "adaptive curriculum (recipes/features/curriculum/levels.py; needs --streaming true): each task with "
                "difficulty levels moves up/down by the strict accuracy of its last curriculum_window GRPO groups"})
    curriculum_start_level: int = field(default=0, metadata={"help": "curriculum: every task's first level (0: the "
                                        "easiest; capped at a task's top level, the official range)"})
    curriculum_window: int = field(default=20, metadata={"help": "curriculum: groups per task a move is judged on"})
    curriculum_up: float = field(default=0.70,
                                 metadata={"help": "curriculum: one level up at this mean strict accuracy"})
    curriculum_down: float = field(default=0.10, metadata={"help": "curriculum: one level down at or below this"})


def check_curriculum(args: Any) -> None:
    """The curriculum options, one ValueError line each (the trainer is the contract's: `refusal`)."""
    window, start = args.curriculum_window, args.curriculum_start_level
    for key, v, low in (("curriculum_window", window, 1), ("curriculum_start_level", start, 0)):
        if not isinstance(v, int) or isinstance(v, bool) or v < low:
            raise ValueError(f"{key} must be an integer >= {low}, got {v!r}")
    up, down = args.curriculum_up, args.curriculum_down
    if not all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in (up, down)) \
            or not 0.0 <= down < up <= 1.0:
        raise ValueError(f"curriculum_down and curriculum_up must be numbers with 0 <= down < up <= 1, got down "
                         f"{down!r}, up {up!r}")
    if not args.curriculum:
        return
    if args.train_data != "synth" or not args.streaming:
        raise ValueError("curriculum needs synth data drawn as the run reads it: --train_data synth --streaming true")


def check_levels(args: Any) -> None:
    """Some task of the run has difficulty levels (after the trainer check, as before)."""
    from recipes.shared.streams import data_streams, level_counts

    counts = level_counts(data_streams(args.tasks, args.langs, args.subtasks))
    if not any(counts.values()):
        from synth.core import available

        have = ", ".join(t for t, g in available().items() if g.levels)
        raise ValueError(f"curriculum: none of the run's tasks ({', '.join(counts)}) has difficulty levels; these "
                         f"do: {have}")


class Curriculum(Feature):
    name = "curriculum"
    requires = ("tracking",)
    options = CurriculumOptions
    after = "async_trace"
    trainers = frozenset({SYNC, ASYNC})
    hooks = {SYNC: ("setup", "dataset_kwargs", "wrap_rewards", "callbacks"),
             ASYNC: ("setup", "dataset_kwargs", "callbacks", "rollout")}

    def enabled(self, args: Any) -> bool:
        return bool(args.curriculum)

    def check_options(self, args: Any) -> None:
        check_curriculum(args)

    def check_enabled(self, args: Any, kind: TrainerKind | None) -> None:
        check_levels(args)

    def check(self, run: Run) -> None:
        """A synchronous reward to read the verdicts from (curriculum.watch), checked before the model loads."""
        if run.rewards is None or not run.args.curriculum:
            return
        from trl.trainer.utils import is_async_callable

        from common.errors import TaseError

        if all(is_async_callable(f) for f in run.rewards.funcs):
            raise TaseError("curriculum needs a synchronous reward function to read the verdicts from; every one is "
                            "async")

    def setup(self, run: Run) -> Any:
        from recipes.features.curriculum import levels as curriculum

        cur = curriculum.start(run.args, run.cfg, run.resume)
        if cur is not None and TRAINERS[run.trainer].rollout_worker:  # the worker moves the levels: a way back
            return curriculum.WorkerLevels(cur)
        return cur

    def dataset_kwargs(self, run: Run) -> dict[str, Any]:
        cur = run.state.get(self.name)
        cur = getattr(cur, "cur", cur)  # async: WorkerLevels holds the trainer's copy
        return {"level": cur and cur.level}  # the data stream reads each task's difficulty level at every draw

    def wrap_rewards(self, funcs: list[Any], run: Run) -> list[Any]:
        from recipes.features.curriculum import levels as curriculum

        return curriculum.watch(funcs, run.state.get(self.name))

    def callbacks(self, run: Run) -> list[Any]:
        from recipes.features.curriculum import levels as curriculum

        state = run.state.get(self.name)
        if isinstance(state, curriculum.WorkerLevels):  # async: the worker's state first, then saved
            return [curriculum.drain_callback(state), *curriculum.callbacks(state.cur)]
        return curriculum.callbacks(state)

    def rollout(self, run: Run) -> list[Any]:
        from recipes.features.curriculum import levels as curriculum

        state = run.state[self.name]
        return [curriculum.WorkerCurriculum(state.cur, state.queue)]


FEATURE = Curriculum()
