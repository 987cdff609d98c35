"""Loss presets: small YAML overlays (recipes/configs/presets/<name>.yaml) that set the options of one published GRPO
variant (GSPO, Dr. GRPO, DAPO with its overlong handling, GRPO as first published) on top of any recipe config,
chosen with `--preset NAME` (or `preset: NAME` in the YAML). Precedence: the --config YAML, then the preset, then the
command line. The soft overlong punishment reward (`soft_overlong`, preset dapo) lives in rewards/overlong.py; its
names stay importable from here."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from common.errors import TaseError
from recipes.shared.parser import ConfigFile, read_yaml
from rewards.overlong import SOFT_OVERLONG, overlong_cache, soft_overlong  # noqa: F401  (their former home)

PRESET_DIR = Path(__file__).resolve().parents[2] / "configs" / "presets"


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
