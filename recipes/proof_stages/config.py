"""The proof config (recipes/proof.py --config): its schema, `load_config` with every check a config gets before
anything runs (one `TaseError` line each), returning it typed (`ProofConfig` and its sections, dataclasses: no stage
indexes the YAML), and what the stages read from it: the arms (`arm_specs`) and how the control is ended
(`control_follows`, `control_steps`). The stage inputs built on it are in recipes/proof_stages/inputs.py."""
from __future__ import annotations

import dataclasses
import re
import sys
from pathlib import Path
from typing import Any

from common.errors import TaseError, bounded
from eval.backends import backend_names
from recipes.proof_stages.sections import START, Compare, Eval, Heldout, ProofConfig, start_sections, typed
from recipes.proof_stages.values import check_seeds, check_select, check_sweep, check_transfer, check_values
from recipes.shared.parser import both_names, deprecation_note, read_yaml
from rewards.levels import COARSE, FINE, STRICT

HERE = Path(__file__).resolve().parents[1]  # recipes/: the recipes and configs the stages run
ROOT = HERE.parent
# the stages in order; "start", "control" and "select" exist only with their config section (stage_names)
# stages shared by every seed run first (subset .. baseline: the evaluations of base, warm-up and start), then each
# seed's unit runs grpo .. summary to its end before the next seed starts (proof.py's seed-major order)
STAGES = ("subset", "sft", "start", "sets", "baseline", "grpo", "control", "rft", "select", "evaluate", "compare",
          "completions", "summary")
UNIT_STAGES = STAGES[STAGES.index("grpo"):]  # a seed's own stages
OPTIONAL_STAGES = ("start", "control", "rft", "select")  # rft: with control: rft
ARMS = (COARSE, FINE)  # the accuracy levels (rewards/levels.py) a proof may train an arm on, each its folder's name
CONTROL = "sft_control"  # the control's model name: eval folders, comparisons, <completions>/sft_control
RFT = "rft"  # the rejection-sampling SFT control's model name and folder (control: rft)
LR_MATCHED = "_lr_matched"  # grpo: lr_matched: ARM adds the arm ARM<LR_MATCHED>
# names a named arm cannot take: the other models' names and OUT's own folders (an arm's folder is OUT/<name>)
RESERVED = ("base", "warm-up", "sft", START, "control", CONTROL, "official", "data", "eval", "comparison",
            "completions", "rescore", RFT, "transfer_official", "control_chosen", "rft_chosen")
OPTIONAL = object()
# eval.dtype (optional, passed as `eval run --dtype`): pin it (float32) so the numbers do not depend on the CPU,
# whose default is bfloat16 where it has bf16 natively and float32 elsewhere
EVAL_DTYPES = ("float32", "bfloat16", "float16")
# the config's keys: a type (or tuple of types), a nested mapping, or (type, OPTIONAL)
SCHEMA: dict[str, Any] = {
    "out": str, "completions": (str, OPTIONAL), "files": list,
    "sft": {"config": str, "options": (dict, OPTIONAL)},
    # a fixed-step SFT from the warm-up on the GRPO arms' data with its own synth_seed (START_SCHEMA); the arms and
    # the control then train from it, and it is the comparisons' baseline. A list of such sections is that many
    # stages, each from the one before (start_stages)
    "start": ((dict, list), OPTIONAL),
    # arms: accuracy levels (coarse, fine) and/or named arms (ARM_SCHEMA)
    # lr_matched: a plain (no dynamic sampling) arm's name: one more arm, that arm at its learning rate divided by the
    # share of its groups that had a learning signal (lr_matched_rate), the rate dynamic sampling in effect trains at
    "grpo": {"config": str, "arms": list, "reward_funcs": list, "options": (dict, OPTIONAL),
             "lr_matched": (str, OPTIONAL)},
    # follows: the arm whose train_runtime is the control's --max_train_seconds (default fine); steps: instead, a fixed
    # step count (--max_steps, no time budget), so that the control reproduces on any machine; learning_rates: the
    # control as a sweep over these rates (select: chooses among rates and steps); rft: true adds the rejection-
    # sampling SFT control (the origin's own strict-correct samples on the GRPO prompts, as many as GRPO generated)
    # sweep_once: [control, rft] (either or both): that sweep on the first seed only, every later seed at the rate
    # the first seed's selection chose
    "control": ({"options": (dict, OPTIONAL), "follows": (str, OPTIONAL), "steps": (int, OPTIONAL),
                 "learning_rates": (list, OPTIONAL), "rft": (bool, OPTIONAL), "sweep_once": (list, OPTIONAL)},
                OPTIONAL),
    # the training seed (--seed) of every arm and control run, each seed its own run (names suffixed _s<seed>)
    "seeds": (list, OPTIONAL),
    # every model also evaluated on harder generated rows of the trained task (heldout:'s task, lang, subtask drawn
    # with synth --harder: beyond the official files' range) and on a stratified slice (rows per file) of official
    # files it did not train on
    "transfer": ({"harder": ({"n": int, "seed": int}, OPTIONAL), "files": (list, OPTIONAL),
                  "rows": (int, OPTIONAL)}, OPTIONAL),
    # held-out checkpoint selection of every GRPO arm and the control: n/seed its own held-out set, else heldout:'s
    "select": ({"n": (int, OPTIONAL), "seed": (int, OPTIONAL), "metric": (str, OPTIONAL)}, OPTIONAL),
    "heldout": {"task": str, "lang": str, "n": int, "seed": int, "max_len": (int, OPTIONAL),
                "subtask": (str, OPTIONAL)},
    "eval": {"backend": str, "max_new_tokens": int, "batch_size": (int, OPTIONAL), "dtype": (str, OPTIONAL)},
    "compare": {"n_boot": int},
    # true: a seed's checkpoint-N folders (arms, controls) deleted once that seed is selected, evaluated and its
    # manifest written; a finished seed is then skipped whole on a rerun
    "delete_checkpoints": (bool, OPTIONAL),
}
# a start stage: its data is the GRPO arms' with its own synth_seed (and optionally its own num_train_examples and
# skip_examples: e.g. the next slice of the warm-up's seed); its options are sft_warmup.py's
START_SCHEMA: dict[str, Any] = {"synth_seed": int, "num_train_examples": (int, OPTIONAL),
                                "skip_examples": (int, OPTIONAL), "options": (dict, OPTIONAL)}
START_DATA = tuple(k for k in START_SCHEMA if k != "options")  # a start stage's own data keys, over the GRPO data's
# a named arm: its folder and model name, its reward_granularity (one of ARMS; formerly `accuracy`, still read with a
# deprecation line), its GRPO options over grpo.options, and (with seeds:) the seeds it trains on (default all)
ARM_SCHEMA: dict[str, Any] = {"name": str, "reward_granularity": str, "options": (dict, OPTIONAL),
                              "seeds": (list, OPTIONAL)}
ARM_RENAMED = {"accuracy": "reward_granularity"}  # a named arm's former keys
SET_HERE = ("config", "output_dir", "exclude", "resume_from_checkpoint")  # options proof.py itself passes
DATA_KEYS = ("train_data", "tasks", "langs", "mixture", "num_train_examples", "skip_examples", "synth_seed", "max_len",
             "paraphrase", "streaming", "subtasks", "repeat_answers")


def check_section(where: str, value: Any, schema: dict[str, Any]) -> None:
    if not isinstance(value, dict):
        raise TaseError(f"{where}: must be a mapping of key: value")
    for key in value:
        if key not in schema:
            raise TaseError(f"{where}: unknown key {key!r} (known: {', '.join(schema)})")
    for key, want in schema.items():
        optional = isinstance(want, tuple) and OPTIONAL in want
        types = want[0] if optional else want
        if optional and key in value and value[key] is None:
            del value[key]  # `steps: null`, `n: null`: the key not given (its default), as `control:` alone is
        if key not in value:
            if not optional:
                raise TaseError(f"{where}: missing key {key!r}")
            continue
        v = value[key]
        if isinstance(types, dict):
            check_section(f"{where}: {key}", v, types)
        elif not isinstance(v, types) or (isinstance(v, bool) and types is int):
            what = ("an integer" if types is int else " or ".join(f"a {t.__name__}" for t in types)
                    if isinstance(types, tuple) else f"a {types.__name__}")
            raise TaseError(f"{where}: {key} must be {what}, got {bounded(v)}")


def load_config(path: str) -> ProofConfig:
    """The proof config (yaml.safe_load), checked and typed: unknown or missing keys, wrong types and bad values are
    one line each. A `control:` key, even empty, turns the control stage on (its options {}); without it control
    is None (select: likewise). An empty `transfer:` or `start:` is refused: each needs keys of its own."""
    cfg = read_yaml(path)
    for part in (*OPTIONAL_STAGES, "transfer"):
        if isinstance(cfg, dict) and part in cfg and cfg[part] is None:
            # `control:` or `select:` with nothing under it: the stage with its defaults; a section without
            # defaults (`transfer: null`, `start:`) is then refused for what it lacks, never silently off
            cfg[part] = {}
    check_section(f"--config {path}", cfg, SCHEMA)
    if isinstance(cfg.get("start"), list) and not cfg["start"]:
        raise TaseError(f"--config {path}: start: give a mapping (one stage) or a list of them, got an empty list")
    for name, sec in start_sections(cfg):
        check_section(f"--config {path}: {name}", sec, START_SCHEMA)
    files = cfg["files"]
    if not files or not all(isinstance(f, str) and re.fullmatch(r"[^/]+/[^/]+/[^/]+\.csv", f) for f in files):
        raise TaseError(f"--config {path}: files must list official files as <group>/<task>/<file>.csv, got "
                        f"{bounded(files)}")
    from common.paths import relative_refusal

    for f in files:  # each part a name inside the release's tasks/ (and OUT/official): `../../x.csv` read outside it
        why = relative_refusal(f, f"--config {path}: files entry {f!r}")
        if why:
            raise TaseError(why)
    check_values(path, Heldout(**cfg["heldout"]), Eval(**cfg["eval"]), Compare(**cfg["compare"]))
    arms = cfg["grpo"]["arms"]
    levels = [a for a in arms if not isinstance(a, dict)]
    if not arms or not all(isinstance(a, str) for a in levels) or len(set(levels)) != len(levels) \
            or not set(levels) <= set(ARMS):
        raise TaseError(f"--config {path}: grpo arms must be some of {', '.join(ARMS)}, each once; got {bounded(arms)}")
    seen = list(levels)  # the arms' names so far: each once
    rename_arm_keys(path, [a for a in arms if isinstance(a, dict)])
    for i, arm in enumerate(arms):
        if isinstance(arm, dict):
            check_arm(path, i + 1, arm, seen)  # named "grpo arm <i>" by its place in the list until its name is known
    if not all(isinstance(f, str) for f in cfg["grpo"]["reward_funcs"]):
        raise TaseError(f"--config {path}: grpo reward_funcs must list reward names or import paths, got "
                        f"{bounded(cfg['grpo']['reward_funcs'])}")
    if cfg["eval"]["backend"] not in (local := backend_names(local=True)):
        raise TaseError(f"--config {path}: eval backend must be {' or '.join(local)}, got "
                        f"{bounded(cfg['eval']['backend'])}")
    if (not isinstance(cfg["eval"].get("dtype"), (str, type(None)))
            or cfg["eval"].get("dtype") not in (None, *EVAL_DTYPES)):
        raise TaseError(f"--config {path}: eval dtype must be one of {', '.join(EVAL_DTYPES)}, got "
                        f"{bounded(cfg['eval']['dtype'])}")
    sections = [("sft", cfg["sft"]), *start_sections(cfg), *((p, cfg[p]) for p in ("grpo", "control") if p in cfg)]
    for part, sec in sections:
        sec["options"] = sec.get("options") or {}
        taken = SET_HERE + {"grpo": ("model_name_or_path", "reward_funcs"),
                            "control": ("model_name_or_path", "max_train_seconds"), "sft": ()}.get(
                                part, ("model_name_or_path",))  # a start stage: from the stage before
        data = {"control": "the control trains on the GRPO arms' data: the grpo config's and grpo options'",
                "sft": None, "grpo": None, START: "the start trains on the GRPO arms' data with start: synth_seed"}.get(
                    part, f"the {part} stage trains on the GRPO arms' data with its own synth_seed")
        check_options(path, part, sec["options"], taken, data)
    pc = typed(cfg)
    ctl = pc.control
    if ctl is not None and ctl.steps is not None:
        if isinstance(ctl.steps, bool) or ctl.steps < 1:
            raise TaseError(f"--config {path}: control: steps must be a whole number of steps >= 1, got "
                            f"{bounded(ctl.steps)}")
        for clash, why in (("follows", "control: follows times the control by an arm"),
                           ("max_steps", "control: options: max_steps")):
            if (ctl.follows is not None if clash == "follows" else clash in ctl.options):
                raise TaseError(f"--config {path}: control: steps fixes the control's step count; drop {why}")
    elif ctl is not None:
        follows = control_follows(pc)
        if follows not in arm_specs(pc, expand=False):
            raise TaseError(f"--config {path}: the control trains for the {follows} arm's train_runtime: grpo arms "
                            f"must include {follows}" + ("" if ctl.follows is not None else
                                                    " (or name another arm in control: follows)"))
    if pc.select is not None:
        check_select(path, pc.select)
    check_seeds(path, pc)
    check_sweep(path, pc)
    check_lr_matched(path, pc)
    if pc.transfer is not None:
        check_transfer(path, pc)
    return pc


def check_lr_matched(path: str, cfg: ProofConfig) -> None:
    """`grpo: lr_matched: ARM`: ARM is an arm without dynamic sampling, and some arm has it (else nothing to match)."""
    ref = cfg.grpo.lr_matched
    if ref is None:
        return
    arms = arm_specs(cfg, expand=False)
    if ref not in arms:
        raise TaseError(f"--config {path}: grpo: lr_matched must name one of the arms ({', '.join(arms)}), got "
                        f"{bounded(ref)}")
    if dynamic(arms[ref], cfg):
        raise TaseError(f"--config {path}: grpo: lr_matched: {ref} samples dynamically; name an arm without "
                        "dynamic_sampling (the one whose rate is matched)")
    if not any(dynamic(a, cfg) for a in arms.values()):
        raise TaseError(f"--config {path}: grpo: lr_matched: no arm has dynamic_sampling true: there is no "
                        "effective learning rate to match")
    if any(a.name == ref + LR_MATCHED for a in cfg.grpo.arms):
        raise TaseError(f"--config {path}: grpo: lr_matched adds the arm {ref + LR_MATCHED}; an arm has that name")


def dynamic(arm: Arm, cfg: ProofConfig) -> bool:
    """Whether an arm samples dynamically (its options over grpo options; a YAML true or "true")."""
    return str(arm.grpo_options(cfg).get("dynamic_sampling", False)).lower() == "true"


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


def rename_arm_keys(path: str, arms: list[dict[str, Any]]) -> None:
    """Named arms' former keys (ARM_RENAMED: `accuracy` is `reward_granularity`, the one name for the reward's
    granularity) given their new names in place, with one deprecation line on stderr per former key used; an arm
    giving both is one line."""
    for old, new in ARM_RENAMED.items():
        used = [a for a in arms if old in a]
        for a in used:
            if new in a:
                raise TaseError(f"--config {path}: grpo arm {bounded(a.get('name'))}: {both_names(old, new)}")
            a[new] = a.pop(old)
        if used:
            print(deprecation_note(f"grpo arms' {old}", new), file=sys.stderr)


def check_arm(path: str, i: int, arm: dict[str, Any], seen: list[str]) -> None:
    """A named arm (ARM_SCHEMA): a folder-safe name that no other model or OUT folder has, nor a level (those are
    the plain arms), a reward_granularity of ARMS, and GRPO options but the data (one pool for every arm and the
    control: grpo options) and what proof.py passes; each refusal one line. `options` is set to {} when absent."""
    check_section(f"--config {path}: grpo arm {i}", arm, ARM_SCHEMA)
    name = arm["name"]
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_-]*", name) or name in RESERVED or name.startswith("select_") \
            or name in (COARSE, STRICT, FINE) or re.fullmatch(rf"{START}[0-9]+", name):
        raise TaseError(f"--config {path}: grpo arm {i}: name must be letters, digits, _ or - (a folder of out), not "
                        f"one of {', '.join((COARSE, STRICT, FINE) + RESERVED)} nor select_* or start<N>; got "
                        f"{bounded(name)}")
    if name in seen:
        raise TaseError(f"--config {path}: grpo arm {name!r} is given twice")
    if arm["reward_granularity"] not in ARMS:
        raise TaseError(f"--config {path}: grpo arm {name!r}: reward_granularity must be one of {', '.join(ARMS)}, "
                        f"got {bounded(arm['reward_granularity'])}")
    arm["options"] = arm.get("options") or {}
    check_options(path, f"grpo arm {name!r}", arm["options"], SET_HERE + ("model_name_or_path", "reward_funcs"),
                  "every arm trains on the same GRPO data: set it in grpo options")
    seen.append(name)


@dataclasses.dataclass(frozen=True)
class Arm:
    """A GRPO arm: its name (folder OUT/<name>, model name), accuracy level, and its own options over grpo.options;
    with seeds:, `base` is the arm's name in the config and `seed` this run's; an lr_matched arm names in
    `lr_from` the run whose logged signal share sets its learning rate (train.lr_matched_rate)."""

    name: str
    level: str
    options: dict[str, Any]
    base: str = ""
    seed: int | None = None
    lr_from: str | None = None
    seeds: list[int] | None = None  # the config's arm's seeds (None: every seed)

    def grpo_options(self, cfg: ProofConfig) -> dict[str, Any]:
        """The options its grpo.py run takes: grpo.options, then its own (each key once, its value winning)."""
        return {**cfg.grpo.options, **self.options}


def seed_list(cfg: ProofConfig) -> list[int | None]:
    """The seeds every arm and control run is trained with (seeds:), or [None]: one run each, named as before."""
    return list(cfg.seeds or [None])


def seeded(name: str, seed: int | None) -> str:
    """A run's name for a seed: `name_s<seed>` (seeds:), else `name`."""
    return name if seed is None else f"{name}_s{seed}"


def arm_specs(cfg: ProofConfig, expand: bool = True) -> dict[str, Arm]:
    """The config's GRPO arms by name, in order: a level `fine` is the arm named fine with no options of its own;
    a named arm (ARM_SCHEMA) is its name, reward_granularity and options; with `grpo: lr_matched: X` the arm
    X_lr_matched last. With seeds: (and `expand`), every arm once per seed, named <arm>_s<seed> with option seed (seed
    by seed). The one reading of grpo: arms."""
    arms = [Arm(x.name, x.reward_granularity, x.options, x.name, seeds=x.seeds) for x in cfg.grpo.arms]
    ref = cfg.grpo.lr_matched
    if ref is not None and ref in {a.name for a in arms}:
        r = next(a for a in arms if a.name == ref)
        arms.append(Arm(ref + LR_MATCHED, r.level, r.options, ref + LR_MATCHED, lr_from=ref, seeds=r.seeds))
    if not expand or cfg.seeds is None:
        return {a.name: a for a in arms}
    return {seeded(a.name, s): Arm(seeded(a.name, s), a.level, {**a.options, "seed": s},
                                   a.name, s, None if a.lr_from is None else seeded(a.lr_from, s))
            for s in seed_list(cfg) for a in arms if a.seeds is None or s in a.seeds}


@dataclasses.dataclass(frozen=True)
class ControlRun:
    """One SFT control run: its folder (OUT/<folder>), its name in the selection and report, the model name its
    seed's chosen control is evaluated as (`model`), its seed and (a sweep) learning rate."""

    folder: str
    name: str
    model: str
    seed: int | None
    lr: float | None
    rate_of: str | None = None  # control: sweep_once: the first seed's model whose chosen rate this run takes


def control_runs(cfg: ProofConfig, kind: str = "control") -> list[ControlRun]:
    """The runs of the more-SFT control (`kind` control) or of the rejection-sampling SFT control (`kind` rft, with
    control: rft): one (OUT/control, sft_control; OUT/rft, rft), or per seed (control_s<seed>), or per rate and
    seed (control_lr<rate>_s<seed>: the selection chooses, per seed, the rate whose chosen checkpoint scores best
    on the held-out rows, evaluated as sft_control_s<seed>). With control: sweep_once naming `kind`, a seed after
    the first has one run, control_chosen_s<seed> (rft_chosen_s<seed>), at the rate the first seed's selection
    chose (rate_of: the first seed's model)."""
    if cfg.control is None or (kind == RFT and not rft_on(cfg)):
        return []
    folder, model = ("control", CONTROL) if kind == "control" else (RFT, RFT)
    rates = cfg.control.learning_rates or [None]
    once = kind in (cfg.control.sweep_once or []) and cfg.first_seed is not None
    out = []
    for s in seed_list(cfg):
        if once and s != cfg.first_seed:
            out.append(ControlRun(seeded(folder + "_chosen", s), seeded(model + "_chosen", s), seeded(model, s), s,
                                  None, seeded(model, cfg.first_seed)))
            continue
        for r in rates:
            tag = "" if r is None else f"_lr{r:g}"
            out.append(ControlRun(seeded(folder + tag, s), seeded(model + tag, s), seeded(model, s), s, r))
    return out


def rft_data(out: Path, seed: int | None) -> Path:
    """OUT/rft[_s<seed>]_data.jsonl: the RFT control's training rows of that seed (train.rft_records)."""
    return out / f"{seeded(RFT, seed)}_data.jsonl"


def rft_empty(out: Path, run: ControlRun) -> bool:
    """Whether an RFT run has no rows: none of its seed's samples was strict-correct, so SFT on them changes nothing
    and the RFT control of that seed is the model it would train from (written empty by train.rft_records)."""
    f = rft_data(out, run.seed)
    return run.folder.startswith(RFT) and f.is_file() and f.stat().st_size == 0


def rft_on(cfg: ProofConfig) -> bool:
    """Whether the config has the rejection-sampling SFT control (control: rft: true)."""
    return cfg.control is not None and bool(cfg.control.rft)


def control_follows(cfg: ProofConfig) -> str:
    """The arm whose train_runtime the control trains for: control: follows, else fine. With control: steps it
    trains for no arm's time; then this is only the arm the summary compares with the control first."""
    assert cfg.control is not None
    follows = cfg.control.follows
    if follows is None and cfg.control.steps is not None:
        arms = list(arm_specs(cfg, expand=False))
        return FINE if FINE in arms else arms[0]
    return FINE if follows is None else follows


def control_steps(cfg: ProofConfig) -> int | None:
    """control: steps, the control's fixed step count (--max_steps, no time budget), or None: it trains for the
    followed arm's train_runtime, which buys a different step count on a faster or busier machine."""
    assert cfg.control is not None
    return cfg.control.steps


def option_value(v: Any) -> bool:
    """A recipe option as a proof config may give it: a scalar (str, number, bool, null) or a flat list of them (the
    values `flags` turns into command-line words; a mapping or nested list would reach the recipe as its repr)."""
    scalar = (str, int, float, bool, type(None))
    return isinstance(v, scalar) or (isinstance(v, list) and all(isinstance(x, scalar) and x is not None for x in v))
