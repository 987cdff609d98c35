"""Contamination guard: drop generated examples whose prompt matches a benchmark prompt."""
from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

_WS = re.compile(r"\s+")


def normalize_prompt(text: str) -> str:
    """NFKC, case-folded, whitespace-collapsed form used to compare prompts."""
    return _WS.sub(" ", unicodedata.normalize("NFKC", text)).strip().casefold()


@dataclass
class Guard:
    """Holds the normalised benchmark prompts and counts what it dropped."""

    prompts: frozenset[str]
    dropped: int = 0
    seen: int = 0

    @classmethod
    def from_records(cls, records: Iterable[dict[str, Any]]) -> "Guard":
        return cls(frozenset(normalize_prompt(r["prompt"]) for r in records))

    def filter(self, records: Iterable[dict[str, Any]]) -> Iterator[dict[str, Any]]:
        for r in records:
            self.seen += 1
            if normalize_prompt(r["prompt"]) in self.prompts:
                self.dropped += 1
                continue
            yield r
