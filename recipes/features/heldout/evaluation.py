"""Evaluation during training on a generated held-out set, and the best checkpoint kept by it.

With `held_out_rows: K` and TRL's own `eval_strategy: steps` + `eval_steps: N` (or `epoch`), the GRPO recipe and the
SFT warm-up score K held-out rows every N steps with the project's evaluator: greedy answers of the live policy
(eval.backends.HFBackend on the model in memory), each scored by `eval.runner.sample_line` (rewards.score, as
`python -m eval run` scores), summed up by `eval.headline.headline` (recipes/select_checkpoint.py uses the same).
The numbers go through `Trainer.log` as `tase/heldout/...` (metrics.jsonl, TensorBoard, W&B) and to
transformers' best-model machinery: the trainer's `evaluate` returns them as `eval_tase/heldout/...`, and
`metric_for_best_model` (default `tase/heldout/strict_acc`) picks the best step, so `save_total_limit` never
deletes that checkpoint and `load_best_model_at_end` / `save_strategy: best` work as documented there. A new best
at a step that `save_steps` would not save is saved anyway, so the best evaluated step always has its checkpoint.
OUTPUT_DIR/best_checkpoint.json names it (step, metric, value, path, every evaluation: the fields of
recipes/shared/best_checkpoint.py, which recipes/select_checkpoint.py writes too).

The held-out rows are guarded by construction (recipes/features/heldout/rows.py): another synth seed, the training
data's `exclude` guard, and the training stream drops every held-out prompt.
"""
from __future__ import annotations

import contextlib
import json
import os
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from common.errors import TaseError
from recipes.features.heldout.rows import heldout_seed, records
from recipes.shared import best_checkpoint
from recipes.shared.best_checkpoint import PREFIX

DEFAULT_METRIC = PREFIX + "strict_acc"
FOLDER = "heldout"  # OUTPUT_DIR/heldout/: heldout.jsonl (the rows) and step-N/ (samples.jsonl, results.json)
# the one chosen-checkpoint file (recipes/shared/best_checkpoint.py), as select_checkpoint's
BEST_FILE = best_checkpoint.NAME
SFT_MAX_NEW_TOKENS = 128  # the warm-up's answers are a reasoning line and the tagged answer


def _strategy(cfg: Any, key: str = "eval_strategy") -> str:
    """An IntervalStrategy/SaveStrategy option as its plain value ("no", "steps", "epoch", "best")."""
    v = getattr(cfg, key, "no")
    return str(getattr(v, "value", v))


def check(args: Any, cfg: Any) -> None:
    """The evaluation options together (one TaseError line each), called by a dry run and a real start alike:
    held_out_rows needs an eval_strategy and the other way round (the recipes evaluate on the held-out set, not
    on a TRL eval_dataset); and metric_for_best_model filled in: unset (or transformers'
    `loss` default) becomes tase/heldout/strict_acc, a given one must be a held-out accuracy (greater is better)."""
    strategy = _strategy(cfg)
    if not args.held_out_rows:
        if strategy != "no":
            raise TaseError(f"eval_strategy {strategy} needs held_out_rows > 0: the recipes evaluate a generated "
                            "held-out set (docs/training.md, 'Evaluation during training'), not a TRL eval_dataset")
        return
    if strategy == "no":
        raise TaseError(f"held_out_rows {args.held_out_rows} is scored at each evaluation: set eval_strategy steps "
                        "with eval_steps N (or epoch)")
    best = Path(getattr(cfg, "output_dir", None) or os.devnull) / BEST_FILE
    if best.exists() and not best.is_file():  # written at every save: a folder there crashed the run mid-training
        raise TaseError(f"output_dir {cfg.output_dir}: {BEST_FILE} is a folder, where the run writes its best "
                        "checkpoint; rename or remove it")
    if getattr(args, "train_data", "synth") != "synth":
        # the held-out rows come from the file's cells: none synth makes is one line now
        from recipes.features.heldout.rows import file_streams

        file_streams(args.train_data)
    metric = cfg.metric_for_best_model
    if metric in (None, "loss", "eval_loss"):
        cfg.metric_for_best_model = DEFAULT_METRIC
    else:
        name = metric.removeprefix("eval_")
        if not (name.startswith(PREFIX) and (name.endswith("_acc") or name == PREFIX + "fine_credit")):
            raise TaseError(f"metric_for_best_model {metric}: choose a held-out accuracy the recipe logs: "
                            f"{DEFAULT_METRIC} (default), {PREFIX}official_acc, {PREFIX}fine_credit or "
                            f"{PREFIX}task/<task>/strict_acc")
        cfg.metric_for_best_model = name
    cfg.greater_is_better = True


@dataclass
class HeldoutSet:
    """The held-out rows and how a trainer scores them (`evaluate`); writes under `out` on the main process."""

    records: list[dict[str, Any]]
    system_prompt: str
    max_new_tokens: int
    batch_size: int
    out: Path
    dataset: Any = None  # the trainer's eval_dataset (transformers asks for one with an eval_strategy)
    metrics_file: Path | None = None  # SFT: append the evaluations here (GRPO's MetricsLogger writes every log)
    seconds: list[float] = field(default_factory=list)

    def evaluate(self, trainer: Any, prefix: str = "eval") -> dict[str, float]:
        """Greedy answers of the live model, scored and logged (tase/heldout/...); returns the metrics with
        `prefix_` for transformers' best-model choice. Every process generates the whole set (ZeRO-3 needs them
        all to; the same verdicts everywhere keep the save decisions equal). A new best forces a save of this
        step when save_strategy is steps, so the best step always has its checkpoint."""
        from trl.models.utils import unwrap_model_for_generation

        from common.prompts import build_messages
        from eval.backends import GenConfig, HFBackend
        from eval.headline import headline
        from eval.runner import sample_line

        start = time.monotonic()
        model, tok = trainer.model, trainer.processing_class
        tok = getattr(tok, "tokenizer", tok)  # a processor's tokenizer
        was_training, side = model.training, tok.padding_side
        gen = GenConfig(max_new_tokens=self.max_new_tokens, batch_size=self.batch_size)
        todo = sorted(self.records, key=lambda r: -len(r["prompt"]))  # as eval run batches: similar lengths
        lines: list[dict[str, Any]] = []
        try:
            model.eval()
            tok.padding_side = "left"
            with unwrap_model_for_generation(trainer.model_wrapped, trainer.accelerator) as live:
                be = HFBackend.live(live, tok, gen)
                for i in range(0, len(todo), gen.batch_size):
                    batch = todo[i : i + gen.batch_size]
                    texts = be.generate([build_messages(r, False, self.system_prompt) for r in batch])
                    lines += [sample_line(r, t) for r, t in zip(batch, texts, strict=False)]
            self.seconds.append(time.monotonic() - start)
            logs = {PREFIX + k: v for k, v in headline(lines).items()}
            logs[PREFIX + "seconds"] = round(self.seconds[-1], 3)
            metric = trainer.args.metric_for_best_model
            if metric not in logs:
                raise TaseError(f"metric_for_best_model {metric} is not logged by this held-out set (it logs "
                                f"{', '.join(sorted(k for k in logs if k.endswith('_acc')))})")
            trainer.log(dict(logs))  # in eval mode: TRL's log adds no (and takes no) training metrics
        finally:
            tok.padding_side = side
            model.train(was_training)
        if trainer.is_world_process_zero():
            self.write(trainer.state.global_step, lines, trainer)
            if self.metrics_file:
                with self.metrics_file.open("a", encoding="utf-8") as f:
                    f.write(json.dumps({"step": trainer.state.global_step, **logs}) + "\n")
        metrics = {f"{prefix}_{k}": v for k, v in logs.items()}
        trainer.control = trainer.callback_handler.on_evaluate(trainer.args, trainer.state, trainer.control, metrics)
        best = trainer.state.best_metric  # transformers' _determine_best_metric compares after this returns
        if _strategy(trainer.args, "save_strategy") == "steps" and (best is None or logs[metric] > best):
            trainer.control.should_save = True  # a new best: save this step even off the save_steps grid
        return metrics

    def write(self, step: int, lines: list[dict[str, Any]], trainer: Any) -> None:
        """OUTPUT_DIR/heldout/step-N/: samples.jsonl and results.json, the files `eval run` writes (rewritten
        whole: a resumed run evaluates a step again)."""
        from eval.runner import dumps_line, write_results

        d = self.out / f"step-{step}"
        d.mkdir(parents=True, exist_ok=True)
        tmp = d / "samples.jsonl.tmp"
        tmp.write_text("".join(dumps_line(s) for s in lines), encoding="utf-8")
        os.replace(tmp, d / "samples.jsonl")
        header = {"model": f"{trainer.args.output_dir} at step {step} (live)", "data": str(self.out / "heldout.jsonl"),
                  "backend": "hf-live", "seed": 0, "generation": {"max_new_tokens": self.max_new_tokens,
                                                                 "temperature": 0.0}}
        write_results(d, self.records, {s["id"]: s for s in lines}, header)


def prepare(args: Any, cfg: Any, kind: str) -> HeldoutSet | None:
    """The held-out set of a run (None when held_out_rows is 0): its records written to
    OUTPUT_DIR/heldout/heldout.jsonl (what recipes/select_checkpoint.py --heldout takes later) and the
    eval_dataset the trainer is given (`kind` grpo: trainer rows; sft: prompt-completion rows)."""
    if not args.held_out_rows:
        return None
    from datasets import Dataset

    from common.prompts import build_messages
    from eval.runner import dumps_line
    from synth.rows import conversational_row  # recipes/shared/data.to_row's row, without importing the data

    rows = records(args)
    out = Path(cfg.output_dir) / FOLDER
    main = int(os.environ.get("RANK", "0")) == 0  # every process draws the same rows; the first one writes and says
    if main:
        out.mkdir(parents=True, exist_ok=True)
        (out / "heldout.jsonl").write_text("".join(dumps_line(r) for r in rows), encoding="utf-8")
    if kind == "sft":
        from synth.gold import sft_completion

        data = [{"prompt": build_messages(r, system_prompt=args.system_prompt),
                 "completion": [{"role": "assistant", "content": sft_completion(r) or ""}]} for r in rows]
        tokens = args.held_out_max_new_tokens or SFT_MAX_NEW_TOKENS
    else:
        data = [conversational_row(r, args.system_prompt) for r in rows]
        tokens = args.held_out_max_new_tokens or cfg.max_completion_length
    if main:
        print(f"held-out set: {len(rows)} rows (synth seed {heldout_seed(args)}, {FOLDER}/heldout.jsonl), scored "
              f"greedily with {tokens} new tokens at each evaluation; training rows with these prompts are dropped",
              file=sys.stderr)
    return HeldoutSet(rows, args.system_prompt, tokens, cfg.per_device_eval_batch_size, out, Dataset.from_list(data),
                      metrics_file=Path(cfg.output_dir) / "metrics.jsonl" if kind == "sft" else None)


def best_record(output_dir: str, args: Any, state: Any) -> dict[str, Any] | None:
    """What best_checkpoint.json holds (recipes/shared/best_checkpoint.py's fields): every evaluation of the metric
    (from the log history, so a resumed run keeps the earlier ones), the best (highest; ties: the earlier step, as
    transformers' strict `>` keeps) and its checkpoint folder (None while it has none: save_strategy no). As
    transformers, step 0 (eval_on_start) is not a candidate."""
    metric = args.metric_for_best_model
    evals = [{"step": h["step"], "value": h[metric]} for h in state.log_history if metric in h]
    trained = [e for e in evals if e["step"] > 0]  # eval_on_start's step 0 is the base model: logged, not a candidate
    if not trained:
        return None
    best = trained[0]
    for e in trained[1:]:
        if e["value"] > best["value"]:
            best = e
    from recipes.shared.run_dir import weights_problem

    ckpt = Path(output_dir) / f"checkpoint-{best['step']}"
    return {"metric": metric, "value": best["value"], "step": best["step"],
            "path": str(ckpt) if ckpt.is_dir() and weights_problem(ckpt, adapter_ok=True) is None else None,
            "greater_is_better": True, "load_best_model_at_end": bool(args.load_best_model_at_end),
            "trainer_best_model_checkpoint": state.best_model_checkpoint, "evaluations": evals}


def best_callback(output_dir: str) -> Any:
    """A TrainerCallback writing OUTPUT_DIR/best_checkpoint.json after each save and at the end of training."""
    from transformers import TrainerCallback

    class BestCheckpoint(TrainerCallback):
        def _write(self, args, state) -> None:
            rec = best_record(output_dir, args, state) if state.is_world_process_zero else None
            if rec is not None:
                best_checkpoint.write(Path(output_dir), rec)

        def on_save(self, args, state, control, **kw):
            self._write(args, state)

        def on_train_end(self, args, state, control, **kw):
            self._write(args, state)

    return BestCheckpoint()


def trainer_class(base: type, held: HeldoutSet | None) -> type:
    """`base` (GRPOTrainer, SFTTrainer) whose `evaluate` scores the held-out set and which records the best
    checkpoint; `base` itself when there is no held-out set."""
    if held is None:
        return base

    class HeldoutTrainer(base):  # type: ignore[misc, valid-type]
        def __init__(self, *a: Any, **kw: Any) -> None:
            super().__init__(*a, eval_dataset=held.dataset, **kw)
            self.add_callback(best_callback(self.args.output_dir))

        def evaluate(self, eval_dataset: Any = None, ignore_keys: Any = None,
                     metric_key_prefix: str = "eval") -> dict[str, float]:
            return held.evaluate(self, metric_key_prefix)

    HeldoutTrainer.__name__ = HeldoutTrainer.__qualname__ = f"Heldout{base.__name__}"
    return HeldoutTrainer


@contextlib.contextmanager
def generation_attention(model: Any) -> Iterator[None]:
    """`model` on SDPA attention inside the block, on its own again after. TRL's AsyncGRPOTrainer builds the policy
    with its tree attention, which runs only packed training rows (it needs the tree's index tensors), so
    `generate` on it fails; the held-out answers are generated with SDPA, the same weights."""
    impl = model.config._attn_implementation
    if impl == "sdpa":
        yield
        return
    model.set_attn_implementation("sdpa")
    try:
        yield
    finally:
        model.set_attn_implementation(impl)


def async_trainer_class(base: type, held: HeldoutSet | None) -> type:
    """`base` (TRL's AsyncGRPOTrainer) whose `evaluate` scores the held-out set between two optimizer steps, as the
    sync trainer's does, and which records the best checkpoint. AsyncGRPOTrainer's constructor takes no
    eval_dataset, which transformers wants with an eval_strategy, so a class between it and the Trainer it builds
    on passes one. The evaluation generates in the trainer process with its current weights (HF `generate`, SDPA);
    the rollout worker is neither paused nor used: it keeps generating meanwhile (docs/training.md)."""
    if held is None:
        return base
    from trl.experimental.async_grpo import AsyncGRPOTrainer

    class WithEvalDataset(AsyncGRPOTrainer.__mro__[1]):  # type: ignore[misc, name-defined]
        def __init__(self, *a: Any, **kw: Any) -> None:
            super().__init__(*a, eval_dataset=held.dataset, **kw)

    class HeldoutAsyncTrainer(base, WithEvalDataset):  # type: ignore[misc, valid-type]
        def __init__(self, *a: Any, **kw: Any) -> None:
            super().__init__(*a, **kw)
            self.add_callback(best_callback(self.args.output_dir))

        def evaluate(self, eval_dataset: Any = None, ignore_keys: Any = None,
                     metric_key_prefix: str = "eval") -> dict[str, float]:
            with generation_attention(self.accelerator.unwrap_model(self.model)):
                return held.evaluate(self, metric_key_prefix)

    HeldoutAsyncTrainer.__name__ = HeldoutAsyncTrainer.__qualname__ = f"Heldout{base.__name__}"
    return HeldoutAsyncTrainer
