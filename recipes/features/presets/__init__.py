"""Loss presets and DAPO's soft overlong reward (recipes/features/presets/overlays.py): `--preset NAME` lays a YAML
overlay over --config before the parser exists; `soft_overlong` adds the reward (recipes/grpo_core/reward_funcs.py loads
it). GRPO trainers."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from recipes.features.contract import ASYNC, SYNC, Feature


@dataclass
class PresetOptions:
    preset: str | None = field(default=None, metadata={"help": "a loss preset laid over --config (the command line "
                               "still overrides it): gspo, dr_grpo, dapo, grpo (recipes/configs/presets/)"})
    soft_overlong: bool = field(default=False, metadata={"help": "add DAPO's soft overlong punishment reward "
                                "(`soft_overlong`, weight 1; preset dapo sets it)"})
    soft_overlong_cache: int | None = field(default=None, metadata={"help": "soft_overlong: tokens before "
                                            "max_completion_length where the penalty starts (default a fifth)"})


class Presets(Feature):
    name = "presets"
    options = PresetOptions
    after = "format_weight"
    trainers = frozenset({SYNC, ASYNC})

    def reward_names(self, names: list[str], args: Any) -> list[str]:
        from rewards.overlong import SOFT_OVERLONG

        if args.soft_overlong and SOFT_OVERLONG not in names:  # preset dapo sets it; explicit reward_funcs get it too
            return [*names, SOFT_OVERLONG]
        return names

    def reward_kwargs(self, args: Any) -> dict[str, Any]:
        return {"overlong_cache": args.soft_overlong_cache}

    def overlay(self, config: Any, route: Any) -> None:
        from recipes.features.presets import overlays as presets

        presets.apply(config, route("preset"))  # the preset's options over the YAML's, under the command line


FEATURE = Presets()
