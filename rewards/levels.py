"""The accuracy levels a GRPO run can train on, declared once: each is a verdict of `Score` (rewards/base.py) and
the name of the accuracy reward that pays it (`accuracy_<level>`, rewards/trl.py).

    coarse  the official verdict, loopholes included (the benchmark's accuracy; for ablations)
    strict  the official verdict without its loopholes, 0 or 1
    fine    partial credit in [0, 1] built on the strict verdict (the default)

A reward function of ours carries its own level (`accuracy_fine.level == "fine"`); a run's rewards are resolved
once (recipes/grpo_core/reward_funcs.resolve_rewards) into names, functions, weights and the level, and what reads the
level reads that. Only this module turns a level into a reward name. (A synth task's difficulty levels, which the
curriculum moves, are another thing: synth/core.py.)

Coarse and official are one idea, the official evaluator's verdict, under one name per role: `coarse` names the
verdict and the level (`Score.coarse`, `accuracy_coarse`, `--reward_granularity coarse`), and `official_acc` names
its mean over rows, wherever a metric is logged or written (`tase/official_acc`, `tase/heldout/official_acc`,
eval/headline.py, select_checkpoint.py's `--metric official_acc`). METRICS maps each level's verdict to its
metric's key; results.json keeps its own keys (`overall` is the official accuracy, `strict.overall` the strict one).
"""
from __future__ import annotations

COARSE, STRICT, FINE = "coarse", "strict", "fine"
LEVELS = (COARSE, STRICT, FINE)  # the order `--reward_granularity` (grpo.py, ablate.py, launch/cpu.sh) lists them in
DEFAULT = FINE  # TaseArgs.reward_granularity's default
# a level's verdict -> the key its mean is logged and written under (the coarse verdict's mean is the official accuracy)
METRICS = {COARSE: "official_acc", STRICT: "strict_acc", FINE: "fine_credit"}

# the 0/1 verdict each level's credit is built on: what a group must mix under dynamic sampling's `auto`
_BINARY = {COARSE: COARSE, STRICT: STRICT, FINE: STRICT}


def accuracy_reward_name(level: str) -> str:
    """The registered name (and `__name__`, which TRL logs as rewards/<name>/mean) of the reward paying `level`."""
    if level not in LEVELS:
        raise ValueError(f"unknown accuracy level {level!r}; one of {', '.join(LEVELS)}")
    return f"accuracy_{level}"


def check_level(value: object, option: str = "reward_granularity") -> str:
    """`value` as a level; anything else is one ValueError line naming `option`."""
    if value not in LEVELS:
        raise ValueError(f"{option} must be {', '.join(LEVELS[:-1])} or {LEVELS[-1]}, got {value!r}")
    return str(value)


def watched(level: str | None) -> str:
    """The verdict a run's groups are watched on (tase/zero_var_groups): its own level; strict for a run with no
    accuracy reward of ours (`level` None)."""
    return level or STRICT


def binary(level: str | None) -> str:
    """The 0/1 verdict `level`'s credit is built on (fine: the strict verdict); strict with no level."""
    return _BINARY[level] if level else STRICT
