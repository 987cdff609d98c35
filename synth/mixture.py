"""Per-task mixing weights from a YAML file, read once for `python -m synth --mixture`, GRPO and SFT."""
from __future__ import annotations

import math

from common.errors import bounded, names
from common.record import TASKS

from .core import SynthError


def load_mixture(path: str) -> dict[str, float]:
    """task -> weight; anything else (not UTF-8, not a mapping of task names to finite weights >= 0) is
    one SynthError line, so neither synth nor a GRPO run starts on a mixture it would misread."""
    from common.yamlfile import YamlFileError, read

    try:
        data = read(path)  # a key given twice: refused (common/yamlfile.py)
    except YamlFileError as e:
        cause = e.cause
        if e.kind == "read":
            raise SynthError(f"cannot read mixture file {path}: {cause.strerror}") from None
        if e.kind == "encoding":
            raise SynthError(f"mixture file {path} is not UTF-8 text (byte {cause.start})") from None
        if e.kind == "yaml":
            raise SynthError(f"mixture file {path} is not valid YAML: {str(cause).splitlines()[0]}") from None
        raise SynthError(f"mixture file {path} is nested too deeply to read") from None
    weights = data.get("weights", data) if isinstance(data, dict) else None
    if not isinstance(weights, dict) or not all(isinstance(v, (int, float)) for v in weights.values()):
        raise SynthError(f"mixture file {path} must map task names to numbers")
    out = {str(k): float(v) for k, v in weights.items()}
    for k, v in out.items():  # inf/nan break the sampler, a negative weight would be read as 0 without a word
        if not math.isfinite(v) or v < 0:
            raise SynthError(f"mixture file {path}: weight of {bounded(k)} must be a finite number >= 0, got {v}")
    unknown = sorted(set(out) - set(TASKS))
    if unknown:
        raise SynthError(f"mixture file {path}: unknown task(s) in weights: {names(unknown)} (choose from: "
                         f"{', '.join(TASKS)})")
    return out
