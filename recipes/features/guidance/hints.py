"""Guided GRPO for groups where the model never succeeds, opt-in with `--guidance hint|gold|both` (sync
GRPO, one training process; under trainer: async in the rollout worker: worker.py).

GRPO learns nothing from a group whose completions all fail. After TRL generates and scores a generation batch, every
group whose *strict* verdicts all fail (`rewards.trl.batch_scores`, the verdict dynamic sampling and the curriculum
read) is guided:

- `hint` (QuestA, arXiv 2507.13266; Guide-GRPO, 2506.13923): the group is generated again with a hint appended to
  its user turn (`synth.core.task_hint`: the task module's graded hint, built from that row's own gold answer) and
  the hinted completions replace the failed ones. The loss uses the log-probabilities under the *hinted* prompt
  (QuestA's choice; docs/training.md says why): the completions are then on-policy samples of the prompt they are
  scored under, so TRL's ratios and clipping apply unchanged.
- `gold` (LUFFY, 2504.14945): the last member of a group that still fails is replaced by the row's gold completion
  (`synth.gold.sft_completion`) under the *plain* prompt, its reward computed by the run's own reward functions and
  the group's advantages recomputed. Its behaviour log-probabilities are taken to be the current policy's (the
  importance ratio starts at 1 and PPO's clip bounds it over num_iterations; a vLLM importance-sampling ratio is 1):
  an advantage-weighted likelihood term, without LUFFY's policy shaping.
- `both`: hint first, then gold for the groups the hint did not rescue.

The hint strength follows a schedule whose state is a `recipes.features.curriculum.levels.Curriculum` over each task's
hint levels (level 0 the strongest): `success` moves a task one level weaker when the mean *unhinted* strict accuracy of
its last `guidance_window` groups reaches `guidance_up` and one stronger at or below `guidance_down`; `step` weakens
every `guidance_step_every` optimizer steps; `fixed` stays at `guidance_start_level`. The state is saved in every
checkpoint (`guidance.json`, and trainer_state.json's stateful_callbacks) and restored on resume.

Hints exist only here, in training prompts of the trainer's training mode: evaluation, the held-out set (recipes/
heldout.py) and official rows never pass through this module, and a row whose id is not a synth id is never
hinted (tests/test_guidance.py guards it). Hinted rows carry curriculum level -1, so a curriculum judges the
unhinted pass only.
"""
from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from common.errors import TaseError

PREFIX = "tase/guide/"
STATE_FILE = "guidance.json"
MODES = ("none", "hint", "gold", "both")  # the `guidance` option (checked in recipes/features/guidance/__init__.py)
SCHEDULES = ("success", "step", "fixed")


def check_run(tase: Any, cfg: Any, processes: int, model_args: Any = None) -> None:
    """What guidance needs from the run (grpo_args.validate, dry runs too, before the model loads): one training
    process (the re-generated batch holds only the failed groups, and TRL gathers rewards across processes by equal
    shapes); for a gold member, TRL's sum_then_normalize advantages (the gold group's are computed that way) and,
    with beta > 0, a reference model, which a PEFT adapter run has not (TRL disables the adapter instead)."""
    if tase.guidance == "none":
        return
    if processes > 1:
        raise TaseError(f"guidance runs with one training process, got {processes}: the hinted re-generation covers "
                        "only the failed groups, which TRL's cross-process gathers cannot take")
    if getattr(cfg, "restore_callback_states_from_checkpoint", False):
        raise TaseError("guidance restores its own state on resume; set restore_callback_states_from_checkpoint false")
    if tase.guidance in ("gold", "both"):
        agg = getattr(cfg, "multi_objective_aggregation", "sum_then_normalize")
        if agg != "sum_then_normalize":
            raise TaseError(f"guidance {tase.guidance} needs multi_objective_aggregation sum_then_normalize, got {agg}")
        if getattr(cfg, "beta", 0.0) != 0.0 and getattr(model_args, "use_peft", False):
            raise TaseError(f"guidance {tase.guidance} with beta > 0 needs a reference model; a PEFT adapter run has "
                            "none: set beta 0 or use_peft false")


# -- pure parts -------------------------------------------------------------------------------------------------------

def failed_groups(verdicts: Sequence[float], size: int) -> list[bool]:
    """For consecutive groups of `size` completions (TRL's RepeatSampler order), whether every strict verdict fails."""
    if size < 1 or len(verdicts) % size:
        raise ValueError(f"{len(verdicts)} verdicts do not split into groups of {size}")
    return [not any(verdicts[i:i + size]) for i in range(0, len(verdicts), size)]


def record_of(row: dict[str, Any]) -> dict[str, Any]:
    """The record fields of a trainer row (recipes/shared/data.to_row) that hints and gold completions are built
    from."""
    return {"id": row.get("id", ""), "task": row.get("task", ""), "subtask": row.get("subtask", ""),
            "lang": row.get("lang", ""), "type": row.get("type", ""), "answer": row.get("answer", ""),
            "prompt": row.get("question", ""), "variation": row.get("variation", ""), "meta": {}}


def hint_for(row: dict[str, Any], level: int) -> str | None:
    """The hint for a synth training row at `level`; None for any other row (an official or file row whose id is not
    a synth id is never hinted) or where its task has none."""
    from synth.core import task_hint

    if not str(row.get("id", "")).startswith("synth/"):
        return None
    return task_hint(record_of(row), level)


def hinted_prompt(messages: list[dict[str, Any]], hint: str) -> list[dict[str, Any]]:
    """A copy of the chat prompt with `hint` appended to its last user turn (the input rows are left untouched)."""
    out = [dict(m) for m in messages]
    for m in reversed(out):
        if m.get("role") == "user" and isinstance(m.get("content"), str):
            m["content"] = f"{m['content']}\n\n{hint}"
            return out
    raise TaseError("guidance: a training prompt has no user turn to add a hint to")


def gold_text(row: dict[str, Any]) -> str | None:
    """The row's gold completion (the SFT warm-up's answer, synth.gold.sft_completion), None where none is built."""
    from synth.gold import sft_completion

    if not str(row.get("id", "")).startswith("synth/"):
        return None
    try:
        return sft_completion(record_of(row))
    except Exception:  # noqa: BLE001 - a type whose training answer needs generator metadata the row lacks
        return None


def plan_hints(inputs: Sequence[dict[str, Any]], strict: Sequence[float], size: int,
               level: Any) -> dict[int, tuple[list[dict[str, Any]], int]]:
    """Which groups of a generation batch are generated again with a hint: group index -> (the hinted prompt, the
    level used), for each group whose strict verdicts all fail and whose row has a hint at its task's `level(task)`
    (None: the task has none). A group with any right answer is never hinted."""
    out = {}
    for g, bad in enumerate(failed_groups(strict, size)):
        row = inputs[g * size]
        lv = level(str(row.get("task"))) if bad else None
        text = hint_for(row, lv) if lv is not None else None
        if text is not None:
            out[g] = (hinted_prompt(row["prompt"], text), lv)
    return out


class HintSchedule:
    """The hint level of every task that has hints: a Curriculum over hint levels
    (recipes/features/curriculum/levels.py; level 0 is the strongest hint, a move "up" weakens it), moved by unhinted
    success (`success`), by step (`step`) or not."""

    def __init__(self, counts: dict[str, int], mode: str = "success", start: int = 0, window: int = 8,
                 up: float = 0.5, down: float = 0.0, every: int = 50) -> None:
        from recipes.features.curriculum.levels import Curriculum

        self.mode, self.start, self.every, self.step = mode, start, every, 0
        self.cur = Curriculum(counts, start, window, up, down)

    def level(self, task: str) -> int | None:
        """The hint level of `task` now (None: the task has no hints)."""
        lv = self.cur.level(task)
        if lv is None or self.mode != "step":
            return lv
        return min(self.cur.counts[task] - 1, self.start + self.step // self.every)

    def record(self, task: str, accuracy: float) -> None:
        """One group's unhinted strict accuracy (`success` moves on it)."""
        if self.mode == "success" and task in self.cur.levels:
            self.cur.record(task, self.cur.levels[task], accuracy)

    def state(self) -> dict[str, Any]:
        return {"mode": self.mode, "step": self.step, **self.cur.state()}

    def load(self, state: dict[str, Any]) -> None:
        self.cur.load(state)
        self.step = int(state.get("step") or 0)


def state_problem(state: Any) -> str | None:
    """What is wrong with a guidance state (HintSchedule.state()'s shape: the curriculum's over hint levels, a mode
    and a step), or None."""
    from common.state import mapping_problem, whole
    from recipes.features.curriculum.levels import state_problem as levels_problem

    why = levels_problem(state) or mapping_problem(state, {"mode": lambda m: m in SCHEDULES, "step": whole},
                                                     optional=("mode", "step"))
    return why.replace("curriculum state", "guidance state") if why else None


def saved_state(ckpt: str | Path) -> dict[str, Any] | None:
    """A checkpoint's guidance state, in common/state.FALLBACK's order: guidance.json, else the copy in
    trainer_state.json (written with the checkpoint itself, so a kill before guidance.json loses nothing); None for a
    checkpoint of a run without guidance. A guidance.json of the wrong shape (`[]`, `null`, levels "x", a level -5)
    falls back to the copy, saying so; with no usable copy either, one line."""
    from common.state import read_saved

    return read_saved(Path(ckpt), STATE_FILE, "GuidanceCallback", state_problem, "guidance hint levels")


def start(tase: Any, resume: str | None) -> HintSchedule | None:
    """The run's hint schedule (None without guidance), restored from `resume`'s state when resuming; one line on
    stderr says where it stands."""
    import sys

    if tase.guidance == "none":
        return None
    from recipes.shared.streams import data_streams
    from synth.core import combos, hint_count

    counts = {t: hint_count(t) for task, lang, sub in data_streams(tase.tasks, tase.langs, tase.subtasks)
              for t, _, _ in combos(task, lang, sub)} if tase.train_data == "synth" else {}
    if tase.train_data != "synth":  # a file's tasks are known as its rows come: every task with hints
        from synth.core import available

        counts = {t: g.hint_levels for t, g in available().items()}
    sched = HintSchedule(counts, tase.guidance_schedule, tase.guidance_start_level, tase.guidance_window,
                         tase.guidance_up, tase.guidance_down, tase.guidance_step_every)
    note = "start"
    if resume:
        saved = saved_state(resume)
        if saved:
            sched.load(saved)
            note = f"restored from {resume}"
        else:
            note = f"start ({resume} holds no guidance state)"
    levels = ", ".join(f"{t} {lv}/{sched.cur.counts[t] - 1}" for t, lv in sorted(sched.cur.levels.items()))
    print(f"guidance {tase.guidance} ({note}): hint levels {levels or 'none (no task of the run has hints)'}; "
          f"schedule {sched.mode}", file=sys.stderr)
    return sched


def callbacks(sched: HintSchedule | None) -> list[Any]:
    """The callback saving the schedule with every checkpoint and the final model (none without guidance): the
    curriculum's (recipes/features/curriculum/levels.py, `state_callback`), so a resume also works from a run made
    without it."""
    if sched is None:
        return []
    from recipes.features.curriculum.levels import state_callback

    return [state_callback("GuidanceCallback", STATE_FILE, sched.state)]


def trainer_args(tase: Any, sched: HintSchedule | None, funcs: list[Any], weights: list[float] | None) -> dict:
    """GuidedGRPOTrainer's keyword arguments: the mode, the schedule, and the run's reward functions *before* any
    logging wrapper (the gold member's reward; its scoring must not feed the tase/ metrics or the curriculum)."""
    return {"guide_mode": tase.guidance, "guide_schedule": sched, "guide_funcs": list(funcs),
            "guide_weights": list(weights) if weights is not None else [1.0] * len(funcs)}


# -- the trainer ------------------------------------------------------------------------------------------------------
