"""What every generation backend shares: its settings (`GenConfig`) and its one-line error (`BackendError`).

A module of its own so that `eval.backends` (hf, vllm and the list of backend modules), `eval.api_backend` (openai)
and `eval.backend_registry` all import it, and none of them imports the one that imports it; `eval.backends`
re-exports both names.
"""
from __future__ import annotations

from dataclasses import dataclass

from common.errors import TaseError


class BackendError(TaseError, RuntimeError):
    """A backend that cannot run here (one clear line for the CLI)."""


@dataclass
class GenConfig:
    """Generation settings shared by both backends (greedy by default, as benchmark numbers should be)."""

    max_new_tokens: int = 1024
    temperature: float = 0.0  # 0 = greedy
    top_p: float = 1.0
    top_k: int = -1  # <= 0: off
    seed: int = 0
    batch_size: int = 8  # prompts per generate call = per flush of samples.jsonl
    num_samples: int = 1  # completions per prompt (pass@k); > 1 needs temperature > 0
