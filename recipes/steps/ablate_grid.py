"""The ablation grid of recipes/ablate.py: `--vary KEY=V1,V2` axes over any recipes/grpo.py option, expanded into
arms (their cartesian product), checked before anything trains, and the one comparison table of the arms (paired
bootstrap intervals against the base model, each arm's wall time).

Every arm shares the config, hence the data, seeds and warm-up (`--base`): options that would change those are
refused as axes (FIXED), so a difference between arms is the varied options' doing."""
from __future__ import annotations

import itertools
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from common.errors import TaseError

# options an axis may not vary: the data, the seeds, the warm-up and where an arm writes
FIXED = ("output_dir", "model_name_or_path", "seed", "data_seed", "synth_seed", "train_data", "tasks", "langs",
         "subtasks", "mixture", "num_train_examples", "skip_examples", "max_len", "paraphrase", "exclude",
         "repeat_answers", "resume_from_checkpoint", "config", "dry_run")


@dataclass
class Arm:
    """One training run of the grid: its name (folder and table row) and the options it sets on top of the config."""

    name: str
    options: dict[str, str] = field(default_factory=dict)

    def argv(self) -> list[str]:
        return [x for k, v in self.options.items() for x in (f"--{k}", v)]


def parse_vary(specs: list[str]) -> list[tuple[str, list[str]]]:
    """`KEY=V1,V2,...` specs as (key, values) axes; a malformed one, a key given twice, an option FIXED keeps equal
    across arms, or a value repeated within an axis is one line."""
    axes: list[tuple[str, list[str]]] = []
    for spec in specs:
        key, sep, vals = spec.partition("=")
        key = key.strip().removeprefix("--").replace("-", "_")
        values = [v.strip() for v in vals.split(",")] if sep else []
        if not sep or not key or not values or not all(values):
            raise TaseError(f"--vary {spec}: expected OPTION=VALUE1,VALUE2 (e.g. loss_type=dapo,dr_grpo)")
        if key in FIXED:
            raise TaseError(f"--vary {key}: every arm keeps the same data, seeds and warm-up (the config's and "
                            f"--base); {key} cannot be an axis")
        if key in (k for k, _ in axes):
            raise TaseError(f"--vary {key}: given twice; list all its values in one --vary")
        if len(set(values)) != len(values):
            raise TaseError(f"--vary {spec}: a value is listed twice")
        axes.append((key, values))
    return axes


def arm_name(values: list[str]) -> str:
    """A folder-safe arm name from its values (`dapo-sequence`); one axis keeps the value itself (`coarse`)."""
    return "-".join(re.sub(r"[^\w.+]+", "_", v) for v in values)


# the names in --out that are ablate's own (an arm named so would write into them): its files and folders
OWN_NAMES = ("base", "export", "eval", "comparison", "times.json", "ablation.json", "ablation.md")
# grpo.py options ablate passes itself: after `--` they would send every arm elsewhere or break its resume
SET_HERE = ("output_dir", "config", "resume_from_checkpoint", "dry_run", "model_name_or_path")


def expand(axes: list[tuple[str, list[str]]]) -> list[Arm]:
    """The arms of the grid, in the order of the axes' values (the first axis varies slowest). Each arm's name
    becomes a folder of --out (and of OUT/export, OUT/eval/dataK): checked as every name that becomes a path
    (common/paths.name_refusal), so `..`, `times.json`, `export` or a 300-character value is one line."""
    from common.paths import MARKER, name_refusal

    arms = []
    for combo in itertools.product(*[values for _, values in axes]):
        arms.append(Arm(arm_name(list(combo)), {k: v for (k, _), v in zip(axes, combo, strict=False)}))
    names = [a.name for a in arms]
    if len(set(names)) != len(names):
        raise TaseError(f"--vary: arms would share a folder name ({', '.join(names)}); use values that differ "
                        "after replacing characters other than letters, digits, '.', '+' and '_'")
    for a in arms:
        why = name_refusal(a.name, f"--vary: arm {a.name[:60]!r} ({' '.join(a.argv())[:120]})",
                           (*OWN_NAMES, MARKER))
        if why:
            raise TaseError(why)
    return arms


def check_extra(extra: list[str]) -> None:
    """The grpo.py options after `--` (every arm gets them) may not be those ablate sets itself (SET_HERE): an
    `--output_dir X` there sent every arm to X, outside --out."""
    for a in extra:
        if a.startswith("--"):
            key = a[2:].split("=")[0].replace("-", "_")
            if key in SET_HERE:
                how = "use --base" if key == "model_name_or_path" else "ablate sets it for every arm"
                raise TaseError(f"-- {a.split('=')[0]}: {how}; it cannot be given after --")


def check_arms(config: str, arms: list[Arm], extra: list[str], out: Path) -> list[tuple[Any, Any]]:
    """Every arm checked as its real start checks it (recipes/grpo_core/args.parse, then validate: the options, their
    ranges, the rewards, held-out evaluation, dynamic sampling, data and model; a bad value is one line naming
    the arm), before the first arm trains: `--vary learning_rate=-1` or `held_out_rows=0,4` once failed when
    that arm started, after the arms before it had trained. Returns each arm's parsed (TaseArgs, training config):
    ablate --in-process keeps an arm whose rollouts use vLLM in its own process."""
    from recipes.grpo_core.args import parse, validate

    parsed = []
    for arm in arms:
        try:
            tase, cfg, model_args = parse(["--config", config, *arm.argv(), *extra, "--output_dir", str(out / arm.name),
                                           "--dry-run"])
            validate(tase, cfg, model_args)
        except TaseError as e:
            raise TaseError(f"arm {arm.name} ({' '.join(arm.argv())}): {e}") from None
        parsed.append((tase, cfg))
    return parsed


def arms_with_vllm(arms: list[Arm], parsed: list[tuple[Any, Any]]) -> set[str]:
    """The arms whose training starts vLLM (rollouts with use_vllm, or the async trainer's rollout worker), from
    check_arms' parsed options: ablate --in-process runs their step in its own process."""
    from recipes.features import trainer_kind

    return {a.name for a, (tase, cfg) in zip(arms, parsed, strict=True)
            if getattr(cfg, "use_vllm", False) or trainer_kind(tase.trainer).rollout_worker}


def comparison_table(evals: Path, arms: list[Arm], times: dict[str, dict[str, float]], n_boot: int = 1000,
                     seed: int = 0, limit: int | None = None) -> str:
    """The arms of one evaluation in one markdown table: options, official and strict accuracy on the rows scored
    (every row of each file, or at most `limit` of each: ablate's --eval-limit), the gain over the base model in
    points with its paired, file-stratified 95% bootstrap interval (eval compare's statistic,
    recipes/steps/pipeline.paired_gains), and each arm's training and evaluation wall time."""
    from eval.compare import load_run
    from recipes.steps.pipeline import paired_gains

    gains = paired_gains(evals, tuple((a.name, "base", a.name) for a in arms), n_boot, seed) or {}
    keys = list(dict.fromkeys(k for a in arms for k in a.options))
    head = ["arm", *keys, "Avg", "strict", "vs base [95% CI]", "train s", "eval s"]
    lines = ["| " + " | ".join(head) + " |", "|---|" + "---|" * len(keys) + "---:|" * 5]
    for name in ["base", *(a.name for a in arms)]:
        _, res, _ = load_run(evals / name)
        arm = next((a for a in arms if a.name == name), None)
        opts = [arm.options.get(k, "") if arm else "(config)" for k in keys]
        strict = (res.get("strict") or {}).get("overall")
        g = gains.get(name)
        gain = (f"{g['delta']:+.2f} [{g['lo']:+.2f}, {g['hi']:+.2f}]" + (" *" if g["beyond"] else "")) if g else ""
        t = times.get(name, {})
        cells = [name, *opts, f"{res['overall']:.2f}", "" if strict is None else f"{strict:.2f}", gain,
                 _secs(t.get("train_s")), _secs(t.get("eval_s"))]
        lines.append("| " + " | ".join(cells) + " |")
    _, base, samples = load_run(evals / "base")
    files = len({s["file"] for s in samples.values()})
    of = f"{files} file" + "s" * (files != 1)
    each = f"at most {limit} of each of {of} (--eval-limit {limit})" if limit else f"each of {of} whole"
    return "\n".join(lines) + (f"\n\nAvg and strict: accuracy (%) of each model on {base['n']} rows, {each}; "
                               "vs base: points "
                               f"over the base model on the same rows, paired bootstrap ({n_boot} resamples, seed "
                               f"{seed}; * = interval excludes 0). Wall times: training (+ export), evaluation.\n")


def _secs(v: float | None) -> str:
    return "" if v is None else f"{v:.0f}"


def load_times(path: Path) -> dict[str, dict[str, float]]:
    """The arms' wall times kept across reruns (a finished step skipped on a rerun keeps its first time)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}
