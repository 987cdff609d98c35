"""One output rule for every command that replaces or writes into an output (issue 36, common/paths.py):
a command may replace only what it wrote itself. Each command is pointed, with --force where it has one, at
every member of a folder zoo (training run, eval run, score folder, lm-eval export, exported model,
comparison, a notes file, and each of these nested two levels down) and must exit 2 with one line and leave
every byte as it was; pointed at its own earlier output it must succeed.

The outputs in the zoo are made by the real commands (in-process `main(argv)` calls, no subprocesses); the
training run and the eval run are folders with their files (making them needs training or a model). Only
two real exports run (the zoo's model, then one --force over it) with the tiny random Llama of
tests/test_recipes.py.
"""
from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

GOOD = [{"id": f"r{i}", "task": "freq_count", "lang": "en", "type": "NUMBER", "prompt": f"How many a in {'a ' * i}?",
         "answer": str(i)} for i in (1, 2)]


def jl(recs: list[dict]) -> str:
    return "".join(json.dumps(r) + "\n" for r in recs)


def snapshot(d: Path) -> dict[str, bytes | None]:
    """Every path under `d` (hidden ones included) with its bytes (None for a folder)."""
    return {str(p.relative_to(d)): (p.read_bytes() if p.is_file() else None) for p in sorted(d.rglob("*"))}


def call(main: Callable[[list[str]], int], argv: list[str], capsys) -> tuple[int, str]:
    try:
        code = main(argv)
    except SystemExit as e:  # argparse
        code = e.code
    return code, capsys.readouterr().err


def eval_main(argv: list[str]) -> int:
    from eval.__main__ import main

    return main(argv)


def synth_main(argv: list[str]) -> int:
    from synth.__main__ import main

    return main(argv)


def export_main(argv: list[str]) -> int:
    from recipes.export import main

    return main(argv)


@pytest.fixture(scope="module")
def src(tmp_path_factory, tiny_model) -> dict[str, Path]:  # noqa: F811
    """The inputs of the commands: data, predictions, a checkpoint, two score folders to compare."""
    d = tmp_path_factory.mktemp("inputs")
    (d / "data.jsonl").write_text(jl(GOOD))
    (d / "preds.jsonl").write_text(jl([{"id": r["id"], "completion": f"<answer>{r['answer']}</answer>"}
                                       for r in GOOD]))
    ck = d / "run" / "checkpoint-1"
    shutil.copytree(tiny_model, ck)
    (ck / "trainer_state.json").write_text('{"global_step": 1, "log_history": []}')
    for name in ("s1", "s2"):
        assert eval_main(["score", "--data", str(d / "data.jsonl"), "--predictions", str(d / "preds.jsonl"),
                          "--out", str(d / name)]) == 0
    return {"data": d / "data.jsonl", "preds": d / "preds.jsonl", "ckpt": ck, "s1": d / "s1", "s2": d / "s2"}


# --- the commands: argv for an output at `out` -------------------------------------------------------------

def export_argv(s: dict[str, Path], out: Path) -> list[str]:
    return [str(s["ckpt"]), "--out", str(out), "--force"]


COMMANDS: dict[str, tuple[Callable[[list[str]], int], Callable[[dict[str, Path], Path], list[str]], str]] = {
    # name: (main, argv, what it writes: a folder it replaces, a folder it writes into, or a file)
    "export": (export_main, export_argv, "replace"),
    "export-lm-eval": (eval_main, lambda s, o: ["export-lm-eval", "--data", str(s["data"]), "--out", str(o),
                                                 "--force"], "replace"),
    "score": (eval_main, lambda s, o: ["score", "--data", str(s["data"]), "--predictions", str(s["preds"]),
                                       "--out", str(o), "--force"], "merge"),
    "compare": (eval_main, lambda s, o: ["compare", str(s["s1"]), str(s["s2"]), "--out", str(o), "--n-boot", "10"],
                "merge"),
    "synth": (synth_main, lambda s, o: ["--task", "freq_count", "--lang", "en", "-n", "2", "--no-progress",
                                        "--out", str(o)], "file"),
    "gold": (eval_main, lambda s, o: ["gold", "--data", str(s["data"]), "--out", str(o)], "file"),
    "tokstats": (eval_main, lambda s, o: ["tokstats", "--model", str(s["ckpt"]), "--data", str(s["data"]),
                                          "--out", str(o)], "merge"),
    "robustness": (eval_main, lambda s, o: ["robustness", "make", "--data", str(s["data"]), "--kinds", "case",
                                            "--out", str(o)], "merge"),
}


@pytest.fixture(scope="module")
def zoo(tmp_path_factory, src) -> Path:
    """One of each kind of output, made by the real command where that is cheap."""
    z = tmp_path_factory.mktemp("zoo")
    run = z / "training_run"
    (run / "checkpoint-2").mkdir(parents=True)
    (run / "checkpoint-2" / "trainer_state.json").write_text('{"global_step": 2}')
    (run / "trainer_state.json").write_text('{"global_step": 2}')
    (run / "metrics.jsonl").write_text('{"step": 1}\n')
    ev = z / "eval_run"
    ev.mkdir()
    (ev / "run_config.json").write_text('{"model": "m", "data": "d"}')
    (ev / "samples.jsonl").write_text('{"id": "r1", "completion": "1"}\n')
    (ev / "results.json").write_text('{"overall": 50.0}')
    shutil.copytree(src["s1"], z / "score_folder")
    assert eval_main(["export-lm-eval", "--data", str(src["data"]), "--out", str(z / "lm_eval_export")]) == 0
    assert eval_main(["compare", str(src["s1"]), str(src["s2"]), "--out", str(z / "comparison"),
                      "--n-boot", "10"]) == 0
    assert export_main([str(src["ckpt"]), "--out", str(z / "exported_model")]) == 0  # real export no. 1
    rob = z / "robustness_folder"  # `eval robustness run` keeps its `eval run` in OUT/run
    assert eval_main(["robustness", "make", "--data", str(src["data"]), "--kinds", "case", "--out", str(rob)]) == 0
    shutil.copytree(ev, rob / "run")
    (z / "notes.md").write_text("my notes\n")
    return z


FOLDERS = ["training_run", "eval_run", "score_folder", "lm_eval_export", "comparison", "exported_model",
           "robustness_folder"]
MEMBERS = FOLDERS + ["notes.md"]
OWN = {"score": "score_folder", "compare": "comparison", "export-lm-eval": "lm_eval_export",
       "export": "exported_model", "robustness": "robustness_folder"}


def place(zoo: Path, member: str, tmp: Path, nested: bool) -> Path:
    """Copy one zoo member into `tmp` (under nest/a/b/ when `nested`); the target a command is pointed at."""
    top = tmp / ("nest" if nested else member)
    dst = tmp / "nest" / "a" / "b" / member if nested else top
    dst.parent.mkdir(parents=True, exist_ok=True)
    (shutil.copytree if (zoo / member).is_dir() else shutil.copy2)(zoo / member, dst)
    return top


def cases() -> list:
    out = []
    for cmd, (_, _, _how) in COMMANDS.items():
        for member in MEMBERS:
            for nested in (False, True):
                if OWN.get(cmd) == member and not nested:
                    continue  # its own earlier output: test_own_output_is_replaced
                out.append(pytest.param(cmd, member, nested, id=f"{cmd}-{'nested-' if nested else ''}{member}"))
    return out


@pytest.mark.parametrize("cmd,member,nested", cases())
def test_never_replaces_another_output(cmd, member, nested, zoo, src, tmp_path, capsys):
    main, argv, how = COMMANDS[cmd]
    target = place(zoo, member, tmp_path, nested)
    if how == "merge" and nested and member == "notes.md":
        # a folder holding only the user's own files: score and compare write theirs beside them
        before = snapshot(tmp_path)
        code, err = call(main, argv(src, target), capsys)
        assert code == 0, err
        after = snapshot(tmp_path)
        assert all(after.get(k) == v for k, v in before.items())  # every byte kept, new files beside
        return
    before = snapshot(tmp_path)
    code, err = call(main, argv(src, target), capsys)
    assert code == 2, err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1 and err.startswith("error: "), err
    assert str(target) in err, err
    assert snapshot(tmp_path) == before
    if how == "file" and member in FOLDERS and not nested:  # a file inside another command's output
        inside = sorted(p for p in target.iterdir() if p.is_file() and p.name != ".tase-output.json")
        for f in [*inside[:2], target / "new.jsonl"]:
            code, err = call(main, argv(src, f), capsys)
            assert code == 2 and "is inside" in err and len(err.strip().splitlines()) == 1, err
            assert snapshot(tmp_path) == before


@pytest.mark.parametrize("cmd", ["export-lm-eval", "score", "compare", "synth", "gold", "tokstats", "robustness"])
def test_own_output_is_replaced(cmd, src, tmp_path, capsys):
    """A command replaces its own earlier output (made here, so this needs no zoo)."""
    main, argv, how = COMMANDS[cmd]
    out = tmp_path / ("out.jsonl" if how == "file" else "out")
    first = [a for a in argv(src, out) if a != "--force"]
    assert call(main, first, capsys)[0] == 0
    code, err = call(main, argv(src, out), capsys)
    assert code == 0, err
    if how == "merge":  # score and compare keep the user's own files beside theirs
        (out / "notes.md").write_text("mine\n")
        assert call(main, argv(src, out), capsys)[0] == 0 and (out / "notes.md").read_text() == "mine\n"


def test_export_replaces_its_own_export_and_nothing_that_joined_it(zoo, src, tmp_path, capsys):
    """Real export no. 2: --force over an earlier export succeeds; once a run, a notes file or a scored/
    folder joins that export, --force is refused and all of it stays."""
    out = tmp_path / "exported"
    shutil.copytree(zoo / "exported_model", out)
    code, err = call(export_main, export_argv(src, out), capsys)
    assert code == 0, err
    assert json.loads((out / ".tase-output.json").read_text())["command"] == "export"
    for extra in ("notes.md", "scored/results.json"):
        (out / extra).parent.mkdir(exist_ok=True)
        (out / extra).write_text("{}")
        before = snapshot(tmp_path)
        code, err = call(export_main, export_argv(src, out), capsys)
        assert code == 2 and f"--out {out} holds " in err and len(err.strip().splitlines()) == 1, err
        assert snapshot(tmp_path) == before
        shutil.rmtree(out / "scored", ignore_errors=True)
        (out / "notes.md").unlink(missing_ok=True)


def test_lm_eval_export_refuses_an_export_that_a_run_joined(zoo, src, tmp_path, capsys):
    """The issue's case: an earlier export that now also holds a run, a scored/ folder and a notes file."""
    out = tmp_path / "tasks"
    shutil.copytree(zoo / "lm_eval_export", out)
    (out / "run_config.json").write_text("{}")
    (out / "samples.jsonl").write_text("")
    shutil.copytree(zoo / "score_folder", out / "scored")
    (out / "notes.txt").write_text("mine\n")
    before = snapshot(tmp_path)
    main, argv, _ = COMMANDS["export-lm-eval"]
    code, err = call(main, argv(src, out), capsys)
    assert code == 2 and str(out) in err and len(err.strip().splitlines()) == 1, err
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize("member", ["training_run", "lm_eval_export", "comparison", "exported_model"])
def test_eval_run_never_writes_into_another_output(member, zoo, src, tmp_path, capsys):
    """`eval run` resumes its own folder; pointed at another command's output it stops before loading a model
    (a score folder has its own refusal, tests/test_eval.py)."""
    target = place(zoo, member, tmp_path, nested=False)
    before = snapshot(tmp_path)
    code, err = call(eval_main, ["run", "--model", "default", "--data", str(src["data"]), "--out", str(target),
                                 "--backend", "hf"], capsys)
    assert code == 2 and f"--out {target} is " in err and len(err.strip().splitlines()) == 1, err
    assert snapshot(tmp_path) == before


def test_demo_fresh_deletes_only_a_demo_folder(tmp_path, capsys, monkeypatch):
    """`recipes/demo.py --fresh` removes its --out whole: only when it holds nothing but what the demo writes
    (the layout DEMO_FILES lists); a notes file or an eval run two levels down stops it, untouched."""
    from common.paths import foreign_entry
    from recipes import demo

    for var in ("HF_HUB_DISABLE_PROGRESS_BARS", "HF_DATASETS_DISABLE_PROGRESS_BARS"):
        monkeypatch.setenv(var, "1")  # the demo sets these for its steps; restored after the test
    out = tmp_path / "demo"
    for f in ("sft/checkpoint-8/trainer_state.json", "grpo/metrics.jsonl", "tuned/config.json",
              "eval/base/results.json", "comparison/comparison.json", "logs/steps.log", "mixture.yaml",
              "sft_data.jsonl", ".tuned.lock"):
        (out / f).parent.mkdir(parents=True, exist_ok=True)
        (out / f).write_text("{}")
    assert foreign_entry(out, demo.DEMO_FILES) is None  # a demo folder: --fresh may delete it
    for extra in ("notes.md", "x/y/run_config.json"):
        (out / extra).parent.mkdir(parents=True, exist_ok=True)
        (out / extra).write_text("mine")
        before = snapshot(tmp_path)
        code, err = call(demo.main, ["--out", str(out), "--fresh"], capsys)
        assert code == 2 and f"--out {out} holds {extra.split('/')[0]}, which the demo did not write" in err, err
        assert len(err.strip().splitlines()) == 1 and snapshot(tmp_path) == before
        (out / extra).unlink()


def test_lm_eval_export_with_a_bytecode_cache_is_still_its_own(zoo, src, tmp_path, capsys):
    """lm-eval imports the export's utils.py and leaves __pycache__/ beside it: that is no reason to refuse."""
    out = tmp_path / "tasks"
    shutil.copytree(zoo / "lm_eval_export", out)
    (out / "__pycache__").mkdir()
    (out / "__pycache__" / "utils.cpython-311.pyc").write_bytes(b"\0")
    main, argv, _ = COMMANDS["export-lm-eval"]
    code, err = call(main, argv(src, out), capsys)
    assert code == 0, err


def test_old_outputs_without_a_marker_are_still_their_commands(zoo, src, tmp_path, capsys):
    """Outputs written before markers existed are known by their files: an lm-eval export with tase.yaml
    and utils.py, a score folder with results.json; --force replaces them as before."""
    for cmd, member in (("export-lm-eval", "lm_eval_export"), ("score", "score_folder")):
        out = tmp_path / member
        shutil.copytree(zoo / member, out)
        (out / ".tase-output.json").unlink()
        main, argv, _ = COMMANDS[cmd]
        code, err = call(main, argv(src, out), capsys)
        assert code == 0, err


def test_robustness_keeps_its_own_eval_run(zoo, src, tmp_path, capsys):
    """OUT/run is `eval robustness run`'s own `eval run`: a rerun into OUT is allowed (it resumes), while the
    same eval run anywhere else in a folder, or a robustness folder inside another, is refused."""
    out = tmp_path / "rob"
    shutil.copytree(zoo / "robustness_folder", out)
    run_before = snapshot(out / "run")
    code, err = call(eval_main, COMMANDS["robustness"][1](src, out), capsys)
    assert code == 0, err
    assert snapshot(out / "run") == run_before
    shutil.copytree(zoo / "eval_run", out / "elsewhere")
    before = snapshot(tmp_path)
    code, err = call(eval_main, COMMANDS["robustness"][1](src, out), capsys)
    assert code == 2 and "elsewhere" in err and len(err.strip().splitlines()) == 1, err
    assert snapshot(tmp_path) == before
