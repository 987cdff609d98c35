"""Model resolution for the recipes: a spec (HF folder, .gguf, `default`) to a local plain HF folder."""
from __future__ import annotations

from common.errors import TaseError


def resolve(model: str | None, allow_pickle_weights: bool = False, download: bool = False) -> str:
    """Model spec -> local plain HF folder (GGUF converted once; a hub id the cache lacks downloaded where
    `download`); one-line error when unusable (a folder without safetensors weights included, unless
    `allow_pickle_weights`)."""
    from common.models import ModelError, resolve_model

    try:
        return str(resolve_model(model, allow_pickle_weights=allow_pickle_weights, download=download))
    except ModelError as e:
        raise TaseError(str(e)) from None
