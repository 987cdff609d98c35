"""Dynamic sampling for the sync GRPO recipe (DAPO's "filter groups"): GRPO learns only from groups whose
completions score differently, so a generation batch keeps only the groups whose accuracy *verdicts* are mixed and
is filled with groups generated for fresh prompts drawn from the trainer's own data stream.

The decision reads each completion's verdict (`rewards.trl.batch_scores`: strict for fine and strict runs, coarse
for coarse runs; `dynamic_sampling_granularity` says otherwise), never the float total reward: a format or length term
must not make a group look mixed, and float noise in a weighted sum (std 1.5e-8 for a group whose every total is
0.2) must not either. After `dynamic_sampling_max_rounds` re-draw rounds the batch is filled with uniform groups
whose loss mask and advantages are zeroed: they reach neither the loss nor its token count (docs/training.md,
"Dynamic sampling").

`DynamicGRPOTrainer` (built by `trainer_class`, so that this module imports without TRL) wraps three methods and
calls each original: `_generate_and_score_completions` (TRL's `_prepare_inputs` calls it once per generation batch,
so `num_iterations` > 1 and `steps_per_generation` reuse the filtered batch), `_calculate_rewards` (to read the
verdicts of the completions the rewards saw) and transformers' `get_batch_samples` (to hold the epoch's iterator:
re-draws take the next unused chunk of TRL's RepeatSampler stream, and the count of batches drawn is saved in the
checkpoint's trainer_state.json and skipped again on resume). tests/test_dynamic_sampling.py pins the sources
these rely on.
"""
from __future__ import annotations

import functools
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from common.errors import TaseError
from rewards.levels import LEVELS, STRICT, binary

PREFIX = "tase/dynamic/"
STATE_NAME = "DynamicSamplingState"  # its key in trainer_state.json's stateful_callbacks
# output keys of TRL's _generate_and_score_completions that the merge knows (text only); padding side and value
PROMPT_KEYS = {"prompt_ids": "pad", "prompt_mask": 0}
COMPLETION_KEYS = {"completion_ids": "pad", "completion_mask": 0, "tool_mask": 1, "old_per_token_logps": 0.0,
                   "sampling_per_token_logps": 0.0, "ref_per_token_logps": 0.0, "importance_sampling_ratio": 0.0}
ROW_KEYS = {"advantages"}
MAX_ROUNDS = 32  # re-draw rounds per generation batch at most: a step then costs at most 33 generation batches


def check_options(tase: Any) -> None:
    """The dynamic sampling options (TaseArgs.__post_init__): one ValueError line each (the trainers it works with are
    declared in recipes/features/dynamic_sampling/__init__.py)."""
    if not isinstance(tase.dynamic_sampling, bool):
        raise ValueError(f"dynamic_sampling must be true or false, got {tase.dynamic_sampling!r}")
    r = tase.dynamic_sampling_max_rounds
    if not isinstance(r, int) or isinstance(r, bool) or not 0 <= r <= MAX_ROUNDS:
        raise ValueError(f"dynamic_sampling_max_rounds must be an integer from 0 to {MAX_ROUNDS}, got {r!r} (each "
                         "re-draw round generates a whole batch more: a step costs at most that many + 1 batches)")
    if tase.dynamic_sampling_granularity not in ("auto", *LEVELS):
        raise ValueError(f"dynamic_sampling_granularity must be auto, strict, coarse or fine, got "
                         f"{tase.dynamic_sampling_granularity!r}")


def check_run(tase: Any, cfg: Any, processes: int) -> None:
    """What dynamic sampling needs from the trainer's options (grpo_args.validate, dry runs too): each process's part
    of a generation batch holds whole groups, since kept groups are chosen per process (a group split across
    processes could not be kept or dropped as one)."""
    if not tase.dynamic_sampling:
        return
    local = cfg.per_device_train_batch_size * cfg.steps_per_generation
    if processes > 1 and local % cfg.num_generations:
        raise TaseError(f"dynamic_sampling with {processes} processes needs per_device_train_batch_size x "
                        f"steps_per_generation ({local}) to be a multiple of num_generations ({cfg.num_generations}): "
                        "each process keeps or drops whole groups")


def verdict_level(tase: Any, level: str | None) -> str:
    """The verdict a group must mix: dynamic_sampling_granularity, or with auto the 0/1 verdict the run's resolved
    accuracy `level` is built on (rewards.levels.binary: strict for a fine or strict run, coarse for a coarse run;
    strict without one)."""
    if tase.dynamic_sampling_granularity != "auto":
        return tase.dynamic_sampling_granularity
    return binary(level)


def mixed_groups(verdicts: Sequence[float], size: int) -> list[bool]:
    """For consecutive groups of `size` completions (TRL's RepeatSampler order), whether their verdicts differ. The
    values are verdicts (0/1, or fine credit), compared exactly: there is no float sum to be noisy."""
    if size < 1 or len(verdicts) % size:
        raise ValueError(f"{len(verdicts)} verdicts do not split into groups of {size}")
    return [len(set(verdicts[i:i + size])) > 1 for i in range(0, len(verdicts), size)]


@dataclass
class Selection:
    """Which groups make the batch, as (round, group) pairs in the order they were drawn: `kept` (mixed) and
    `padded` (uniform, loss masked: only when the rounds ran out), and what was left out."""

    kept: list[tuple[int, int]] = field(default_factory=list)
    padded: list[tuple[int, int]] = field(default_factory=list)
    dropped: int = 0  # uniform groups left out or used only as padding
    surplus: int = 0  # mixed groups drawn beyond the batch's need (discarded)


def select(rounds: Sequence[Sequence[bool]], need: int) -> Selection:
    """The batch of `need` groups from the mixed flags of every round drawn: the first `need` mixed groups, then, if
    fewer, the earliest uniform groups as padding."""
    sel = Selection()
    uniform = []
    for r, flags in enumerate(rounds):
        for g, mixed in enumerate(flags):
            if not mixed:
                uniform.append((r, g))
            elif len(sel.kept) < need:
                sel.kept.append((r, g))
            else:
                sel.surplus += 1
    sel.dropped = len(uniform)
    sel.padded = uniform[:need - len(sel.kept)]
    return sel


def merge(parts: Sequence[dict[str, Any]], sel: Selection, size: int, pad_id: int,
          sequence_level: frozenset[str] = frozenset()) -> dict[str, Any]:
    """One output of TRL's `_generate_and_score_completions` from the selected groups of several (one per round):
    rows taken group by group, prompts re-padded on the left and completions on the right to the widest part, and the
    padding groups' completion mask and advantages zeroed. `num_items_in_batch` is left for the caller (it spans
    processes). Keys in `sequence_level` are one value per row (a sequence-level importance ratio): never padded."""
    import torch

    keys = set(parts[0])
    unknown = keys - set(PROMPT_KEYS) - set(COMPLETION_KEYS) - ROW_KEYS - {"num_items_in_batch"}
    if unknown:
        raise TaseError(f"dynamic_sampling: the generation batch has {', '.join(sorted(unknown))}; only text batches "
                        "are supported (no images or multimodal inputs)")
    order = [*sel.kept, *sel.padded]
    widths = {k: max(p[k].size(1) for p in parts) for k in keys if parts[0].get(k) is not None
              and (k in PROMPT_KEYS or (k in COMPLETION_KEYS and k not in sequence_level))}
    out: dict[str, Any] = {}
    for key in sorted(keys - {"num_items_in_batch"}):
        if parts[0].get(key) is None:
            out[key] = None
            continue
        pieces = []
        for r, g in order:
            t = parts[r][key][g * size:(g + 1) * size]
            if key in widths and t.size(1) < widths[key]:
                spec = PROMPT_KEYS.get(key, COMPLETION_KEYS.get(key))
                value = pad_id if spec == "pad" else spec
                fill = t.new_full((t.size(0), widths[key] - t.size(1)), value)
                t = torch.cat([fill, t] if key in PROMPT_KEYS else [t, fill], dim=1)
            pieces.append(t)
        out[key] = torch.cat(pieces, dim=0)
    if sel.padded:
        masked = torch.zeros(len(order) * size, dtype=torch.bool, device=out["advantages"].device)
        masked[len(sel.kept) * size:] = True
        out["completion_mask"] = out["completion_mask"].masked_fill(masked.unsqueeze(1), 0)
        out["advantages"] = out["advantages"].masked_fill(masked, 0.0)
    return out


def saved_counts(entry: Any, pos: int) -> dict[str, int]:
    """The re-draw counters a resumed checkpoint saved (its trainer_state.json's DynamicSamplingState entry), checked
    as every state file read on resume is (common/state.py): no entry (a run without dynamic sampling) or absent
    counters take their defaults (`pos`: the batches transformers skips); an entry of another shape, or a value that
    is not a whole number >= 0, is one line, not a ValueError mid-resume or a silent start over."""
    from common.errors import bounded
    from common.state import whole

    entry = entry[-1] if isinstance(entry, list) and entry else entry
    attrs = entry.get("attributes") if isinstance(entry, dict) else None
    if entry is not None and not isinstance(attrs, dict):  # there, but not the callback's shape: not a silent start
        raise TaseError(f"trainer_state.json of the resumed checkpoint: stateful_callbacks.{STATE_NAME} is "
                        f"{bounded(entry)}, not a callback state with attributes; resume from another checkpoint")
    out = {"pos": pos, "extra": 0, "prompts": 0, "short_epochs": 0}
    for key in out:
        if isinstance(attrs, dict) and key in attrs:
            if not whole(attrs[key]):
                raise TaseError(f"trainer_state.json of the resumed checkpoint: stateful_callbacks.{STATE_NAME} "
                                f"{key} is {bounded(attrs[key])}, not a whole number >= 0; resume from another "
                                "checkpoint")
            out[key] = attrs[key]
    return out


def trainer_args(tase: Any, level: str | None) -> dict[str, Any]:
    """The keyword arguments DynamicGRPOTrainer takes beside GRPOTrainer's (`level`: the run's resolved accuracy
    level, recipes/grpo_core/reward_funcs.resolve_rewards)."""
    return {"dynamic_rounds": tase.dynamic_sampling_max_rounds, "dynamic_level": verdict_level(tase, level)}


@functools.cache
def trainer_class(base: type | None = None) -> type:
    """DynamicGRPOTrainer: TRL's GRPOTrainer (or `base`, e.g. recipes/features/guidance/hints.py's trainer) with dynamic
    sampling (the module docstring says which methods it wraps). Built on first use, so that the options and the pure
    parts above import without TRL."""
    import torch
    from transformers import TrainerCallback
    from transformers.trainer_callback import ExportableState
    from trl import GRPOTrainer

    base = base or GRPOTrainer

    class DynamicSamplingState(TrainerCallback, ExportableState):
        """Where the data stream stands, saved in every checkpoint's trainer_state.json (transformers' stateful
        callbacks): `pos` batches taken from this epoch's iterator, `extra` of them by re-draws (resume skips those on
        top of the batches transformers skips), `prompts` drawn since the run started, `short_epochs` that re-draws
        ran out of prompts (transformers' epoch count is off after one: resume then warns)."""

        def __init__(self) -> None:
            self.pos, self.extra, self.prompts, self.short_epochs, self.exhausted = 0, 0, 0, 0, False

        def state(self) -> dict:
            return {"args": {}, "attributes": {"pos": self.pos, "extra": self.extra, "prompts": self.prompts,
                                               "short_epochs": self.short_epochs}}

    class DynamicGRPOTrainer(base):  # type: ignore[misc, valid-type]
        """GRPOTrainer whose generation batch holds only groups with mixed verdicts
        (recipes/features/dynamic_sampling/sampling.py)."""

        def __init__(self, *args: Any, dynamic_rounds: int = 4, dynamic_level: str = STRICT, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self.dynamic_rounds, self.dynamic_level = dynamic_rounds, dynamic_level
            self._dyn = DynamicSamplingState()
            self.add_callback(self._dyn)
            self._dyn_iter: Any = None
            self._dyn_verdicts: list[float] | None = None
            local = self.args.per_device_train_batch_size * self.args.steps_per_generation
            if local % self.num_generations and self.accelerator.num_processes > 1:
                raise TaseError(f"dynamic_sampling: {local} rows per process do not hold whole groups of "
                                f"{self.num_generations}")

        # -- the data stream -------------------------------------------------------------------------------------
        def get_batch_samples(self, epoch_iterator: Any, num_batches: int, device: Any) -> Any:
            """transformers' prefetch of an optimizer step's batches, after noting the epoch's iterator (and, on
            the first call of a resumed run, skipping the batches re-draws had taken before the checkpoint)."""
            if epoch_iterator is not self._dyn_iter:
                self._dyn_new_iterator(epoch_iterator)
            batches, n = super().get_batch_samples(epoch_iterator, num_batches, device)
            self._dyn.pos += len(batches)
            return batches, n

        def _dyn_new_iterator(self, it: Any) -> None:
            first = self._dyn_iter is None
            self._dyn_iter = it
            # the callback transformers holds (restore_callback_states_from_checkpoint may have replaced ours)
            self._dyn = next(c for c in self.callback_handler.callbacks if isinstance(c, DynamicSamplingState))
            self.state.stateful_callbacks.setdefault(STATE_NAME, self._dyn.state())  # a checkpoint without it
            if not first:  # a new epoch
                self._dyn.short_epochs += int(self._dyn.exhausted)
                self._dyn.pos = self._dyn.extra = 0
                self._dyn.exhausted = False
                return
            if self.state.global_step == 0:
                return
            saved = saved_counts(self.state.stateful_callbacks.get(STATE_NAME),
                                 self.state.global_step * self.args.gradient_accumulation_steps)
            self._dyn.pos, self._dyn.extra = saved["pos"], saved["extra"]
            self._dyn.prompts, self._dyn.short_epochs = saved["prompts"], saved["short_epochs"]
            if self._dyn.short_epochs:
                print(f"dynamic sampling: {self._dyn.short_epochs} epoch(s) ran out of prompts before this "
                      "checkpoint, so transformers' data position on resume is approximate (use streaming: true or "
                      "more num_train_examples)", file=sys.stderr)
            if self.args.ignore_data_skip:  # transformers starts the epoch over: so does the count
                self._dyn.pos = self._dyn.extra = 0
                return
            try:
                for _ in range(self._dyn.extra):  # the re-draws' batches, past what transformers skipped
                    next(it)
            except StopIteration:
                self._dyn.exhausted = True
                print("dynamic sampling: the resumed epoch has no prompts left after the batches re-draws took",
                      file=sys.stderr)

        def _dyn_next_chunk(self) -> list | None:
            """The first copy of the next chunk no one has generated on: RepeatSampler (or TRL's iterable wrap) repeats
            each chunk of prompts num_iterations x steps_per_generation times in a row, so the rest of the current chunk
            and the new chunk's other copies are taken too. None when the epoch has no more."""
            repeat = self.args.steps_per_generation * self.num_iterations
            d = self._dyn
            try:
                while d.pos % repeat:
                    next(self._dyn_iter)
                    d.pos, d.extra = d.pos + 1, d.extra + 1
                batch = next(self._dyn_iter)
                d.pos, d.extra = d.pos + 1, d.extra + 1
                for _ in range(repeat - 1):
                    next(self._dyn_iter)
                    d.pos, d.extra = d.pos + 1, d.extra + 1
            except StopIteration:
                if not d.exhausted:
                    print("dynamic sampling: this epoch ran out of prompts during re-draws; it ends early "
                          "(streaming: true, or more num_train_examples, avoids it)", file=sys.stderr)
                d.exhausted = True
                return None
            return batch

        # -- the verdicts --------------------------------------------------------------------------------------
        def _calculate_rewards(self, inputs, prompts, completions, completion_ids_list):  # noqa: ANN001, ANN202
            """TRL's rewards, after reading the verdict of each completion (the columns TRL gives the rewards)."""
            if self.model.training:
                from rewards.trl import batch_scores

                cols = {k: [x[k] for x in inputs] for k in inputs[0] if k not in ("prompt", "completion",
                                                                                  "completion_ids")}
                scores = batch_scores(prompts, completions, **cols)
                self._dyn_verdicts = [float(getattr(s, self.dynamic_level)) for s in scores]
            return super()._calculate_rewards(inputs, prompts, completions, completion_ids_list)

        # -- the filter ----------------------------------------------------------------------------------------
        def _generate_and_score_completions(self, inputs):  # noqa: ANN001, ANN202
            """TRL's generation batch, filtered: rounds of generation on fresh chunks until every process holds
            enough groups with mixed verdicts or the rounds run out, then one batch of the same size."""
            if not self.model.training:
                return super()._generate_and_score_completions(inputs)
            size = self.num_generations
            need = len(inputs) // size  # groups per process
            parts, flags = [], []
            batch, rounds = inputs, 0
            while True:
                self._dyn_verdicts = None
                parts.append(super()._generate_and_score_completions(batch))
                if self._dyn_verdicts is None:
                    raise TaseError("dynamic_sampling: the rewards were not computed for a generation batch")
                flags.append(mixed_groups(self._dyn_verdicts, size))
                self._dyn.prompts += len(flags[-1]) * self.accelerator.num_processes  # every process draws as many
                short = need - sum(sum(f) for f in flags)
                if rounds >= self.dynamic_rounds or not self._dyn_any(short > 0):
                    break
                batch = self._dyn_next_chunk()
                if self._dyn_any(batch is None):
                    break
                rounds += 1
            sel = select(flags, need)
            seq = frozenset({"importance_sampling_ratio"}) if str(
                getattr(self, "vllm_importance_sampling_mode", "")).startswith("sequence") else frozenset()
            out = merge(parts, sel, size, self._tokenizer.pad_token_id, seq)
            loss_mask = (out["completion_mask"] if out.get("tool_mask") is None
                         else out["completion_mask"] * out["tool_mask"])
            out["num_items_in_batch"] = self.accelerator.gather(loss_mask.sum()).sum()
            self._dyn_log(sel, rounds, sum(len(f) for f in flags))
            return out

        def _dyn_any(self, flag: bool) -> bool:
            """Whether any process says yes (every process makes the same number of rounds: generation gathers)."""
            t = torch.tensor([float(flag)], device=self.accelerator.device)
            return bool(self.accelerator.gather(t).max().item() > 0)

        def _dyn_log(self, sel: Selection, rounds: int, drawn: int) -> None:
            """Per generation batch, summed over processes: groups drawn, kept, dropped (uniform), surplus (mixed but
            not needed), padded (uniform groups filling a batch whose rounds ran out); re-draw rounds; prompts drawn
            since the run started (every process draws as many); trained_uniform_share: padded over the
            batch's groups, the zero-variance share of what the loss saw (tase/zero_var_groups counts every group
            drawn); capped: 1 when the batch needed padding."""
            local = [drawn, len(sel.kept), sel.dropped, sel.surplus, len(sel.padded)]
            t = self.accelerator.gather(torch.tensor(local, dtype=torch.float32, device=self.accelerator.device))
            tot = t.view(-1, len(local)).sum(dim=0).tolist()
            m = self._metrics["train"]
            for key, v in zip(("groups_drawn", "groups_kept", "groups_dropped", "groups_surplus", "groups_padded"), tot,
                              strict=False):
                m[PREFIX + key].append(float(v))
            m[PREFIX + "prompts_consumed"].append(float(self._dyn.prompts))
            m[PREFIX + "trained_uniform_share"].append(float(tot[4] / (tot[1] + tot[4])) if tot[1] + tot[4] else 0.0)
            m[PREFIX + "rounds"].append(float(rounds))
            m[PREFIX + "capped"].append(float(bool(sel.padded)))

    return DynamicGRPOTrainer
