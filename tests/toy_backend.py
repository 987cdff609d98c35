"""A toy generation backend, the whole of it in this one module: registered as `toy`, it answers every prompt with
`ANSWER` and needs no model (tests/test_backend_registry.py runs `eval run --backend toy` with it)."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from eval.backend_registry import register_backend
from eval.gen_config import GenConfig

ANSWER = "<answer>2</answer>"  # right for the two rows of the sample's component_count/english.csv whose answer is 2


@register_backend("toy")
class ToyBackend:
    help = "test only: answers every prompt with a fixed string"
    batch_size = 4

    def __init__(self, cfg: GenConfig) -> None:
        self.cfg = cfg
        self.calls: list[int] = []  # the size of each generate call

    @classmethod
    def build(cls, model_path: Path, cfg: GenConfig, options: dict[str, Any]) -> ToyBackend:
        return cls(cfg)

    def generate(self, conversations: list[list[dict[str, str]]]) -> list[Any]:
        self.calls.append(len(conversations))
        return [ANSWER] * len(conversations) if self.cfg.num_samples == 1 else \
            [[ANSWER] * self.cfg.num_samples for _ in conversations]
