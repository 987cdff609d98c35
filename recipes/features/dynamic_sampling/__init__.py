"""DAPO's dynamic sampling (recipes/features/dynamic_sampling/sampling.py): train only on groups whose verdicts differ, re-drawing
prompts to fill the batch. Sync (docs/training.md says why not async)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from recipes.features.contract import SYNC, Feature, Run
from rewards.levels import COARSE, FINE, STRICT


@dataclass
class DynamicSamplingOptions:
    dynamic_sampling: bool = field(default=False, metadata={
        "help": "sync only: DAPO's dynamic sampling (recipes/features/dynamic_sampling/sampling.py): train only on groups whose "
                "accuracy verdicts differ, re-drawing fresh prompts from the data stream to fill the batch"})
    dynamic_sampling_max_rounds: int = field(default=4, metadata={
        "help": "dynamic sampling: most re-draw rounds per generation batch; past it the batch is filled with "
                "uniform groups that carry no loss (0: drop uniform groups from the loss, never re-draw)"})
    dynamic_sampling_granularity: str = field(default="auto", metadata={
        "help": "dynamic sampling: the granularity of the verdict a group must mix (formerly dynamic_sampling_verdict): auto (strict for fine and strict runs, coarse for "
                "coarse runs), strict, coarse or fine (partial credit: groups that differ only in it count as mixed)",
        "choices": ["auto", STRICT, COARSE, FINE]})


class DynamicSampling(Feature):
    name = "dynamic_sampling"
    modules = ("recipes/features/dynamic_sampling/sampling.py",)
    options = DynamicSamplingOptions
    after = "curriculum_down"
    trainers = frozenset({SYNC})
    renamed = {"dynamic_sampling_verdict": "dynamic_sampling_granularity"}  # one name per idea (issue 61)
    refusal = ("dynamic_sampling works with trainer: sync only (AsyncGRPOTrainer's rollout worker fills its queue on "
               "its own; filtering there is not built)")

    def enabled(self, args: Any) -> bool:
        return args.dynamic_sampling is True

    def check_options(self, args: Any) -> None:
        from recipes.features.dynamic_sampling.sampling import check_options

        check_options(args)

    def check(self, run: Run) -> None:
        from recipes.features.dynamic_sampling.sampling import check_run

        check_run(run.args, run.cfg, run.processes)

    def trainer_class(self, base: type, run: Run) -> type:
        from trl import GRPOTrainer

        from recipes.features.dynamic_sampling import sampling as dynamic_sampling

        return dynamic_sampling.trainer_class(None if base is GRPOTrainer else base)  # each round guided first

    def trainer_kwargs(self, run: Run) -> dict[str, Any]:
        from recipes.features.dynamic_sampling import sampling as dynamic_sampling

        return dynamic_sampling.trainer_args(run.args, run.rewards.level)


FEATURE = DynamicSampling()
