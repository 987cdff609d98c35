"""`make proof TASE=DIR`: the proof that GRPO teaches token awareness, on whole official files, on CPU.

    python recipes/proof.py --config recipes/configs/proof_cpu.yaml --official /path/to/Tase [--out DIR] [--dry-run]

1 subset: the config's official files linked into OUT/official (evaluated whole, with the release's ids);
2 SFT warm-up; 3 one GRPO arm per accuracy reward (coarse, fine) from the warm-up, nothing else differing;
4 the training sets written out, and a generated held-out set guarded against them and the release;
5 greedy evaluations of base, warm-up and the arms on OUT/official and on the held-out set;
6 `eval compare` per data set; 7 per-row completion files, re-scored with `eval score` (must match);
8 summary: accuracy per model, GRPO fine vs warm-up and fine vs coarse with paired 95% CIs, wall times.
Each step is printed as the command it runs and timed; a stage whose output exists is skipped, so rerunning
the same command resumes. Relative paths in the config are relative to the repository root.
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

from recipes.config import DataArgs, one_line_errors, read_yaml
from recipes.errors import fail
from recipes.pipeline import Steps, gain_line, paired_gains

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
N_STAGES = 8
ARMS = ("coarse", "fine")
OPTIONAL = object()
# the config's keys: a type (or tuple of types), a nested mapping, or (type, OPTIONAL)
SCHEMA: dict[str, Any] = {
    "out": str, "completions": str, "files": list,
    "sft": {"config": str, "options": (dict, OPTIONAL)},
    "grpo": {"config": str, "arms": list, "reward_funcs": list, "options": (dict, OPTIONAL)},
    "heldout": {"task": str, "lang": str, "n": int, "seed": int, "max_len": (int, OPTIONAL)},
    "eval": {"backend": str, "max_new_tokens": int, "batch_size": (int, OPTIONAL)},
    "compare": {"n_boot": int},
}
SET_HERE = ("config", "output_dir", "exclude", "resume_from_checkpoint")  # options proof.py itself passes
DATA_KEYS = ("train_data", "tasks", "langs", "mixture", "num_train_examples", "synth_seed", "max_len", "paraphrase",
             "streaming")


def check_section(where: str, value: Any, schema: dict[str, Any]) -> None:
    if not isinstance(value, dict):
        fail(f"{where}: must be a mapping of key: value")
    for key in value:
        if key not in schema:
            fail(f"{where}: unknown key {key!r} (known: {', '.join(schema)})")
    for key, want in schema.items():
        optional = isinstance(want, tuple) and OPTIONAL in want
        types = want[0] if optional else want
        if key not in value or (optional and value[key] is None):
            if not optional:
                fail(f"{where}: missing key {key!r}")
            continue
        v = value[key]
        if isinstance(types, dict):
            check_section(f"{where}: {key}", v, types)
        elif not isinstance(v, types) or (isinstance(v, bool) and types is int):
            fail(f"{where}: {key} must be {'an integer' if types is int else f'a {types.__name__}'}, got {v!r}")


def load_config(path: str) -> dict[str, Any]:
    """The proof config (yaml.safe_load), checked: unknown or missing keys and wrong types are one line."""
    cfg = read_yaml(path)
    check_section(f"--config {path}", cfg, SCHEMA)
    files = cfg["files"]
    if not files or not all(isinstance(f, str) and re.fullmatch(r"[^/]+/[^/]+/[^/]+\.csv", f) for f in files):
        fail(f"--config {path}: files must list official files as <group>/<task>/<file>.csv, got {files!r}")
    arms = cfg["grpo"]["arms"]
    if not arms or len(set(arms)) != len(arms) or not set(arms) <= set(ARMS):
        fail(f"--config {path}: grpo arms must be some of {', '.join(ARMS)}, each once; got {arms!r}")
    if cfg["eval"]["backend"] not in ("vllm", "hf"):
        fail(f"--config {path}: eval backend must be vllm or hf, got {cfg['eval']['backend']!r}")
    for part in ("sft", "grpo"):
        cfg[part]["options"] = cfg[part].get("options") or {}
        taken = SET_HERE + (("model_name_or_path", "reward_funcs") if part == "grpo" else ())
        for key in cfg[part]["options"]:
            if key in taken:
                fail(f"--config {path}: {part} option {key!r} is set by proof.py")
    return cfg


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
    for src in (yml, options):
        d.update({k: v for k, v in src.items() if k in DATA_KEYS})
    return d


def training_set_cmds(py: str, name: str, data: dict[str, Any], guard: str, folder: Path) -> tuple[list, list]:
    """Commands writing what the recipe trains on, and the files to guard the held-out set against.

    The recipes draw their rows on the fly (recipes/data.py iter_records): for each task x lang cell in
    turn, the next row of `synth.generate(task, lang, ..., synth_seed)` (the same call `python -m synth --task
    T --lang L` makes), round-robin, then the contamination guard, up to num_train_examples rows. So the first
    num_train_examples guarded rows of every cell, written by `python -m synth` with the same flags, hold
    every training prompt (a superset: the held-out set may lose a few more rows than it must, never fewer)."""
    if data["train_data"] != "synth":
        return [], [Path(data["train_data"])]
    if data["streaming"]:
        fail(f"{name}: streaming training data has no end; the held-out set cannot be guarded against it")
    cmds, files = [], []
    for task in data["tasks"]:
        for lang in data["langs"]:
            f = folder / f"{name}_{task}_{lang}.jsonl"
            cmd = [py, "-m", "synth", "--task", task, "--lang", lang, "-n", str(data["num_train_examples"]),
                   "--seed", str(data["synth_seed"])]
            cmd += ["--max-len", str(data["max_len"])] if data["max_len"] else []
            cmd += ["--paraphrase"] if data["paraphrase"] else []
            cmd += ["--mixture", str(data["mixture"])] if data["mixture"] and task == "all" else []
            cmds.append((f, [*cmd, "--exclude", guard, "--no-progress", "--out", shown(f)]))
            files.append(f)
    return cmds, files


def link_subset(official: Path, files: list[str], dest: Path, dry_run: bool) -> list[list[str]]:
    """Link the chosen files (and the release's data/final_token_*.json) into dest; returns the equivalent
    shell commands of what is still to do. A link pointing elsewhere, or another CSV there, is an error."""
    wanted = {dest / "tasks" / f: official / "tasks" / f for f in files}
    wanted.update({dest / "data" / c.name: c for c in sorted((official / "data").glob("final_token_*.json"))})
    extra = [p for p in sorted((dest / "tasks").glob("*/*/*.csv")) if p not in wanted]
    if extra:
        fail(f"{shown(dest)} holds {shown(extra[0])}, not in the config's files: it would be evaluated too; "
             "remove it or choose another --out")
    todo = []
    for link, target in wanted.items():
        if link.is_symlink() or link.exists():
            if link.resolve() != target.resolve():
                fail(f"{shown(link)} points to {link.resolve()}, not {target}; remove it or choose another --out")
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
        fail(f"{shown(samples.parent)}: the evaluation is not complete ({res.get('n')} of {res.get('n_expected')} rows)")
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
                      official: str) -> list[str]:
    """Stage 7: write each model's completion files, re-score each with `eval score` (skipped while its scores
    are newer than the file) and check its accuracy equals the eval run's; returns the mismatches."""
    step.header(7, f"completion files under {shown(completions)}, re-scored with `eval score`")
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
                step.run(f"re-score {name} {f}", cmd, stage="7 completion files + re-score")
    bad = []
    for name, f, rescored in [] if step.dry_run else checks:
        a, b = accuracy_of(out / "eval" / "official" / name, f), accuracy_of(rescored, f)
        print(f"   {name:<8} {f}: eval run {a:.2f}, re-scored {b:.2f}" + ("" if a == b else "  MISMATCH"))
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

    @property
    def guard(self) -> str:
        return f"official:{self.official}"

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
    """The config and the release checked (one line each: a missing folder, file or recipe config), and the
    evaluation backend (vllm falls back to eval's default where it is not installed)."""
    cfg = load_config(args.config)
    official = Path(args.official).resolve()
    if not official.is_dir():
        fail(f"--official {args.official}: no such folder")
    for f in cfg["files"]:
        if not (official / "tasks" / f).is_file():
            fail(f"--official {args.official}: no tasks/{f} (the config's files must be in the release)")
    out = Path(args.out).resolve() if args.out else ROOT / cfg["out"]
    sft_config, grpo_config = ROOT / cfg["sft"]["config"], ROOT / cfg["grpo"]["config"]
    for c in (sft_config, grpo_config):
        if not c.is_file():
            fail(f"--config {args.config}: no such recipe config {shown(c)}")
    from eval.backends import default_backend

    backend = cfg["eval"]["backend"]
    if backend == "vllm" and default_backend() != "vllm":
        print(f"note: vllm is not installed; evaluating with {default_backend()} (eval's default)")
        backend = default_backend()
    step = Steps("proof", N_STAGES, ROOT, dry_run=args.dry_run, quote=True)
    return Proof(cfg, official, out, sft_config, grpo_config, backend, step, args.dry_run)


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
        cmd = [pr.py, shown(HERE / "grpo.py"), "--config", shown(pr.grpo_config), "--model_name_or_path",
               shown(out / "sft"), "--exclude", pr.guard, "--output_dir", shown(out / arm), "--reward_funcs",
               f"accuracy_{arm}", *cfg["grpo"]["reward_funcs"], *flags(cfg["grpo"]["options"]),
               "--resume_from_checkpoint", "true"]
        if not pr.skip(3, f"GRPO {arm}", out / arm / "model.safetensors", cmd, f"3 GRPO {arm}"):
            step(3, f"GRPO {arm} (accuracy_{arm} + {' + '.join(cfg['grpo']['reward_funcs'])})", cmd,
                 stage=f"3 GRPO {arm}")


def stage_sets(pr: Proof) -> Path:
    """4. the training sets (a superset of every prompt the recipes train on, see training_set_cmds) and the
    held-out set guarded against them and the release; returns the held-out file."""
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
    cmd += ["--max-len", str(ho["max_len"])] if ho.get("max_len") else []
    cmd += ["--no-progress", "--out", shown(heldout), "--exclude", pr.guard]
    for f in guard_files:
        cmd += ["--exclude-exact", shown(f)]
    sets.append((heldout, cmd))
    for f, cmd in sets:
        title = f"held-out set ({ho['n']} rows)" if f == heldout else f"training set {f.stem} (held-out guard)"
        if not pr.skip(4, title, f, cmd, "4 training and held-out sets"):
            pr.step(4, title, cmd, stage="4 training and held-out sets")
    return heldout


def stage_evaluate(pr: Proof, heldout: Path) -> tuple[dict[str, str], dict[str, str]]:
    """5. greedy evaluations of every model on both data sets; 6. comparisons with paired bootstrap
    intervals. Returns the models and data sets, by name."""
    out, sft_opts = pr.out, pr.cfg["sft"]["options"]
    models = {"base": str(sft_opts.get("model_name_or_path") or data_model(pr.sft_config)),
              "warm-up": shown(out / "sft"), **{arm: shown(out / arm) for arm in pr.cfg["grpo"]["arms"]}}
    data = {"official": f"official:{shown(out / 'official')}", "heldout": shown(heldout)}
    ev = pr.cfg["eval"]
    for dname, spec in data.items():
        for name, model in models.items():
            cmd = [pr.py, "-m", "eval", "run", "--model", model, "--data", spec, "--out",
                   shown(out / "eval" / dname / name), "--backend", pr.backend, "--max-new-tokens",
                   str(ev["max_new_tokens"]), "--no-progress"]
            cmd += ["--batch-size", str(ev["batch_size"])] if ev.get("batch_size") else []
            pr.step(5, f"evaluate {name} on {dname} ({pr.backend}, greedy; resumes)", cmd,
                    stage=f"5 evaluate on {dname}")
    n_boot = pr.cfg["compare"]["n_boot"]
    for dname in data:
        pr.step(6, f"compare on {dname}", [pr.py, "-m", "eval", "compare",
                                           *(shown(out / "eval" / dname / m) for m in models),
                                           "--out", shown(out / "comparison" / dname), "--n-boot", str(n_boot)],
                stage="6 compare")
    return models, data


def main(argv: list[str] | None = None) -> int:
    """The eight stages in order (docs/results.md, "make proof"); 1 when a re-scored file disagrees."""
    pr = setup(parse_args(argv))
    t0 = time.time()
    stage_subset(pr)
    stage_train(pr)
    heldout = stage_sets(pr)
    models, data = stage_evaluate(pr, heldout)
    # 7. completion files, re-scored by `eval score`
    if completions_stage(pr.step, pr.out, pr.cfg["files"], list(models), ROOT / pr.cfg["completions"],
                         data["official"]):
        return 1
    # 8. summary
    pr.step.header(8, "summary")
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
    pairs += (("fine vs coarse", "coarse", "fine"),) if set(arms) == set(ARMS) else ()
    pairs += (("warm-up vs base", "base", "warm-up"),)
    for dname in ("official", "heldout"):
        lines += ["", f"gains on {dname} (overall as `eval compare`: file means -> task means; points; paired 95% "
                      f"bootstrap, {n_boot} resamples):"]
        g = paired_gains(out / "eval" / dname, pairs, n_boot)
        lines += ["  the evaluations share no rows"] if g is None else [gain_line(k, x, 22) for k, x in g.items()]
    lines += ["", "wall time per stage (this invocation; skipped stages count 0):", "", step.table(),
              f"", f"proof finished in {total:.0f} s; comparisons: {shown(out / 'comparison')}"]
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
