"""What a GRPO run logs beside TRL's own metrics, so that reward hacking shows while it trains: the TASE view of
every generation batch (official and strict accuracy, fine credit, the share of official passes that are
loopholes, zero-variance groups, distinct answers, accuracy per task and per language), sent through TRL's
`log_metric` hook (GRPOTrainer passes it to every reward function: `_calculate_rewards`), and the checks of
`report_to` (a tracker that is not installed is one line, not a traceback at the first log).

TRL averages what `log_metric` receives over each logging step and hands it, with its own metrics, to
`Trainer.log`: so the same keys reach metrics.jsonl (recipes/grpo.py MetricsLogger), TensorBoard, W&B and
Trackio. Every key starts with `tase/` (docs/training.md, "Rewards and what is logged", lists them).
"""
from __future__ import annotations

import os
import sys
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

from rewards.levels import COARSE, FINE, LEVELS, METRICS, STRICT, watched

PREFIX = "tase/"
# the keys logged for every batch (per-task and per-language keys come on top: tase/task/<task>/official_acc, ...)
KEYS = (*METRICS.values(), "loophole_share", "zero_var_groups", "distinct_answers")  # official_acc: coarse's mean


class Verdict(NamedTuple):
    """One completion's verdicts and where it belongs (its GRPO group, task and language)."""

    group: str
    task: str | None
    lang: str | None
    coarse: float
    strict: float
    fine: float
    answer: str


def _mean(xs: Sequence[float]) -> float:
    return sum(xs) / len(xs) if xs else 0.0


def groups(verdicts: Sequence[Verdict]) -> list[list[Verdict]]:
    """GRPO groups: TRL's RepeatSampler puts the num_generations completions of one prompt next to each other
    (across processes too, in rank order), so a group is a run of equal group keys."""
    out: list[list[Verdict]] = []
    for v in verdicts:
        if out and out[-1][0].group == v.group:
            out[-1].append(v)
        else:
            out.append([v])
    return out


def batch_metrics(verdicts: Sequence[Verdict], level: str = FINE) -> dict[str, float]:
    """The TASE view of one batch of completions (shares in [0, 1]):

    official_acc / strict_acc / fine_credit: mean of the official verdict, the strict one and the fine credit;
    loophole_share: official passes that fail the strict verdict, over official passes (0 with no official pass);
    zero_var_groups: groups whose `level` verdict (the accuracy the run trains on) is the same for every
      completion, hence no accuracy signal; counted on the verdicts themselves, not on a float std of the total
      reward (TRL's frac_reward_zero_std misses groups whose total is 0.2: std 1.5e-8 > its 1e-8 tolerance);
    distinct_answers: distinct extracted answers in a group over its size, averaged over groups (1/G: every
      completion gave the same answer; an empty extraction counts as one answer);
    task/<task>/official_acc, task/<task>/strict_acc, lang/<lang>/...: the same accuracies per task and language.
    """
    if not verdicts:
        return {}
    passes = [v for v in verdicts if v.coarse == 1.0]
    gs = groups(verdicts)
    m = {
        **{METRICS[lv]: _mean([getattr(v, lv) for v in verdicts]) for lv in LEVELS},  # official_acc: coarse's mean
        "loophole_share": _mean([1.0 if v.strict != 1.0 else 0.0 for v in passes]),
        "zero_var_groups": _mean([1.0 if len({getattr(v, level) for v in g}) == 1 else 0.0 for g in gs]),
        "distinct_answers": _mean([len({v.answer for v in g}) / len(g) for g in gs]),
    }
    for kind in ("task", "lang"):
        by: dict[str, list[Verdict]] = {}
        for v in verdicts:
            key = getattr(v, kind)
            if key:
                by.setdefault(str(key), []).append(v)
        for key, vs in sorted(by.items()):
            for lv in (COARSE, STRICT):
                m[f"{kind}/{key}/{METRICS[lv]}"] = _mean([getattr(v, lv) for v in vs])
    return {PREFIX + k: float(v) for k, v in m.items()}


def verdicts(prompts: Any, completions: Any, columns: dict[str, Any]) -> list[Verdict]:
    """The verdicts of a batch as TRL hands it to a reward function (rewards.trl.batch_scores: the same checks
    as the accuracy rewards; RewardInputError where they would refuse it)."""
    from rewards.trl import batch_scores

    cols = {k: v for k, v in columns.items()
            if k not in ("prompts", "completions", "trainer_state", "log_metric", "log_extra", "environments")}
    scores = batch_scores(prompts, completions, **cols)
    n = len(scores)

    def column(name: str) -> list | None:
        v = columns.get(name)
        return list(v) if isinstance(v, (list, tuple)) and len(v) == n else None

    ids = column("id") or [repr(p) for p in (prompts if isinstance(prompts, (list, tuple)) else [None] * n)]
    tasks, langs = column("task") or [None] * n, column("lang") or [None] * n
    return [Verdict(str(i), t, lang, s.coarse, s.strict, s.fine, s.extracted)
            for i, t, lang, s in zip(ids, tasks, langs, scores, strict=False)]


def _gather(local: Any) -> list:
    """Every process's part of the generation batch, in rank order (one process: its own). TRL calls the reward
    functions on every process in the same order, so the collective is safe here."""
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1):
        return [local]
    from accelerate.utils import gather_object

    return gather_object([local])


class WatchedReward:
    """A reward function that also logs the TASE view of its batch through TRL's `log_metric` hook. It returns
    exactly what the wrapped function returns and keeps its name (TRL logs `rewards/<name>/mean` by it); where the
    batch cannot be scored as TASE rows (a user dataset without `type`), it says so once and logs nothing more."""

    def __init__(self, func: Callable[..., Any], level: str = FINE) -> None:
        self.func, self.level = func, level
        self.__name__ = getattr(func, "__name__", type(func).__name__)
        self.__doc__ = getattr(func, "__doc__", None)
        self.off: str | None = None

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        out = self.func(*args, **kwargs)
        log = kwargs.get("log_metric")
        if callable(log) and self.off is None:
            for k, v in self.metrics(kwargs).items():
                log(k, v)
        return out

    def metrics(self, kwargs: dict[str, Any]) -> dict[str, float]:
        """The whole generation batch's metrics (every process computes the same and logs it: TRL's average across
        processes then leaves it unchanged)."""
        from rewards.trl import RewardInputError

        columns = {k: v for k, v in kwargs.items() if k not in ("prompts", "completions")}
        try:
            local: list[Verdict] | str = verdicts(kwargs.get("prompts"), kwargs.get("completions"), columns)
        except RewardInputError as e:
            local = str(e)
        parts = _gather(local)
        why = next((p for p in parts if isinstance(p, str)), None)
        if why is not None:
            self.off = why
            print(f"tase/ metrics off for this run: {why}", file=sys.stderr)
            return {}
        return batch_metrics([v for p in parts for v in p], self.level)


def watch(funcs: list[Any], level: str | None) -> list[Any]:
    """The reward functions of a run with the first synchronous one wrapped in WatchedReward (TRL runs async ones
    concurrently, outside the order the gather needs). The zero-variance level is the accuracy the run trains on,
    its resolved `level` (recipes/grpo_core/reward_funcs.resolve_rewards), strict without one
    (rewards.levels.watched)."""
    from trl.trainer.utils import is_async_callable

    out = list(funcs)
    for i, f in enumerate(out):
        if not is_async_callable(f):
            out[i] = WatchedReward(f, watched(level))
            break
    else:
        print("tase/ metrics off for this run: every reward function is async", file=sys.stderr)
    return out


# report_to -> the package it imports (transformers' is_<x>_available checks these; a tracker it knows but that is not
# installed passed its INTEGRATION_TO_CALLBACK lookup and failed with a traceback when the trainer built its callbacks)
TRACKERS = {"tensorboard": "tensorboard", "wandb": "wandb", "trackio": "trackio", "comet_ml": "comet_ml",
            "mlflow": "mlflow", "azure_ml": "azureml", "neptune": "neptune", "codecarbon": "codecarbon",
            "clearml": "clearml", "dagshub": "dagshub", "flyte": "flytekit", "dvclive": "dvclive",
            "swanlab": "swanlab", "kubeflow": "kubeflow"}


def report_to(cfg: Any) -> list[str]:
    """The trackers of a run: transformers has turned report_to into a list (`none`: empty); a comma-separated
    value (`--report_to tensorboard,wandb`: the command line takes one word, a YAML list takes several) is split."""
    r = getattr(cfg, "report_to", None) or []
    r = [r] if isinstance(r, str) else list(r)
    return [x.strip() for item in r for x in str(item).split(",") if x.strip() and x.strip() != "none"]


def check_trackers(cfg: Any) -> str | None:
    """Why the run's report_to cannot work (an unknown name, a tracker that is not installed), in one line, or None,
    after splitting a comma-separated report_to into cfg.report_to. Checked before training: transformers would raise
    only when it builds the trainer's callbacks."""
    import importlib.util

    from transformers.integrations.integration_utils import INTEGRATION_TO_CALLBACK

    cfg.report_to = report_to(cfg)  # what the trainer's callbacks are built from
    for name in report_to(cfg):
        if name not in INTEGRATION_TO_CALLBACK and name != "all":  # transformers raises only when building the trainer
            return f"report_to {name}: unknown tracker; one of none, all, {', '.join(INTEGRATION_TO_CALLBACK)}"
        mod = TRACKERS.get(name)
        if mod and importlib.util.find_spec(mod) is None:
            how = ("make install (it is in requirements.lock)" if name == "tensorboard" else
                   'pip install -e ".[track]"' if name == "wandb" else f"pip install {mod}")
            return f"report_to {name}: the {mod} package is not installed ({how}), or set --report_to none"
    return None


def tracker_env(cfg: Any) -> dict[str, str]:
    """Environment defaults that put a tracker's local files under the run folder (entry points set them with
    os.environ.setdefault, before the trainer starts the tracker): W&B's run folder (offline runs included)."""
    return {"WANDB_DIR": str(cfg.output_dir)} if "wandb" in report_to(cfg) else {}


def _num(v: Any) -> str:
    return f"{v:.4g}" if isinstance(v, float) else str(v)


def summary_line(logs: dict[str, Any], step: int, max_steps: int) -> str:
    """One short line for a training log dict (about 1,400 characters as transformers prints it): the step, loss,
    reward and its spread, each reward function's mean, the TASE accuracies and the step time. The whole dict goes
    to metrics.jsonl (GRPO) and trainer_state.json's log_history; `--verbose` prints it as before."""
    if "train_runtime" in logs:  # the trainer's closing summary
        return (f"trained {step} step{'' if step == 1 else 's'} in {logs['train_runtime']:.0f} s"
                + (f", mean loss {_num(logs['train_loss'])}" if "train_loss" in logs else ""))
    parts = [f"step {step}/{max_steps}" if max_steps > 0 else f"step {step}"]
    for key, name in (("loss", "loss"), ("eval_loss", "eval loss"), ("reward", "reward")):
        if key in logs:
            parts.append(f"{name} {_num(logs[key])}" + (f" ± {_num(logs['reward_std'])}" if key == "reward"
                                                         and "reward_std" in logs else ""))
    funcs = [f"{k.split('/')[1]} {_num(v)}" for k, v in logs.items()
             if k.startswith("rewards/") and k.endswith("/mean")]
    if funcs:
        parts.append(", ".join(funcs))
    tase = [f"{k.split('/')[-1].removesuffix('_acc')} {_num(v)}" for k, v in logs.items()
            if k in ("tase/strict_acc", "tase/official_acc", "tase/heldout/strict_acc", "tase/heldout/official_acc")]
    if tase:
        parts.append("acc " + ", ".join(tase))
    if "mean_token_accuracy" in logs:
        parts.append(f"token acc {_num(logs['mean_token_accuracy'])}")
    if "learning_rate" in logs:
        parts.append(f"lr {_num(logs['learning_rate'])}")
    if "step_time" in logs:
        parts.append(f"{logs['step_time']:.1f} s/step")
    return " | ".join(parts)


def short_logs(trainer: Any) -> None:
    """Replace transformers' printing of each whole log dict by summary_line, unless verbose (TASE_VERBOSE, set by
    --verbose in common/process.apply)."""
    if os.environ.get("TASE_VERBOSE", "") not in ("", "0"):
        return
    from transformers.trainer_callback import PrinterCallback, ProgressCallback

    class ShortProgress(ProgressCallback):
        def on_log(self, args, state, control, logs=None, **kw):
            if state.is_world_process_zero and self.training_bar is not None and logs:
                self.training_bar.write(summary_line(logs, state.global_step, state.max_steps))

    class ShortPrinter(PrinterCallback):
        def on_log(self, args, state, control, logs=None, **kw):
            if state.is_local_process_zero and logs:
                print(summary_line(logs, state.global_step, state.max_steps))

    for old, new in ((ProgressCallback, ShortProgress), (PrinterCallback, ShortPrinter)):
        if any(type(c) is old for c in trainer.callback_handler.callbacks):
            trainer.remove_callback(old)
            trainer.add_callback(new)
