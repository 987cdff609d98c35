"""DAPO's dynamic sampling (recipes/features/dynamic_sampling/sampling.py): train only on groups whose verdicts
differ, re-drawing prompts to fill the batch. Sync (a trainer mixin) and async (a rollout hook: the worker drops a
uniform group before it reaches the trainer's queue; docs/training.md, "Dynamic sampling")."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from recipes.features.contract import ASYNC, SYNC, Feature, Run
from rewards.levels import COARSE, FINE, STRICT


@dataclass
class DynamicSamplingOptions:
    dynamic_sampling: bool = field(default=False, metadata={
        "help": "DAPO's dynamic sampling (recipes/features/dynamic_sampling/sampling.py): train only on groups whose "
                "accuracy verdicts differ, re-drawing fresh prompts from the data stream to fill the batch (async: the "
                "rollout worker drops uniform groups)"})
    dynamic_sampling_max_rounds: int = field(default=4, metadata={
        "help": "dynamic sampling: most re-draw rounds per generation batch; past it the batch is filled with "
                "uniform groups that carry no loss (0: drop uniform groups from the loss, never re-draw)"})
    dynamic_sampling_granularity: str = field(default="auto", metadata={
        "help": "dynamic sampling: the granularity of the verdict a group must mix (formerly "
                "dynamic_sampling_verdict): auto (strict for fine and strict runs, coarse for coarse runs), strict, "
                "coarse or fine (partial credit: groups that differ only in it count as mixed)",
        "choices": ["auto", STRICT, COARSE, FINE]})


class DynamicSampling(Feature):
    name = "dynamic_sampling"
    requires = ("tracking",)
    options = DynamicSamplingOptions
    after = "curriculum_down"
    trainers = frozenset({SYNC, ASYNC})
    hooks = {SYNC: ("trainer_class", "trainer_kwargs"), ASYNC: ("setup", "rollout", "callbacks", "after_build")}
    renamed = {"dynamic_sampling_verdict": "dynamic_sampling_granularity"}  # one name per idea

    def enabled(self, args: Any) -> bool:
        return args.dynamic_sampling is True

    def check_options(self, args: Any) -> None:
        from recipes.features.dynamic_sampling.sampling import check_options

        check_options(args)

    def check(self, run: Run) -> None:
        from recipes.features.dynamic_sampling.sampling import check_run

        if not run.args.dynamic_sampling or not hasattr(run.cfg, "steps_per_generation"):
            return  # async: the worker keeps or drops whole groups in one process
        check_run(run.args, run.cfg, run.processes)

    def setup(self, run: Run) -> Any:
        """Async: where the worker reports the groups it dropped (their prompts count as used on resume)."""
        from recipes.features.dynamic_sampling.worker import DroppedGroups

        return DroppedGroups()

    def rollout(self, run: Run) -> list[Any]:
        from recipes.features.dynamic_sampling.sampling import verdict_level
        from recipes.features.dynamic_sampling.worker import WorkerFilter

        cfg = run.cfg
        per_step = cfg.per_device_train_batch_size * cfg.gradient_accumulation_steps * max(cfg.world_size, 1) \
            // cfg.num_generations
        return [WorkerFilter(verdict_level(run.args, run.rewards.level), run.args.dynamic_sampling_max_rounds,
                             per_step, run.state[self.name].queue)]

    def callbacks(self, run: Run) -> list[Any]:
        from recipes.features.dynamic_sampling.worker import dropped_groups_callback

        return [dropped_groups_callback(run.state[self.name])]

    def after_build(self, trainer: Any, run: Run) -> None:
        run.state[self.name].trainer = trainer

    def trainer_class(self, base: type, run: Run) -> type:
        from trl import GRPOTrainer

        from recipes.features.dynamic_sampling import sampling as dynamic_sampling

        return dynamic_sampling.trainer_class(None if base is GRPOTrainer else base)  # each round guided first

    def trainer_kwargs(self, run: Run) -> dict[str, Any]:
        from recipes.features.dynamic_sampling import sampling as dynamic_sampling

        return dynamic_sampling.trainer_args(run.args, run.rewards.level)


FEATURE = DynamicSampling()
