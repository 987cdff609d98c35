"""Guidance (recipes/features/guidance/hints.py, recipes/features/guidance/trainer.py): groups whose strict verdicts
all fail are generated again with a graded hint and/or given the gold completion as a member. Sync (a trainer mixin,
one training process) and async (a rollout hook: the worker generates the failed group again and/or puts the gold
completion in it, recipes/features/guidance/worker.py)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from recipes.features.contract import ASYNC, SYNC, TRAINERS, Feature, Run
from recipes.features.guidance.hints import MODES, SCHEDULES


@dataclass
class GuidanceOptions:
    guidance: str = field(default="none", metadata={
        "help": "guide groups whose strict verdicts all fail (recipes/features/guidance/hints.py, docs/training.md): "
                "hint (generate the group again with the task's graded hint in the prompt and train on it; async: "
                "in the rollout worker), gold (put the row's gold completion in the group as one member, its "
                "behaviour log-probs the engine's; async: in the rollout worker), both (hint, then gold for a group "
                "that still fails), or none",
        "choices": ["none", "hint", "gold", "both"]})
    guidance_schedule: str = field(default="success", metadata={
        "help": "guidance: how the hint weakens: success (one level weaker when the unhinted strict accuracy of a "
                "task's last guidance_window groups reaches guidance_up), step (every guidance_step_every steps), "
                "fixed", "choices": ["success", "step", "fixed"]})
    guidance_start_level: int = field(default=0, metadata={"help": "guidance: first hint level (0: the strongest)"})
    guidance_window: int = field(default=8, metadata={"help": "guidance: groups per task a success move is judged on"})
    guidance_up: float = field(default=0.5, metadata={"help": "guidance: a weaker hint at this mean unhinted accuracy"})
    guidance_down: float = field(default=0.0, metadata={"help": "guidance: a stronger hint at or below this"})
    guidance_step_every: int = field(default=50, metadata={"help": "guidance step schedule: steps per level"})


def check_guidance(args: Any) -> None:
    """The guidance options, one ValueError line each (the trainer is the contract's: `refusal`)."""
    if args.guidance not in MODES:
        raise ValueError(f"guidance must be one of {', '.join(MODES)}, got {args.guidance!r}")
    if args.guidance_schedule not in SCHEDULES:
        raise ValueError(f"guidance_schedule must be one of {', '.join(SCHEDULES)}, got {args.guidance_schedule!r}")
    for key, low in (("guidance_start_level", 0), ("guidance_window", 1), ("guidance_step_every", 1)):
        v = getattr(args, key)
        if not isinstance(v, int) or isinstance(v, bool) or v < low:
            raise ValueError(f"{key} must be an integer >= {low}, got {v!r}")
    up, down = args.guidance_up, args.guidance_down
    if not all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in (up, down)) \
            or not 0.0 <= down < up <= 1.0:
        raise ValueError(f"guidance_down and guidance_up must be numbers with 0 <= down < up <= 1, got down "
                         f"{down!r}, up {up!r}")


class Guidance(Feature):
    name = "guidance"
    requires = ("tracking", "curriculum", "dynamic_sampling")
    options = GuidanceOptions
    after = "dynamic_sampling_granularity"
    trainers = frozenset({SYNC, ASYNC})
    hooks = {SYNC: ("setup", "trainer_class", "trainer_kwargs", "callbacks"), ASYNC: ("setup", "callbacks", "rollout")}
    rollout_before = ("reward_log", "dynamic_sampling")  # they read the hinted group, as sync's guided batch

    def enabled(self, args: Any) -> bool:
        return args.guidance != "none"

    def check_options(self, args: Any) -> None:
        check_guidance(args)

    def check(self, run: Run) -> None:
        from recipes.features.guidance import hints as guidance

        # async: the worker retries a group in its one process, whatever the trainer's process count
        guidance.check_run(run.args, run.cfg, 1 if TRAINERS[run.trainer].rollout_worker else run.processes,
                           run.model_args)

    def setup(self, run: Run) -> Any:
        from recipes.features.guidance import hints as guidance

        sched = guidance.start(run.args, run.resume)
        if sched is not None and TRAINERS[run.trainer].rollout_worker:  # the worker moves it: a way back
            from recipes.features.guidance.worker import WorkerSchedule

            return WorkerSchedule(sched)
        return sched

    def trainer_class(self, base: type, run: Run) -> type:
        from trl import GRPOTrainer

        from recipes.features.guidance import trainer as guidance_trainer

        return guidance_trainer.trainer_class(None if base is GRPOTrainer else base)

    def trainer_kwargs(self, run: Run) -> dict[str, Any]:
        from recipes.features.guidance import hints as guidance

        rewards = run.rewards  # the reward functions before any logging wrapper (the gold member's reward)
        return guidance.trainer_args(run.args, run.state.get(self.name), rewards.funcs, rewards.weights)

    def callbacks(self, run: Run) -> list[Any]:
        from recipes.features.guidance import hints as guidance

        state = run.state.get(self.name)
        if TRAINERS[run.trainer].rollout_worker and state is not None:  # async: the worker's state first, then saved
            from recipes.features.guidance.worker import schedule_callback

            return [schedule_callback(state), *guidance.callbacks(state.sched)]
        return guidance.callbacks(state)

    def dry_run_line(self, run: Run) -> str | None:
        if not TRAINERS[run.trainer].rollout_worker:
            return None
        what = {"hint": "generated again with its task's hint",
                "gold": "given the row's gold completion as a member (its log-probs the engine's)",
                "both": "generated again with its task's hint, then given the gold completion if it still fails"}
        return (f"guidance {run.args.guidance}: in the rollout worker, a group whose strict verdicts all fail is "
                f"{what[run.args.guidance]} ({run.args.guidance_schedule} schedule; "
                "recipes/features/guidance/worker.py)")

    def rollout(self, run: Run) -> list[Any]:
        from recipes.features.guidance.worker import WorkerGuidance

        state = run.state[self.name]
        return [WorkerGuidance(state.sched, state.queue, state.step, run.args.guidance)]


FEATURE = Guidance()
