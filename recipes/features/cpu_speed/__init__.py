"""CPU speed (recipes/features/cpu_speed/speed.py): `cpu_bf16` resolved into `--bf16` before the parser exists, and on
CPU the bf16 generation cast once, the completion-only LM head and each distinct prompt prefilled once (sync GRPO); the
SFT warm-up takes `cpu_shared_prefill` alone: its batch's shared prefix computed once, with the completion-only head.
Under `trainer: async` cpu_bf16 resolves the same way (the trainer's loss forward); each prompt's prefix is computed
once by the trainer itself (TRL's prefix tree in the loss, vLLM's prefix cache in generation), so
cpu_shared_prefill false is refused there."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from recipes.features.contract import ASYNC, SFT, SYNC, TRAINERS, Feature, Run, TrainerKind


@dataclass
class CpuSpeedOptions:
    cpu_bf16: str = field(default="false", metadata={
        "help": "GRPO runs on CPU: auto (bf16 autocast with float32 weights where the CPU has native bf16, "
                "avx512_bf16 or AMX; else float32), true, false; an explicit bf16 wins "
                "(recipes/features/cpu_speed/speed.py)",
        "choices": ["auto", "true", "false"]})
    cpu_shared_prefill: bool = field(default=True, metadata={
        "help": "sync runs on CPU: compute each distinct prompt once, not once per completion of its group, in the "
                "transformers rollouts and in the loss forward (the same tokens and gradients; "
                "recipes/features/cpu_speed/speed.py)"})


@dataclass
class CpuSpeedSFTOptions:
    """The SFT warm-up's part of the feature (its bf16 is SFTConfig's own)."""

    cpu_shared_prefill: bool = field(default=True, metadata={
        "help": "runs on CPU: compute the tokens every row of a batch starts with (the system turn and the user "
                "turn's header) once, not once per row, in the loss forward (the same loss and gradients; the LM "
                "head scores completion tokens only either way; recipes/features/cpu_speed/speed.py)"})


class CpuSpeed(Feature):
    name = "cpu_speed"
    options = CpuSpeedOptions
    sft_options = CpuSpeedSFTOptions
    after = "async_max_model_len"
    trainers = frozenset({SYNC, ASYNC, SFT})
    hooks = {ASYNC: ()}  # cpu_bf16 is resolved into --bf16 before the parser (argv), as for sync
    native = {ASYNC: "each prompt's prefix computed once: TRL's prefix tree in the loss, vLLM's prefix cache in "
                     "generation"}

    def check_enabled(self, args: Any, kind: TrainerKind | None) -> None:
        if kind and kind.rollout_worker and args.cpu_shared_prefill is False:
            raise ValueError("cpu_shared_prefill false: trainer: async always computes each prompt's prefix once "
                             "(TRL's prefix tree in the loss, vLLM's prefix cache in generation); remove it "
                             "(docs/training.md)")

    def argv(self, config: Any, route: Any, trainer: str) -> list[str]:
        """`--bf16 true` where cpu_bf16 resolves on for this run (a GRPO run on CPU, no explicit bf16); a bad value is
        one line."""
        from common.errors import TaseError
        from recipes.features.cpu_speed.speed import bf16_argv

        on_cpu = str(route("use_cpu")).lower() in ("true", "1", "yes")
        try:
            return bf16_argv(route("cpu_bf16"), config.given(), on_cpu, trainer)
        except ValueError as e:
            raise TaseError(str(e)) from None

    def after_build(self, trainer: Any, run: Run) -> None:
        from recipes.features.cpu_speed.speed import sft_speed_up, speed_up

        if TRAINERS[run.trainer].rows == "sft":  # prompt-completion rows: the head, and the batch's shared prefix once
            done = sft_speed_up(trainer, shared_prefix=run.args.cpu_shared_prefill)
        else:  # CPU: bf16 generation cast once, completion-only LM head, shared prefill
            done = speed_up(trainer, shared_prefill=run.args.cpu_shared_prefill)
        for what in done:
            trainer.accelerator.print(f"cpu speed: {what}")


FEATURE = CpuSpeed()


def trains_bf16(parsed: tuple[Any, ...]) -> bool:
    """Whether a run parsed into `parsed` (its option dataclasses) trains under bf16 autocast on this CPU: cpu_bf16 as
    this CPU resolves it (speed.py) where the run has the option, else its own bf16. The proof records it
    in each seed's manifest and pools only seeds of one precision."""
    from recipes.features.cpu_speed.speed import resolve

    setting = next((x.cpu_bf16 for x in parsed if hasattr(x, "cpu_bf16")), None)
    if setting is not None:
        return resolve(str(setting).lower())
    return any(getattr(x, "bf16", None) is True for x in parsed)
