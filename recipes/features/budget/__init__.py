"""A wall-clock budget (`max_train_seconds`): stop after that many seconds of training and save, so arms are
compared at equal time (recipes/proof.py's control). Every trainer: a callback checked after each optimizer step
(under async the rollout worker is stopped, as at max_steps, and the final model saved)."""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from recipes.features.contract import ASYNC, SFT, SYNC, Feature, Run


def _inf() -> float:
    return float("inf")


@dataclass
class BudgetOptions:
    max_train_seconds: float | None = field(default=None, metadata={
        "help": "stop after this many seconds of training (checked after each step) and save; arms compared "
                "at equal wall time (max_steps still sets the learning-rate schedule)"})


@dataclass
class BudgetArgs:
    """A wall-clock budget: the proof's more-SFT control arm trains for as long as a GRPO arm did, so that
    "GRPO vs more supervised data" compares equal compute time, not equal steps."""

    max_train_seconds: float | None = field(default=None, metadata={
        "help": "stop after this many seconds of training (checked after each step) and save; max_steps still "
                "sets the learning-rate schedule"})


def wall_clock_stop(seconds: float):
    """A TrainerCallback that ends training once `seconds` have passed since its first step began."""
    from transformers import TrainerCallback

    class WallClockStop(TrainerCallback):
        start: float | None = None

        def on_train_begin(self, args, state, control, **kwargs):
            self.start = time.monotonic()

        def on_step_end(self, args, state, control, **kwargs):
            if self.start is not None and time.monotonic() - self.start >= seconds:
                print(f"max_train_seconds {seconds:g} reached at step {state.global_step}; stopping", flush=True)
                control.should_training_stop = True
            return control

    return WallClockStop()


class Budget(Feature):
    name = "budget"
    options = BudgetOptions
    sft_options = BudgetArgs  # the warm-up's help says it without "sync only"
    after = "guidance_step_every"
    trainers = frozenset({SYNC, ASYNC, SFT})
    ranges = {"max_train_seconds": (lambda v: v is None or 0 < v < _inf(), "> 0")}

    def enabled(self, args: Any) -> bool:
        return bool(args.max_train_seconds)

    def callbacks(self, run: Run) -> list[Any]:
        return [wall_clock_stop(run.args.max_train_seconds)]


FEATURE = Budget()
