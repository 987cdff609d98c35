"""The feature contract (issue 61, recipes/features/): a training feature is one module and one entry in FEATURES,
and nothing else in the recipes names its options or compares trainer names."""
from __future__ import annotations

import dataclasses
import json
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from conftest import ROOT, tree_env

PY = sys.executable


# the toy feature, as a new feature is written: one module (its options, checks, hooks, declared trainers)
TOY = '''
from dataclasses import dataclass, field
from pathlib import Path

from recipes.features.contract import SYNC, Feature


@dataclass
class ToyOptions:
    toy_bonus: float = field(default=0.0, metadata={"help": "toy: added to the first reward of every completion"})


class Toy(Feature):
    name = "toy"
    options = ToyOptions
    trainers = frozenset({SYNC})
    refusal = "toy_bonus works with trainer: sync only"

    def enabled(self, args):
        return args.toy_bonus != 0

    def check_options(self, args):
        if args.toy_bonus < 0:
            raise ValueError(f"toy_bonus must be >= 0, got {args.toy_bonus}")

    def wrap_rewards(self, funcs, run):
        first, bonus = funcs[0], run.args.toy_bonus

        def plus(*a, **kw):
            Path(run.cfg.output_dir, "toy_rewards.txt").open("a").write("scored\\n")
            return [None if v is None else v + bonus for v in first(*a, **kw)]

        plus.__name__ = first.__name__
        return [plus, *funcs[1:]]

    def callbacks(self, run):
        from transformers import TrainerCallback

        class ToySteps(TrainerCallback):
            def on_step_end(self, args, state, control, **kw):
                Path(args.output_dir, "toy_steps.txt").open("a").write(f"{state.global_step}\\n")

        return [ToySteps()]

    def trainer_class(self, base, run):
        return type("Toy" + base.__name__, (base,), {})

    def after_build(self, trainer, run):
        print(f"toy: trainer {type(trainer).__name__}", flush=True)

    def dry_run_line(self, run):
        return f"toy: bonus {run.args.toy_bonus:g} on the first reward"


FEATURE = Toy()
'''

# the one list entry, then the GRPO entry point as is: each argv in one interpreter, its exit code printed
DRIVER = '''
import importlib.util, json, sys
spec = importlib.util.spec_from_file_location("toy_feature", sys.argv[1])
toy = importlib.util.module_from_spec(spec)
spec.loader.exec_module(toy)
from recipes import features
features.FEATURES.append(toy.FEATURE)
from recipes.grpo import main
for argv in json.loads(sys.argv[2]):
    try:
        rc = main(argv)
    except SystemExit as e:
        rc = e.code
    print(f"exit {rc}", flush=True)
'''


def _drive(tmp_path: Path, argvs: list[list[str]]) -> subprocess.CompletedProcess:
    (tmp_path / "toy_feature.py").write_text(textwrap.dedent(TOY))
    (tmp_path / "driver.py").write_text(DRIVER)
    return subprocess.run([PY, str(tmp_path / "driver.py"), str(tmp_path / "toy_feature.py"), json.dumps(argvs)],
                          cwd=ROOT, env=tree_env(), capture_output=True, text=True, timeout=600)


@pytest.mark.slow
def test_a_toy_feature_is_one_module_and_one_list_entry(tiny_model, tmp_path):
    """The toy module plus one FEATURES entry: its option is on the command line and in the dry run's plan, its
    option check and its declared trainers refuse in one line each, and one CPU step runs with its reward wrapper,
    callback, trainer mixin and post-build note."""
    import synth

    rows = list(synth.generate("freq_count", "en", 8, 1234, max_len=6))
    data = tmp_path / "train.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "run"
    base = ["--model_name_or_path", str(tiny_model), "--use_cpu", "true", "--bf16", "false", "--dtype", "float32",
            "--train_data", str(data), "--logging_steps", "1", "--report_to", "none", "--seed", "0",
            "--gradient_checkpointing", "false", "--num_train_examples", "8", "--num_generations", "2",
            "--per_device_train_batch_size", "2", "--max_completion_length", "8", "--max_steps", "1"]
    res = _drive(tmp_path, [
        [*base, "--output_dir", str(tmp_path / "dry"), "--toy_bonus", "0.5", "--dry-run"],
        [*base, "--output_dir", str(tmp_path / "neg"), "--toy_bonus", "-1", "--dry-run"],
        [*base, "--output_dir", str(tmp_path / "async"), "--toy_bonus", "0.5", "--trainer", "async", "--dry-run"],
        [*base, "--output_dir", str(out), "--toy_bonus", "0.5", "--save_strategy", "no"],
    ])
    assert res.returncode == 0, res.stderr[-3000:]
    assert [line for line in res.stdout.splitlines() if line.startswith("exit ")] == \
        ["exit 0", "exit 2", "exit 2", "exit 0"], res.stdout[-2000:] + res.stderr[-2000:]
    assert "toy_bonus: 0.5" in res.stdout and "toy: bonus 0.5 on the first reward" in res.stdout  # plan and its line
    assert "toy_bonus must be >= 0, got -1" in res.stderr
    assert "toy_bonus works with trainer: sync only" in res.stderr
    assert "toy: trainer ToyGRPOTrainer" in res.stdout
    assert (out / "toy_steps.txt").read_text().split() == ["1"]
    assert (out / "toy_rewards.txt").read_text().split() == ["scored"]  # one generation batch, scored once
    logged = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
    first = next(m for m in logged if "rewards/accuracy_fine/mean" in m)
    assert first["rewards/accuracy_fine/mean"] >= 0.5  # the bonus went through the wrapper into TRL's reward


def _sources(*, skip_features: bool) -> list[Path]:
    """The packages' Python files; without the features and the modules they declare as theirs."""
    from recipes.features import FEATURES

    own = {ROOT / m for f in FEATURES for m in f.modules} | set((ROOT / "recipes" / "features").rglob("*.py"))
    files = [p for d in ("recipes", "common", "eval", "synth", "rewards", "bench") for p in (ROOT / d).rglob("*.py")]
    return sorted(p for p in files if not (skip_features and p in own))


TRAINER_CHECK = re.compile(r"""(==|!=)\s*["'](async|sync|sft)["']|["'](async|sync|sft)["']\s*(==|!=)"""
                           r"""|\bin\s*[(\[{][^)\]}]*["'](async|sync)["']|\.trainer\s*(==|!=|\bin\b)""")


def test_no_trainer_name_check_outside_the_contract():
    """What a trainer can do is declared once (recipes/features/contract.py TRAINERS) and each feature declares the
    trainers it works with: a new `== "async"` (or `!= "sync"`, `in ("sync", "async")`, `.trainer ==`) in the
    recipes or the packages below them fails here. bench/ compares its own run kinds, not the recipes'."""
    found = [f"{p.relative_to(ROOT)}:{i}: {line.strip()}"
             for p in _sources(skip_features=True) if "bench" not in p.parts
             for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1) if TRAINER_CHECK.search(line)]
    assert found == []
    assert TRAINER_CHECK.search('    if tase.trainer == "async":') and TRAINER_CHECK.search('if kind != "sync"')


def test_no_module_outside_the_features_reads_their_options():
    """A feature's options (its dataclass fields) are read only by its module in recipes/features/ and the modules
    it declares as its implementation: no other module reads `args.<option>` or getattr(args, "<option>")."""
    from recipes.features import FEATURES

    names = sorted({x.name for f in FEATURES for o in (f.options, f.sft_options) if o for x in dataclasses.fields(o)})
    assert {"dynamic_sampling", "held_out_rows", "curriculum", "guidance", "cpu_bf16", "preset",
            "vllm_reload_sync", "max_train_seconds"} <= set(names)
    alt = "|".join(names)
    reads = re.compile(rf"""\.({alt})\b|getattr\([^,]+,\s*["']({alt})["']""")
    found = [f"{p.relative_to(ROOT)}:{i}: {line.strip()}"
             for p in _sources(skip_features=True)
             for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1) if reads.search(line)]
    assert found == []


def test_entry_points_fold_the_one_list():
    """grpo.run, the async main and the SFT warm-up import no feature (nor a module that implements one): they fold
    recipes.features. The warm-up keeps its old names BudgetArgs and wall_clock_stop importable (one line)."""
    from recipes.features import FEATURES

    packages = {f.name for f in FEATURES}  # each feature's package, recipes/features/<name>/
    assert {"dynamic_sampling", "heldout", "curriculum", "guidance", "vllm_cpu"} <= packages
    for path in ("recipes/grpo.py", "recipes/async_grpo/main.py", "recipes/sft_warmup.py"):
        text = (ROOT / path).read_text(encoding="utf-8")
        text = text.replace("from recipes.features.budget import BudgetArgs, wall_clock_stop  # noqa: F401", "")
        named = set()
        for module, names in re.findall(r"^\s*from recipes(?:\.([\w.]+))? import ([^\n#]+)", text, re.M):
            parts = (module or "").split(".")
            if parts[0] == "features":
                named |= set(parts[1:2]) | ({n.strip() for n in names.split(",")} & packages)
        assert named == set(), (path, named)
        assert "features." in text, path


def test_a_renamed_option_still_works_with_one_deprecation_line(tmp_path, capsys):
    """dynamic_sampling_verdict is now dynamic_sampling_granularity (one name for the reward's granularity): the old
    name, on the command line or in the YAML, still sets the option, with exactly one deprecation line on stderr; the
    new name prints none."""
    from conftest import call_main

    from recipes.grpo_core.args import parse

    cfg = tmp_path / "old.yaml"
    cfg.write_text("dynamic_sampling_verdict: coarse\n")
    note = ("dynamic_sampling_verdict is deprecated: use dynamic_sampling_granularity (the old name is accepted for "
            "one more release)")
    for argv, want, old in ((["--dynamic_sampling_verdict", "fine"], "fine", True),
                            (["--dynamic-sampling-verdict=strict"], "strict", True),
                            (["--config", str(cfg)], "coarse", True),
                            (["--dynamic_sampling_granularity", "fine"], "fine", False)):
        tase, _, _ = parse([*argv, "--output_dir", str(tmp_path / "o"), "--dry-run"])
        assert tase.dynamic_sampling_granularity == want
        err = capsys.readouterr().err
        assert [line for line in err.splitlines() if "deprecated" in line] == ([note] if old else [])
    code, err = call_main(["recipes/grpo.py", "--dynamic_sampling_verdict", "total", "--output_dir",
                           str(tmp_path / "o"), "--dry-run"])
    assert code == 2 and err.splitlines()[0] == note
    assert "--dynamic_sampling_granularity" in err.splitlines()[-1] and "invalid choice: 'total'" in err  # its new name


def test_each_feature_is_one_package_and_recipes_top_level_is_small():
    """Each listed feature is the package recipes/features/<name>/ (its adapter in __init__.py), the modules it
    declares as its implementation live in that package and nowhere else, and recipes/ keeps at most 15 modules at
    its top level (the entry points; the rest sits in sub-packages)."""
    from recipes.features import FEATURES

    for f in FEATURES:
        home = ROOT / "recipes" / "features" / f.name
        assert type(f).__module__ == f"recipes.features.{f.name}" and (home / "__init__.py").is_file(), f.name
        assert all((ROOT / m).is_file() and (ROOT / m).parent == home for m in f.modules), (f.name, f.modules)
    top = sorted(p.name for p in (ROOT / "recipes").glob("*.py"))
    assert len(top) <= 15, top
