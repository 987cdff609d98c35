"""recipes/proof.py's inputs, on the config that recipes/proof_stages/config.py loads and checks: the recipe
options every stage will pass, parsed now by each recipe's own parser (`check_recipe_options`), and `Proof`, what
every stage reads (`setup`). Each recipe config is read once, and every value a stage takes from it (its data options,
the base model) comes out of that recipe's parser, never a merge of our own. Shared helpers for the stage modules:
`flags`, `shown`, `data_args`."""
from __future__ import annotations

import argparse
import dataclasses
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from common.errors import TaseError
from recipes.proof_stages.config import (
    DATA_KEYS,
    OPTIONAL_STAGES,
    ROOT,
    STAGES,
    START,
    Arm,
    arm_specs,
    load_config,
    rft_on,
)
from recipes.proof_stages.sections import ProofConfig, StartStage
from recipes.shared.config import DataArgs
from recipes.shared.parser import read_yaml
from recipes.steps.pipeline import Steps
from rewards.levels import accuracy_reward_name


def flags(options: dict[str, Any]) -> list[str]:
    """Recipe options as command-line flags (`--key value`, a list as several values, booleans true/false)."""
    out: list[str] = []
    for key, v in options.items():
        vals = v if isinstance(v, list) else [v]
        out += [f"--{key}", *(str(x).lower() if isinstance(x, bool) else str(x) for x in vals)]
    return out


def shown(p: Path) -> str:
    """A path as the commands show it: relative to the repository root (their cwd) when inside it."""
    p = Path(p)
    try:
        return str(Path(os.path.abspath(p)).relative_to(ROOT)) if p.is_absolute() else str(p)
    except ValueError:
        return str(p)


def config_reader() -> Callable[[str | Path], Any]:
    """A reader of recipe configs that reads each file once (read_yaml, errors naming the file), for every stage's
    parse of it."""
    cache: dict[str, Any] = {}

    def read(path: str | Path) -> Any:
        if str(path) not in cache:
            cache[str(path)] = read_yaml(path, "")
        return cache[str(path)]

    return read


def data_args(recipe_config: Path, options: dict[str, Any], read: Callable[[str | Path], Any] | None = None,
              where: str = "") -> dict[str, Any]:
    """The training-data options a recipe will use, as its own parser makes them: the recipe parser over DataArgs,
    with the config's data keys as the YAML and the proof's data options as the flags proof.py passes. A bad
    value is DataArgs' own one line after `where` (e.g. "grpo: subtasks: ...")."""
    from recipes.shared.parser import ConfigFile, RecipeParser

    read = read or config_reader()

    def data_keys(path: str | Path) -> dict[str, Any]:
        yml = read(path) or {}
        if not isinstance(yml, dict):
            raise TaseError(f"{shown(recipe_config)}: must be a YAML mapping of option: value")
        return {k: v for k, v in yml.items() if k in DATA_KEYS}

    argv = ["--config", str(recipe_config), *flags({k: v for k, v in options.items() if k in DATA_KEYS})]
    (data,) = RecipeParser((DataArgs,), where=where).parse(ConfigFile(argv, read=data_keys))
    # in DataArgs' order; skip_examples only when set, so the configs written for runs without it stay as they were
    return {f.name: getattr(data, f.name) for f in dataclasses.fields(DataArgs)
            if f.name in DATA_KEYS and not (f.name == "skip_examples" and not data.skip_examples)}


def completions_dir(args: argparse.Namespace, cfg: ProofConfig, out: Path) -> Path:
    """Where the completion files go: --completions DIR as named for this run, else inside OUT (the config's
    `completions:`, a relative folder, or `completions`). The shipped configs once pointed into docs/results/, so
    every proof, whatever its --out, replaced the committed files; a config cannot send them outside OUT."""
    if args.completions:
        return Path(args.completions).resolve()
    rel = cfg.completions or "completions"
    if Path(rel).is_absolute() or ".." in Path(rel).parts:
        raise TaseError(f"--config {args.config}: completions must be a folder inside out (relative, without ..), got "
                        f"{rel!r}; name a place outside it for this run with --completions DIR")
    return out / rel


def check_recipe_options(cfg: ProofConfig, sft_config: Path, grpo_config: Path,
                         read: Callable[[str | Path], Any] | None = None) -> dict[str, tuple]:
    """Every stage's recipe options, parsed now by that recipe's own parser (its --config, then the options as
    proof.py will pass them), so that a misspelled key or a bad value in `sft:`, `start:`, `grpo:` (a named arm's
    options over grpo's) or `control:` is one line before stage 1, not a failure hours later when its stage starts.
    The range checks are config.TRAINER_RANGES'; the recipes check the rest (model, data, output
    folder) when they start. Returns each stage's parsed dataclasses, by stage ("grpo:<name>" for a named arm
    with options)."""
    from trl import GRPOConfig, ModelConfig

    from recipes.sft_warmup import option_types
    from recipes.shared.config import TaseArgs, check_trainer_ranges
    from recipes.shared.parser import ConfigFile, RecipeParser

    sft = option_types()
    common = ["--output_dir", os.devnull, "--use_cpu", "true"]  # set by proof.py; use_cpu: no GPU check here
    grpo = (TaseArgs, GRPOConfig, ModelConfig)
    parts = [("sft", "sft", sft, sft_config, cfg.sft.options, [])]
    for st in cfg.start:
        parts.append((st.name, st.name, sft, sft_config, continued_options(cfg, st.options), []))
    arms = arm_specs(cfg)
    first = next(iter(arms.values())).level  # the shared options as an arm trains them (a coarse-only config: coarse)
    parts.append(("grpo", "grpo", grpo, grpo_config, cfg.grpo.options,
                  ["--reward_funcs", accuracy_reward_name(first), *cfg.grpo.reward_funcs]))
    for arm in arms.values():
        if arm.options:
            parts.append((f"grpo:{arm.name}", f"grpo arm {arm.name!r}", grpo, grpo_config,
                          arm.grpo_options(cfg),
                          ["--reward_funcs", accuracy_reward_name(arm.level), *cfg.grpo.reward_funcs]))
    if cfg.control is not None:
        parts.append(("control", "control", sft, sft_config, continued_options(cfg, cfg.control.options),
                      ["--max_train_seconds", "1"]))
    read = read or config_reader()
    parsed_parts: dict[str, tuple] = {}
    for part, label, types, recipe_config, options, fixed in parts:
        where = f"{label} options (for {shown(recipe_config)})"
        parser = RecipeParser(types, where=f"{where}: ")
        known = parser.options()
        for key in options:  # named exactly as the recipe's parser names them
            if key not in known:
                raise TaseError(f"{where}: unknown option {key!r}")
        argv = ["--config", str(recipe_config), *flags(options), *fixed, *common]
        parsed = parser.parse(ConfigFile(argv, read=read))  # a TaseError: main's one line
        check_trainer_ranges(*parsed, where=f"{where}: ")
        parsed_parts[part] = parsed
    return parsed_parts


def continued_options(cfg: ProofConfig, options: dict[str, Any]) -> dict[str, Any]:
    """The options of an SFT that continues a model (a start stage, the control; `options` its section's own): the
    sft options but data and model, then the section's own options (each key once, the section's value winning)."""
    opts = {k: v for k, v in cfg.sft.options.items() if k not in DATA_KEYS + ("model_name_or_path",)}
    return {**opts, **options}


@dataclasses.dataclass
class Proof:
    """What every stage reads: the checked inputs, where outputs go, and the step printer/timer."""

    cfg: ProofConfig
    official: Path
    out: Path
    sft_config: Path
    grpo_config: Path
    backend: str
    step: Steps
    dry: bool
    py: str = sys.executable
    completions: Path | None = None  # the completion files' folder: inside out unless --completions names one
    data: dict[str, dict[str, Any]] = dataclasses.field(default_factory=dict)  # sft, start, grpo: data_args, once
    base_model: str = "default"  # the model the sft recipe starts from (the comparison's base), as parsed
    read: Callable[[str | Path], Any] = dataclasses.field(default_factory=config_reader)  # each file read once
    parsed: dict[str, tuple] = dataclasses.field(default_factory=dict)  # check_recipe_options': by stage

    @property
    def guard(self) -> str:
        return f"official:{self.official}"

    @property
    def control(self) -> bool:
        """Whether the config has a control section (the control stage)."""
        return self.cfg.control is not None

    @property
    def rft(self) -> bool:
        """Whether the config has the rejection-sampling SFT control (control: rft: true; its own stage)."""
        return rft_on(self.cfg)

    @property
    def start(self) -> bool:
        """Whether the config has a start section (a stage after the warm-up, or several)."""
        return bool(self.cfg.start)

    @property
    def starts(self) -> list[StartStage]:
        """The start stages in order (ProofConfig.start): the last one is named start."""
        return self.cfg.start

    @property
    def arms(self) -> dict[str, Arm]:
        """The GRPO arms by name (arm_specs)."""
        return arm_specs(self.cfg)

    @property
    def origin(self) -> Path:
        """The model the GRPO arms and the control train from: the start with a start section, else the warm-up."""
        return self.out / (START if self.start else "sft")

    @property
    def select(self) -> bool:
        """Whether the config has a select section (the selection stage, after the sets)."""
        return self.cfg.select is not None

    @property
    def select_heldout(self) -> Path:
        """The rows the selection sees: its own set (select: n, seed) or the proof's held-out set; never official."""
        sel = self.cfg.select
        return self.out / ("heldout_select.jsonl" if sel is not None and sel.n is not None else "heldout.jsonl")

    def k(self, stage: str) -> int:
        """The printed number of a stage (STAGES): without a control or a select section, the stages after it move
        up by one."""
        return stage_names(self.cfg).index(stage) + 1

    def unit(self, seed: int | None) -> Proof:
        """The view of one seed's unit: the config's seeds: narrowed to `seed` (its arms and control runs only;
        first_seed kept, so control: sweep_once still knows the first), everything else shared. Without seeds:
        the proof itself."""
        if self.cfg.seeds is None:
            return self
        return dataclasses.replace(self, cfg=dataclasses.replace(self.cfg, seeds=[seed]))

    def skip(self, k: int, title: str, done: Path, cmd: list[str], stage: str, finished: bool | None = None,
             why: str | None = None) -> bool:
        """True (after saying so, or `why`) when the stage's output exists (`finished` given: when that is true,
        e.g. a training run whose completion marker is there); under --dry-run its command still shows."""
        if not (done.exists() if finished is None else finished):
            return False
        why = why or f"{shown(done)} " + ("exists" if finished is None else "says it finished")
        self.step.header(k, f"{title}: skipped, {why}")
        self.step.add(stage, 0.0)
        if self.dry:
            self.step.show(cmd)
        return True


class ProofSteps(Steps):
    """The proof's steps, their wall times kept per unit (`unit`: "" for the stages every seed shares, "s<seed> "
    for a seed's) and, once `keep` names a file (OUT/wall_times.json), added to what earlier invocations of the same
    OUT spent and written after every step: a resumed proof's table adds up across invocations (a killed step's
    partial time is not counted)."""

    def __init__(self, *args: Any, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self.unit = ""
        self.keep: Path | None = None

    def load(self, keep: Path) -> None:
        """Start from the times kept in `keep`, read through the checked reader of state files (an unreadable or
        foreign file: one line, nothing overwritten)."""
        from common.state import read_state

        self.keep = keep
        old = read_state(keep, lambda v: None if isinstance(v, dict) and all(
            isinstance(x, (int, float)) and not isinstance(x, bool) for x in v.values())
            else "not a table of stage: seconds", "; remove it to start the wall-time table again")
        if old is not None:
            self.times = {str(k): float(v) for k, v in old.items()}

    def add(self, stage: str, seconds: float) -> None:
        super().add(self.unit + stage, seconds)
        if self.keep is not None and not self.dry_run:
            import json

            tmp = self.keep.with_name(self.keep.name + ".tmp")
            tmp.write_text(json.dumps(self.times, indent=1) + "\n", encoding="utf-8")
            os.replace(tmp, self.keep)

    def table_of(self, units: list[str]) -> str:
        """The wall-time table of the stages shared by every seed and of the given units (their prefixes)."""
        rows = {k: v for k, v in self.times.items() if not k.startswith("s") or any(k.startswith(u) for u in units)}
        lines = [f"| {stage} | {s:.0f} |" for stage, s in rows.items()]
        return "\n".join(["| stage | wall time (s) |", "|---|---:|", *lines, f"| total | {sum(rows.values()):.0f} |"])


def stage_names(cfg: ProofConfig) -> list[str]:
    """The stages this config runs, in order: STAGES less the optional ones it has no section for (rft: no
    control: rft)."""
    has = {"start": bool(cfg.start), "control": cfg.control is not None, "rft": rft_on(cfg),
           "select": cfg.select is not None}
    return [s for s in STAGES if s not in OPTIONAL_STAGES or has[s]]


def setup(args: argparse.Namespace) -> Proof:
    """The config and the release checked (one line each: a missing folder, file or recipe config, data options
    that generate nothing), and the evaluation backend (vllm falls back to eval's default where it is not
    installed)."""
    cfg = load_config(args.config)
    official = Path(args.official).resolve()
    if not official.is_dir():
        raise TaseError(f"--official {args.official}: no such folder")
    for f in cfg.files:
        if not (official / "tasks" / f).is_file():
            raise TaseError(f"--official {args.official}: no tasks/{f} (the config's files must be in the release)")
    for f in (cfg.transfer.files if cfg.transfer else None) or []:
        if not (official / "tasks" / f).is_file():
            raise TaseError(f"--official {args.official}: no tasks/{f} (transfer: files must be in the release)")
    out = Path(args.out).resolve() if args.out else ROOT / cfg.out
    completions = completions_dir(args, cfg, out)
    sft_config, grpo_config = ROOT / cfg.sft.config, ROOT / cfg.grpo.config
    for c in (sft_config, grpo_config):
        if not c.is_file():
            raise TaseError(f"--config {args.config}: no such recipe config {shown(c)}")
    read = config_reader()  # each recipe config read once, for every parse below and the control's config
    # bad tasks/langs/subtasks: now, not in the sets stage (DataArgs checks them as it parses)
    data = {part: data_args(c, options, read, where=f"{part}: ")
            for part, c, options in (("sft", sft_config, cfg.sft.options), ("grpo", grpo_config, cfg.grpo.options))}
    if cfg.start:  # each start stage: the GRPO arms' data with its seed (and slice), as the grpo parser makes it
        starts = {}
        for st in cfg.start:
            starts[st.name] = data_args(grpo_config, {**cfg.grpo.options, **st.data}, read, where=f"{st.name}: ")
        data = {"sft": data["sft"], **starts, "grpo": data["grpo"]}
    parsed = check_recipe_options(cfg, sft_config, grpo_config, read)
    if rft_on(cfg):
        check_rft_data(args.config, data["grpo"])
    base_model = str(parsed["sft"][2].model_name_or_path or "default")  # (DataArgs, SFTConfig, ModelConfig, ...)
    from eval.backends import default_backend

    backend = cfg.eval.backend
    if backend == "vllm" and default_backend() != "vllm":
        print(f"note: vllm is not installed; evaluating with {default_backend()} (eval's default)")
        backend = default_backend()
    step = ProofSteps("proof", len(stage_names(cfg)), ROOT, dry_run=args.dry_run, quote=True)
    return Proof(cfg, official, out, sft_config, grpo_config, backend, step, args.dry_run, completions=completions,
                 data=data, base_model=base_model, read=read, parsed=parsed)


def check_rft_data(config: str, data: dict[str, Any]) -> None:
    """control: rft samples the GRPO arms' first prompts, written by one `python -m synth` call: the GRPO data must
    be generated (synth), one task x lang (x subtask) stream, and start at its first row (no skip_examples)."""
    from recipes.shared.streams import data_streams

    streams = data_streams(data["tasks"], data["langs"], data["subtasks"]) if data["train_data"] == "synth" else []
    if len(streams) != 1 or data.get("skip_examples") or "all" in streams[0][:2]:
        raise TaseError(f"--config {config}: control: rft samples the GRPO arms' first prompts as one synth stream: "
                        "the GRPO data must be generated, of one task, lang (and subtask), without skip_examples")
