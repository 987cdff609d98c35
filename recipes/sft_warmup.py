"""SFT warm-up before GRPO: teach the answer format (and a little of each task) with TRL's SFTTrainer.

Small instruct models never emit `<answer>` tags on their own (SmolLM2-135M: 0 of 8 samples), so a
strict reward gives all-zero GRPO groups. This trains on generated examples whose assistant turn is a
short reasoning line plus the gold answer in tags (completion-only loss).

    python recipes/sft_warmup.py --config recipes/configs/sft_smollm2_cpu.yaml
"""
from __future__ import annotations

import os
import sys

from common.errors import TaseError, one_line_exit
from common.process import apply as process_settings, pop_verbose
from recipes import features
from recipes.features.budget import BudgetArgs, wall_clock_stop  # noqa: F401  (also importable from here)
from recipes.shared import adapters, config, data, model, run_dir
from recipes.shared.config import DataArgs
from recipes.shared.parser import parse_config


def option_types() -> tuple[type, ...]:
    """The dataclasses the warm-up parses: DataArgs, TRL's SFTConfig and ModelConfig, then the options of the features
    that declare SFT (recipes/features/: a wall-clock budget, the CPU shared prefix); proof.py checks its SFT stages
    with the same."""
    from trl import ModelConfig, SFTConfig

    return (DataArgs, SFTConfig, ModelConfig, *features.sft_option_types())


def build_sft_dataset(args: DataArgs, tokenizer=None, max_length: int | None = None):
    """Prompt-completion rows (TRL trains on the completion only); examples without a writable gold
    answer (no gold, no known solution) and prompts over max_prompt_tokens are skipped. A record (from a
    --train_data file) that carries its own `completion` string trains on it instead of the gold answer's turn:
    recipes/proof.py's rejection-sampling control, the policy's own strict-correct samples. With `max_length`
    (SFTConfig's, truncation keep_start) an example whose prompt alone fills max_length tokens is dropped
    here and counted in one line: TRL would truncate its answer away and drop it silently, and with every row
    dropped fail with "num_samples=0"; then this fails in one line naming max_length."""
    from datasets import Dataset

    from common.readers import DataError
    from synth.gold import sft_completion

    measure = data.PromptLength(tokenizer, args.system_prompt) if args.max_prompt_tokens and tokenizer else None
    length = data.PromptLength(tokenizer, args.system_prompt) if max_length and tokenizer else None
    rows, too_long, longest = [], 0, 0
    try:
        for r in data.iter_records(args):
            own = r.get("completion")
            resp = own if isinstance(own, str) and own else sft_completion(r)
            if resp is None or (measure and measure(r) > args.max_prompt_tokens):
                continue
            n = length(r) if length else 0
            if length and n >= max_length:
                too_long, longest = too_long + 1, max(longest, n)
                continue
            rows.append({"prompt": data.messages(r, args.system_prompt),
                         "completion": [{"role": "assistant", "content": resp}], "task": r["task"], "lang": r["lang"]})
    except DataError as e:
        raise TaseError(str(e)) from None
    if too_long and not rows:
        raise TaseError(f"max_length {max_length}: all {too_long} SFT examples have prompts of {max_length} tokens or "
             f"more (longest {longest}), so truncation leaves no answer to learn; raise --max_length or shorten the "
             "prompts (--max_len)")
    if too_long:
        print(f"dropped {too_long} of {too_long + len(rows)} SFT examples whose prompt fills max_length {max_length} "
              f"tokens (longest {longest}): truncation would leave them no answer", file=sys.stderr)
    if not rows:
        raise TaseError("no SFT examples with a gold answer (check --tasks/--langs)")
    return Dataset.from_list(rows)


@one_line_exit
def main(argv: list[str] | None = None) -> int:
    """Parse (recipes/shared/parser.py), check, build the SFTTrainer and train; the features that declare SFT (held-out
    evaluation, tracking, a wall-clock budget) are folded from recipes/features/ as GRPO's are."""
    argv, verbose = pop_verbose(argv)  # --verbose: the full log dict each step and the libraries' messages
    process_settings(verbose or None)  # OpenMP wait policy, before torch loads; quiet libraries (common/process.py)
    from trl import SFTTrainer, get_peft_config

    data_args, cfg, model_args, *extra = parse_config(
        option_types(), argv, prog="python recipes/sft_warmup.py", section=config.option_section,
        description="SFT warm-up before GRPO with TRL's SFTTrainer: teaches the <answer> format on gold answers. "
                    "Options: ours (data, each feature's), then TRL's and transformers' own (docs/training.md).")
    config.check_trainer_ranges(cfg, *extra)  # max_steps -5, learning_rate nan, max_train_seconds 0: one line
    job = features.Run(features.merged(data_args, *extra), cfg, model_args, trainer=features.SFT)
    features.check(job)  # held_out_rows with eval_strategy, installed trackers, ...
    why = adapters.quantization_problem(model_args, features.SFT, cfg.use_cpu)
    if why:
        raise TaseError(why)
    for k, v in features.environment(cfg).items():  # W&B's files under the run folder
        os.environ.setdefault(k, v)
    from transformers import AutoTokenizer

    from recipes.grpo_core.run import build, train

    resume = run_dir.prepare_output_dir(cfg.output_dir, cfg.resume_from_checkpoint)
    if run_dir.already_finished(cfg.output_dir, resume, cfg.max_steps):
        return 0
    path = model.resolve(model_args.model_name_or_path, data_args.allow_pickle_weights)
    tok = AutoTokenizer.from_pretrained(path)
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    init = dict(cfg.model_init_kwargs or {})
    if model_args.dtype:
        init.setdefault("dtype", model_args.dtype)
    cfg.model_init_kwargs = init
    job.resume, job.path = resume, path
    features.setup(job)  # before the training rows: a held-out set is guarded against
    keep_start = getattr(cfg, "truncation_mode", "keep_start") == "keep_start" and not getattr(cfg, "packing", False)
    ds = build_sft_dataset(data_args, tok, cfg.max_length if keep_start else None)
    run_dir.save_tase_config(cfg.output_dir, data=data_args, model={"model": model_args.model_name_or_path or "default",
                            "path": path}, training=cfg.to_dict())
    trainer = build(features.trainer_class(SFTTrainer, job), model=path, args=cfg, train_dataset=ds,
                    processing_class=tok,
                    peft_config=get_peft_config(model_args),  # use_peft: LoRA (recipes/shared/adapters.py)
                    quantization_config=adapters.quantization_config(model_args))
    for callback in features.callbacks(job):
        trainer.add_callback(callback)
    features.after_build(trainer, job)  # one line per logged step; the whole dict in trainer_state.json
    train(trainer, resume)  # a tied head's quiet resume; a resumed checkpoint at max_steps trains no further
    features.after_train(trainer, job)
    trainer.save_model(cfg.output_dir)
    trainer.save_state()
    tok.save_pretrained(cfg.output_dir)
    what = trained_rows(trainer.state.global_step, len(trainer.train_dataset), cfg.per_device_train_batch_size,
                        cfg.gradient_accumulation_steps, cfg.world_size)
    print(f"saved to {cfg.output_dir} ({what})")
    return 0


def trained_rows(steps: int, rows: int, batch: int, accumulation: int, processes: int = 1) -> str:
    """What `steps` optimizer steps trained on, as transformers' epoch loop takes a set of `rows` (batches of
    `batch` per process, `accumulation` of them a step, the last batch and step of an epoch short): "4 steps, 32
    examples of a set of 256" (max_steps ended it early), "8 steps, 64 examples", "16 steps, 2 epochs of 64
    examples"."""
    per_batch = batch * processes
    batches = -(-rows // per_batch)  # an epoch's dataloader length (the last batch short)
    epoch_steps = max(-(-batches // accumulation), 1)
    epochs, rest = divmod(steps, epoch_steps)
    seen = epochs * rows + min(rest * accumulation * per_batch, rows)
    head = f"{steps} step{'s' * (steps != 1)}, "
    if seen == rows * epochs and epochs:
        return head + (f"{rows} examples" if epochs == 1 else f"{epochs} epochs of {rows} examples")
    more = f" ({epochs} epoch{'s' * (epochs != 1)} and part of another)" if epochs else ""
    return head + f"{seen} examples of a set of {rows}" + more


if __name__ == "__main__":
    raise SystemExit(main())
