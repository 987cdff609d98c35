"""Held-out evaluation (recipes/features/heldout/evaluation.py): score generated held-out rows at each evaluation and
keep the best checkpoint. Its options are data options (GRPO and the SFT warm-up share them); sync GRPO, async GRPO (a
trainer class over TRL's AsyncGRPOTrainer: it evaluates between optimizer steps with the trainer's own weights) and
SFT."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from recipes.features.contract import ASYNC, SFT, SYNC, TRAINERS, Feature, Run
from recipes.features.heldout.rows import guard_training as guard_training  # public: recipes/shared/data.py


@dataclass
class HeldoutOptions:
    held_out_rows: int = field(default=0, metadata={"help": "score this many generated held-out rows with the "
                               "project's evaluator at each evaluation (eval_strategy/eval_steps; 0: off; "
                               "recipes/features/heldout/evaluation.py, docs/training.md)"})
    held_out_seed: int | None = field(default=None, metadata={"help": "synth seed of the held-out rows (default: "
                                      "synth_seed + 1; must differ from synth_seed)"})
    held_out_max_new_tokens: int | None = field(default=None, metadata={"help": "greedy tokens per held-out "
                                                "answer (default: max_completion_length in GRPO, 128 in SFT)"})


def heldout_problem(args: Any) -> None:
    """The held_out_* data options (at parse time): a bad value is one ValueError line."""
    for key, low in (("held_out_rows", 0), ("held_out_seed", None), ("held_out_max_new_tokens", 1)):
        v = getattr(args, key)
        if v is None and key != "held_out_rows":
            continue
        if not isinstance(v, int) or isinstance(v, bool) or (low is not None and v < low):
            raise ValueError(f"{key} must be an integer" + (f" >= {low}" if low is not None else "") + f", got {v!r}")
    if args.held_out_rows and args.held_out_seed == args.synth_seed:
        raise ValueError(f"held_out_seed {args.held_out_seed} equals synth_seed: the held-out rows must come from "
                         "another seed than the training rows")


class Heldout(Feature):
    name = "heldout"
    options = HeldoutOptions
    data_options = True
    trainers = frozenset({SYNC, ASYNC, SFT})
    refuse_at = "check"  # data options: parsed without the trainer

    def enabled(self, args: Any) -> bool:
        return bool(args.held_out_rows)

    def check_options(self, args: Any) -> None:
        heldout_problem(args)

    def check(self, run: Run) -> None:
        from recipes.features.heldout import evaluation as heldout

        heldout.check(run.args, run.cfg)  # evaluation options; fills metric_for_best_model

    def setup(self, run: Run) -> Any:
        from recipes.features.heldout import evaluation as heldout

        # before the training rows: they are guarded against it
        return heldout.prepare(run.args, run.cfg, TRAINERS[run.trainer].rows)

    def trainer_class(self, base: type, run: Run) -> type:
        from recipes.features.heldout import evaluation as heldout

        if TRAINERS[run.trainer].rollout_worker:  # TRL's AsyncGRPOTrainer: no eval_dataset, tree attention
            return heldout.async_trainer_class(base, run.state.get(self.name))
        return heldout.trainer_class(base, run.state.get(self.name))  # evaluate() scores the held-out set


FEATURE = Heldout()
