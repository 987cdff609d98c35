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
from typing import Any

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
    """The packages' Python files; without the features' (recipes/features/, each feature's package)."""
    own = set((ROOT / "recipes" / "features").rglob("*.py"))
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
    """A feature's options (its dataclass fields) are read only inside recipes/features/ (its package): no other
    module reads `args.<option>` or getattr(args, "<option>")."""
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


# the drivers that write a run's command line or read their own YAML as a user would (a flag, an arm's option)
DRIVERS = ("recipes/demo.py", "recipes/proof_stages/")


def test_no_module_outside_the_features_names_their_options():
    """No string in the code outside a feature's package (docstrings aside) is one of its option names or their
    flags (`"dynamic_sampling"`, `"--guidance"`): a dict key, a flag list or a name compared against. Only the
    DRIVERS, which build command lines and read their own YAML as a user does, may spell them."""
    import ast

    from recipes.features import FEATURES

    options = {x.name for f in FEATURES for o in (f.options, f.sft_options) if o for x in dataclasses.fields(o)}
    options |= {old for f in FEATURES for old in f.renamed}
    spelled = options | {"--" + n for n in options} | {"--" + n.replace("_", "-") for n in options}
    home = ROOT / "recipes" / "features"
    found = []
    for d in ("recipes", "eval", "launch"):
        for p in sorted((ROOT / d).rglob("*.py")):
            rel = p.relative_to(ROOT).as_posix()
            if home in p.parents or rel.startswith(DRIVERS):
                continue
            tree = ast.parse(p.read_text(encoding="utf-8"))
            docs = {id(n.body[0].value) for n in ast.walk(tree)
                    if isinstance(n, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and n.body
                    and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)}
            found += [f"{rel}:{n.lineno}: {n.value!r}" for n in ast.walk(tree)
                      if isinstance(n, ast.Constant) and id(n) not in docs and n.value in spelled]
    assert found == []
    assert all((ROOT / d).exists() for d in DRIVERS) and "--dynamic_sampling" in (ROOT / DRIVERS[0]).read_text()


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
    """Each listed feature is the package recipes/features/<name>/ (its adapter in __init__.py, its working modules
    beside it), it defines no public method the contract does not declare (a hook the folds no longer call would
    never run), and recipes/ keeps at most 15 modules at its top level (the entry points; the rest sits in
    sub-packages)."""
    from recipes.features import FEATURES, Feature

    for f in FEATURES:
        home = ROOT / "recipes" / "features" / f.name
        assert type(f).__module__ == f"recipes.features.{f.name}" and (home / "__init__.py").is_file(), f.name
        assert not (ROOT / "recipes" / f"{f.name}.py").exists() and not (ROOT / "recipes" / f.name).exists(), f.name
        extra = [n for k in type(f).__mro__[:-1] if k is not Feature and issubclass(k, Feature) for n in vars(k)
                 if not n.startswith("_") and not hasattr(Feature, n)]
        assert extra == [], (f.name, extra)
    top = sorted(p.name for p in (ROOT / "recipes").glob("*.py"))
    assert len(top) <= 15, top


def _imported_features(source: str, packages: set[str]) -> dict[str, set[str]]:
    """Feature package -> the names `source` imports from it: `import recipes.features.X[.m]`,
    `from recipes.features.X[.m] import n` (n, or the module m), `from recipes.features import X` ("" for the
    package itself)."""
    import ast

    out: dict[str, set[str]] = {}
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            mods = [(a.name, "") for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            mods = ([(f"{node.module}.{a.name}", "") for a in node.names] if node.module == "recipes.features"
                    else [(node.module, a.name) for a in node.names])
        else:
            continue
        for module, name in mods:
            parts = module.split(".")
            if parts[:2] == ["recipes", "features"] and len(parts) > 2 and parts[2] in packages:
                out.setdefault(parts[2], set()).add(".".join(parts[3:]) or name)
    return out


def test_each_feature_declares_the_features_it_imports_and_follows_them():
    """A feature that imports another feature's code declares it (`requires`), and FEATURES lists every feature
    after those it requires (their setups run first, their reward wrappers sit inside, their mixins outside):
    an undeclared cross-feature import, or a list order against the declarations, fails here."""
    from recipes.features import FEATURES

    names = [f.name for f in FEATURES]
    packages = set(names)
    source = ("from recipes.features.tracking.metrics import verdicts\nimport recipes.features.curriculum\n"
              "from recipes.features import heldout, contract")
    assert _imported_features(source, packages) == {
        "tracking": {"metrics"}, "curriculum": {""}, "heldout": {""}}  # the parser sees each way of importing
    found = {}
    for f in FEATURES:
        home = ROOT / "recipes" / "features" / f.name
        used = {other for p in home.rglob("*.py")
                for other in _imported_features(p.read_text(encoding="utf-8"), packages) if other != f.name}
        found[f.name] = used
        assert used <= set(f.requires), f"{f.name} imports {sorted(used - set(f.requires))} without `requires`"
        for other in f.requires:
            assert other in packages and names.index(other) < names.index(f.name), (f.name, other, names)
    assert found["guidance"] == {"tracking", "curriculum", "dynamic_sampling"}  # the declarations follow real imports
    assert {"curriculum", "dynamic_sampling", "reward_log"} <= {n for n, used in found.items() if "tracking" in used}


def test_no_module_outside_a_feature_imports_its_internals():
    """Outside recipes/features/<name>/, code imports the fold (recipes.features), the contract, or names a feature's
    package (its adapter) exposes; never one of the modules that implement it (tests excepted: they test them)."""
    from recipes.features import FEATURES

    packages = {f.name for f in FEATURES}
    home = ROOT / "recipes" / "features"
    found = []
    for d in ("recipes", "common", "eval", "synth", "rewards", "bench", "launch"):
        for p in sorted((ROOT / d).rglob("*.py")):
            if home in p.parents:
                continue
            for package, used in _imported_features(p.read_text(encoding="utf-8"), packages).items():
                inner = {u for u in used if u.split(".")[0] in {m.stem for m in (home / package).glob("*.py")}}
                found += [f"{p.relative_to(ROOT)}: recipes.features.{package}.{u}" for u in sorted(inner)]
    assert found == []


# one way to turn each listed feature on (a feature without a switch of its own is always on): a new feature must
# add its line here, or the test below fails
ENABLE = {"tracking": [], "presets": ["--soft_overlong", "true"], "reward_log": [], "vllm_cpu": [], "cpu_speed": [],
          "curriculum": ["--curriculum", "true", "--train_data", "synth", "--streaming", "true"],
          "heldout": ["--held_out_rows", "4", "--eval_strategy", "steps", "--eval_steps", "1"],
          "dynamic_sampling": ["--dynamic_sampling", "true"], "guidance": ["--guidance", "hint"],
          "budget": ["--max_train_seconds", "5"]}


def _dry(argv: list[str]) -> tuple[int, str, Any]:
    """What a dry run of recipes/grpo.py ARGV checks before it plans, in this process: the parse (parse-time refusals)
    and each feature's check (check-time ones). Exit code (2: refused), stderr, and the parsed run (None if refused)."""
    import contextlib
    import io

    from common.errors import TaseError
    from recipes import features
    from recipes.grpo_core.args import parse

    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        try:
            tase, cfg, model_args = parse([*argv, "--dry-run"])
            run = features.Run(tase, cfg, model_args, trainer=tase.trainer)
            features.check(run)
        except TaseError as e:
            return 2, err.getvalue() + f"error: {e}\n", None
        except SystemExit as e:
            return int(e.code or 0), err.getvalue(), None
    return 0, err.getvalue(), run


def test_every_feature_under_every_trainer_runs_whole_or_is_refused_in_one_line(tmp_path):
    """No silent skips (issue 79): each feature, enabled under each GRPO trainer, is either refused in one line (exit
    2) or planned with every run hook it needs folded by that trainer's entry point; under the SFT warm-up the same
    holds for the features whose options it takes."""
    from recipes import features

    assert set(ENABLE) == {f.name for f in features.FEATURES}
    seen = {}
    for f in features.FEATURES:
        for trainer in features.GRPO_TRAINERS:
            argv = [*ENABLE[f.name], "--trainer", trainer, "--output_dir", str(tmp_path / f"{f.name}-{trainer}")]
            code, err, run = _dry(argv)
            lines = [x for x in err.splitlines() if x.startswith("error:")]
            if code:
                assert code == 2 and len(lines) == 1 and "Traceback" not in err, (f.name, trainer, err[-1500:])
                seen[f.name, trainer] = "refused"
                continue
            assert f in features._on(run), (f.name, trainer, "enabled, accepted, and left out")
            assert f.needs(trainer) <= features.TRAINERS[trainer].folds, (f.name, trainer)
            seen[f.name, trainer] = "runs"
    for f in features.FEATURES:  # the SFT warm-up: the features whose options it parses, and those without options
        if f.sft_options or f.data_options or f.options is None:
            assert features.skipped(f, features.SFT) is None or f.refusal, f.name
    # the paper's path: what trainer: async runs, and what it refuses (docs/training.md, "Features under async")
    assert {k[0] for k, v in seen.items() if k[1] == "async" and v == "runs"} == {
        "tracking", "presets", "reward_log", "vllm_cpu", "cpu_speed", "dynamic_sampling", "budget", "heldout",
        "curriculum", "guidance"}
    assert all(v == "runs" for k, v in seen.items() if k[1] == "sync")


def test_each_trainer_declares_the_hooks_its_entry_point_folds():
    """TrainerKind.folds is what each entry point really calls (`features.<hook>(` in its source), no more and no
    less: a hook removed from a trainer's list while its entry still folds it (or the reverse) fails here."""
    from recipes.features import RUN_HOOKS, TRAINERS

    for kind in TRAINERS.values():
        text = (ROOT / kind.entry).read_text(encoding="utf-8")
        called = {h for h in RUN_HOOKS if re.search(rf"\bfeatures\.{h}\(", text)}
        assert called == set(kind.folds), (kind.name, kind.entry, called ^ set(kind.folds))


@pytest.mark.parametrize("trainer,hook,argv", [("async", "callbacks", ["--max_train_seconds", "5"]),
                                                ("async", "rollout", ["--dynamic_sampling", "true"]),
                                                ("async", "trainer_class", ["--held_out_rows", "4", "--eval_strategy",
                                                                            "steps", "--eval_steps", "1"]),
                                                ("async", "rollout", ["--curriculum", "true", "--streaming", "true"]),
                                                ("sync", "trainer_class", ["--guidance", "hint"]),
                                                ("async", "rollout", ["--guidance", "hint"])])
def test_a_hook_removed_from_a_trainer_refuses_the_features_that_need_it(tmp_path, monkeypatch, trainer, hook, argv):
    """Take `hook` out of a trainer's declared folds: a feature that needs it is refused at parse time in one line
    naming the hook (not accepted and left out)."""
    import dataclasses

    from recipes.features import TRAINERS

    monkeypatch.setitem(TRAINERS, trainer, dataclasses.replace(TRAINERS[trainer],
                                                               folds=TRAINERS[trainer].folds - {hook}))
    code, err, _ = _dry([*argv, "--trainer", trainer, "--output_dir", str(tmp_path / "o")])
    assert code == 2 and f"needs the {hook} hook(s), which trainer: {trainer} does not run" in err, err[-1500:]


def test_an_option_of_a_feature_the_trainer_does_not_run_is_one_line(tmp_path, monkeypatch):
    """A feature whose module does not declare a trainer (guidance, were it sync only): its option given under that
    trainer without the feature's switch is refused in one line naming it, not accepted and ignored."""
    from recipes.features import SYNC, feature

    monkeypatch.setattr(type(feature("guidance")), "trainers", frozenset({SYNC}))
    code, err, _ = _dry(["--guidance_schedule", "step", "--trainer", "async", "--output_dir", str(tmp_path / "o")])
    assert code == 2 and "(given: guidance_schedule)" in err and "Traceback" not in err, err[-1500:]


def test_rollout_hooks_run_in_list_order_except_before_the_features_named():
    """The async worker's hooks (recipes/features.rollout): the list's order, except that guidance's hinted retry
    moves before reward logging and dynamic sampling (they read the hinted group, as sync's guided batch), and the
    curriculum stays before it (it judges the unhinted pass)."""
    from recipes.features import feature, rollout_order

    names = ["curriculum", "reward_log", "dynamic_sampling", "guidance"]
    assert [f.name for f in rollout_order([feature(n) for n in names])] == [
        "curriculum", "guidance", "reward_log", "dynamic_sampling"]
    assert [f.name for f in rollout_order([feature(n) for n in names[:3]])] == names[:3]


@pytest.mark.parametrize("argv,why", [
    (["--cpu_shared_prefill", "false"], "cpu_shared_prefill false: trainer: async always computes"),
    (["--vllm_reload_sync", "never"], "vllm_reload_sync never: trainer: async picks its weight path itself"),
])
def test_async_refuses_what_it_would_ignore_in_one_line(tmp_path, argv, why):
    """Issue 80's "accepted and ignored" under --trainer async: a CPU option async does its own way is one line."""
    code, err, _ = _dry([*argv, "--trainer", "async", "--output_dir", str(tmp_path / "o")])
    assert code == 2 and why in err and "Traceback" not in err, err[-1500:]
