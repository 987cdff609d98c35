"""Bad input never costs data and never ends in a traceback (issue 17).

Table-driven: each case prepares a folder, runs the real CLI and asserts exit code 2, exactly one stderr line
starting with "error:" and naming the problem, and that every file that existed before is byte-identical afterwards
(and nothing was added). One case of each entry point (recipes/export.py, python -m synth, python -m eval,
recipes/grpo.py: the first, or one that takes a lock held until its process ends) runs in a subprocess, the real exit
code and the whole stderr of a fresh interpreter; the others call the same entry point's `main(argv)` in-process from
the repo root, with the environment and working folder restored afterwards (a fresh interpreter each cost 10-20 s of
start-up, mostly imports). Kill tests SIGKILL synth's writer, `eval score` and a GRPO checkpoint save at random points,
then rerun the command and check that nothing was lost.
"""
from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import FIXTURES, ROOT, call_main, entry_point
from test_recipes import TINY_ARGS  # tiny_model: the session fixture in tests/conftest.py

PY = sys.executable
OFFICIAL = f"official:{FIXTURES}"
GOOD = {"id": "r0", "task": "freq_count", "lang": "en", "type": "NUMBER", "prompt": "How many a in a a?",
        "answer": "2"}


def jl(*recs: dict) -> str:
    return "".join(json.dumps(r) + "\n" for r in recs)


def fake_checkpoint(d: Path, pickle: bool = False) -> None:
    """A folder that looks like a Trainer checkpoint (never loaded: every case fails before that)."""
    d.mkdir(parents=True)
    (d / "config.json").write_text('{"model_type": "llama"}')
    (d / ("pytorch_model.bin" if pickle else "model.safetensors")).write_bytes(b"\x00" * 64)
    (d / "trainer_state.json").write_text('{"global_step": 1}')


def run_folder(d: Path) -> None:
    fake_checkpoint(d / "checkpoint-1")
    (d / "trainer_state.json").write_text('{"global_step": 1}')
    (d / "metrics.jsonl").write_text('{"step": 1, "reward": 0.5}\n')
    (d / "notes.txt").write_text("unrelated\n")


@dataclass
class Case:
    name: str
    argv: Callable[[Path], list[str]]        # command, given the case folder
    setup: Callable[[Path], None]            # files to prepare in the case folder
    expect: str                              # a fragment of the one stderr line


def w(rel: str, text: str | bytes) -> Callable[[Path], None]:
    def f(d: Path) -> None:
        p = d / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(text if isinstance(text, bytes) else text.encode("utf-8"))
    return f


def both(*fs: Callable[[Path], None]) -> Callable[[Path], None]:
    return lambda d: [f(d) for f in fs] and None


EVAL_RUN = ["-m", "eval", "run", "--model", "default", "--no-progress"]
GRPO = ["recipes/grpo.py", "--use_cpu", "true", "--bf16", "false"]

CASES = [
    # data loss
    Case("export --force onto the run that holds the checkpoint",
         lambda d: ["recipes/export.py", str(d / "run/checkpoint-1"), "--out", str(d / "run"), "--force"],
         lambda d: run_folder(d / "run"), "contains the checkpoint being exported"),
    Case("export --force onto another training run",
         lambda d: ["recipes/export.py", str(d / "ck"), "--out", str(d / "run"), "--force"],
         both(lambda d: fake_checkpoint(d / "ck"), lambda d: run_folder(d / "run")), "holds a training run"),
    Case("synth --mixture with an unknown task over an existing file",
         lambda d: ["-m", "synth", "-n", "5", "--mixture", str(d / "mix.yaml"), "--out", str(d / "old.jsonl")],
         both(w("mix.yaml", "weights: {nope: 1}\n"), w("old.jsonl", jl(GOOD))), "unknown task(s) in weights: nope"),
    Case("synth --mixture that is not YAML",
         lambda d: ["-m", "synth", "-n", "5", "--mixture", str(d / "mix.yaml"), "--out", str(d / "old.jsonl")],
         both(w("mix.yaml", "weights: [\n"), w("old.jsonl", jl(GOOD))), "not valid YAML"),
    Case("eval score into a folder that holds scores",
         lambda d: ["-m", "eval", "score", "--data", str(d / "data.jsonl"), "--predictions", str(d / "p.jsonl"),
                    "--out", str(d / "scores")],
         both(w("data.jsonl", jl(GOOD)), w("p.jsonl", jl({"id": "r0", "completion": "2"})),
              w("scores/results.json", "{}"), w("scores/samples.jsonl", "")), "pass --force"),
    # tracebacks before
    Case("eval run on non-UTF-8 JSONL", lambda d: [*EVAL_RUN, "--data", str(d / "d.jsonl"), "--out", str(d / "o")],
         w("d.jsonl", jl(GOOD).replace("How", "caf\u00e9").encode("latin-1")), "line 1: not UTF-8 text"),
    Case("eval run with id given as a list",
         lambda d: [*EVAL_RUN, "--data", str(d / "d.jsonl"), "--out", str(d / "o")],
         w("d.jsonl", jl(GOOD, {**GOOD, "id": ["x"]})), "line 2: id must be a string, got list"),
    Case("eval run with task given as a list",
         lambda d: [*EVAL_RUN, "--data", str(d / "d.jsonl"), "--out", str(d / "o")],
         w("d.jsonl", jl({**GOOD, "task": ["freq_count"]})), "line 1: task must be a string"),
    Case("eval run with prompt null", lambda d: [*EVAL_RUN, "--data", str(d / "d.jsonl"), "--out", str(d / "o")],
         w("d.jsonl", jl({**GOOD, "prompt": None})), "line 1: prompt must be a string, got NoneType"),
    Case("eval run with a lone surrogate in a prompt",
         lambda d: [*EVAL_RUN, "--data", str(d / "d.jsonl"), "--out", str(d / "o")],
         w("d.jsonl", jl(GOOD).replace("How", "\\ud800")), "line 1: prompt holds a lone surrogate"),
    Case("grpo --tasks nope", lambda d: [*GRPO, "--tasks", "nope", "--dry-run"], lambda d: None,
         "unknown task 'nope'"),
    Case("grpo --langs fr", lambda d: [*GRPO, "--langs", "fr", "--dry-run"], lambda d: None, "unknown language 'fr'"),
    Case("grpo --num_train_examples -5", lambda d: [*GRPO, "--num_train_examples", "-5", "--dry-run"], lambda d: None,
         "num_train_examples must be an integer >= 1, got -5"),
    Case("grpo YAML tasks: 5", lambda d: [*GRPO, "--config", str(d / "c.yaml"), "--dry-run"], w("c.yaml", "tasks: 5\n"),
         "tasks expects a list, got 5"),
    Case("grpo YAML value of the wrong type", lambda d: [*GRPO, "--config", str(d / "c.yaml"), "--dry-run"],
         w("c.yaml", "learning_rate: fast\n"), "learning_rate expects a number, got 'fast'"),
    Case("grpo bad value on the command line", lambda d: [*GRPO, "--max_steps", "many", "--dry-run"], lambda d: None,
         "invalid int value: 'many'"),
    Case("grpo output_dir under a file", lambda d: [*GRPO, "--output_dir", str(d / "f" / "run"), "--max_steps", "1"],
         w("f", "a file\n"), "is a file, not a folder"),
    Case("export --out is a file", lambda d: ["recipes/export.py", str(d / "ck"), "--out", str(d / "f")],
         both(lambda d: fake_checkpoint(d / "ck"), w("f", "a file\n")), "is a file, not a folder"),
    Case("export --out under a file", lambda d: ["recipes/export.py", str(d / "ck"), "--out", str(d / "f" / "x")],
         both(lambda d: fake_checkpoint(d / "ck"), w("f", "a file\n")), "is a file, not a folder"),
    # root writes through permission bits, so "unwritable" is a name the file system refuses (too long)
    Case("export --out unwritable", lambda d: ["recipes/export.py", str(d / "ck"), "--out", str(d / ("x" * 300))],
         lambda d: fake_checkpoint(d / "ck"), "cannot write there"),
    # a name longer than the file system allows (ENAMETOOLONG): tracebacks before, from os.stat
    Case("grpo output_dir with a name too long", lambda d: [*GRPO, "--output_dir", str(d / ("x" * 300) / "run"),
                                                           "--max_steps", "1"], lambda d: None,
         "x" * 300 + " is a name longer than the file system allows"),
    Case("synth --out with a name too long",
         lambda d: ["-m", "synth", "-n", "2", "--out", str(d / ("x" * 300) / "a.jsonl")],
         lambda d: None, "is a name longer than the file system allows"),
    Case("eval run --out with a name too long", lambda d: [*EVAL_RUN, "--data", str(d / "d.jsonl"), "--out",
                                                          str(d / ("x" * 300))], w("d.jsonl", jl(GOOD)),
         "x" * 300 + ": a name longer than the file system allows"),
    # silent before
    Case("eval run on a record with an unknown type",
         lambda d: [*EVAL_RUN, "--data", str(d / "d.jsonl"), "--out", str(d / "o")],
         w("d.jsonl", jl(GOOD, {**GOOD, "id": "r1", "type": "COUNT"})), "line 2: unknown type 'COUNT'"),
    Case("eval compare on a corrupt samples.jsonl",
         lambda d: ["-m", "eval", "compare", str(d / "a"), str(d / "b"), "--out", str(d / "cmp")],
         both(*(w(f"{x}/results.json", json.dumps({"overall": 0, "by_task": {}, "by_lang": {}, "micro": {}, "n": 1}))
                for x in "ab"), w("a/samples.jsonl", "garbage\n"), w("b/samples.jsonl", "garbage\n")),
         "line 1: not JSON (Expecting value); the file is damaged or not an `eval` samples file"),
    Case("grpo output_dir that holds a run, not resuming",
         lambda d: [*GRPO, "--output_dir", str(d / "run"), "--max_steps", "1"], lambda d: run_folder(d / "run"),
         "already holds a training run"),
    # pickles
    Case("eval run on a model folder with only pytorch_model.bin",
         lambda d: [*EVAL_RUN[:3], "--model", str(d / "m"), "--data", str(d / "d.jsonl"), "--out", str(d / "o")],
         both(lambda d: fake_checkpoint(d / "m", pickle=True), w("d.jsonl", jl(GOOD))), "no safetensors weights"),
    Case("export of a checkpoint with only pytorch_model.bin",
         lambda d: ["recipes/export.py", str(d / "m"), "--out", str(d / "x")],
         lambda d: fake_checkpoint(d / "m", pickle=True), "no safetensors weights"),
]


def snapshot(d: Path) -> dict[str, bytes]:
    return {str(p.relative_to(d)): p.read_bytes() for p in sorted(d.rglob("*")) if p.is_file()}


# cases that take a lock held until their process ends (recipes/shared/run_dir.hold_output_dir): never in-process
PROCESS_LOCK = ["grpo output_dir that holds a run, not resuming"]
# one case per entry point runs as a real subprocess (see the module docstring): the locking one, else the first
IN_SUBPROCESS = {next(n for n in [*PROCESS_LOCK, *(c.name for c in CASES)]
                      if entry_point(next(c for c in CASES if c.name == n).argv(Path("d")))[0] == m)
                 for m in {entry_point(c.argv(Path("d")))[0] for c in CASES}}


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory) -> dict[str, tuple]:
    """Run every case once: one per entry point as subprocesses (all at once), the rest in-process meanwhile;
    per case: (returncode, stderr, files before, files after)."""
    base = tmp_path_factory.mktemp("bad_inputs")
    folders, before, procs, done = {}, {}, {}, {}
    for k, case in enumerate(CASES):
        d = folders[case.name] = base / f"case{k}"
        d.mkdir()
        case.setup(d)
        before[case.name] = snapshot(d)
    try:
        for case in CASES:  # started first: they inherit the environment untouched by the in-process calls
            if case.name in IN_SUBPROCESS:
                procs[case.name] = subprocess.Popen([PY, *case.argv(folders[case.name])], cwd=ROOT, text=True,
                                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        for case in CASES:
            if case.name not in IN_SUBPROCESS:
                done[case.name] = call_main(case.argv(folders[case.name]))
        for name, proc in procs.items():
            _, err = proc.communicate(timeout=600)
            done[name] = proc.returncode, err
    finally:
        for proc in procs.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    return {c.name: (*done[c.name], before[c.name], snapshot(folders[c.name])) for c in CASES}


def test_each_entry_point_has_one_bad_input_case_in_a_subprocess():
    assert set(PROCESS_LOCK) <= IN_SUBPROCESS
    assert sorted(entry_point(c.argv(Path("d")))[0] for c in CASES if c.name in IN_SUBPROCESS) == [
        "eval.__main__", "recipes.export", "recipes.grpo", "synth.__main__"]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_bad_input_is_one_line_and_loses_nothing(case: Case, outcomes):
    code, err, before, after = outcomes[case.name]
    assert code == 2, err[-2000:]
    assert len(err.splitlines()) == 1 and err.startswith("error: "), err[-2000:]
    assert case.expect in err, err
    assert after.keys() == before.keys(), set(after) ^ set(before)  # nothing added, nothing removed
    changed = [k for k in before if before[k] != after[k]]
    assert not changed, changed


def test_score_keeps_a_lone_surrogate_escaped_and_reports_invalid_rows(tmp_path):
    """A completion with a lone surrogate is scored and kept (escaped); an unscorable row is counted by
    reason in results.json and on stderr instead of silently lowering the score."""
    data = tmp_path / "d.jsonl"
    data.write_text(jl(GOOD, {"id": "g", "task": "sentence_length", "lang": "en", "type": "LENGTH",
                              "prompt": "Write some words.", "answer": ""}))
    preds = tmp_path / "p.jsonl"
    preds.write_text(jl({"id": "r0", "completion": "<answer>2</answer> \ud800"}, {"id": "g", "completion": "a b"}))
    out = tmp_path / "s"
    res = subprocess.run([PY, "-m", "eval", "score", "--data", str(data), "--predictions", str(preds), "--out",
                          str(out)], cwd=ROOT, capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    assert "1 of 2 rows are invalid" in res.stderr and "LENGTH prompt without an integer target (1)" in res.stderr
    samples = [json.loads(l) for l in (out / "samples.jsonl").read_text(encoding="utf-8").splitlines()]
    assert samples[0]["completion"] == "<answer>2</answer> \ud800" and samples[0]["coarse"] == 1.0
    results = json.loads((out / "results.json").read_text())
    assert results["invalid_by_reason"] == {"LENGTH prompt without an integer target": 1}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["d.jsonl", "p.jsonl", "s"]  # no temp left behind
    again = subprocess.run([PY, "-m", "eval", "score", "--data", str(data), "--predictions", str(preds), "--out",
                            str(out), "--force"], cwd=ROOT, capture_output=True, text=True)
    assert again.returncode == 0 and (out / "samples.jsonl").read_text(encoding="utf-8").count("\n") == 2


def kill_at(cmd: list[str], delay: float) -> int | None:
    """Start `cmd`, SIGKILL it after `delay` seconds; the return code, or None when it was killed."""
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        return proc.wait(timeout=delay)
    except subprocess.TimeoutExpired:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        return None


def timed(cmd: list[str]) -> float:
    t = time.perf_counter()
    subprocess.run(cmd, cwd=ROOT, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - t


KILLS = 6  # random kill points per writer


def test_killed_synth_leaves_the_old_file(tmp_path):
    out = tmp_path / "train.jsonl"
    ref = tmp_path / "ref.jsonl"
    # one task (its three languages): the file is written over ~2 s of a ~3 s run (start-up ~1 s), so most random
    # kill points still fall inside the write. `--task all` spent ~10 s a run building every task's tables (the
    # test makes about five runs' worth); the atomic write is the same whatever the task.
    cmd = [PY, "-m", "synth", "--task", "component_count", "--lang", "all", "-n", "1500", "--seed", "5",
           "--no-progress"]
    full = timed([*cmd, "--out", str(ref)])
    old = jl(GOOD).encode()
    out.write_bytes(old)
    rng = random.Random(17)
    killed = tries = 0
    while tries < KILLS or (killed < KILLS // 2 and tries < 3 * KILLS):  # load varies: more draws, same checks
        tries += 1
        rc = kill_at([*cmd, "--out", str(out)], rng.uniform(0.05, full))
        now = out.read_bytes()
        assert now in (old, ref.read_bytes())  # never partial: killed before the rename, or after it (exiting)
        if rc is None:
            killed += 1
        else:
            assert rc == 0 and now == ref.read_bytes()
        out.write_bytes(old)
    print(f"synth: {killed} of {tries} runs killed mid-way, old file intact every time")
    assert killed >= KILLS // 2
    subprocess.run([*cmd, "--out", str(out)], cwd=ROOT, check=True)
    assert out.read_bytes() == ref.read_bytes()


def test_killed_score_leaves_the_old_scores(tmp_path):
    preds = tmp_path / "gold.jsonl"
    subprocess.run([PY, "-m", "eval", "gold", "--data", OFFICIAL, "--out", str(preds)], cwd=ROOT, check=True,
                   capture_output=True)
    wrong = tmp_path / "wrong.jsonl"
    wrong.write_text("".join(json.dumps({"id": json.loads(l)["id"], "completion": "no idea"}) + "\n"
                             for l in preds.read_text(encoding="utf-8").splitlines()))
    out = tmp_path / "scores"
    score = [PY, "-m", "eval", "score", "--data", OFFICIAL, "--out", str(out), "--force"]
    subprocess.run([*score, "--predictions", str(wrong)], cwd=ROOT, check=True, capture_output=True)
    (out / "notes.md").write_text("mine\n")
    old = snapshot(out)
    full = timed([*score, "--predictions", str(preds)])
    new = snapshot(out)
    assert json.loads(new["results.json"])["overall"] == 100.0 and new["notes.md"] == b"mine\n"
    rng = random.Random(23)
    killed = tries = 0
    while tries < KILLS or (killed < 2 and tries < 3 * KILLS):  # load varies: more draws, same checks
        tries += 1
        subprocess.run([*score, "--predictions", str(wrong)], cwd=ROOT, check=True, capture_output=True)
        rc = kill_at([*score, "--predictions", str(preds)], rng.uniform(0.4, 0.95) * full)  # start-up is most of it
        aside = list(tmp_path.glob(".scores.old-*/scores"))
        now = snapshot(out) if out.exists() else snapshot(aside[0])  # killed between the two renames
        if rc is None:
            killed += 1
        def strip(s: dict) -> dict:  # versions/timing-free compare
            return {k: v for k, v in s.items() if k != "results.json"}
        assert strip(now) in (strip(old), strip(new)), sorted(now)
        assert json.loads(now["results.json"])["overall"] == json.loads(
            (old if strip(now) == strip(old) else new)["results.json"])["overall"]
        t = time.perf_counter()
        res = subprocess.run([*score, "--predictions", str(preds)], cwd=ROOT, capture_output=True, text=True)
        # the kill points are drawn within the quickest whole run seen: one slow first measure (the other worker
        # busy) once put every kill after the run's end (0 of 18 killed)
        full = min(full, time.perf_counter() - t)
        assert res.returncode == 0, res.stderr  # the rerun finishes the job
        assert strip(snapshot(out)) == strip(new)
    print(f"score: {killed} of {tries} runs killed mid-way, old or new scores whole every time")
    assert killed >= 2  # the others finished first: timing on a loaded machine varies
    assert not list(tmp_path.glob(".scores.*"))


@pytest.mark.slow
def test_kill_during_checkpoint_save_resumes_from_last_complete(tiny_model, tmp_path):
    model = tiny_model
    out = tmp_path / "run"
    cmd = [PY, "recipes/grpo.py", "--model_name_or_path", str(model), "--output_dir", str(out), "--max_steps", "3",
           "--save_steps", "1", *TINY_ARGS, "--resume_from_checkpoint", "true",
           "--keep_optimizer_state", "true"]  # the last case below makes the finished run look killed before its end
    rng = random.Random(5)
    for target in (2, 3):
        proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.time() + 600
        while not (out / f"checkpoint-{target}").exists():  # the save of this step has begun
            assert proc.poll() is None and time.time() < deadline, proc.stderr.read().decode()[-2000:]
            time.sleep(0.01)
        time.sleep(rng.uniform(0, 0.3))
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    res = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert res.returncode == 0, res.stderr[-3000:]
    assert "resuming from" in res.stderr or "no complete checkpoint" in res.stderr
    state = json.loads((out / "checkpoint-3" / "trainer_state.json").read_text())
    assert [h["step"] for h in state["log_history"] if "reward" in h] == [1, 2, 3]  # nothing lost or repeated
    logged = [json.loads(l) for l in (out / "metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in logged if "reward" in m] == [1, 2, 3]  # the killed runs' later steps trimmed
    again = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=900)  # a finished run: no step 4
    assert again.returncode == 0 and "nothing to do" in again.stdout, again.stderr[-2000:]
    assert not (out / "checkpoint-4").exists()
    assert [json.loads(l)["step"] for l in (out / "metrics.jsonl").read_text().splitlines()][-1] == 3
    # A kill after checkpoint-3's save and before the final one (what CI once hit by chance: a step 4 was
    # trained and logged): the resume saves checkpoint-3 as it is, with no step past max_steps.
    (out / "model.safetensors").unlink()
    (out / "trainer_state.json").unlink(missing_ok=True)  # absent when the kill fell inside the final save
    last = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert last.returncode == 0 and "nothing left to train" in last.stdout, last.stderr[-2000:]
    logged = [json.loads(l) for l in (out / "metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in logged if "reward" in m] == [1, 2, 3]
    assert json.loads((out / "trainer_state.json").read_text())["global_step"] == 3
    from safetensors.torch import load_file

    final, ckpt = load_file(out / "model.safetensors"), load_file(out / "checkpoint-3" / "model.safetensors")
    assert final.keys() == ckpt.keys() and all(final[k].equal(ckpt[k]) for k in final)



def test_checkpoint_completeness_catches_every_torn_file(tmp_path):
    """Whichever file a kill tears (weights, optimizer, scheduler, RNG state, trainer state), the
    checkpoint is reported incomplete; whole ones pass. Real safetensors and torch.save files."""
    import shutil

    import torch
    from safetensors.torch import save_file

    from recipes.shared import run_dir

    good = tmp_path / "checkpoint-2"
    good.mkdir()
    save_file({"w": torch.randn(64, 64)}, str(good / "model.safetensors"))
    torch.save({"state": {0: {"exp_avg": torch.randn(64, 64)}}}, good / "optimizer.pt")
    torch.save({"last_epoch": 2}, good / "scheduler.pt")
    torch.save({"python": list(range(100))}, good / "rng_state.pth")
    (good / "trainer_state.json").write_text(json.dumps({"global_step": 2, "log_history": []}))
    assert run_dir.checkpoint_problem(good) is None
    for name, why in (("model.safetensors", "incomplete"), ("optimizer.pt", "optimizer.pt"),
                      ("scheduler.pt", "scheduler.pt"), ("rng_state.pth", "rng_state.pth"),
                      ("trainer_state.json", "trainer_state.json")):
        for cut in (0.5, 0.99):
            bad = tmp_path / f"checkpoint-3-{name}-{cut}"
            shutil.copytree(good, bad)
            data = (bad / name).read_bytes()
            (bad / name).write_bytes(data[: int(len(data) * cut)])
            assert why in (run_dir.checkpoint_problem(bad) or ""), (name, cut)
    (tmp_path / "run").mkdir()
    shutil.copytree(good, tmp_path / "run" / "checkpoint-2")
    torn = tmp_path / "run" / "checkpoint-3"
    shutil.copytree(good, torn)
    (torn / "trainer_state.json").unlink()
    assert run_dir.resolve_resume(str(tmp_path / "run"), "true") == str(tmp_path / "run" / "checkpoint-2")
    assert (tmp_path / "run" / "checkpoint-3.incomplete").is_dir() and not torn.exists()


def test_swap_in_keeps_the_users_files_in_out_when_killed_after_the_swap(tmp_path, monkeypatch):
    """A kill right after the new folder took `out`'s place (before the old one was cleared) must not leave
    `out` without the user's own files (the CI once caught `notes.md` missing there)."""
    from eval import runner

    out, new = tmp_path / "scores", tmp_path / "new"
    out.mkdir()
    new.mkdir()
    (out / "results.json").write_text("old")
    (out / "notes.md").write_text("mine\n")
    (new / "results.json").write_text("new")
    real, done = os.replace, []

    def replace(a, b):
        real(a, b)
        done.append(b)
        if Path(b) == out:
            raise KeyboardInterrupt  # "killed" here
    monkeypatch.setattr(runner.os, "replace", replace)
    with pytest.raises(KeyboardInterrupt):
        runner.swap_in(new, out)
    assert (out / "results.json").read_text() == "new" and (out / "notes.md").read_text() == "mine\n"
    monkeypatch.setattr(runner.os, "replace", real)
    runner.recover_swap(out)  # what the next run does first: clears the old folder, keeps everything
    assert sorted(p.name for p in tmp_path.iterdir()) == ["scores"]
    assert (out / "notes.md").read_text() == "mine\n"
