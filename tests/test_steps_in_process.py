"""recipes/pipeline.py's in-process steps (recipes/proof.py --in-process, issue 64): which commands run as their entry
point's `main(argv)` in the pipeline's interpreter, that such a step's exit status and failure are the subprocess's,
and that a step's working folder, sys.argv and environment do not reach the next step. The whole proof in-process is
tests/test_proof_transfer.py's tiny proof, which also runs one of its steps again as a subprocess (same bytes)."""
from __future__ import annotations

import os
import sys

import pytest

from common.errors import StepFailed
from recipes import pipeline
from recipes.pipeline import Steps, entry_main

ROOT = pipeline.ROOT
PY = sys.executable


def test_only_this_interpreter_running_a_project_entry_point_is_called_in_process():
    import eval.__main__
    import recipes.select_checkpoint
    import synth.__main__

    assert entry_main([PY, "-m", "synth", "-n", "1"], ROOT)[:2] == (synth.__main__.main, ["-n", "1"])
    assert entry_main([PY, "-m", "eval", "run"], ROOT)[0] is eval.__main__.main
    got = entry_main([PY, "recipes/select_checkpoint.py", "RUN"], ROOT)
    assert got == (recipes.select_checkpoint.main, ["RUN"], "recipes/select_checkpoint.py")
    assert entry_main([PY, str(ROOT / "recipes" / "select_checkpoint.py")], ROOT / "docs")[0] is got[0]
    for cmd in ([PY, "-m", "pip", "list"],  # not the project's
                ["/usr/bin/python3", "-m", "synth"],  # another interpreter
                ["ln", "-s", "a", "b"],  # another program
                [PY, "-c", "print(1)"],
                [PY, "recipes/no_such_recipe.py"],
                [PY, "recipes/config.py"],  # a module without main
                [PY, "-m", "recipes.no_such_module"]):  # not importable: the subprocess says why
        assert entry_main(cmd, ROOT) is None, cmd


def test_an_in_process_step_fails_as_its_subprocess_would_and_leaves_nothing_behind(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(pipeline, "_IN_PROCESS", True)
    monkeypatch.delenv("TASE_STEP_PROBE", raising=False)
    steps = Steps("t", 2, ROOT)
    out = tmp_path / "rows.jsonl"
    cwd, argv, env = os.getcwd(), list(sys.argv), dict(os.environ)
    steps(1, "rows", [PY, "-m", "synth", "--task", "component_split", "--lang", "en", "-n", "2", "--seed", "3",
                      "--subtask", "combine", "--no-progress", "--out", str(out)], stage="sets")
    assert len(out.read_text(encoding="utf-8").splitlines()) == 2 and "sets" in steps.times
    with pytest.raises(StepFailed) as e:  # argparse's exit 2, from the same interpreter
        steps(2, "bad", [PY, "-m", "synth", "--task", "component_split", "-n", "nope"])
    assert e.value.exit_code == 2 and "failed (exit 2)" in str(e.value)
    assert "argument -n/--n: invalid int value: 'nope'" in capsys.readouterr().err
    assert (os.getcwd(), sys.argv, dict(os.environ)) == (cwd, argv, env)


def test_a_step_s_environment_settings_stay_with_that_step(monkeypatch):
    from recipes.pipeline import call_in_process

    monkeypatch.delenv("TASE_STEP_PROBE", raising=False)

    def main(argv: list[str]) -> int:
        os.environ["TASE_STEP_PROBE"] = argv[0]
        assert os.getcwd() == str(ROOT / "docs") and sys.argv == ["prog.py", *argv]
        raise RuntimeError("boom")  # an uncaught exception: exit 1, as the interpreter gives it

    assert call_in_process(main, ["x"], "prog.py", ROOT / "docs") == 1
    assert "TASE_STEP_PROBE" not in os.environ
    assert call_in_process(lambda argv: sys.exit("a message"), [], "p", ROOT) == 1
    assert call_in_process(lambda argv: 0, [], "p", ROOT) == 0
