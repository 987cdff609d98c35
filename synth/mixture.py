"""Per-task mixing weights from a YAML file, read once for `python -m synth --mixture`, GRPO and SFT."""
from __future__ import annotations

from pathlib import Path

from .core import SynthError


def load_mixture(path: str) -> dict[str, float]:
    import yaml

    try:
        data = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except OSError as e:
        raise SynthError(f"cannot read mixture file {path}: {e.strerror}") from None
    except yaml.YAMLError as e:
        raise SynthError(f"mixture file {path} is not valid YAML: {str(e).splitlines()[0]}") from None
    weights = data.get("weights", data) if isinstance(data, dict) else None
    if not isinstance(weights, dict) or not all(isinstance(v, (int, float)) for v in weights.values()):
        raise SynthError(f"mixture file {path} must map task names to numbers")
    return {str(k): float(v) for k, v in weights.items()}
