"""The feature contract: what one training opt-in declares, in one module under recipes/features/, so that a run is
assembled by folding one list (recipes/features/__init__.py FEATURES) instead of wiring each feature by hand in
every entry point. The trainers' own differences (sync, async, SFT) are declared here too, as capabilities, so no
other module compares trainer names.

A feature is a `Feature` subclass; every hook has a do-nothing default, so a feature writes only what it does:
- `options`: the dataclass of its options (their fields join TaseArgs, or DataArgs with `data_options`, in the
  order of the list; `after` names the option they follow, which keeps `--help` in its historical order);
- `trainers`: the trainers it works with; enabled under another, `refusal` is the one line (ValueError at parse
  time, or TaseError at check time with `refuse_at = "check"`), or without a refusal it is left out there;
- `check_options` (parse time, ValueError; `check_enabled` after the trainer's refusal), `check` (a dry run and a real start alike, TaseError), `ranges`
  (option -> (accepts, what it must be), as config.TRAINER_RANGES);
- `renamed`: former option names, still accepted with a one-line deprecation note;
- `reward_names` / `reward_kwargs`: rewards the feature adds by name, and how they are built;
- `overlay` / `argv`: the command line before the parser exists (a preset's values, a resolved `--bf16`);
- `environment`: process variables a run sets before it starts (setdefault);
- `setup` (its state, once the run's folder and model are known), `wrap_rewards`, `callbacks`, `trainer_class`
  (a mixin over the class so far), `trainer_kwargs`, `after_build` (patches and one-line notes on the built
  trainer), `after_train`, `dry_run_line`.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

SYNC, ASYNC, SFT = "sync", "async", "sft"


@dataclass(frozen=True)
class TrainerKind:
    """What a trainer can do, declared once (the other modules ask these, never the trainer's name)."""

    name: str
    rollout_worker: bool = False  # generation runs in its own process/server (TRL's AsyncGRPOTrainer)
    launcher: str = "recipes/accelerate/zero3.yaml"  # the accelerate config of a multi-GPU run
    config_class: str = "TaseGRPOConfig"  # recipes/grpo_core/args.py builds it
    quantization: bool = True  # takes a quantization_config (QLoRA)
    rows: str = "grpo"  # the held-out rows it is given: grpo (prompt rows) or sft (prompt-completion rows)


TRAINERS: dict[str, TrainerKind] = {
    SYNC: TrainerKind(SYNC),
    ASYNC: TrainerKind(ASYNC, rollout_worker=True, launcher="recipes/accelerate/fsdp2.yaml",
                       config_class="TaseAsyncGRPOConfig", quantization=False),
    SFT: TrainerKind(SFT, rows="sft"),
}
GRPO_TRAINERS = (SYNC, ASYNC)  # the values of TaseArgs.trainer


def trainer_kind(name: str) -> TrainerKind:
    """The declared capabilities of trainer `name` (sync, async, sft)."""
    return TRAINERS[name]


@dataclass
class Run:
    """What the hooks see of one run: its options (TaseArgs, or DataArgs plus the SFT options), the trainer's
    config and ModelConfig, the trainer kind, and what the run resolved so far. `state` holds each feature's own
    state (setup's return value) under its name; `difficulty` is a curriculum's task -> difficulty level for the data
    (apart from the reward's granularity, `rewards.level`)."""

    args: Any
    cfg: Any
    model_args: Any = None
    trainer: str = SYNC
    rewards: Any = None
    resume: str | None = None
    path: str | None = None
    processes: int = 1
    state: dict[str, Any] = field(default_factory=dict)
    difficulty: Any = None


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
    modules: tuple[str, ...] = ()  # the modules that implement it (they, and only they, read its options too)

    def enabled(self, args: Any) -> bool:
        """Whether the run asked for it (a feature with no switch of its own: always)."""
        return True

    def supports(self, trainer: str) -> bool:
        return trainer in self.trainers

    def check_options(self, args: Any) -> None:
        pass

    def check_enabled(self, args: Any) -> None:
        """Parse time, once the trainer is known to support it."""

    def overlay(self, config: Any, route: Any) -> None:
        pass

    def reward_names(self, names: list[str], args: Any) -> list[str]:
        """The run's reward names (explicit or default) with the feature's own added."""
        return names

    def reward_kwargs(self, args: Any) -> dict[str, Any]:
        """Keyword arguments of recipes/grpo_core/reward_funcs.load_reward_funcs that come from the feature's options."""
        return {}

    def argv(self, config: Any, route: Any, trainer: str) -> list[str]:
        return []

    def check(self, run: Run) -> None:
        pass

    def environment(self, cfg: Any) -> dict[str, str]:
        return {}

    def setup(self, run: Run) -> Any:
        return None

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

    def dry_run_line(self, run: Run) -> str | None:
        return None
