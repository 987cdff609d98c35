"""recipes/steps/pipeline.py's in-process steps (recipes/proof.py --in-process, issue 64): which commands run as their
entry point's `main(argv)` in the pipeline's interpreter, that such a step's exit status and failure are the
subprocess's, and that a step's working folder, sys.argv and environment do not reach the next step. The whole proof
in-process is tests/test_proof_transfer.py's tiny proof, which also runs one of its steps again as a subprocess (same
bytes)."""
from __future__ import annotations

import os
import sys

import pytest
from conftest import tree_env

from common.errors import StepFailed
from recipes.steps import pipeline
from recipes.steps.pipeline import Steps, entry_main

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
                [PY, "recipes/shared/config.py"],  # a module without main
                [PY, "-m", "recipes.no_such_module"]):  # not importable: the subprocess says why
        assert entry_main(cmd, ROOT) is None, cmd


def test_looking_at_a_command_has_no_effect_on_this_interpreter():
    """entry_main looked `python -m pip ...` up with importlib.util.find_spec; looking pip up turns setuptools'
    distutils shim off for the rest of the process, so TRL's trainer (torch.utils.cpp_extension imports setuptools) then
    failed to import in that interpreter (`AssertionError: .../distutils/core.py`): a later in-process step, or in the
    test suite the next test file on the same worker. A module outside the project is not looked up at all now. In a
    fresh interpreter, which holds the shim as every process starts."""
    import subprocess

    code = ("import sys\nfrom recipes.steps.pipeline import ROOT, entry_main\n"
            "assert entry_main([sys.executable, '-m', 'pip', 'list'], ROOT) is None\nimport setuptools\nprint('ok')")
    res = subprocess.run([PY, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120, env=tree_env())
    assert res.returncode == 0 and res.stdout == "ok\n", res.stderr[-2000:]


def test_an_in_process_step_fails_as_its_subprocess_would_and_leaves_nothing_behind(tmp_path, capfd, monkeypatch):
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
    assert "argument -n/--n: invalid int value: 'nope'" in capfd.readouterr().err  # the step's own fd 2
    assert (os.getcwd(), sys.argv, dict(os.environ)) == (cwd, argv, env)


def test_a_step_s_environment_settings_stay_with_that_step(monkeypatch):
    from recipes.steps.pipeline import call_in_process

    monkeypatch.delenv("TASE_STEP_PROBE", raising=False)

    def main(argv: list[str]) -> int:
        os.environ["TASE_STEP_PROBE"] = argv[0]
        assert os.getcwd() == str(ROOT / "docs") and sys.argv == ["prog.py", *argv]
        raise RuntimeError("boom")  # an uncaught exception: exit 1, as the interpreter gives it

    assert call_in_process(main, ["x"], "prog.py", ROOT / "docs") == 1
    assert "TASE_STEP_PROBE" not in os.environ
    assert call_in_process(lambda argv: sys.exit("a message"), [], "p", ROOT) == 1
    assert call_in_process(lambda argv: 0, [], "p", ROOT) == 0


def test_an_in_process_step_s_library_logs_go_to_the_log_file_as_a_subprocess_s_do(tmp_path):
    """`make demo` runs its steps in-process: what run_filtered keeps out of the terminal for a subprocess (the listed
    harmless library lines, from Python's logging and warnings or from C code writing to fd 2) must stay out of it
    in-process too, while progress bars, results, errors and unknown warnings reach it. In a process of its own:
    pytest's capture replaces sys.stderr, which in the demo writes to fd 2."""
    import subprocess

    script = """if True:
        import logging, os, sys, warnings
        from pathlib import Path
        from recipes.steps.pipeline import filtered_output

        print("before", flush=True)
        with filtered_output(Path(sys.argv[1]), ["step"]):
            logging.basicConfig(format="%(levelname)s %(asctime)s [x.py:1] %(message)s", datefmt="%m-%d %H:%M:%S",
                                level=logging.INFO)
            logging.getLogger("lib").info("library note")
            logging.getLogger("lib").warning("library warning nobody listed")
            warnings.warn_explicit("`torch.distributed.reduce_op` is deprecated", FutureWarning, "lib.py", 3)
            os.write(2, b"(EngineCore pid=7) WARNING 11-24 17:00:06 [cpu.py:1] Triton is not installed. triton-cpu "
                        b"is expected on x86 CPUs.\\n")
            sys.stderr.write("step 1/2\\rstep 2/2\\n")
            sys.stderr.flush()
            print("error: real trouble", file=sys.stderr)
            print("result 42")
        print("after")
    """
    log = tmp_path / "steps.log"
    p = subprocess.run([PY, "-c", script, str(log)], cwd=ROOT, capture_output=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert p.stdout == b"before\nresult 42\nafter\n"
    assert p.stderr.endswith(b"step 1/2\rstep 2/2\nerror: real trouble\n")  # bytes: a bar's \r kept
    assert p.stderr.count(b"\n") == 3 and b"library warning nobody listed" in p.stderr  # unknown: shown
    kept = log.read_text()
    assert "+ step" in kept and "library note" in kept and "FutureWarning: `torch.distributed" in kept
    assert "Triton is not installed" in kept and "nobody listed" not in kept


def test_an_in_process_step_with_a_log_folder_still_prints_its_results_and_errors(tmp_path, capfd, monkeypatch):
    monkeypatch.setattr(pipeline, "_IN_PROCESS", True)
    steps = Steps("t", 2, ROOT, log_dir=tmp_path / "logs")
    out = tmp_path / "rows.jsonl"
    steps(1, "rows", [PY, "-m", "synth", "--task", "component_split", "--lang", "en", "-n", "2", "--seed", "3",
                      "--subtask", "combine", "--no-progress", "--out", str(out)])
    with pytest.raises(StepFailed) as e:
        steps(2, "bad", [PY, "-m", "synth", "--task", "component_split", "-n", "nope"])
    assert e.value.exit_code == 2 and f"library logs in {tmp_path / 'logs' / 'steps.log'}" in str(e.value)
    got, err = capfd.readouterr()
    assert "== 1/2 rows" in got and str(out) in got  # synth's own line naming what it wrote
    assert "argument -n/--n: invalid int value: 'nope'" in err
    assert "invalid int value" not in (tmp_path / "logs" / "steps.log").read_text()


GRPO_ARGS = ["--max_steps", "2", "--save_strategy", "no", "--reward_funcs", "tests.user_rewards:counted",
             "tests.user_rewards:torch_threads", "--format_reward", "false", "--use_cpu", "true", "--bf16", "false",
             "--dtype", "float32",
             "--tasks", "freq_count", "--langs", "en", "--max_len", "6", "--num_train_examples", "8",
             "--num_generations", "2", "--per_device_train_batch_size", "4", "--max_completion_length", "8",
             "--logging_steps", "1", "--report_to", "none", "--learning_rate", "1e-3", "--seed", "0",
             "--gradient_checkpointing", "false"]


def rewards(out) -> list[dict]:
    """Each logged step's reward columns (metrics.jsonl), as the run wrote them."""
    import json

    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text(encoding="utf-8").splitlines()]
    return [{k: v for k, v in r.items() if "reward" in k or k == "step"} for r in rows if "reward" in r]


@pytest.mark.slow
def test_in_process_steps_give_the_bytes_of_fresh_interpreters(tiny_model, tmp_path):
    """Issue 80: an in-process `eval run --threads 1` left torch on 1 thread for the next GRPO step (its weights
    differed from the subprocess run's in 594,391 elements), and a user reward module's module-level state went on
    from one step to the next (rewards 1.05/2.05 where the subprocess gives 0.05/1.05). A pipeline running
    `eval run --threads 1`, then the same 2-step GRPO run twice with a stateful user reward, in-process; each run's
    weights and rewards must be those of the same command in a fresh interpreter, byte for byte. A second user
    reward scores torch's thread count in the step's process: the tiny model's weights alone did not show it."""
    import subprocess

    grpo = [PY, "recipes/grpo.py", "--model_name_or_path", str(tiny_model), *GRPO_ARGS]
    driver = f"""if True:
        import sys
        from pathlib import Path
        from recipes.steps import pipeline
        pipeline.run_in_process()
        steps = pipeline.Steps("t", 4, pipeline.ROOT)
        steps(1, "rows", [sys.executable, "-m", "synth", "--task", "freq_count", "--lang", "en", "-n", "2",
                          "--no-progress", "--out", {str(tmp_path / "rows.jsonl")!r}])
        steps(2, "eval", [sys.executable, "-m", "eval", "run", "--model", {str(tiny_model)!r}, "--threads", "1",
                          "--backend", "hf", "--data", {str(tmp_path / "rows.jsonl")!r}, "--max-new-tokens", "4",
                          "--no-progress", "--out", {str(tmp_path / "eval")!r}])
        for k, name in ((3, "a"), (4, "b")):
            steps(k, name, [*{grpo!r}, "--output_dir", str(Path({str(tmp_path)!r}) / name)])
    """
    res = subprocess.run([PY, "-c", driver], cwd=ROOT, capture_output=True, text=True, timeout=900, env=tree_env())
    assert res.returncode == 0, res.stderr[-3000:]
    assert (tmp_path / "eval" / "results.json").is_file()
    res = subprocess.run([*grpo, "--output_dir", str(tmp_path / "fresh")], cwd=ROOT, capture_output=True, text=True,
                         timeout=900, env=tree_env())
    assert res.returncode == 0, res.stderr[-3000:]
    fresh = (tmp_path / "fresh" / "model.safetensors").read_bytes()
    for name in ("a", "b"):
        assert rewards(tmp_path / name) == rewards(tmp_path / "fresh"), name
        assert (tmp_path / name / "model.safetensors").read_bytes() == fresh, name
    assert rewards(tmp_path / "fresh")[0]["rewards/counted/mean"] < 1  # the first batch a fresh module scores
