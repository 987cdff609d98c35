"""A reward defined outside the project, as a user would write one: tests/test_tracking.py trains with it by
import path (`--reward_funcs tests.user_rewards:brevity`). TRL passes the batch as keyword lists."""
from __future__ import annotations

from typing import Any


def brevity(completions: list[Any], **kwargs: Any) -> list[float]:
    """1 for an empty completion, falling linearly to 0 at 40 characters (chat messages or strings)."""
    texts = [c[-1]["content"] if isinstance(c, list) else str(c) for c in completions]
    return [max(0.0, 1.0 - len(t) / 40) for t in texts]


def length_spread(completions: list[Any], **kwargs: Any) -> list[float]:
    """The completion's length in characters / 100 (chat messages or strings): unbounded, so the completions of one
    group, which a tiny random model draws at different lengths, never all score the same and every group gives GRPO
    a real gradient at any max_completion_length (the distributed tests check wiring and numerics, not learning)."""
    texts = [c[-1]["content"] if isinstance(c, list) else str(c) for c in completions]
    return [len(t) / 100 for t in texts]


NOT_A_FUNCTION = 3


def record_prompts(prompts: list[Any], completions: list[Any], **kwargs: Any) -> list[float]:
    """Appends every prompt the trainer hands the reward functions, one JSON line each, to $TASE_PROMPT_LOG and
    scores 0: tests/test_trl_cli.py checks what TRL's own `trl grpo` trained on."""
    import json
    import os

    with open(os.environ["TASE_PROMPT_LOG"], "a", encoding="utf-8") as f:
        for p in prompts:
            f.write(json.dumps(p, ensure_ascii=False) + "\n")
    return [0.0] * len(completions)


_SCORED = [0]  # batches scored by this process so far: module-level state, as a user's reward may keep


def counted(completions: list[Any], **kwargs: Any) -> list[float]:
    """The number of batches this process scored before this one, plus the completion's length in characters / 100:
    a reward with module-level state (tests/test_steps_in_process.py: a step run in the pipeline's interpreter must
    start from a fresh module, as its subprocess does)."""
    before = _SCORED[0]
    _SCORED[0] += 1
    texts = [c[-1]["content"] if isinstance(c, list) else str(c) for c in completions]
    return [before + len(t) / 100 for t in texts]


def torch_threads(completions: list[Any], **kwargs: Any) -> list[float]:
    """torch's intra-op thread count in the scoring process, for every completion: a process setting a reward can
    see (tests/test_steps_in_process.py: an earlier in-process step's `--threads 1` must not reach a later step)."""
    import torch

    return [float(torch.get_num_threads())] * len(completions)
