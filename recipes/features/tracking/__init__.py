"""Tracking (recipes/features/tracking/metrics.py): the tase/ metrics of every reward batch, the one-line step logs, the
trackers report_to names (installed, with W&B's files under the run folder). Every trainer; no options of its own (TRL's
report_to)."""
from __future__ import annotations

from typing import Any

from recipes.features.contract import ASYNC, SFT, SYNC, Feature, Run
from recipes.features.tracking.metrics import PREFIX as PREFIX, Verdict as Verdict, verdicts as verdicts  # public


class Tracking(Feature):
    name = "tracking"
    hooks = {SYNC: ("wrap_rewards", "after_build"), ASYNC: ("after_build",), SFT: ("after_build",)}
    native = {ASYNC: "the tase/ metrics ride on each sample from the rollout worker (recipes/async_grpo/metrics.py)"}

    def check(self, run: Run) -> None:
        from common.errors import TaseError
        from recipes.features.tracking import metrics as tracking

        why = tracking.check_trackers(run.cfg)
        if why:
            raise TaseError(why)

    def environment(self, cfg: Any) -> dict[str, str]:
        from recipes.features.tracking import metrics as tracking

        return tracking.tracker_env(cfg)  # W&B's local files under the run folder unless WANDB_DIR says

    def wrap_rewards(self, funcs: list[Any], run: Run) -> list[Any]:
        from recipes.features.tracking import metrics as tracking

        return tracking.watch(funcs, run.rewards.level)  # the tase/ metrics, through TRL's log_metric hook

    def after_build(self, trainer: Any, run: Run) -> None:
        from recipes.features.tracking import metrics as tracking

        tracking.short_logs(trainer)  # one line per logged step; the whole dict in metrics.jsonl (--verbose prints it)


FEATURE = Tracking()
