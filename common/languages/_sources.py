"""Readers of the installed packages' text files that the language modules name as their running text
(standard library only: the packages' files are read, their code is not imported)."""
from __future__ import annotations

import importlib.util
import json
from functools import cache
from pathlib import Path


def ir_files(package: str) -> Path:
    """The folder of an installed package, without importing it (konlpy's __init__ starts Java machinery)."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError(f"{package} is not installed (make install)")
    return Path(next(iter(spec.submodule_search_locations)))


@cache
def hsk() -> tuple[dict, ...]:
    """hsk-sentences-audio's 4,354 sentences (HSK 1-6) with their English translations."""
    text = ir_files("hsk_sentences_audio").joinpath("data/sentences.json").read_text(encoding="utf-8")
    return tuple(json.loads(text))
