"""A run's rewards, resolved once (`resolve_rewards`): names, functions, weights and the accuracy level, which the
trainer, the tase/ metrics, dynamic sampling, the dry run and tase_config.json read (none rebuilds them from options).

`--reward_funcs`: ours by name (rewards.REWARD_FUNCS) or any function by import path, `module:function` or
dotted `package.module.function` (the form TRL's own `trl grpo` script takes: the part after the last dot is
the function, modules in the current directory come first, even over a module of ours of the same name). A name
that resolves to nothing is one line, also under --dry_run, before any model or data is loaded; a user's function is
wrapped in reward_checks.CheckedReward (its output checked on every batch, its logged name apart from ours)."""
from __future__ import annotations

import math
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from common.errors import TaseError
from rewards.levels import LEVELS, accuracy_reward_name


@dataclass
class ResolvedRewards:
    """What a run trains on, resolved once from its options (resolve_rewards).

    names:   the reward functions as named (tase_config.json's `rewards.names`, the dry run's `rewards`)
    funcs:   the functions, in the same order (a user's wrapped in reward_checks.CheckedReward)
    weights: GRPOConfig.reward_weights as given, else 1.0 each and format_weight for `format`
    level:   the level (rewards/levels.py) of the first accuracy reward of ours among `funcs`, read from the
             function itself (`.level`); None when there is none (a user's function under any name has none)
    """

    names: list[str]
    funcs: list[Any]
    weights: list[float]
    level: str | None


def resolve_rewards(tase: Any, cfg: Any) -> ResolvedRewards:
    """The run's rewards: explicit `reward_funcs`, else the accuracy reward of `reward_granularity` (+ format, +
    soft_overlong); each loaded (an unknown one: one line) and weighted. Given reward_weights must be finite and
    one per function (one line). `cfg` is read, never changed: the trainer's reward_weights are set from this."""
    from recipes import features

    names = list(tase.reward_funcs) if tase.reward_funcs else _default_names(tase)
    names = features.reward_names(names, tase)  # soft_overlong: true (preset dapo) adds it, explicit names too
    twice = sorted({str(n) for n in names if names.count(n) > 1})
    if twice:
        raise TaseError(f"reward_funcs: {', '.join(twice)} given twice; each reward once (weight it with "
                        "reward_weights instead)")
    funcs = load_reward_funcs(names, cfg.max_completion_length, **features.reward_kwargs(tase))
    given = getattr(cfg, "reward_weights", None)  # AsyncGRPOConfig has none (grpo_args refuses it there)
    if given:
        if len(given) != len(names):
            raise TaseError(f"reward_weights has {len(given)} values for {len(names)} reward functions "
                            f"({', '.join(names)})")
        if not all(math.isfinite(w) for w in given):
            raise TaseError(f"reward_weights must be finite numbers, got {given}")
    weights = given or [tase.format_weight if n == "format" else 1.0 for n in names]
    level = next((f.level for f in funcs if getattr(f, "level", None) in LEVELS), None)
    return ResolvedRewards(names, funcs, weights, level)


def _default_names(tase: Any) -> list[str]:
    """Without explicit names: the accuracy reward of reward_granularity and format (format_reward); the features add
    theirs (soft_overlong)."""
    names = [accuracy_reward_name(tase.reward_granularity)]
    if tase.format_reward:
        names.append("format")
    return names


def split_path(spec: str) -> tuple[str, str] | None:
    """(module, attribute) of an import path, or None when `spec` is not one."""
    if ":" in spec:
        module, _, attr = spec.partition(":")
    elif "." in spec:
        module, _, attr = spec.rpartition(".")
    else:
        return None
    return (module, attr) if module and attr else None


def import_module(name: str) -> Any:
    """`importlib.import_module`, with the current directory searched first for the top-level package, as TRL's
    script does by putting it first on sys.path (a rewards file beside the command imports however the recipe was
    started: `python recipes/grpo.py` puts recipes/ first instead). sys.path itself is left alone (docs/
    architecture.md: nothing edits it); the package found there is registered in sys.modules."""
    import importlib.machinery
    import importlib.util

    top = name.split(".")[0]
    spec = importlib.machinery.PathFinder.find_spec(top, [os.getcwd()])
    if spec is not None and spec.origin and top in sys.modules and not same_origin(sys.modules[top], spec):
        return import_shadowed(name, spec)
    if top not in sys.modules:
        if spec is not None:
            mod = importlib.util.module_from_spec(spec)
            sys.modules[top] = mod
            try:
                if spec.loader is not None:
                    spec.loader.exec_module(mod)
            except BaseException:
                del sys.modules[top]
                raise
    return importlib.import_module(name)


def same_origin(mod: Any, spec: Any) -> bool:
    """Whether the module already imported as `mod` is the one `spec` finds in the current directory."""
    here = getattr(mod, "__file__", None)
    return bool(here and spec.origin) and os.path.realpath(here) == os.path.realpath(spec.origin)


def import_shadowed(name: str, spec: Any) -> Any:
    """`name` from the current directory where its top-level name is already taken by another module (ours: a
    `rewards.py` beside the command, while this package's `rewards` is loaded). The current directory comes first,
    as documented, without replacing the module already loaded: the file is loaded under `tase_user_<top>` (its
    submodules import through that package's __path__)."""
    import importlib.util

    top, _, rest = name.partition(".")
    alias = f"tase_user_{top}"
    if alias not in sys.modules:
        mod = importlib.util.module_from_spec(importlib.util.spec_from_file_location(
            alias, spec.origin, submodule_search_locations=spec.submodule_search_locations))
        sys.modules[alias] = mod
        try:
            mod.__spec__.loader.exec_module(mod)
        except BaseException:
            del sys.modules[alias]
            raise
    return importlib.import_module(f"{alias}.{rest}" if rest else alias)


def load_user(spec: str) -> Any:
    """The user's reward function `spec` names by import path; one line and exit 2 where it names none (a name that
    is neither ours nor an import path included)."""
    from rewards import REWARD_FUNCS
    from rewards.overlong import SOFT_OVERLONG

    path = split_path(spec)
    if path is None:
        names = ", ".join([*REWARD_FUNCS, SOFT_OVERLONG])
        raise TaseError(f"reward_funcs {spec}: unknown reward function; choose from {names}, or give an "
             "import path (module:function or package.module.function)")
    module, attr = path
    try:
        mod = import_module(module)
    except ModuleNotFoundError as e:
        raise TaseError(f"reward_funcs {spec}: cannot import {module} (no module named {e.name!r})") from e
    except Exception as e:  # noqa: BLE001 - the user's module failed while importing: name it, in one line
        raise TaseError(f"reward_funcs {spec}: importing {module} raised {type(e).__name__}: "
                        f"{str(e).splitlines()[0] if str(e) else ''}") from e
    func = getattr(mod, attr, None)
    if func is None:
        raise TaseError(f"reward_funcs {spec}: module {module} has no {attr!r}")
    if not callable(func):
        raise TaseError(f"reward_funcs {spec}: {module}.{attr} is a {type(func).__name__}, not a function")
    return func


def load_reward_funcs(names: Sequence[str], max_completion_length: int = 256, overlong_cache: int | None = None
                      ) -> list[Any]:
    """Every reward function of a run, in order: rewards.get_reward_funcs (the one loader: ours by name, soft_overlong
    built for the lengths; TRL's default max_completion_length is 256), with a user's function by import path
    (load_user) checked on every batch and its logged name kept apart from ours. None at all is one line (a trainer
    without a reward learns nothing)."""
    from recipes.grpo_core.reward_checks import checked
    from rewards import REWARD_FUNCS, get_reward_funcs
    from rewards.overlong import SOFT_OVERLONG

    if not names:
        raise TaseError(f"no reward functions given; choose from: {', '.join(REWARD_FUNCS)}, or an import path")
    taken = {*REWARD_FUNCS, SOFT_OVERLONG}

    def user(spec: str) -> Any:
        func = checked(load_user(spec), spec, taken)
        taken.add(func.__name__)
        return func

    return get_reward_funcs([str(n) for n in names], max_completion_length=max_completion_length,
                            overlong_cache=overlong_cache, other=user)
