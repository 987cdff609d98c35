"""recipes/proof.py's inputs: the proof config (`load_config`, checked against SCHEMA), the recipe options every
stage will pass, parsed now by each recipe's own parser (`check_recipe_options`), and `Proof`, what every stage
reads (`setup`). Each recipe config is read once, and every value a stage takes from it (its data options, the
base model) comes out of that recipe's parser, never a merge of our own. Shared helpers for the stage modules:
`flags`, `shown`, `data_args`."""
from __future__ import annotations

import argparse
import dataclasses
import os
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from common.errors import bounded
from recipes.config import DataArgs
from common.errors import TaseError
from recipes.parser import read_yaml
from recipes.pipeline import Steps
from rewards.levels import COARSE, FINE, STRICT, accuracy_reward_name


HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
# the stages in order; "start", "control" and "select" exist only with their config section (stage_names)
STAGES = ("subset", "sft", "start", "grpo", "control", "sets", "select", "evaluate", "compare", "completions",
          "summary")
OPTIONAL_STAGES = ("start", "control", "select")
ARMS = (COARSE, FINE)  # the accuracy levels (rewards/levels.py) a proof may train an arm on, each its folder's name
CONTROL = "sft_control"  # the control's model name: eval folders, comparisons, <completions>/sft_control
START = "start"  # the start's model name and folder (OUT/start): what the arms and the control train from
# names a named arm cannot take: the other models' names and OUT's own folders (an arm's folder is OUT/<name>)
RESERVED = ("base", "warm-up", "sft", START, "control", CONTROL, "official", "data", "eval", "comparison",
            "completions", "rescore")
OPTIONAL = object()
# eval.dtype (optional, passed as `eval run --dtype`): pin it (float32) so the numbers do not depend on the CPU,
# whose default is bfloat16 where it has bf16 natively and float32 elsewhere
EVAL_DTYPES = ("float32", "bfloat16", "float16")
# the config's keys: a type (or tuple of types), a nested mapping, or (type, OPTIONAL)
SCHEMA: dict[str, Any] = {
    "out": str, "completions": (str, OPTIONAL), "files": list,
    "sft": {"config": str, "options": (dict, OPTIONAL)},
    # a fixed-step SFT from the warm-up on the GRPO arms' data with its own synth_seed; the arms and the control
    # then train from it, and it is the comparisons' baseline
    "start": ({"synth_seed": int, "options": (dict, OPTIONAL)}, OPTIONAL),
    # arms: accuracy levels (coarse, fine) and/or named arms (ARM_SCHEMA)
    "grpo": {"config": str, "arms": list, "reward_funcs": list, "options": (dict, OPTIONAL)},
    # follows: the arm whose train_runtime is the control's --max_train_seconds (default fine); steps: instead, a fixed
    # step count (--max_steps, no time budget), so that the control reproduces on any machine
    "control": ({"options": (dict, OPTIONAL), "follows": (str, OPTIONAL), "steps": (int, OPTIONAL)}, OPTIONAL),
    # held-out checkpoint selection of every GRPO arm and the control: n/seed its own held-out set, else heldout:'s
    "select": ({"n": (int, OPTIONAL), "seed": (int, OPTIONAL), "metric": (str, OPTIONAL)}, OPTIONAL),
    "heldout": {"task": str, "lang": str, "n": int, "seed": int, "max_len": (int, OPTIONAL),
                "subtask": (str, OPTIONAL)},
    "eval": {"backend": str, "max_new_tokens": int, "batch_size": (int, OPTIONAL), "dtype": (str, OPTIONAL)},
    "compare": {"n_boot": int},
}
# a named arm: its folder and model name, its accuracy level (one of ARMS), its GRPO options over grpo.options
ARM_SCHEMA: dict[str, Any] = {"name": str, "accuracy": str, "options": (dict, OPTIONAL)}
SET_HERE = ("config", "output_dir", "exclude", "resume_from_checkpoint")  # options proof.py itself passes
DATA_KEYS = ("train_data", "tasks", "langs", "mixture", "num_train_examples", "synth_seed", "max_len", "paraphrase",
             "streaming", "subtasks", "repeat_answers")


def check_section(where: str, value: Any, schema: dict[str, Any]) -> None:
    if not isinstance(value, dict):
        raise TaseError(f"{where}: must be a mapping of key: value")
    for key in value:
        if key not in schema:
            raise TaseError(f"{where}: unknown key {key!r} (known: {', '.join(schema)})")
    for key, want in schema.items():
        optional = isinstance(want, tuple) and OPTIONAL in want
        types = want[0] if optional else want
        if key not in value or (optional and value[key] is None):
            if not optional:
                raise TaseError(f"{where}: missing key {key!r}")
            continue
        v = value[key]
        if isinstance(types, dict):
            check_section(f"{where}: {key}", v, types)
        elif not isinstance(v, types) or (isinstance(v, bool) and types is int):
            raise TaseError(f"{where}: {key} must be {'an integer' if types is int else f'a {types.__name__}'}, got "
                            f"{bounded(v)}")


def load_config(path: str) -> dict[str, Any]:
    """The proof config (yaml.safe_load), checked: unknown or missing keys and wrong types are one line.
    A `control:` key, even empty, turns the control stage on (cfg["control"]["options"], a dict); without it
    cfg has no "control" key."""
    cfg = read_yaml(path)
    for part in OPTIONAL_STAGES:
        if isinstance(cfg, dict) and part in cfg and cfg[part] is None:
            cfg[part] = {}  # `control:` or `select:` with nothing under it: the stage with its defaults
    check_section(f"--config {path}", cfg, SCHEMA)
    files = cfg["files"]
    if not files or not all(isinstance(f, str) and re.fullmatch(r"[^/]+/[^/]+/[^/]+\.csv", f) for f in files):
        raise TaseError(f"--config {path}: files must list official files as <group>/<task>/<file>.csv, got "
                        f"{bounded(files)}")
    arms = cfg["grpo"]["arms"]
    levels = [a for a in arms if not isinstance(a, dict)]
    if not arms or not all(isinstance(a, str) for a in levels) or len(set(levels)) != len(levels) \
            or not set(levels) <= set(ARMS):
        raise TaseError(f"--config {path}: grpo arms must be some of {', '.join(ARMS)}, each once; got {bounded(arms)}")
    seen = list(levels)  # the arms' names so far: each once
    for i, arm in enumerate(arms):
        if isinstance(arm, dict):
            check_arm(path, i + 1, arm, seen)  # named "grpo arm <i>" by its place in the list until its name is known
    if not all(isinstance(f, str) for f in cfg["grpo"]["reward_funcs"]):
        raise TaseError(f"--config {path}: grpo reward_funcs must list reward names or import paths, got "
                        f"{bounded(cfg['grpo']['reward_funcs'])}")
    if cfg["eval"]["backend"] not in ("vllm", "hf"):
        raise TaseError(f"--config {path}: eval backend must be vllm or hf, got {bounded(cfg['eval']['backend'])}")
    if not isinstance(cfg["eval"].get("dtype"), (str, type(None))) or cfg["eval"].get("dtype") not in (None, *EVAL_DTYPES):
        raise TaseError(f"--config {path}: eval dtype must be one of {', '.join(EVAL_DTYPES)}, got "
                        f"{bounded(cfg['eval']['dtype'])}")
    for part in ("sft", "start", "grpo", "control"):
        if part not in cfg:
            continue
        cfg[part]["options"] = cfg[part].get("options") or {}
        taken = SET_HERE + {"grpo": ("model_name_or_path", "reward_funcs"), "start": ("model_name_or_path",),
                            "control": ("model_name_or_path", "max_train_seconds"), "sft": ()}[part]
        data = {"control": "the control trains on the GRPO arms' data: the grpo config's and grpo options'",
                "start": "the start trains on the GRPO arms' data with start: synth_seed"}.get(part)
        check_options(path, part, cfg[part]["options"], taken, data)
    if "control" in cfg and "steps" in cfg["control"]:
        steps = cfg["control"]["steps"]
        if isinstance(steps, bool) or steps < 1:
            raise TaseError(f"--config {path}: control: steps must be a whole number of steps >= 1, got {bounded(steps)}")
        for clash, why in (("follows", "control: follows times the control by an arm"),
                           ("max_steps", "control: options: max_steps")):
            if clash in cfg["control"] or clash in cfg["control"]["options"]:
                raise TaseError(f"--config {path}: control: steps fixes the control's step count; drop {why}")
    elif "control" in cfg:
        follows = control_follows(cfg)
        if follows not in arm_specs(cfg):
            raise TaseError(f"--config {path}: the control trains for the {follows} arm's train_runtime: grpo arms must "
                            f"include {follows}" + ("" if "follows" in cfg["control"] else
                                                    " (or name another arm in control: follows)"))
    if "select" in cfg:
        check_select(path, cfg["select"])
    return cfg


def check_options(path: str, part: str, options: dict[str, Any], taken: tuple[str, ...], data: str | None) -> None:
    """A section's recipe options: each a value or a list of values, none of those proof.py passes itself (`taken`)
    and, where `data` says why, no data option; each refusal one line."""
    for key, v in options.items():
        if not option_value(v):  # flags() passes a value or a list of values; anything else is misread
            raise TaseError(f"--config {path}: {part} option {key!r} must be a value or a list of values, got "
                            f"{bounded(v)}")
        if key in taken:
            raise TaseError(f"--config {path}: {part} option {key!r} is set by proof.py")
        if data and key in DATA_KEYS:
            raise TaseError(f"--config {path}: {part} option {key!r} is set by proof.py ({data})")


def check_arm(path: str, i: int, arm: dict[str, Any], seen: list[str]) -> None:
    """A named arm (ARM_SCHEMA): a folder-safe name that no other model or OUT folder has, nor a level (those are
    the plain arms), an accuracy level of ARMS, and GRPO options but the data (one pool for every arm and the
    control: grpo options) and what proof.py passes; each refusal one line. `options` is set to {} when absent."""
    check_section(f"--config {path}: grpo arm {i}", arm, ARM_SCHEMA)
    name = arm["name"]
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_-]*", name) or name in RESERVED or name.startswith("select_") \
            or name in (COARSE, STRICT, FINE):
        raise TaseError(f"--config {path}: grpo arm {i}: name must be letters, digits, _ or - (a folder of out), not "
                        f"one of {', '.join((COARSE, STRICT, FINE) + RESERVED)} nor select_*; got {bounded(name)}")
    if name in seen:
        raise TaseError(f"--config {path}: grpo arm {name!r} is given twice")
    if arm["accuracy"] not in ARMS:
        raise TaseError(f"--config {path}: grpo arm {name!r}: accuracy must be one of {', '.join(ARMS)}, got "
                        f"{bounded(arm['accuracy'])}")
    arm["options"] = arm.get("options") or {}
    check_options(path, f"grpo arm {name!r}", arm["options"], SET_HERE + ("model_name_or_path", "reward_funcs"),
                  "every arm trains on the same GRPO data: set it in grpo options")
    seen.append(name)


@dataclasses.dataclass(frozen=True)
class Arm:
    """A GRPO arm: its name (folder OUT/<name>, model name), accuracy level, and its own options over grpo.options."""

    name: str
    level: str
    options: dict[str, Any]

    def grpo_options(self, cfg: dict[str, Any]) -> dict[str, Any]:
        """The options its grpo.py run takes: grpo.options, then its own (each key once, its value winning)."""
        return {**cfg["grpo"]["options"], **self.options}


def arm_specs(cfg: dict[str, Any]) -> dict[str, Arm]:
    """The config's GRPO arms by name, in order: a level `fine` is the arm named fine with no options of its own;
    a named arm (ARM_SCHEMA) is its name, accuracy and options. The one reading of grpo: arms."""
    return {a.name: a for a in (Arm(x, x, {}) if isinstance(x, str) else Arm(x["name"], x["accuracy"],
                                                                            x.get("options") or {})
                                for x in cfg["grpo"]["arms"])}


def control_follows(cfg: dict[str, Any]) -> str:
    """The arm whose train_runtime the control trains for: control: follows, else fine. With control: steps it
    trains for no arm's time; then this is only the arm the summary compares with the control first."""
    follows = cfg["control"].get("follows")
    if follows is None and "steps" in cfg["control"]:
        arms = list(arm_specs(cfg))
        return FINE if FINE in arms else arms[0]
    return FINE if follows is None else follows


def control_steps(cfg: dict[str, Any]) -> int | None:
    """control: steps, the control's fixed step count (--max_steps, no time budget), or None: it trains for the
    followed arm's train_runtime, which buys a different step count on a faster or busier machine."""
    return cfg["control"].get("steps")


def check_select(path: str, sel: dict[str, Any]) -> None:
    """`select:`: n and seed together (its own held-out set) or neither (the proof's held-out set), n >= 1, and a
    metric select_checkpoint.py knows; each refusal one line."""
    from recipes.select_checkpoint import RULES

    if ("n" in sel) != ("seed" in sel):
        raise TaseError(f"--config {path}: select: give n and seed together (its own held-out set) or neither (the "
                        "held-out set of heldout:)")
    if "n" in sel and sel["n"] < 1:
        raise TaseError(f"--config {path}: select: n must be at least 1, got {bounded(sel['n'])}")
    if sel.get("metric", "official_acc") not in RULES:
        raise TaseError(f"--config {path}: select: metric must be one of {', '.join(sorted(RULES))}, got "
                        f"{bounded(sel['metric'])}")


def option_value(v: Any) -> bool:
    """A recipe option as a proof config may give it: a scalar (str, number, bool, null) or a flat list of them (the
    values `flags` turns into command-line words; a mapping or nested list would reach the recipe as its repr)."""
    scalar = (str, int, float, bool, type(None))
    return isinstance(v, scalar) or (isinstance(v, list) and all(isinstance(x, scalar) and x is not None for x in v))


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
    from recipes.parser import ConfigFile, RecipeParser

    read = read or config_reader()

    def data_keys(path: str | Path) -> dict[str, Any]:
        yml = read(path) or {}
        if not isinstance(yml, dict):
            raise TaseError(f"{shown(recipe_config)}: must be a YAML mapping of option: value")
        return {k: v for k, v in yml.items() if k in DATA_KEYS}

    argv = ["--config", str(recipe_config), *flags({k: v for k, v in options.items() if k in DATA_KEYS})]
    (data,) = RecipeParser((DataArgs,), where=where).parse(ConfigFile(argv, read=data_keys))
    return {f.name: getattr(data, f.name) for f in dataclasses.fields(DataArgs) if f.name in DATA_KEYS}  # its order


def completions_dir(args: argparse.Namespace, cfg: dict[str, Any], out: Path) -> Path:
    """Where the completion files go: --completions DIR as named for this run, else inside OUT (the config's
    `completions:`, a relative folder, or `completions`). The shipped configs once pointed into docs/results/, so
    every proof, whatever its --out, replaced the committed files; a config cannot send them outside OUT."""
    if args.completions:
        return Path(args.completions).resolve()
    rel = cfg.get("completions") or "completions"
    if Path(rel).is_absolute() or ".." in Path(rel).parts:
        raise TaseError(f"--config {args.config}: completions must be a folder inside out (relative, without ..), got "
                        f"{rel!r}; name a place outside it for this run with --completions DIR")
    return out / rel


def check_recipe_options(cfg: dict[str, Any], sft_config: Path, grpo_config: Path,
                         read: Callable[[str | Path], Any] | None = None) -> dict[str, tuple]:
    """Every stage's recipe options, parsed now by that recipe's own parser (its --config, then the options as
    proof.py will pass them), so that a misspelled key or a bad value in `sft:`, `start:`, `grpo:` (a named arm's
    options over grpo's) or `control:` is one line before stage 1, not a failure hours later when its stage starts
    (issue 36). The range checks are config.TRAINER_RANGES'; the recipes check the rest (model, data, output
    folder) when they start. Returns each stage's parsed dataclasses, by stage ("grpo:<name>" for a named arm
    with options)."""
    from trl import GRPOConfig, ModelConfig, SFTConfig

    from recipes.config import TaseArgs, check_trainer_ranges
    from recipes.parser import ConfigFile, RecipeParser
    from recipes.sft_warmup import BudgetArgs

    sft = (DataArgs, SFTConfig, ModelConfig, BudgetArgs)
    common = ["--output_dir", os.devnull, "--use_cpu", "true"]  # set by proof.py; use_cpu: no GPU check here
    grpo = (TaseArgs, GRPOConfig, ModelConfig)
    parts = [("sft", "sft", sft, sft_config, cfg["sft"]["options"], [])]
    if "start" in cfg:
        parts.append(("start", "start", sft, sft_config, continued_options(cfg, "start"), []))
    parts.append(("grpo", "grpo", grpo, grpo_config, cfg["grpo"]["options"],
                  ["--reward_funcs", accuracy_reward_name(FINE), *cfg["grpo"]["reward_funcs"]]))
    for arm in arm_specs(cfg).values():
        if arm.options:
            parts.append((f"grpo:{arm.name}", f"grpo arm {arm.name!r}", grpo, grpo_config,
                          arm.grpo_options(cfg),
                          ["--reward_funcs", accuracy_reward_name(arm.level), *cfg["grpo"]["reward_funcs"]]))
    if "control" in cfg:
        parts.append(("control", "control", sft, sft_config, continued_options(cfg, "control"),
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


def continued_options(cfg: dict[str, Any], part: str) -> dict[str, Any]:
    """The options of an SFT that continues a model (the start, the control): the sft options but data and model,
    then the part's own options (each key once, the part's value winning)."""
    opts = {k: v for k, v in cfg["sft"]["options"].items() if k not in DATA_KEYS + ("model_name_or_path",)}
    return {**opts, **cfg[part]["options"]}


@dataclasses.dataclass
class Proof:
    """What every stage reads: the checked inputs, where outputs go, and the step printer/timer."""

    cfg: dict[str, Any]
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

    @property
    def guard(self) -> str:
        return f"official:{self.official}"

    @property
    def control(self) -> bool:
        """Whether the config has a control section (stage 4)."""
        return "control" in self.cfg

    @property
    def start(self) -> bool:
        """Whether the config has a start section (a stage after the warm-up)."""
        return "start" in self.cfg

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
        return "select" in self.cfg

    @property
    def select_heldout(self) -> Path:
        """The rows the selection sees: its own set (select: n, seed) or the proof's held-out set; never official."""
        return self.out / ("heldout_select.jsonl" if "n" in self.cfg["select"] else "heldout.jsonl")

    def k(self, stage: str) -> int:
        """The printed number of a stage (STAGES): without a control or a select section, the stages after it move
        up by one."""
        return stage_names(self.cfg).index(stage) + 1

    def skip(self, k: int, title: str, done: Path, cmd: list[str], stage: str) -> bool:
        """True (after saying so) when the stage's output exists; under --dry-run its command still shows."""
        if not done.exists():
            return False
        self.step.header(k, f"{title}: skipped, {shown(done)} exists")
        self.step.add(stage, 0.0)
        if self.dry:
            self.step.show(cmd)
        return True


def stage_names(cfg: dict[str, Any]) -> list[str]:
    """The stages this config runs, in order: STAGES less the optional ones it has no section for."""
    return [s for s in STAGES if s not in OPTIONAL_STAGES or s in cfg]


def setup(args: argparse.Namespace) -> Proof:
    """The config and the release checked (one line each: a missing folder, file or recipe config, data options
    that generate nothing), and the evaluation backend (vllm falls back to eval's default where it is not
    installed)."""
    cfg = load_config(args.config)
    official = Path(args.official).resolve()
    if not official.is_dir():
        raise TaseError(f"--official {args.official}: no such folder")
    for f in cfg["files"]:
        if not (official / "tasks" / f).is_file():
            raise TaseError(f"--official {args.official}: no tasks/{f} (the config's files must be in the release)")
    out = Path(args.out).resolve() if args.out else ROOT / cfg["out"]
    completions = completions_dir(args, cfg, out)
    sft_config, grpo_config = ROOT / cfg["sft"]["config"], ROOT / cfg["grpo"]["config"]
    for c in (sft_config, grpo_config):
        if not c.is_file():
            raise TaseError(f"--config {args.config}: no such recipe config {shown(c)}")
    read = config_reader()  # each recipe config read once, for every parse below and the control's config
    # bad tasks/langs/subtasks: now, not in stage 4/5 (DataArgs checks them as it parses)
    data = {part: data_args(c, cfg[part]["options"], read, where=f"{part}: ")
            for part, c in (("sft", sft_config), ("grpo", grpo_config))}
    if "start" in cfg:  # the GRPO arms' data with the start's seed, as the grpo recipe's parser makes it
        data = {"sft": data["sft"], "start": data_args(grpo_config, {**cfg["grpo"]["options"], "synth_seed":
                                                                     cfg["start"]["synth_seed"]}, read,
                                                       where="start: "), "grpo": data["grpo"]}
    parsed = check_recipe_options(cfg, sft_config, grpo_config, read)
    base_model = str(parsed["sft"][2].model_name_or_path or "default")  # (DataArgs, SFTConfig, ModelConfig, ...)
    from eval.backends import default_backend

    backend = cfg["eval"]["backend"]
    if backend == "vllm" and default_backend() != "vllm":
        print(f"note: vllm is not installed; evaluating with {default_backend()} (eval's default)")
        backend = default_backend()
    step = Steps("proof", len(stage_names(cfg)), ROOT, dry_run=args.dry_run, quote=True)
    return Proof(cfg, official, out, sft_config, grpo_config, backend, step, args.dry_run, completions=completions,
                 data=data, base_model=base_model, read=read)
