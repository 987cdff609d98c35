"""The training features, in one ordered list, and the folds the entry points run over it (recipes/grpo.py,
recipes/async_grpo/main.py, recipes/sft_warmup.py): adding a feature is one package here (recipes/features/<name>/,
its adapter in __init__.py) and one entry in FEATURES (docs/architecture.md, "Training features: one module and one
list entry"). recipes/features/contract.py says what a feature declares.

The order is the order of effects: setups (a curriculum's line, then the held-out set's, then the guidance
schedule's), reward wrappers (the first listed wraps first, so it sits innermost), callbacks and post-build notes;
trainer mixins fold from the last to the first, so the first listed is the outermost class."""
from __future__ import annotations

import dataclasses
from typing import Any

from recipes.features import (
    budget,
    cpu_speed,
    curriculum,
    dynamic_sampling,
    guidance,
    heldout,
    presets,
    reward_log,
    tracking,
    vllm_cpu,
)
from recipes.features.contract import (
    ASYNC,
    GRPO_TRAINERS,
    RUN_HOOKS,
    SFT,
    SYNC,
    TRAINERS,
    Feature,
    Run,
    TrainerKind,
    trainer_kind,
)

__all__ = ["FEATURES", "Feature", "Run", "TrainerKind", "TRAINERS", "GRPO_TRAINERS", "SYNC", "ASYNC", "SFT",
           "trainer_kind", "RUN_HOOKS", "skipped", "given_problem", "rollout", "rollout_order", "feature",
           "option_fields",
           "check_options", "ranges", "check", "environment", "setup", "dataset_kwargs", "wrap_rewards", "callbacks",
           "trainer_class", "trainer_kwargs", "after_build", "after_train", "dry_run_lines", "overlay", "argv",
           "sft_option_types", "merged", "reward_names", "reward_kwargs", "renamed"]

FEATURES: list[Feature] = [tracking.FEATURE, presets.FEATURE, curriculum.FEATURE, reward_log.FEATURE, heldout.FEATURE,
                           vllm_cpu.FEATURE, cpu_speed.FEATURE, dynamic_sampling.FEATURE, guidance.FEATURE,
                           budget.FEATURE]


def feature(name: str) -> Feature:
    """The listed feature called `name`."""
    return next(f for f in FEATURES if f.name == name)


def option_fields(base: list[tuple[str, Any, Any]], data: bool) -> list[tuple[str, Any, Any]]:
    """`base` (make_dataclass field specs) with every listed feature's option fields inserted after the option its
    `after` names (at the end without one): DataArgs (`data`) or TaseArgs."""
    out = list(base)
    for f in FEATURES:
        if f.options is None or f.data_options != data:
            continue
        spec = [(x.name, x.type, dataclasses.field(default=x.default, default_factory=x.default_factory,
                                                   metadata=x.metadata)) for x in dataclasses.fields(f.options)]
        names = [n for n, _, _ in out]
        at = names.index(f.after) + 1 if f.after in names else len(out)
        out[at:at] = spec
    return out


def _present(f: Feature, args: Any) -> bool:
    """The feature's options, or its SFT options, are among `args` (the SFT warm-up has only the data and its own
    features' options)."""
    return f.options is None or any(all(hasattr(args, x.name) for x in dataclasses.fields(o))
                                    for o in (f.options, f.sft_options) if o is not None)


def _for(args: Any, trainer: str) -> list[Feature]:
    """The features a run of `trainer` folds: those that work with it and whose options it has."""
    return [f for f in FEATURES if f.supports(trainer) and _present(f, args)]


def skipped(f: Feature, trainer: str) -> str | None:
    """The one line that refuses feature `f`, enabled, under `trainer`: the trainer is not among those it declares,
    or its entry point does not fold a run hook the feature needs there; None where the trainer runs it whole."""
    if not f.supports(trainer):
        return f.refusal or (f"{f.name} does not run with trainer: {trainer} (its module declares "
                             f"{', '.join(sorted(f.trainers))}; docs/training.md)")
    missing = sorted(f.needs(trainer) - TRAINERS[trainer].folds)
    if missing:
        return (f"{f.name} needs the {', '.join(missing)} hook(s), which trainer: {trainer} does not run "
                f"({TRAINERS[trainer].entry}); docs/training.md")
    return None


def check_options(args: Any, data: bool) -> None:
    """Parse time (the options dataclasses' __post_init__): each feature's option checks, then its declared trainers
    and hooks (the first problem is one ValueError line: nothing enabled is left out without a word)."""
    trainer = getattr(args, "trainer", None)
    for f in FEATURES:
        if f.data_options != data or not _present(f, args):
            continue
        f.check_options(args)
        if trainer and f.refuse_at == "parse" and f.enabled(args) and (line := skipped(f, trainer)):
            raise ValueError(line)
        if f.enabled(args) and (not trainer or f.supports(trainer)):
            f.check_enabled(args, TRAINERS[trainer] if trainer else None)


def given_problem(given: set[str], trainer: str) -> str | None:
    """Before the parser: an option given on the command line or in the YAML that belongs to a feature `trainer`
    does not run (curriculum_window under async without the curriculum would be accepted and ignored)."""
    for f in FEATURES:
        if f.options is None or f.supports(trainer):
            continue
        mine = sorted(given & {x.name for x in dataclasses.fields(f.options)})
        if mine:
            return f"{skipped(f, trainer)} (given: {', '.join(mine)})"
    return None


def ranges() -> dict[str, tuple[Any, str]]:
    """The features' option ranges (config.check_trainer_ranges checks them beside the trainer's)."""
    return {k: v for f in FEATURES for k, v in f.ranges.items()}


def check(run: Run) -> None:
    """A dry run and a real start alike (grpo_args.validate, the SFT warm-up): each feature's checks, then a
    feature enabled under a trainer it does not work with (refuse_at check) is one TaseError line."""
    from common.errors import TaseError

    for f in FEATURES:
        if not _present(f, run.args):
            continue
        f.check(run)
        if f.refuse_at == "check" and f.enabled(run.args) and (line := skipped(f, run.trainer)):
            raise TaseError(line)


def overlay(config: Any, route: Any) -> None:
    """Before the parser exists: features that lay values over the --config YAML (a preset)."""
    for f in FEATURES:
        f.overlay(config, route)


def renamed() -> dict[str, str]:
    """Former option names -> new ones, accepted with a deprecation line (recipes/shared/parser.py
    RecipeParser.rename)."""
    return {old: new for f in FEATURES for old, new in f.renamed.items()}


def reward_names(names: list[str], args: Any) -> list[str]:
    """The reward names with those the features add (soft_overlong's)."""
    for f in FEATURES:
        if _present(f, args):
            names = f.reward_names(names, args)
    return names


def reward_kwargs(args: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for f in FEATURES:
        if _present(f, args):
            out.update(f.reward_kwargs(args))
    return out


def argv(config: Any, route: Any, trainer: str) -> list[str]:
    """Before the parser exists: options the features add to the command line (cpu_bf16's resolved --bf16)."""
    return [a for f in FEATURES for a in f.argv(config, route, trainer)]


def environment(cfg: Any) -> dict[str, str]:
    """Process variables the features want set (setdefault) before the run starts."""
    out: dict[str, str] = {}
    for f in FEATURES:
        out.update(f.environment(cfg))
    return out


def setup(run: Run) -> None:
    """Each enabled feature's state for this run, in run.state[name] (before the training rows are built)."""
    for f in _on(run, "setup"):
        run.state[f.name] = f.setup(run)


def _on(run: Run, hook: str | None = None) -> list[Feature]:
    """The enabled features of the run; with `hook`, those that need it under the run's trainer (Feature.needs)."""
    return [f for f in _for(run.args, run.trainer) if f.enabled(run.args)
            and (hook is None or hook in f.needs(run.trainer))]


def dataset_kwargs(run: Run) -> dict[str, Any]:
    """Keyword arguments of recipes/shared/data.build_dataset from the features' state (a curriculum's levels)."""
    out: dict[str, Any] = {}
    for f in _on(run, "dataset_kwargs"):
        out.update(f.dataset_kwargs(run))
    return out


def wrap_rewards(funcs: list[Any], run: Run) -> list[Any]:
    """The reward functions through each feature's wrapper, the first listed innermost."""
    for f in _on(run, "wrap_rewards"):
        funcs = f.wrap_rewards(funcs, run)
    return funcs


def callbacks(run: Run) -> list[Any]:
    return [cb for f in _on(run, "callbacks") for cb in f.callbacks(run)]


def trainer_class(base: type, run: Run) -> type:
    """`base` with each feature's mixin, the first listed outermost."""
    for f in reversed(_on(run, "trainer_class")):
        base = f.trainer_class(base, run)
    return base


def trainer_kwargs(run: Run) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for f in _on(run, "trainer_kwargs"):
        out.update(f.trainer_kwargs(run))
    return out


def after_build(trainer: Any, run: Run) -> None:
    for f in _on(run, "after_build"):
        f.after_build(trainer, run)


def after_train(trainer: Any, run: Run) -> None:
    for f in _on(run, "after_train"):
        f.after_train(trainer, run)


def rollout(run: Run) -> list[Any]:
    """The objects the async rollout worker runs on each scored group, in the order of the list, except that a
    feature's hooks move before those of the features its `rollout_before` names (guidance's hinted retry comes
    before reward logging and dynamic sampling read the group, as sync's guided batch does)."""
    return [hook for f in rollout_order(_on(run, "rollout")) for hook in f.rollout(run)]


def rollout_order(on: list[Feature]) -> list[Feature]:
    """`on` (features in the list's order) with each one moved before the first of those its `rollout_before`
    names."""
    order = list(on)
    for f in list(order):
        ahead = [i for i, g in enumerate(order) if g.name in f.rollout_before]
        if ahead and min(ahead) < order.index(f):
            order.remove(f)
            order.insert(min(ahead), f)
    return order


def dry_run_lines(run: Run) -> list[str]:
    """The features the run folds (and those its trainer refuses), then each enabled feature's line (what it will do
    in this run) and what the trainer does in a feature's place."""
    refused = [f.name if skipped(f, run.trainer) else f"{f.name} {f.refused_values[run.trainer]}" for f in FEATURES
               if _present(f, run.args) and (skipped(f, run.trainer) or run.trainer in f.refused_values)]
    head = f"features (trainer: {run.trainer}): {', '.join(f.name for f in _on(run))}" + (
        f"; refused here if enabled: {', '.join(refused)}" if refused else "")
    return [head, *(line for f in _on(run) for line in (f.dry_run_line(run), _native(f, run.trainer)) if line)]


def _native(f: Feature, trainer: str) -> str | None:
    why = f.native.get(trainer)
    return f"{f.name}: {why}" if why else None


def sft_option_types() -> tuple[type, ...]:
    """The option dataclasses the SFT warm-up parses beside DataArgs: its features' own (not data) options."""
    return tuple(f.sft_options for f in FEATURES if f.supports(SFT) and f.sft_options is not None)


class merged:
    """One options object over several parsed dataclasses (the SFT warm-up's DataArgs and its features' options),
    read by attribute."""

    def __init__(self, *parts: Any) -> None:
        self._parts = parts

    def __getattr__(self, name: str) -> Any:
        for p in self._parts:
            if hasattr(p, name):
                return getattr(p, name)
        raise AttributeError(name)
