"""`make proof TASE=DIR`: the proof that GRPO teaches token awareness, on whole official files, on CPU.

    python recipes/proof.py --config recipes/configs/proof_cpu.yaml --official /path/to/Tase [--out DIR] [--dry-run]
        [--completions DIR]

1 subset: the config's official files linked into OUT/official (evaluated whole, with the release's ids);
2 SFT warm-up; 3 one GRPO arm per accuracy reward (coarse, fine) from the warm-up, nothing else differing;
4 (with a `control:` section only) the more-SFT control: the warm-up continued with gold answers on the GRPO
  arms' data for the fine arm's train_runtime (--max_train_seconds), so GRPO is measured against equal time;
5 the training sets written out, and a generated held-out set guarded against them and the release;
6 greedy evaluations of base, warm-up, the arms (and the control) on OUT/official and on the held-out set;
7 `eval compare` per data set; 8 per-row completion files, re-scored with `eval score` (must match);
9 summary: accuracy per model, GRPO fine vs warm-up, fine vs coarse (and fine vs control) with paired 95%
  CIs, wall times.
Without a `control:` section stage 4 does not exist and the later ones are numbered 4-8. Each step is printed
as the command it runs and timed; a stage whose output exists is skipped, so rerunning the same command
resumes. Relative paths in the config are relative to the repository root. Nothing is written outside OUT unless
named for the run (--completions DIR).
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import re
import sys
import time
from pathlib import Path
from typing import Any

from common.errors import bounded
from recipes.config import DataArgs, data_streams
from recipes.errors import TaseError, one_line_exit
from recipes.parser import one_line_errors, read_yaml
from recipes.pipeline import Steps, gain_line, paired_gains
from rewards.levels import COARSE, FINE, accuracy_reward_name

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
N_STAGES = 9  # 8 without a control section (stage 4)
STAGES = ("subset", "sft", "grpo", "control", "sets", "evaluate", "compare", "completions", "summary")
ARMS = (COARSE, FINE)  # the accuracy levels (rewards/levels.py) a proof may train an arm on, each its folder's name
CONTROL = "sft_control"  # the control's model name: eval folders, comparisons, <completions>/sft_control
OPTIONAL = object()
# eval.dtype (optional, passed as `eval run --dtype`): pin it (float32) so the numbers do not depend on the CPU,
# whose default is bfloat16 where it has bf16 natively and float32 elsewhere
EVAL_DTYPES = ("float32", "bfloat16", "float16")
# the config's keys: a type (or tuple of types), a nested mapping, or (type, OPTIONAL)
SCHEMA: dict[str, Any] = {
    "out": str, "completions": (str, OPTIONAL), "files": list,
    "sft": {"config": str, "options": (dict, OPTIONAL)},
    "grpo": {"config": str, "arms": list, "reward_funcs": list, "options": (dict, OPTIONAL)},
    "control": ({"options": (dict, OPTIONAL)}, OPTIONAL),
    "heldout": {"task": str, "lang": str, "n": int, "seed": int, "max_len": (int, OPTIONAL),
                "subtask": (str, OPTIONAL)},
    "eval": {"backend": str, "max_new_tokens": int, "batch_size": (int, OPTIONAL), "dtype": (str, OPTIONAL)},
    "compare": {"n_boot": int},
}
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
    if isinstance(cfg, dict) and "control" in cfg and cfg["control"] is None:
        cfg["control"] = {}  # `control:` with nothing under it: the stage with no extra options
    check_section(f"--config {path}", cfg, SCHEMA)
    files = cfg["files"]
    if not files or not all(isinstance(f, str) and re.fullmatch(r"[^/]+/[^/]+/[^/]+\.csv", f) for f in files):
        raise TaseError(f"--config {path}: files must list official files as <group>/<task>/<file>.csv, got "
                        f"{bounded(files)}")
    arms = cfg["grpo"]["arms"]
    if not arms or not all(isinstance(a, str) for a in arms) or len(set(arms)) != len(arms) or not set(arms) <= set(ARMS):
        raise TaseError(f"--config {path}: grpo arms must be some of {', '.join(ARMS)}, each once; got {bounded(arms)}")
    if not all(isinstance(f, str) for f in cfg["grpo"]["reward_funcs"]):
        raise TaseError(f"--config {path}: grpo reward_funcs must list reward names or import paths, got "
                        f"{bounded(cfg['grpo']['reward_funcs'])}")
    if cfg["eval"]["backend"] not in ("vllm", "hf"):
        raise TaseError(f"--config {path}: eval backend must be vllm or hf, got {bounded(cfg['eval']['backend'])}")
    if not isinstance(cfg["eval"].get("dtype"), (str, type(None))) or cfg["eval"].get("dtype") not in (None, *EVAL_DTYPES):
        raise TaseError(f"--config {path}: eval dtype must be one of {', '.join(EVAL_DTYPES)}, got "
                        f"{bounded(cfg['eval']['dtype'])}")
    for part in ("sft", "grpo", "control"):
        if part not in cfg:
            continue
        cfg[part]["options"] = cfg[part].get("options") or {}
        taken = SET_HERE + {"grpo": ("model_name_or_path", "reward_funcs"),
                            "control": ("model_name_or_path", "max_train_seconds"), "sft": ()}[part]
        for key, v in cfg[part]["options"].items():
            if not option_value(v):  # flags() passes a value or a list of values; anything else is misread
                raise TaseError(f"--config {path}: {part} option {key!r} must be a value or a list of values, got "
                                f"{bounded(v)}")
            if key in taken:
                raise TaseError(f"--config {path}: {part} option {key!r} is set by proof.py")
            if part == "control" and key in DATA_KEYS:
                raise TaseError(f"--config {path}: control option {key!r} is set by proof.py (the control trains on the GRPO "
                     "arms' data: the grpo config's and grpo options')")
    if "control" in cfg and FINE not in arms:
        raise TaseError(f"--config {path}: the control trains for the fine arm's train_runtime: grpo arms must include fine")
    return cfg


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


def data_args(recipe_config: Path, options: dict[str, Any]) -> dict[str, Any]:
    """The training-data options a recipe will use: DataArgs defaults, then its YAML config, then the options."""
    d = {f.name: f.default if f.default is not dataclasses.MISSING else f.default_factory()
         for f in dataclasses.fields(DataArgs) if f.name in DATA_KEYS}
    yml = read_yaml(recipe_config, "") or {}
    if not isinstance(yml, dict):
        raise TaseError(f"{shown(recipe_config)}: must be a YAML mapping of option: value")
    listed = {f.name for f in dataclasses.fields(DataArgs) if "list" in str(f.type)}
    d.update({k: v for k, v in yml.items() if k in DATA_KEYS})
    for k, v in options.items():  # as the recipe will read them from flags(): a scalar for a list option is one word
        if k in DATA_KEYS:
            d[k] = flags({k: v})[1:] if k in listed and v is not None else v
    return d


def training_set_cmds(py: str, name: str, data: dict[str, Any], guard: str, folder: Path) -> tuple[list, list]:
    """Commands writing what the recipe trains on, and the files to guard the held-out set against.

    The recipes draw their rows on the fly (recipes/data.py iter_records): for each stream in turn (a task x
    lang cell, or with `subtasks` a task x lang x subtask cell: config.data_streams), the next row of
    `synth.generate(task, lang, ..., synth_seed, subtask)` (the same call `python -m synth --task T --lang L
    [--subtask S]` makes), round-robin, then the contamination guard, up to num_train_examples rows. So the
    first num_train_examples guarded rows of every stream, written by `python -m synth` with the same flags,
    one file per stream, hold every training prompt (a superset: the held-out set may lose a few more rows
    than it must, never fewer)."""
    if data["train_data"] != "synth":
        return [], [Path(data["train_data"])]
    if data["streaming"]:
        raise TaseError(f"{name}: streaming training data has no end; the held-out set cannot be guarded against it")
    try:
        streams = data_streams(data["tasks"], data["langs"], data["subtasks"])
    except ValueError as e:
        raise TaseError(f"{name}: {e}")
    cmds, files = [], []
    for task, lang, sub in streams:
        f = folder / (f"{name}_{task}_{lang}.jsonl" if sub is None else f"{name}_{task}_{lang}_{sub}.jsonl")
        cmd = [py, "-m", "synth", "--task", task, "--lang", lang, "-n", str(data["num_train_examples"]),
               "--seed", str(data["synth_seed"])]
        cmd += ["--subtask", sub] if sub is not None else []
        cmd += ["--max-len", str(data["max_len"])] if data["max_len"] else []
        cmd += ["--paraphrase"] if data["paraphrase"] else []
        cmd += ["--mixture", str(data["mixture"])] if data["mixture"] and task == "all" else []
        cmds.append((f, [*cmd, "--exclude", guard, "--no-progress", "--out", shown(f)]))
        files.append(f)
    return cmds, files


def train_runtime(run: Path) -> float:
    """A finished run's training wall time: the `train_runtime` the Trainer logs when train() returns, kept in
    the log_history of the trainer_state.json both recipes save. A resumed run's covers its last invocation
    only. Missing or unreadable: one line (the control needs it to train for as long)."""
    state = run / "trainer_state.json"
    try:
        history = json.loads(state.read_text(encoding="utf-8")).get("log_history") or []
    except (OSError, ValueError, AttributeError, RecursionError) as e:
        raise TaseError(f"{shown(state)}: cannot read the fine arm's train_runtime ({getattr(e, 'strerror', None) or e}); "
             "the control trains for as long as the fine arm did")
    times = [h["train_runtime"] for h in history
             if isinstance(h, dict) and isinstance(h.get("train_runtime"), (int, float))]
    if not times or not times[-1] > 0:
        raise TaseError(f"{shown(state)}: no train_runtime in its log_history (did the fine arm finish?); the control "
             "trains for as long as the fine arm did")
    return float(times[-1])


def link_subset(official: Path, files: list[str], dest: Path, dry_run: bool) -> list[list[str]]:
    """Link the chosen files (and the release's data/final_token_*.json) into dest; returns the equivalent
    shell commands of what is still to do. A link pointing elsewhere, or another CSV there, is an error."""
    wanted = {dest / "tasks" / f: official / "tasks" / f for f in files}
    wanted.update({dest / "data" / c.name: c for c in sorted((official / "data").glob("final_token_*.json"))})
    extra = [p for p in sorted((dest / "tasks").glob("*/*/*.csv")) if p not in wanted]
    if extra:
        raise TaseError(f"{shown(dest)} holds {shown(extra[0])}, not in the config's files: it would be evaluated too; "
             "remove it or choose another --out")
    todo = []
    for link, target in wanted.items():
        if link.is_symlink() or link.exists():
            if link.resolve() != target.resolve():
                raise TaseError(f"{shown(link)} points to {link.resolve()}, not {target}; remove it or choose another --out")
            continue
        todo.append((link, target))
    cmds = []
    for link, target in todo:
        if ["mkdir", "-p", shown(link.parent)] not in cmds:
            cmds.append(["mkdir", "-p", shown(link.parent)])
        cmds.append(["ln", "-s", str(target), shown(link)])
        if not dry_run:
            link.parent.mkdir(parents=True, exist_ok=True)
            os.symlink(target, link)
    return cmds


def completion_files(samples: Path, files: list[str], folder: Path, dry_run: bool) -> list[Path]:
    """<folder>/<task>/<file stem>.jsonl for every official file: one {"id", "completion"} line per row, in
    row order, from an eval run's samples.jsonl. A file is rewritten only when its content changes."""
    out = {f: folder / f.split("/", 1)[1].removesuffix(".csv") for f in files}
    if dry_run:
        return [p.with_suffix(".jsonl") for p in out.values()]
    res = json.loads((samples.parent / "results.json").read_text(encoding="utf-8"))
    if not res.get("complete"):
        raise TaseError(f"{shown(samples.parent)}: the evaluation is not complete ({res.get('n')} of {res.get('n_expected')} rows)")
    rows: dict[str, list[tuple[int, str]]] = {f: [] for f in files}
    with samples.open(encoding="utf-8") as fh:
        for line in fh:
            s = json.loads(line)
            if s["file"] in rows:
                rows[s["file"]].append((int(s["id"].rsplit("/", 1)[1]), json.dumps(
                    {"id": s["id"], "completion": s["completion"]}, ensure_ascii=False) + "\n"))
    written = []  # the run is complete: every row of every file has its sample
    for f, path in out.items():
        path = path.with_suffix(".jsonl")
        text = "".join(line for _, line in sorted(rows[f]))
        if not path.is_file() or path.read_text(encoding="utf-8") != text:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
        written.append(path)
    return written


def accuracy_of(run: Path, file: str) -> float:
    return json.loads((run / "results.json").read_text(encoding="utf-8"))["by_file"][file]["accuracy"]


def completions_stage(step: Steps, out: Path, files: list[str], models: list[str], completions: Path,
                      official: str, k: int = 7) -> list[str]:
    """Stage k (7, or 8 with a control): write each model's completion files, re-score each with `eval score`
    (skipped while its scores are newer than the file) and check its accuracy equals the eval run's; returns
    the mismatches."""
    step.header(k, f"completion files under {shown(completions)}, re-scored with `eval score`")
    checks = []
    for name in models:
        samples = out / "eval" / "official" / name / "samples.jsonl"
        print(f"# writes {shown(completions / name)}/<task>/<file>.jsonl (id, completion) from {shown(samples)}")
        paths = completion_files(samples, files, completions / name, step.dry_run)
        for f, path in zip(files, paths):
            rescored = out / "rescore" / name / path.relative_to(completions / name).with_suffix("")
            checks.append((name, f, rescored))
            cmd = [sys.executable, "-m", "eval", "score", "--data", official, "--predictions", shown(path),
                   "--out", shown(rescored), "--force"]
            res = rescored / "results.json"
            if not step.dry_run and res.is_file() and res.stat().st_mtime >= path.stat().st_mtime:
                print(f"   skipped: {shown(res)} is newer than {shown(path)}")
            else:
                step.run(f"re-score {name} {f}", cmd, stage=f"{k} completion files + re-score")
    bad = []
    for name, f, rescored in [] if step.dry_run else checks:
        a, b = accuracy_of(out / "eval" / "official" / name, f), accuracy_of(rescored, f)
        width = max(8, *map(len, models))
        print(f"   {name:<{width}} {f}: eval run {a:.2f}, re-scored {b:.2f}" + ("" if a == b else "  MISMATCH"))
        if a != b:
            bad.append(f"{name} {f}")
    if bad:
        print(f"error: re-scored completions differ from the eval run: {', '.join(bad)}", file=sys.stderr)
    return bad


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python recipes/proof.py", description=__doc__.splitlines()[0],
                                epilog="Stages and outputs: docs/results.md, \"make proof\".")
    p.add_argument("--config", default=str(HERE / "configs" / "proof_cpu.yaml"), help="proof YAML (default: "
                   "recipes/configs/proof_cpu.yaml)")
    p.add_argument("--official", required=True, help="the official TASE release folder (tasks/<group>/<task>/*.csv)")
    p.add_argument("--out", default=None, help="output folder (default: the config's out, runs/proof)")
    p.add_argument("--completions", default=None, metavar="DIR", help="where the per-row completion files go "
                   "(default: OUT/completions, or OUT/<the config's completions:>); nothing is written outside OUT "
                   "unless named here, e.g. --completions docs/results/proof_cpu to refresh the committed files")
    p.add_argument("--dry-run", action="store_true", help="print every stage's commands, run nothing")
    one_line_errors(p)
    return p.parse_args(argv)


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

    @property
    def guard(self) -> str:
        return f"official:{self.official}"

    @property
    def control(self) -> bool:
        """Whether the config has a control section (stage 4)."""
        return "control" in self.cfg

    def k(self, stage: str) -> int:
        """The printed number of a stage (STAGES): without a control, the stages after it move up by one."""
        names = [s for s in STAGES if s != "control" or self.control]
        return names.index(stage) + 1

    def skip(self, k: int, title: str, done: Path, cmd: list[str], stage: str) -> bool:
        """True (after saying so) when the stage's output exists; under --dry-run its command still shows."""
        if not done.exists():
            return False
        self.step.header(k, f"{title}: skipped, {shown(done)} exists")
        self.step.add(stage, 0.0)
        if self.dry:
            self.step.show(cmd)
        return True


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
    for part, c in (("sft", sft_config), ("grpo", grpo_config)):  # bad tasks/langs/subtasks: now, not in stage 4/5
        d = data_args(c, cfg[part]["options"])
        if d["train_data"] == "synth":
            try:
                data_streams(d["tasks"], d["langs"], d["subtasks"])
            except ValueError as e:
                raise TaseError(f"{part}: {e}")
    check_recipe_options(cfg, sft_config, grpo_config)
    from eval.backends import default_backend

    backend = cfg["eval"]["backend"]
    if backend == "vllm" and default_backend() != "vllm":
        print(f"note: vllm is not installed; evaluating with {default_backend()} (eval's default)")
        backend = default_backend()
    step = Steps("proof", N_STAGES if "control" in cfg else N_STAGES - 1, ROOT, dry_run=args.dry_run, quote=True)
    return Proof(cfg, official, out, sft_config, grpo_config, backend, step, args.dry_run, completions=completions)


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


def check_recipe_options(cfg: dict[str, Any], sft_config: Path, grpo_config: Path) -> None:
    """Every stage's recipe options, parsed now by that recipe's own parser (its --config, then the options as
    proof.py will pass them), so that a misspelled key or a bad value in `sft:`, `grpo:` or `control:` is one
    line before stage 1, not a failure hours later when its stage starts (issue 36). The range checks are
    config.TRAINER_RANGES'; the recipes check the rest (model, data, output folder) when they start."""
    from trl import GRPOConfig, ModelConfig, SFTConfig

    from recipes.config import TaseArgs, check_trainer_ranges
    from recipes.parser import ConfigFile, RecipeParser
    from recipes.sft_warmup import BudgetArgs

    sft = (DataArgs, SFTConfig, ModelConfig, BudgetArgs)
    common = ["--output_dir", os.devnull, "--use_cpu", "true"]  # set by proof.py; use_cpu: no GPU check here
    parts = [("sft", sft, sft_config, cfg["sft"]["options"], [])]
    parts.append(("grpo", (TaseArgs, GRPOConfig, ModelConfig), grpo_config, cfg["grpo"]["options"],
                  ["--reward_funcs", accuracy_reward_name(FINE), *cfg["grpo"]["reward_funcs"]]))
    if "control" in cfg:
        opts = {k: v for k, v in cfg["sft"]["options"].items() if k not in DATA_KEYS + ("model_name_or_path",)}
        parts.append(("control", sft, sft_config, {**opts, **cfg["control"]["options"]}, ["--max_train_seconds", "1"]))
    for part, types, recipe_config, options, fixed in parts:
        where = f"{part} options (for {shown(recipe_config)})"
        parser = RecipeParser(types, where=f"{where}: ")
        known = parser.options()
        for key in options:  # named exactly as the recipe's parser names them
            if key not in known:
                raise TaseError(f"{where}: unknown option {key!r}")
        argv = ["--config", str(recipe_config), *flags(options), *fixed, *common]
        parsed = parser.parse(ConfigFile(argv))  # a TaseError: main's one line
        check_trainer_ranges(*parsed, where=f"{where}: ")


def stage_subset(pr: Proof) -> None:
    """1. the official subset, whole files, release ids."""
    step, out = pr.step, pr.out
    step.header(1, f"official subset: {len(pr.cfg['files'])} whole files linked into {shown(out / 'official')}")
    t = time.time()
    cmds = link_subset(pr.official, pr.cfg["files"], out / "official", pr.dry)
    for cmd in cmds:
        step.show(cmd)
    if not cmds:
        print("   skipped: every link exists")
    step.add("1 official subset", time.time() - t)


def stage_train(pr: Proof) -> None:
    """2. SFT warm-up; 3. GRPO arms: same config, seed, data and steps; only the accuracy reward differs."""
    cfg, out, step = pr.cfg, pr.out, pr.step
    cmd = [pr.py, shown(HERE / "sft_warmup.py"), "--config", shown(pr.sft_config), *flags(cfg["sft"]["options"]),
           "--exclude", pr.guard, "--output_dir", shown(out / "sft"),
           "--resume_from_checkpoint", "true"]  # a killed run continues
    if not pr.skip(2, "SFT warm-up", out / "sft" / "model.safetensors", cmd, "2 SFT warm-up"):
        step(2, "SFT warm-up", cmd, stage="2 SFT warm-up")
    for arm in cfg["grpo"]["arms"]:
        reward = accuracy_reward_name(arm)  # the arm's accuracy reward, named by rewards/levels.py
        cmd = [pr.py, shown(HERE / "grpo.py"), "--config", shown(pr.grpo_config), "--model_name_or_path",
               shown(out / "sft"), "--exclude", pr.guard, "--output_dir", shown(out / arm), "--reward_funcs",
               reward, *cfg["grpo"]["reward_funcs"], *flags(cfg["grpo"]["options"]),
               "--resume_from_checkpoint", "true"]
        if not pr.skip(3, f"GRPO {arm}", out / arm / "model.safetensors", cmd, f"3 GRPO {arm}"):
            step(3, f"GRPO {arm} ({reward} + {' + '.join(cfg['grpo']['reward_funcs'])})", cmd,
                 stage=f"3 GRPO {arm}")


def control_config_text(sft_config: Path, data: dict[str, Any]) -> str:
    """The control's recipe config: the sft recipe config's YAML with every data option replaced by `data` (the
    GRPO arms'), None written as null: an unset option (max_len, subtasks) cannot be given as a flag."""
    import yaml

    recipe = {**(read_yaml(sft_config, "") or {}), **data}
    return (f"# written by recipes/proof.py: {shown(sft_config)} with the GRPO arms' data options\n"
            + yaml.safe_dump(recipe, sort_keys=False, allow_unicode=True))


def stage_control(pr: Proof) -> None:
    """4. the more-SFT control: sft_warmup.py from the warm-up with gold answers on the GRPO arms' data, for
    --max_train_seconds = the fine arm's train_runtime: "GRPO vs more supervised data" at equal training time.
    Its --config is OUT/control_config.yaml, the sft recipe config with every data option set to the GRPO
    arms' (the grpo config's, then grpo.options; an unset one as null, which no flag can say); then the sft
    options but data and model, then control.options. Its prompts are the GRPO arms', so the held-out guard
    (stage 5) covers them."""
    cfg, out, k = pr.cfg, pr.out, pr.k("control")
    data = data_args(pr.grpo_config, cfg["grpo"]["options"])
    control_config, done = out / "control_config.yaml", out / "control" / "model.safetensors"
    opts = {key: v for key, v in cfg["sft"]["options"].items() if key not in DATA_KEYS + ("model_name_or_path",)}
    opts.update(cfg["control"]["options"])
    state = out / FINE / "trainer_state.json"
    if not state.is_file() and (pr.dry or done.exists()):
        seconds = f"<train_runtime of {shown(state)}>"  # read once the fine arm has trained
    else:
        seconds = f"{train_runtime(out / FINE):g}"
    cmd = [pr.py, shown(HERE / "sft_warmup.py"), "--config", shown(control_config), "--model_name_or_path",
           shown(out / "sft"), *flags(opts), "--max_train_seconds", seconds, "--exclude", pr.guard,
           "--output_dir", shown(out / "control"), "--resume_from_checkpoint", "true"]
    if pr.skip(k, "more-SFT control", done, cmd, f"{k} more-SFT control"):
        return
    pr.step.header(k, "more-SFT control (gold answers on the GRPO data, for the fine arm's train_runtime)")
    print(f"# writes {shown(control_config)}: {shown(pr.sft_config)} with the GRPO arms' data options: "
          + ", ".join(f"{key} {json.dumps(v)}" for key, v in data.items()))
    print(f"# --max_train_seconds: the fine arm's train_runtime, from {shown(state)}")
    text = control_config_text(pr.sft_config, data)
    if not pr.dry and (not control_config.is_file() or control_config.read_text(encoding="utf-8") != text):
        control_config.parent.mkdir(parents=True, exist_ok=True)
        control_config.write_text(text, encoding="utf-8")
    pr.step.run("more-SFT control", cmd, stage=f"{k} more-SFT control")


def stage_sets(pr: Proof) -> Path:
    """4 (5 with a control). the training sets (a superset of every prompt the recipes train on, see
    training_set_cmds) and the held-out set guarded against them and the release; returns the held-out file."""
    sets, guard_files = [], []
    for name, recipe_config, opts in (("sft", pr.sft_config, pr.cfg["sft"]["options"]),
                                      ("grpo", pr.grpo_config, pr.cfg["grpo"]["options"])):
        cmds, files = training_set_cmds(pr.py, name, data_args(recipe_config, opts), pr.guard, pr.out / "data")
        sets += cmds
        guard_files += files
    ho = pr.cfg["heldout"]
    heldout = pr.out / "heldout.jsonl"
    cmd = [pr.py, "-m", "synth", "--task", ho["task"], "--lang", ho["lang"], "-n", str(ho["n"]), "--seed",
           str(ho["seed"])]
    cmd += ["--subtask", ho["subtask"]] if ho.get("subtask") else []
    cmd += ["--max-len", str(ho["max_len"])] if ho.get("max_len") else []
    cmd += ["--no-progress", "--out", shown(heldout), "--exclude", pr.guard]
    for f in guard_files:
        cmd += ["--exclude-exact", shown(f)]
    sets.append((heldout, cmd))
    k = pr.k("sets")
    for f, cmd in sets:
        title = f"held-out set ({ho['n']} rows)" if f == heldout else f"training set {f.stem} (held-out guard)"
        if not pr.skip(k, title, f, cmd, f"{k} training and held-out sets"):
            pr.step(k, title, cmd, stage=f"{k} training and held-out sets")
    return heldout


def stage_evaluate(pr: Proof, heldout: Path) -> tuple[dict[str, str], dict[str, str]]:
    """5 (6 with a control). greedy evaluations of every model on both data sets; 6 (7). comparisons with
    paired bootstrap intervals. Returns the models and data sets, by name."""
    out, sft_opts = pr.out, pr.cfg["sft"]["options"]
    models = {"base": str(sft_opts.get("model_name_or_path") or data_model(pr.sft_config)),
              "warm-up": shown(out / "sft"), **{arm: shown(out / arm) for arm in pr.cfg["grpo"]["arms"]}}
    if pr.control:
        models[CONTROL] = shown(out / "control")
    k_eval, k_cmp = pr.k("evaluate"), pr.k("compare")
    data = {"official": f"official:{shown(out / 'official')}", "heldout": shown(heldout)}
    ev = pr.cfg["eval"]
    for dname, spec in data.items():
        for name, model in models.items():
            cmd = [pr.py, "-m", "eval", "run", "--model", model, "--data", spec, "--out",
                   shown(out / "eval" / dname / name), "--backend", pr.backend, "--max-new-tokens",
                   str(ev["max_new_tokens"]), "--no-progress"]
            cmd += ["--batch-size", str(ev["batch_size"])] if ev.get("batch_size") else []
            cmd += ["--dtype", ev["dtype"]] if ev.get("dtype") else []
            pr.step(k_eval, f"evaluate {name} on {dname} ({pr.backend}, greedy; resumes)", cmd,
                    stage=f"{k_eval} evaluate on {dname}")
    n_boot = pr.cfg["compare"]["n_boot"]
    for dname in data:
        pr.step(k_cmp, f"compare on {dname}", [pr.py, "-m", "eval", "compare",
                                               *(shown(out / "eval" / dname / m) for m in models),
                                               "--out", shown(out / "comparison" / dname), "--n-boot", str(n_boot)],
                stage=f"{k_cmp} compare")
    return models, data


@one_line_exit
def main(argv: list[str] | None = None) -> int:
    """The stages in order (eight, nine with a control; docs/results.md, "make proof"); 1 when a re-scored file
    disagrees."""
    pr = setup(parse_args(argv))
    t0 = time.time()
    stage_subset(pr)
    stage_train(pr)
    if pr.control:
        stage_control(pr)
    heldout = stage_sets(pr)
    models, data = stage_evaluate(pr, heldout)
    # completion files, re-scored by `eval score`
    if completions_stage(pr.step, pr.out, pr.cfg["files"], list(models), pr.completions,
                         data["official"], k=pr.k("completions")):
        return 1
    pr.step.header(pr.k("summary"), "summary")
    out = pr.out
    if pr.dry:
        print(f"# accuracy per model on {shown(out / 'official')} and the held-out set; paired gains from "
              f"{shown(out / 'eval')}; wall time per stage; written to {shown(out / 'summary.md')}")
        return 0
    text = summary(out, pr.cfg, list(models), pr.cfg["compare"]["n_boot"], pr.step, time.time() - t0)
    print(text)
    (out / "summary.md").write_text(text + "\n", encoding="utf-8")
    return 0


def data_model(recipe_config: Path) -> str:
    """The model a recipe config starts from (the base model of the comparison)."""
    return str((read_yaml(recipe_config, "") or {}).get("model_name_or_path") or "default")


def summary(out: Path, cfg: dict[str, Any], models: list[str], n_boot: int, step: Steps, total: float) -> str:
    files = cfg["files"]
    lines = ["official subset (whole files), accuracy % (coarse = the official verdict):", "",
             "| model | " + " | ".join(f.split("/", 1)[1].removesuffix(".csv") for f in files)
             + " | files' average | held-out (overall) |", "|---|" + "---:|" * (len(files) + 2)]
    for name in models:
        res = json.loads((out / "eval" / "official" / name / "results.json").read_text(encoding="utf-8"))
        held = json.loads((out / "eval" / "heldout" / name / "results.json").read_text(encoding="utf-8"))
        accs = [res["by_file"][f]["accuracy"] for f in files]
        lines.append(f"| {name} | " + " | ".join(f"{a:.2f}" for a in accs)
                     + f" | {sum(accs) / len(accs):.2f} | {held['overall']:.2f} |")
    arms = cfg["grpo"]["arms"]
    pairs = tuple((f"GRPO {arm} vs warm-up", "warm-up", arm) for arm in reversed(arms))
    pairs += ((f"{FINE} vs {COARSE}", COARSE, FINE),) if set(arms) == set(ARMS) else ()
    if CONTROL in models:
        pairs += ((f"GRPO {FINE} vs control", CONTROL, FINE), ("control vs warm-up", "warm-up", CONTROL))
    pairs += (("warm-up vs base", "base", "warm-up"),)
    for dname in ("official", "heldout"):
        lines += ["", f"gains on {dname} (overall as `eval compare`: file means -> task means; points; paired 95% "
                      f"bootstrap, {n_boot} resamples):"]
        g = paired_gains(out / "eval" / dname, pairs, n_boot)
        lines += ["  the evaluations share no rows"] if g is None else [gain_line(k, x, 22) for k, x in g.items()]
    lines += answer_class_lines(out / "eval" / "official", models, files)
    lines += ["", "wall time per stage (this invocation; skipped stages count 0):", "", step.table(),
              "", f"proof finished in {total:.0f} s; comparisons: {shown(out / 'comparison')}"]
    return "\n".join(lines)


MAX_CLASSES = 12  # a file whose gold answers take at most this many values is a classification: per-class table


def answer_class_lines(evals: Path, models: list[str], files: list[str]) -> list[str]:
    """Per-class accuracy (the class is the row's gold answer, e.g. kana or greek in char_classification) for
    every file whose gold answers take at most MAX_CLASSES values: correct/rows per model from each eval run's
    samples.jsonl (`coarse`, the official verdict). Why: a whole-file gain can hide where it comes from (one
    class learnt, another lost)."""
    per: dict[str, dict[str, dict[str, list[int]]]] = {}  # file -> model -> answer -> [correct, rows]
    for name in models:
        with (evals / name / "samples.jsonl").open(encoding="utf-8") as fh:
            for line in fh:
                s = json.loads(line)
                if s.get("file") in files:
                    c = per.setdefault(s["file"], {}).setdefault(name, {}).setdefault(str(s.get("answer")), [0, 0])
                    c[0] += bool(s.get("coarse"))
                    c[1] += 1
    lines: list[str] = []
    for f in files:
        classes = sorted({a for m in per.get(f, {}).values() for a in m},
                         key=lambda a: (-max(m.get(a, [0, 0])[1] for m in per[f].values()), a))
        if not classes or len(classes) > MAX_CLASSES:
            continue
        lines += ["", f"{f.split('/', 1)[1].removesuffix('.csv')}: correct / rows per class (the gold answer; "
                      "official verdict):", "", "| model | " + " | ".join(classes) + " |",
                  "|---|" + "---:|" * len(classes)]
        for name in models:
            got = per[f].get(name, {})
            lines.append(f"| {name} | " + " | ".join("{}/{}".format(*got.get(a, [0, 0])) for a in classes) + " |")
    return lines


if __name__ == "__main__":
    raise SystemExit(main())
