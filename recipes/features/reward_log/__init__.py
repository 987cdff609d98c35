"""Reward logging (recipes/features/reward_log/weighted.py): tase/reward/<name>/mean and /weighted beside TRL's raw
mean. Sync (a reward wrapper) and async (a rollout hook in the worker, which holds each group's raw rewards); no options
of its own (the weights are TRL's reward_weights, or format_weight folded into the async worker's reward functions)."""
from __future__ import annotations

from typing import Any

from recipes.features.contract import ASYNC, SFT, SYNC, Feature, Run


class RewardLog(Feature):
    name = "reward_log"
    requires = ("tracking",)
    trainers = frozenset({SYNC, ASYNC, SFT})
    hooks = {SYNC: ("wrap_rewards",), ASYNC: ("rollout",), SFT: ()}
    native = {SFT: "nothing to log: the SFT warm-up has no rewards"}

    def wrap_rewards(self, funcs: list[Any], run: Run) -> list[Any]:
        from recipes.features.reward_log.weighted import log_weighted

        return log_weighted(funcs, run.cfg.reward_weights)

    def rollout(self, run: Run) -> list[Any]:
        from recipes.features.reward_log.weighted import WorkerRewardLog

        return [WorkerRewardLog()]


FEATURE = RewardLog()
