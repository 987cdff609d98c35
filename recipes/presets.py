"""Loss presets: small YAML overlays (recipes/configs/presets/<name>.yaml) that set the options of one published GRPO
variant (GSPO, Dr. GRPO, DAPO with its overlong handling, GRPO as first published) on top of any recipe config,
chosen with `--preset NAME` (or `preset: NAME` in the YAML). Precedence: the --config YAML, then the preset, then the
command line. Also the soft overlong punishment reward (`soft_overlong`), which needs the run's
max_completion_length and so cannot be a plain function in rewards/."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from common.errors import TaseError
from recipes.parser import ConfigFile, read_yaml

PRESET_DIR = Path(__file__).resolve().parent / "configs" / "presets"
SOFT_OVERLONG = "soft_overlong"


def preset_names() -> list[str]:
    """The shipped presets, by file name."""
    return sorted(p.stem for p in PRESET_DIR.glob("*.yaml"))


def preset_values(name: str) -> dict[str, Any]:
    """A preset's options; an unknown name is one line listing the shipped ones."""
    path = PRESET_DIR / f"{name}.yaml"
    if name not in preset_names():
        raise TaseError(f"preset {name}: unknown; choose from {', '.join(preset_names())}")
    data = read_yaml(path, "preset ")
    if not isinstance(data, dict):
        raise TaseError(f"preset {path}: must be a YAML mapping of option: value")
    return data


def apply(config: ConfigFile, name: Any) -> None:
    """Overlay preset `name` (None: nothing) on the --config values, so that the command line still overrides it.
    The preset's values are type-checked as the YAML's are (under the preset file's name)."""
    if not name:
        return
    values = preset_values(str(name))
    config.values = {**config.values, **values}
    if config.path is None:
        config.path = str(PRESET_DIR / f"{name}.yaml")  # named by check_types' line for a value of the wrong type


def overlong_cache(max_completion_length: int, cache: int | None) -> int:
    """DAPO's L_cache: where the soft penalty starts before max_completion_length (default a fifth, DAPO's 4096 of
    20480); one line where it does not fit."""
    if cache is None:
        cache = max(1, max_completion_length // 5)
    if isinstance(cache, bool) or not isinstance(cache, int) or not 0 < cache <= max_completion_length:
        raise TaseError(f"soft_overlong_cache must be an integer in [1, max_completion_length {max_completion_length}]"
                        f", got {cache!r}")
    return cache


def soft_overlong(max_completion_length: int, cache: int | None = None) -> Any:
    """TRL's soft overlong punishment (DAPO Eq. 13: 0 up to L_max - L_cache, then linearly down to -1 at L_max),
    logged under the reward name `soft_overlong`; picklable, so the async rollout worker can take it."""
    from trl.rewards import get_soft_overlong_punishment

    func = get_soft_overlong_punishment(max_completion_length, overlong_cache(max_completion_length, cache))
    func.__name__ = SOFT_OVERLONG  # TRL logs rewards/<__name__>/mean
    return func
