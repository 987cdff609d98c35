"""Reward logging (recipes/features/reward_log/weighted.py): tase/reward/<name>/mean and /weighted beside TRL's raw mean. Sync; no
options of its own (the weights are TRL's reward_weights)."""
from __future__ import annotations

from typing import Any

from recipes.features.contract import SYNC, Feature, Run


class RewardLog(Feature):
    name = "reward_log"
    modules = ("recipes/features/reward_log/weighted.py",)
    trainers = frozenset({SYNC})

    def wrap_rewards(self, funcs: list[Any], run: Run) -> list[Any]:
        from recipes.features.reward_log.weighted import log_weighted

        return log_weighted(funcs, run.cfg.reward_weights)


FEATURE = RewardLog()
