"""The feature contract: what one training opt-in declares, in its package under recipes/features/, so that a run is
assembled by folding one list (recipes/features/__init__.py FEATURES) instead of wiring each feature by hand in
every entry point. The trainers' own differences (sync, async, SFT) are declared here too, as capabilities, so no
other module compares trainer names.

A feature is a `Feature` subclass; every hook has a do-nothing default, so a feature writes only what it does:
- `options`: the dataclass of its options (their fields join TaseArgs, or DataArgs with `data_options`, in the
  order of the list; `after` names the option they follow, which places them in `--help`);
- `trainers`: the trainers it works with; enabled under another, `refusal` is the one line (ValueError at parse
  time, or TaseError at check time with `refuse_at = "check"`), or without a refusal it is left out there;
- two check phases: at parse time (ValueError) `check_options` on its options, then, once the trainer's refusal has
  not fired, `check_enabled` on an enabled feature under the trainer it runs with (a value that trainer cannot
  honour); at a dry run and a real start alike (TaseError) `check`, with the run's config and rewards; `ranges`
  (option -> (accepts, what it must be), as config.TRAINER_RANGES);
- `renamed`: former option names, still accepted with a one-line deprecation note;
- `requires`: the other features whose code it imports (FEATURES lists them before it; tests/test_features.py
  checks both against the imports);
- `reward_names` / `reward_kwargs`: rewards the feature adds by name, and how they are built;
- `overlay` / `argv`: the command line before the parser exists (a preset's values, a resolved `--bf16`);
- `environment`: process variables a run sets before it starts (setdefault);
- `setup` (its state, once the run's folder and model are known), `dataset_kwargs` (keyword arguments of
  recipes/shared/data.build_dataset that come from its state: a curriculum's levels), `wrap_rewards`, `callbacks`,
  `trainer_class` (a mixin over the class so far), `trainer_kwargs`, `after_build` (patches and one-line notes on
  the built trainer), `after_train`, `rollout` (picklable objects the async rollout worker runs on each group it
  scores, in its own process: recipes/async_grpo/metrics.py; in the list's order, except that a feature's run
  before those of the features its `rollout_before` names), `dry_run_line`;
- `refused_values`: trainer -> the option values of an enabled feature that trainer refuses (`check_enabled` says
  why in one line; the dry run's "refused here" list names them).

No silent skips: each trainer declares the run hooks its entry point folds (`TrainerKind.folds`, checked against the
entry's source by tests/test_features.py), and each feature the run hooks it needs under each trainer (`needs`: the
ones it overrides, or `hooks[trainer]` where they differ by trainer, with `native[trainer]` saying what that trainer
does by itself instead). A feature enabled under a trainer it does not declare, or whose needed hooks that trainer
does not fold, is refused in one line (recipes/features/__init__.skipped).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

SYNC, ASYNC, SFT = "sync", "async", "sft"

# the hooks an entry point folds while it builds and runs a trainer (the parse-time hooks run for every trainer)
RUN_HOOKS = ("setup", "dataset_kwargs", "wrap_rewards", "callbacks", "trainer_class", "trainer_kwargs", "after_build",
             "after_train", "rollout")


@dataclass(frozen=True)
class TrainerKind:
    """What a trainer can do, declared once (the other modules ask these, never the trainer's name)."""

    name: str
    rollout_worker: bool = False  # generation runs in its own process/server (TRL's AsyncGRPOTrainer)
    launcher: str = "recipes/accelerate/zero3.yaml"  # the accelerate config of a multi-GPU run
    config_class: str = "TaseGRPOConfig"  # recipes/grpo_core/args.py builds it
    quantization: bool = True  # takes a quantization_config (QLoRA)
    rows: str = "grpo"  # the held-out rows it is given: grpo (prompt rows) or sft (prompt-completion rows)
    folds: frozenset[str] = frozenset()  # the RUN_HOOKS its entry point runs
    entry: str = "recipes/grpo.py"  # the module that folds them


TRAINERS: dict[str, TrainerKind] = {
    SYNC: TrainerKind(SYNC, folds=frozenset({"setup", "dataset_kwargs", "wrap_rewards", "callbacks", "trainer_class",
                                             "trainer_kwargs", "after_build", "after_train"})),
    ASYNC: TrainerKind(ASYNC, rollout_worker=True, launcher="recipes/accelerate/fsdp2.yaml",
                       config_class="TaseAsyncGRPOConfig", quantization=False, entry="recipes/async_grpo/main.py",
                       folds=frozenset({"setup", "dataset_kwargs", "callbacks", "trainer_class", "after_build",
                                        "after_train", "rollout"})),
    SFT: TrainerKind(SFT, rows="sft", entry="recipes/sft_warmup.py",
                     folds=frozenset({"setup", "callbacks", "trainer_class", "after_build", "after_train"})),
}
GRPO_TRAINERS = (SYNC, ASYNC)  # the values of TaseArgs.trainer


def trainer_kind(name: str) -> TrainerKind:
    """The declared capabilities of trainer `name` (sync, async, sft)."""
    return TRAINERS[name]


@dataclass
class Run:
    """What the hooks see of one run: its options (TaseArgs, or DataArgs plus the SFT options), the trainer's
    config and ModelConfig, the trainer kind, and what the run resolved so far. `state` holds each feature's own
    state (setup's return value) under its name: what one feature keeps stays out of the shared fields."""

    args: Any
    cfg: Any
    model_args: Any = None
    trainer: str = SYNC
    rewards: Any = None
    resume: str | None = None
    path: str | None = None
    processes: int = 1
    state: dict[str, Any] = field(default_factory=dict)


class Feature:
    """One training opt-in (the module docstring lists the hooks); subclasses override what they do."""

    name: str = ""
    options: type | None = None
    data_options: bool = False  # its options join DataArgs (shared by GRPO and the SFT warm-up)
    sft_options: type | None = None  # the options the SFT warm-up parses for it (not data options)
    after: str | None = None  # the option its options follow in TaseArgs (None: at the end)
    trainers: frozenset[str] = frozenset({SYNC, ASYNC, SFT})
    refusal: str | None = None
    refuse_at: str = "parse"  # or "check"
    ranges: dict[str, tuple[Any, str]] = {}
    renamed: dict[str, str] = {}  # former option name -> new name (accepted for one release, with one line)
    requires: tuple[str, ...] = ()  # the features whose code it imports or whose state it reads (listed before it)
    hooks: dict[str, tuple[str, ...]] = {}  # trainer -> the run hooks it needs there (default: those it overrides)
    native: dict[str, str] = {}  # trainer -> what that trainer does by itself in the feature's place (dry-run line)
    rollout_before: tuple[str, ...] = ()  # features whose rollout hooks run after this one's (it changes the group)
    refused_values: dict[str, str] = {}  # trainer -> the option values refused there (check_enabled's line says why)

    def needs(self, trainer: str) -> frozenset[str]:
        """The run hooks (RUN_HOOKS) this feature needs folded under `trainer`."""
        if trainer in self.hooks:
            return frozenset(self.hooks[trainer])
        return frozenset(h for h in RUN_HOOKS if getattr(type(self), h) is not getattr(Feature, h))

    def enabled(self, args: Any) -> bool:
        """Whether the run asked for it (a feature with no switch of its own: always)."""
        return True

    def supports(self, trainer: str) -> bool:
        return trainer in self.trainers

    def check_options(self, args: Any) -> None:
        pass

    def check_enabled(self, args: Any, kind: TrainerKind | None) -> None:
        """Parse time, when enabled and not refused: values that need the feature on, or that trainer `kind` (None:
        the SFT warm-up's options, which have no trainer) cannot honour, e.g. a CPU setting the async trainer does
        its own way (one ValueError line)."""

    def overlay(self, config: Any, route: Any) -> None:
        pass

    def reward_names(self, names: list[str], args: Any) -> list[str]:
        """The run's reward names (explicit or default) with the feature's own added."""
        return names

    def reward_kwargs(self, args: Any) -> dict[str, Any]:
        """Keyword arguments of recipes/grpo_core/reward_funcs.load_reward_funcs that come from the feature's
        options."""
        return {}

    def argv(self, config: Any, route: Any, trainer: str) -> list[str]:
        return []

    def check(self, run: Run) -> None:
        pass

    def environment(self, cfg: Any) -> dict[str, str]:
        return {}

    def setup(self, run: Run) -> Any:
        return None

    def dataset_kwargs(self, run: Run) -> dict[str, Any]:
        return {}

    def wrap_rewards(self, funcs: list[Any], run: Run) -> list[Any]:
        return funcs

    def callbacks(self, run: Run) -> list[Any]:
        return []

    def trainer_class(self, base: type, run: Run) -> type:
        return base

    def trainer_kwargs(self, run: Run) -> dict[str, Any]:
        return {}

    def after_build(self, trainer: Any, run: Run) -> None:
        pass

    def after_train(self, trainer: Any, run: Run) -> None:
        pass

    def rollout(self, run: Run) -> list[Any]:
        """Objects the async rollout worker calls as `hook(loop, group, samples) -> samples` on each group it scores
        (in its spawned process: picklable, module-level classes); a coroutine hook may return `(group, samples)`
        for a group it generated again in the scored one's place (recipes/async_grpo/metrics.TaseMetricsLoop)."""
        return []

    def dry_run_line(self, run: Run) -> str | None:
        return None
