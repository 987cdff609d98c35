"""Checkpoints at generation-batch boundaries only (sync GRPO, TRL 1.16's GRPOTrainer).

Why: TRL generates once per `steps_per_generation x num_iterations` micro-batches and trains the following ones on
that buffered batch (`_buffered_inputs`, indexed by the micro-step counter `_step`). Neither is saved in a
checkpoint: a run resumed from a checkpoint inside a generation batch starts `_step` at 0 with an empty buffer, so it
generates new completions for the rest of the batch (and every later batch is shifted), and the per-generation
states (guidance's schedule, dynamic sampling's re-draws, the curriculum's levels) move on a generation the
uninterrupted run never made: the final weights differ (measured: from byte 2,153, resumed from checkpoint-1 of 4).
At a boundary nothing is buffered, so a resume is exact. So a run saving every `save_steps` steps needs `save_steps`
to be a multiple of the boundary period (`period`), and a resume from a checkpoint inside a batch (a run's final
save at a max_steps inside one, a checkpoint written before this rule) is refused; each one line."""
from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from common.errors import TaseError


def generate_every(cfg: Any) -> int:
    """Micro-batches per generation batch: TRL's `steps_per_generation x num_iterations` (steps_per_generation
    defaults to gradient_accumulation_steps in GRPOConfig)."""
    spg = getattr(cfg, "steps_per_generation", None) or cfg.gradient_accumulation_steps
    return int(spg) * int(getattr(cfg, "num_iterations", 1) or 1)


def period(cfg: Any) -> int:
    """Optimizer steps from one generation-batch boundary to the next that is also an optimizer step's end: the
    smallest P with P x gradient_accumulation_steps a multiple of generate_every (1 at TRL's defaults)."""
    every, ga = generate_every(cfg), int(cfg.gradient_accumulation_steps)
    return every // math.gcd(every, ga)


def at_boundary(cfg: Any, step: int) -> bool:
    """Whether optimizer step `step` ends a generation batch (nothing buffered there)."""
    return step * int(cfg.gradient_accumulation_steps) % generate_every(cfg) == 0


def _why(cfg: Any) -> str:
    spg = getattr(cfg, "steps_per_generation", None) or cfg.gradient_accumulation_steps
    return (f"steps_per_generation {spg} x num_iterations {getattr(cfg, 'num_iterations', 1)} (gradient_accumulation_"
            f"steps {cfg.gradient_accumulation_steps}): a generation batch ends every {period(cfg)} steps, and a "
            "resume inside one would train on other completions (docs/training.md)")


def check_save_steps(cfg: Any) -> None:
    """A step-wise save schedule whose checkpoints all fall on generation-batch boundaries (parse time: a dry run
    refuses too). `save_steps` below 1 is a share of max_steps, as transformers reads it."""
    p = period(cfg)
    if p == 1 or str(getattr(cfg, "save_strategy", "")).split(".")[-1].lower() != "steps":
        return
    every = cfg.save_steps
    if every < 1:
        if cfg.max_steps <= 0:
            return  # a share of an epoch-based run: the resume check below still holds
        every = math.ceil(cfg.max_steps * every)
    if int(every) != every or int(every) % p:
        given = int(cfg.save_steps) if float(cfg.save_steps).is_integer() else cfg.save_steps  # argparse's float
        raise TaseError(f"save_steps {given} saves inside a generation batch: {_why(cfg)}; use a multiple of {p}")


def check_resume(cfg: Any, ckpt: str | None) -> None:
    """A checkpoint to resume from that lies on a generation-batch boundary, or one line naming why not (a
    checkpoint at max_steps or beyond trains nothing more: left to the finished-run check)."""
    if ckpt is None or period(cfg) == 1:
        return
    from common.state import read_state

    state = read_state(Path(ckpt) / "trainer_state.json",
                       lambda v: None if isinstance(v, dict) and isinstance(v.get("global_step"), int)
                       and not isinstance(v.get("global_step"), bool) else "no whole global_step")
    step = state["global_step"] if state else 0
    if 0 < cfg.max_steps <= step:
        return  # nothing left to train: a rerun of a finished command (run_dir.already_finished says so)
    if not at_boundary(cfg, step):
        raise TaseError(f"resume_from_checkpoint {ckpt}: step {step} is inside a generation batch: {_why(cfg)}; "
                        f"resume from a checkpoint at a multiple of {period(cfg)} steps")
