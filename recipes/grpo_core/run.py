"""What sync and async GRPO both do around their trainer (recipes/grpo.py, recipes/async_grpo/main.py): the launch
checks, the output folder and model before anything is built (`start_run`), the tokenizer, `metrics.jsonl`, the
training call whose first unscorable batch is one line, and the final save."""
from __future__ import annotations

import json
import os
from collections.abc import Callable
from typing import Any

from common.errors import TaseError
from recipes.grpo_core import distributed
from recipes.grpo_core.plan import world_size
from recipes.shared.config import TaseArgs
from recipes.shared.model import resolve
from recipes.shared.run_dir import already_finished, prepare_output_dir


class MetricsLogger:
    """Appends every TRL log dict (rewards per function, frac_reward_zero_std, lengths) to metrics.jsonl."""

    def __new__(cls, path: str):
        from transformers import TrainerCallback

        class _CB(TrainerCallback):
            def on_log(self, args, state, control, logs=None, **kw):
                if logs and state.is_world_process_zero:
                    with open(path, "a", encoding="utf-8") as f:
                        f.write(json.dumps({"step": state.global_step, **logs}) + "\n")

        return _CB()



def start_run(tase: TaseArgs, cfg: Any, model_args: Any,
              check: Callable[[str | None], None] | None = None) -> tuple[Any, Any] | None:
    """What both trainers do before building anything: the output folder (resume or a fresh start, the checkpoint
    passed to `check` first) and the model path. None when the run already finished."""
    resume = prepare_output_dir(cfg.output_dir, cfg.resume_from_checkpoint, check)
    if already_finished(cfg.output_dir, resume, cfg.max_steps):
        return None
    return resume, resolve(model_args.model_name_or_path, tase.allow_pickle_weights, download=not tase.local_files_only)



def check_launch(tase: TaseArgs, cfg: Any) -> None:
    """The launch fits the machine (one line each; the GPU count is grpo_args.check_gpus): no FSDP on CPU
    (accelerate would run it as DDP), a distributed CPU run with use_cpu, and a precision the devices support."""
    import torch

    on_cpu = cfg.use_cpu or not torch.cuda.is_available()
    if os.environ.get("ACCELERATE_USE_FSDP", "").lower() in ("1", "true") and on_cpu:
        # accelerate 1.15 honours the FSDP plugin only for accelerator devices (state.py, AcceleratorState):
        # a CPU run would silently train as DDP with full weights on every process.
        raise TaseError("FSDP on CPU: accelerate prepares CPU (gloo) runs as DDP, not FSDP; launch with "
             "--config_file recipes/accelerate/cpu_ddp.yaml (tests/fsdp_cpu_check.py shows FSDP2 on gloo)")
    if world_size() > 1 and not torch.cuda.is_available() and not cfg.use_cpu:
        raise TaseError(f"{world_size()} processes and no CUDA, but use_cpu: false: remove it (the recipe sets use_cpu "
             "on CPU); without it accelerate gives each process no distributed backend and they train alone")
    if (why := distributed.precision_mismatch(cfg)):
        raise TaseError(why)



def tokenizer(path: str) -> Any:
    """The model's tokenizer, padding with EOS where it has no pad token (GRPO batches need one)."""
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(path)
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    return tok



def build(trainer_class: type, **kwargs: Any) -> Any:
    """The trainer; a combination of options its constructor refuses (TRL checks some only there, e.g. SFT's
    `padding_free` without packing and with `max_length`) is one line and exit 2, not a traceback."""
    try:
        return trainer_class(**kwargs)
    except ValueError as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        name = next((c.__name__ for c in trainer_class.__mro__ if c.__module__.startswith("trl.")),
                    trainer_class.__name__)  # TRL's class under the features' mixins
        raise TaseError(f"{name} refused the options: {first}") from None


def quiet_tied_head(trainer: Any, resume: Any) -> None:
    """On resume, transformers warns "There were missing keys in the checkpoint model loaded: ['lm_head.weight']" for a
    model whose LM head is tied to its embedding (SmolLM2): the checkpoint holds the one shared tensor, and loading
    ties the head to it again. Filtered for exactly that list and a tied model only (any other missing key still
    warns); --verbose keeps it."""
    if not resume or os.environ.get("TASE_VERBOSE", "") not in ("", "0"):
        return
    if getattr(getattr(getattr(trainer, "model", None), "config", None), "tie_word_embeddings", False):
        from common.process import drop_messages

        drop_messages("transformers.trainer",
                      "There were missing keys in the checkpoint model loaded: ['lm_head.weight'].")


class _AtMaxSteps(Exception):
    """Raised at train begin when the resumed checkpoint already holds the last step."""


def _stop_at_max_steps() -> Any:
    """A callback that stops before the first step when the resumed state is already at max_steps. The Trainer
    checks `should_training_stop` only after a step, so resuming the checkpoint of the last step (a kill between
    its save and the final one) would train one step past max_steps and log it. By train begin the checkpoint's
    weights and state are loaded (plain, DDP, DeepSpeed and FSDP alike), so the caller saves them as they are."""
    from transformers import TrainerCallback

    class _CB(TrainerCallback):
        def on_train_begin(self, args, state, control, **kw):
            if state.max_steps > 0 and state.global_step >= state.max_steps:
                raise _AtMaxSteps(state.global_step)

    return _CB()


def train(trainer: Any, resume: str | None) -> None:
    """trainer.train; a batch the rewards cannot score stops the run in one line (the first batch already
    shows it: stop rather than learn from zeros). A resumed checkpoint at max_steps trains no further: its
    weights and state go to the final save as they are (one line says so)."""
    from rewards.trl import RewardInputError

    quiet_tied_head(trainer, resume)
    if resume:
        trainer.add_callback(_stop_at_max_steps())
    try:
        trainer.train(resume_from_checkpoint=resume)
    except RewardInputError as e:
        raise TaseError(str(e)) from e
    except _AtMaxSteps as e:
        trainer.accelerator.print(f"{resume} is at max_steps (step {e.args[0]}): nothing left to train; saving it "
                                  "as the final model")



def save(trainer: Any, tok: Any, output_dir: str, keep_optimizer_state: bool = False) -> None:
    """The final model, trainer_state.json (log history, for export's model card) and the tokenizer; then what the
    finished run keeps on disk (run_dir.finish_run: no optimizer state unless asked, the final weights once) and one
    line saying what it wrote and its size."""
    trainer.save_model(output_dir)
    trainer.save_state()
    tok.save_pretrained(output_dir)
    trainer.accelerator.print(f"saved to {output_dir}")
    if trainer.accelerator.is_main_process:
        from recipes.shared.run_dir import finish_run

        dtype = str(next(trainer.model.parameters()).dtype).removeprefix("torch.")
        print(finish_run(output_dir, keep_optimizer_state, dtype))
