"""Nothing lost, nothing silent (issue 30): each case of the issue, as a test.

Most cases call the real entry points in-process (`eval.__main__.main`, `synth.__main__.main`, the recipes'
`main`) and check the exit code, the one stderr line and that nothing was lost; a subprocess is used where
another process is the point (the write lock) or where the exit code of the real CLI is.
"""
from __future__ import annotations

import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import FIXTURES, ROOT

PY = sys.executable
GOOD = {"id": "r0", "task": "freq_count", "lang": "en", "type": "NUMBER", "prompt": "How many a in a a?",
        "answer": "2"}


def jl(*recs: dict) -> str:
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in recs)


def snapshot(d: Path) -> dict[str, bytes]:
    return {str(p.relative_to(d)): p.read_bytes() for p in sorted(d.rglob("*")) if p.is_file()}


def one_line(err: str, fragment: str) -> None:
    """Exactly one stderr line, starting with "error:" and containing `fragment`, no traceback."""
    assert "Traceback" not in err, err[-2000:]
    assert len(err.strip().splitlines()) == 1 and err.startswith("error: "), err[-2000:]
    assert fragment in err, err


def eval_main(argv: list[str], capsys) -> tuple[int, str]:
    from eval.__main__ import main

    try:
        code = main(argv)
    except SystemExit as e:  # argparse
        code = e.code
    return code, capsys.readouterr().err


def recipe_main(script: str, argv: list[str], capsys) -> tuple[int, str]:
    import importlib

    mod = importlib.import_module(f"recipes.{script}")
    try:
        code = mod.main(argv)
    except SystemExit as e:
        code = e.code
    return code, capsys.readouterr().err


# --- rewards: a 0.0 always means a wrong answer ------------------------------------------------------------

def tag(s: str) -> str:
    return f"<answer>{s}</answer>"


REWARD_CASES = [
    ("answer column missing", None, [tag("5")], dict(type=["NUMBER"]), "no `answer` column"),
    ("short answer column", None, [tag("5"), tag("6")], dict(type=["NUMBER"] * 2, answer=["5"]),
     "`answer` column has 1 values for 2"),
    ("answer column not a list", None, [tag("5")], dict(type=["NUMBER"], answer="5"), "`answer` column has a str"),
    ("short question column", None, [tag("a b")] * 2, dict(type=["LENGTH"] * 2, answer=["", ""], question=["q"]),
     "`question` column has 1 values"),
    ("prompts shorter than completions", ["p"], [tag("5"), tag("6")], dict(type=["NUMBER"] * 2, answer=["5", "6"]),
     "prompts has 1 values for 2"),
    ("prompts None for LENGTH", None, [tag("a b")], dict(type=["LENGTH"], answer=[""]),
     "row 0 (LENGTH) has no question"),
    ("prompt None for SHUFFLE", [None], [tag("b a")], dict(type=["SHUFFLE"], answer=[""]),
     "row 0 (SHUFFLE) has no question"),
    ("completion one list too deep", None, [[tag("5")]], dict(type=["NUMBER"], answer=["5"]), "one list too deep"),
    ("completion None", None, [None], dict(type=["NUMBER"], answer=["5"]), "completion 0 is a NoneType"),
    ("completions a string", None, tag("5"), dict(type=["NUMBER"], answer=["5"]), "completions must be a list"),
]


@pytest.mark.parametrize("prompts,comps,cols,msg", [c[1:] for c in REWARD_CASES], ids=[c[0] for c in REWARD_CASES])
def test_accuracy_rewards_refuse_batches_that_would_score_zero(prompts, comps, cols, msg):
    from rewards import get_reward_funcs
    from rewards.trl import RewardInputError

    for f in get_reward_funcs(["accuracy_coarse", "accuracy_fine"]):
        with pytest.raises(RewardInputError, match=msg.replace("(", r"\(").replace(")", r"\)")) as e:
            f(prompts, comps, **cols)
        assert "\n" not in str(e.value)


def test_format_and_length_rewards_check_completion_shape():
    from rewards import get_reward_funcs
    from rewards.trl import RewardInputError, make_length_penalty

    for f in [*get_reward_funcs(["format", "length_penalty"]), make_length_penalty(10, 20)]:
        with pytest.raises(RewardInputError, match="one list too deep"):
            f(None, [[tag("5")]])
        with pytest.raises(RewardInputError, match="completions must be a list"):
            f(None, tag("5"))


def test_well_formed_batches_still_score():
    """The checks refuse only what would have been a silent zero: the same batches, whole, score as before."""
    from rewards import get_reward_funcs

    coarse, fine, fmt = get_reward_funcs(["accuracy_coarse", "accuracy_fine", "format"])
    assert coarse(None, [tag("5")], type=["NUMBER"], answer=["5"]) == [1.0]
    assert coarse(None, [tag("4")], type=["NUMBER"], answer=["5"]) == [0.0]  # a wrong answer: 0
    chat = [{"role": "user", "content": "Please generate 2 English words."}]
    msgs = [[{"role": "assistant", "content": tag("a b")}]]
    assert fine([chat], msgs, type=["LENGTH"]) == [1.0]  # LENGTH reads no answer column
    assert coarse(None, [tag("a b")], type=["LENGTH"], question=["Please generate 2 English words."]) == [1.0]
    assert fmt(None, msgs) == [1.0]


# --- one write lock per output ----------------------------------------------------------------------------

HOLD = ("import sys, time\nfrom common.paths import hold_output\nwith hold_output(sys.argv[1]):\n"
        "    print('held', flush=True)\n    time.sleep(float(sys.argv[2]))\n")


def holder(out: Path, seconds: float = 60) -> subprocess.Popen:
    """Another process holding `out`'s write lock (the real helper, in a real second process)."""
    p = subprocess.Popen([PY, "-c", HOLD, str(out), str(seconds)], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "held"
    return p


def test_second_writer_is_refused_naming_the_first_then_the_lock_goes_stale(tmp_path, capsys):
    data, preds, out = tmp_path / "d.jsonl", tmp_path / "p.jsonl", tmp_path / "scores"
    data.write_text(jl(GOOD))
    preds.write_text(jl({"id": "r0", "completion": tag("2")}))
    argv = ["score", "--data", str(data), "--predictions", str(preds), "--out", str(out)]
    p = holder(out)
    try:
        code, err = eval_main(argv, capsys)
        one_line(err, f"is being written by process {p.pid}")
        assert code == 2 and not out.exists()
        for args in (["-m", "synth", "-n", "1", "--task", "freq_count", "--lang", "en", "--out", str(out)],):
            res = subprocess.run([PY, *args], cwd=ROOT, capture_output=True, text=True)
            assert res.returncode == 2
            one_line(res.stderr, f"process {p.pid}")
    finally:
        p.kill()  # killed, not released: its lock file stays, and is stale
        p.wait()
    assert (tmp_path / ".scores.lock").exists()
    code, err = eval_main(argv, capsys)
    assert code == 0, err
    assert [json.loads(x)["id"] for x in (out / "samples.jsonl").read_text().splitlines()] == ["r0"]
    assert not (tmp_path / ".scores.lock").exists()


def test_lock_is_reentrant_and_a_refused_command_adds_no_folders(tmp_path):
    from common.paths import OutputBusy, hold_output

    with hold_output(tmp_path / "o"), hold_output(tmp_path / "o"):  # the CLI and the library both take it
        pass
    deep = tmp_path / "a" / "b" / "o"
    p = holder(tmp_path / "x")
    try:
        with pytest.raises(OutputBusy, match=str(p.pid)):
            with hold_output(tmp_path / "x"):
                pass
    finally:
        p.kill()
        p.wait()
    with hold_output(deep):
        assert (tmp_path / "a" / "b").is_dir()
    assert not (tmp_path / "a").exists()  # made for the lock, left empty: removed


@pytest.mark.slow
def test_two_eval_runs_into_one_folder(tmp_path, default_model):
    """The issue's case: two `eval run` with the same --out, the second started while the first runs. The
    second is refused in one line naming the first; the samples hold every id once. Three short rows: the first
    holds the lock from its start, and its imports and model load alone outlast the second's refusal (the 36
    fixture files' rows, the long dot_matrix prompts among them, took ~100 s of generation on 2 busy cores)."""
    out, data = tmp_path / "o", tmp_path / "d.jsonl"
    data.write_text(jl(GOOD, {**GOOD, "id": "r1", "prompt": "How many b in b b b?", "answer": "3"},
                       {**GOOD, "id": "r2", "prompt": "How many c in c?", "answer": "1"}))
    cmd = [PY, "-m", "eval", "run", "--model", "default", "--backend", "hf", "--data", str(data),
           "--max-new-tokens", "4", "--no-progress", "--out", str(out)]
    first = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    lock = tmp_path / ".o.lock"
    t = time.time()
    while not (lock.exists() and lock.read_text().strip()) and time.time() - t < 120:
        time.sleep(0.05)
    second = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    assert first.wait(timeout=600) == 0, first.stderr.read()[-2000:]
    assert second.returncode == 2
    one_line(second.stderr, f"is being written by process {first.pid}")
    ids = [json.loads(x)["id"] for x in (out / "samples.jsonl").read_text().splitlines()]
    assert sorted(ids) == ["r0", "r1", "r2"] and json.loads((out / "results.json").read_text())["n"] == 3


# --- --force never removes a run, the data or the current directory --------------------------------------

def nested_runs(w: Path) -> None:
    (w / "runs" / "r1" / "checkpoint-2").mkdir(parents=True)
    (w / "runs" / "r1" / "checkpoint-2" / "trainer_state.json").write_text('{"global_step": 2}')
    (w / "runs" / "r2").mkdir(parents=True)
    (w / "runs" / "r2" / "metrics.jsonl").write_text('{"step": 1}\n')


@pytest.fixture(scope="module")
def ckpt(tmp_path_factory, default_model) -> Path:
    """A real checkpoint: the default model's folder (weights hard-linked) with a trainer state."""
    d = tmp_path_factory.mktemp("ck") / "checkpoint-4"
    d.mkdir()
    for f in default_model.iterdir():
        if f.is_file():
            try:
                os.link(f, d / f.name)
            except OSError:
                shutil.copy(f, d / f.name)
    (d / "trainer_state.json").write_text('{"global_step": 4, "log_history": []}')
    return d


def test_export_force_refuses_a_folder_holding_runs_at_any_depth(tmp_path, ckpt):
    nested_runs(tmp_path)
    before = snapshot(tmp_path)
    res = subprocess.run([PY, "recipes/export.py", str(ckpt), "--out", str(tmp_path / "runs"), "--force"], cwd=ROOT,
                         capture_output=True, text=True)
    assert res.returncode == 2
    one_line(res.stderr, "holds a training run or checkpoint (r1/checkpoint-2)")
    assert snapshot(tmp_path) == before


def test_export_force_refuses_the_current_directory(tmp_path, ckpt, capsys, monkeypatch):
    (tmp_path / "notes.txt").write_text("mine\n")
    monkeypatch.chdir(tmp_path)
    code, err = recipe_main("export", [str(ckpt), "--out", ".", "--force"], capsys)
    assert code == 2
    one_line(err, "is or contains the current directory")
    assert sorted(p.name for p in tmp_path.parent.iterdir() if p.name.startswith(f".{tmp_path.name}")) == []
    assert (tmp_path / "notes.txt").read_text() == "mine\n"


def test_force_refusal_rules(tmp_path, monkeypatch):
    from common.paths import force_refusal

    nested_runs(tmp_path)
    assert "r1/checkpoint-2" in force_refusal(tmp_path / "runs")
    (tmp_path / "data").mkdir()
    assert "which this command reads" in force_refusal(tmp_path / "data", reading=(tmp_path / "data" / "d.jsonl",))
    monkeypatch.chdir(tmp_path / "data")
    assert "current directory" in force_refusal(tmp_path)
    (tmp_path / "old_export").mkdir()
    assert force_refusal(tmp_path / "old_export") is None


def test_gold_never_writes_over_its_data(tmp_path, capsys):
    data = tmp_path / "d.jsonl"
    data.write_text(jl(GOOD))
    code, err = eval_main(["gold", "--data", str(data), "--out", str(data)], capsys)
    assert code == 2
    one_line(err, "is the data being read")
    assert data.read_text() == jl(GOOD)


# --- torn files the project writes ------------------------------------------------------------------------

def torn_copy(ckpt: Path, dst: Path, name: str, keep: int) -> Path:
    shutil.copytree(ckpt, dst, copy_function=os.link)
    (dst / name).unlink()
    (dst / name).write_bytes((ckpt / name).read_bytes()[:keep])
    return dst


@pytest.mark.parametrize("name,keep,msg", [("trainer_state.json", 10, "torn or truncated (not valid JSON)"),
                                           ("config.json", 30, "torn or not a JSON object"),
                                           ("model.safetensors", 1 << 20, "truncated (1048576 of")])
def test_export_of_a_torn_checkpoint_is_one_line(tmp_path, ckpt, capsys, name, keep, msg):
    prev = tmp_path / "run" / "checkpoint-2"
    shutil.copytree(ckpt, prev, copy_function=os.link)
    (prev / "optimizer.pt").write_bytes(b"")  # not resumable, so not suggested ...
    torn = torn_copy(ckpt, tmp_path / "run" / "checkpoint-4", name, keep)
    code, err = recipe_main("export", [str(torn), "--out", str(tmp_path / "x")], capsys)
    assert code == 2
    one_line(err, f"{torn / name}: {msg}")
    assert "export an earlier checkpoint" in err and not (tmp_path / "x").exists()


def test_export_of_a_checkpoint_killed_before_its_weights_names_it_torn(tmp_path, ckpt, capsys):
    """What a kill mid-save leaves when it lands after config.json (the Trainer writes the model's config,
    then its weights, then the optimizer, scheduler and trainer_state.json, into checkpoint-N itself): a
    folder with config.json and generation_config.json and no weights. Export names it torn and names the
    previous complete checkpoint, not "pass --allow-pickle-weights"."""
    import torch

    prev = tmp_path / "run" / "checkpoint-2"
    shutil.copytree(ckpt, prev, copy_function=os.link)
    for name in ("optimizer.pt", "scheduler.pt"):
        torch.save({}, prev / name)  # complete, so resumable and suggested
    torn = tmp_path / "run" / "checkpoint-4"
    torn.mkdir()
    for name in ("config.json", "generation_config.json"):
        if (ckpt / name).is_file():
            shutil.copy(ckpt / name, torn / name)
    code, err = recipe_main("export", [str(torn), "--out", str(tmp_path / "x")], capsys)
    assert code == 2 and not (tmp_path / "x").exists()
    one_line(err, f"{torn}: torn checkpoint (config.json but no model weights: a save killed midway); "
                  f"export an earlier checkpoint instead, e.g. {prev}")
    assert "allow-pickle" not in err
    shutil.rmtree(prev)  # no complete checkpoint before it: the same line without a suggestion
    code, err = recipe_main("export", [str(torn), "--out", str(tmp_path / "x")], capsys)
    assert code == 2
    one_line(err, f"{torn}: torn checkpoint")
    assert "e.g." not in err


def test_eval_run_on_a_truncated_model_is_one_line(tmp_path, ckpt, capsys):
    m = torn_copy(ckpt, tmp_path / "m", "model.safetensors", 4096)
    data = tmp_path / "d.jsonl"
    data.write_text(jl(GOOD))
    code, err = eval_main(["run", "--model", str(m), "--data", str(data), "--out", str(tmp_path / "o")], capsys)
    assert code == 2
    one_line(err, "model.safetensors: truncated")
    assert not (tmp_path / "o").exists()


# --- options validated before any work --------------------------------------------------------------------

@pytest.mark.parametrize("argv,msg", [
    (["run", "--model", "default", "--data", "D", "--out", "O", "--top-p", "2"],
     "--top-p: expected a number in (0, 1]"),
    (["run", "--model", "default", "--data", "D", "--out", "O", "--top-p", "0"], "--top-p"),
    (["run", "--model", "default", "--data", "D", "--out", "O", "--temperature", "inf"], "--temperature"),
    (["run", "--model", "default", "--data", "D", "--out", "O", "--max-retries", "-1"], "--max-retries"),
    (["run", "--model", "default", "--data", "D", "--out", "O", "--gpu-memory-utilization", "2"],
     "--gpu-memory-utilization"),
    (["compare", "a", "b", "--out", "c", "--n-boot", "1000000000"], "--n-boot: expected an integer from 1 to"),
    (["robustness", "report", "a", "b", "--out", "c", "--n-boot", "0"], "--n-boot"),
    (["tokstats", "--data", "D", "--results", "/nonexistent"], "--results /nonexistent: no samples.jsonl"),
])
def test_eval_options_are_checked_first(tmp_path, capsys, argv, msg):
    d = tmp_path / "D"
    d.write_text(jl(GOOD))
    argv = [str(d) if a == "D" else str(tmp_path / a) if a in ("O", "a", "b", "c") else a for a in argv]
    code, err = eval_main(argv, capsys)
    assert code == 2
    one_line(err, msg)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["D"]  # no table, no plot


def test_n_boot_is_bounded_by_memory():
    from eval.compare import CompareError, check_boot_memory

    check_boot_memory(1000, 500)
    with pytest.raises(CompareError, match="needs about .* GiB .* use at most"):
        check_boot_memory(1_000_000, 10_000_000)


def test_score_refuses_duplicate_ids_whose_content_differs(tmp_path, capsys):
    data, preds = tmp_path / "d.jsonl", tmp_path / "p.jsonl"
    data.write_text(jl(GOOD, {**GOOD, "prompt": "How many b in b?", "answer": "1"}))
    preds.write_text(jl({"id": "r0", "completion": tag("2")}))
    code, err = eval_main(["score", "--data", str(data), "--predictions", str(preds), "--out", str(tmp_path / "o")],
                          capsys)
    assert code == 2
    one_line(err, "duplicate id 'r0'")


@pytest.mark.parametrize("mixture,msg", [
    (b"weights: {freq_count: \xff}\n", "is not UTF-8 text"),
    (b"weights: {freq_count: .inf}\n", "must be a finite number >= 0, got inf"),
    (b"weights: {freq_count: .nan}\n", "must be a finite number >= 0, got nan"),
    (b"weights: {freq_count: -1, diff_tokens: 1}\n", "must be a finite number >= 0, got -1.0"),
])
def test_synth_mixture_weights(tmp_path, capsys, mixture, msg):
    from synth.__main__ import main

    (tmp_path / "m.yaml").write_bytes(mixture)
    (tmp_path / "old.jsonl").write_text(jl(GOOD))
    assert main(["-n", "3", "--mixture", str(tmp_path / "m.yaml"), "--out", str(tmp_path / "old.jsonl")]) == 2
    one_line(capsys.readouterr().err, msg)
    assert (tmp_path / "old.jsonl").read_text() == jl(GOOD)


def test_synth_max_len_zero(tmp_path, capsys):
    from synth.__main__ import main

    assert main(["-n", "3", "--max-len", "0", "--out", str(tmp_path / "x.jsonl")]) == 2
    one_line(capsys.readouterr().err, "--max-len must be >= 1")
    assert not any(tmp_path.iterdir())


def test_synth_removes_a_killed_runs_temp_files_at_once(tmp_path, capsys):
    """The lock says no live writer owns them: a killed run's temp files (184 MB once) go on the next run,
    not an hour later."""
    from synth.__main__ import main

    stale = tmp_path / ".x.jsonl.tmp-abc"
    stale.write_text("half\n")
    assert main(["-n", "2", "--task", "freq_count", "--lang", "en", "--no-progress",
                 "--out", str(tmp_path / "x.jsonl")]) == 0
    assert not stale.exists() and len((tmp_path / "x.jsonl").read_text().splitlines()) == 2


GRPO = ["--use_cpu", "true", "--bf16", "false"]


@pytest.mark.parametrize("config,argv,msg", [
    (b"learning_rate: 1e-5\nx: \xff\n", [], "cannot read"),
    (b"- a\n- b\n", [], "must be a YAML mapping"),
    (None, ["--num_generations", "0"], "num_generations must be >= 2"),
    (None, ["--num_generations=0"], "num_generations must be >= 2"),
    (None, ["--per_device_train_batch_size", "0"], "per_device_train_batch_size must be >= 1"),
    (b"tasks: [all]\nmixture: MIX\n", [], "unknown task(s) in weights: nope"),
    (None, ["--model_name_or_path", "/nonexistent/model"], "no such model folder"),
    (None, ["--train_data", "/nonexistent.jsonl"], "train_data /nonexistent.jsonl: no such file"),
    (None, ["--output_dir", "FILE/run"], "is a file, not a folder"),
])
def test_grpo_refuses_before_any_work_even_in_a_dry_run(tmp_path, capsys, config, argv, msg):
    (tmp_path / "mix.yaml").write_text("weights: {nope: 1, freq_count: 1}\n")
    (tmp_path / "FILE").write_text("a file\n")
    extra = [a.replace("FILE", str(tmp_path / "FILE")) for a in argv]
    if config is not None:
        (tmp_path / "c.yaml").write_bytes(config.replace(b"MIX", str(tmp_path / "mix.yaml").encode()))
        extra = ["--config", str(tmp_path / "c.yaml"), *extra]
    code, err = recipe_main("grpo", [*GRPO, *extra, "--output_dir", str(tmp_path / "o"), "--dry-run"]
                            if "--output_dir" not in extra else [*GRPO, *extra, "--dry-run"], capsys)
    assert code == 2
    one_line(err, msg)


# --- export-lm-eval ---------------------------------------------------------------------------------------

def test_export_lm_eval_needs_force_and_replaces_the_old_export_whole(tmp_path, capsys):
    out = tmp_path / "tasks"
    small = tmp_path / "small.jsonl"
    small.write_text(jl(GOOD))
    assert eval_main(["export-lm-eval", "--data", f"official:{FIXTURES}", "--limit", "1", "--out", str(out)],
                     capsys)[0] == 0
    many = snapshot(out)
    code, err = eval_main(["export-lm-eval", "--data", str(small), "--out", str(out)], capsys)
    assert code == 2
    one_line(err, "is not empty; pass --force")
    assert snapshot(out) == many
    assert eval_main(["export-lm-eval", "--data", str(small), "--out", str(out), "--force"], capsys)[0] == 0
    assert len(list(out.glob("tase_*.yaml"))) == 2  # one file task and its task group: none of the old export
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]
    other = tmp_path / "mine"
    other.mkdir()
    (other / "notes.txt").write_text("x")
    code, err = eval_main(["export-lm-eval", "--data", str(small), "--out", str(other), "--force"], capsys)
    assert code == 2 and (other / "notes.txt").exists()
    one_line(err, "not an earlier export-lm-eval folder")


def test_export_lm_eval_escapes_data_values_in_yaml(tmp_path, capsys):
    import yaml

    data = tmp_path / "d.jsonl"
    data.write_text(jl({**GOOD, "meta": {"file": "a.csv\ninclude: /etc/evil.yaml\ntask: x\n"}}))
    assert eval_main(["export-lm-eval", "--data", str(data), "--out", str(tmp_path / "t")], capsys)[0] == 0
    for f in (tmp_path / "t").glob("*.yaml"):
        text = f.read_text()
        doc = yaml.load(text.replace("!function", ""), Loader=yaml.SafeLoader)
        assert "include" not in doc, f.name
        assert not [ln for ln in text.splitlines() if ln.startswith(("include", "task: x"))]


def _fsize_limit() -> None:  # in the child: a "full disk" at 3 kB per file, as EFBIG rather than a kill
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (3000, 3000))


def test_export_lm_eval_on_a_full_disk_keeps_the_old_export(tmp_path):
    out = tmp_path / "tasks"
    cmd = [PY, "-m", "eval", "export-lm-eval", "--data", f"official:{FIXTURES}", "--out", str(out)]
    assert subprocess.run([*cmd, "--limit", "1"], cwd=ROOT, capture_output=True).returncode == 0
    before = snapshot(out)
    res = subprocess.run([*cmd, "--force"], cwd=ROOT, capture_output=True, text=True, preexec_fn=_fsize_limit)
    assert res.returncode == 2
    one_line(res.stderr, "File too large")
    assert ": :" not in res.stderr
    assert snapshot(out) == before
    assert [p.name for p in tmp_path.iterdir()] == ["tasks"]  # no temp folder, no lock left


def test_os_errors_always_name_something():
    from common.paths import os_error_line

    assert os_error_line(OSError(28, "No space left on device")) == "No space left on device"
    assert os_error_line(OSError(28, "No space left on device", "/x/y")) == "/x/y: No space left on device"
    assert os_error_line(OSError()) == "OSError"


# --- quiet by default -------------------------------------------------------------------------------------

def test_demo_steps_keep_library_logs_out_of_the_terminal(tmp_path, capfd):
    """`make demo` printed 482 lines, 291 of them vLLM INFO/WARNING lines: its steps' listed harmless library lines
    go to a file; progress bars, results, errors and any warning no pattern lists still reach the terminal."""
    from recipes.steps.pipeline import run_filtered

    script = ("import os, sys, warnings\n"
              "print('(EngineCore pid=7) WARNING 11-24 17:00:06 [ompmultiprocessing.py:63] "
              "VLLM_CPU_NUM_OF_RESERVED_CPU is less than the minimum requirement: 1 cores', file=sys.stderr)\n"
              "print('INFO 11-24 17:00:06 [x.py:1] loading', file=sys.stderr)\n"
              "print('[2026-11-24 18:17:48,481] [WARNING] [real_accelerator.py:213:get_accelerator] Setting "
              "accelerator to CPU.')\n"
              "warnings.warn('old api')\n"
              "sys.stderr.write('step 1/2\\rstep 2/2\\n')\n"
              "print('error: real trouble', file=sys.stderr)\n"
              "print('(Worker pid=8) WARNING 11-24 17:00:07 [cpu_worker.py:1] libiomp is not found in LD_PRELOAD. x')\n"
              "warnings.warn('invalid value encountered in divide: loss is nan', RuntimeWarning)\n"
              "print('(Worker pid=8) WARNING 11-24 17:00:07 [memory.py:1] CUDA out of memory. "
              "Tried to allocate 2 GiB')\n"
              "print('(Worker pid=8) WARNING 11-24 17:00:07 [scheduler.py:1] a vLLM warning nobody listed')\n"
              "print('result 42', os.environ.get('TASE_OUTPUT_FILTERED'))\n")
    log = tmp_path / "steps.log"
    assert run_filtered([PY, "-c", script], tmp_path, log) == 0
    out, err = capfd.readouterr()
    # issue 80: a NaN RuntimeWarning, a CUDA OOM warning and an unlisted vLLM warning reach the terminal
    assert out.endswith("CUDA out of memory. Tried to allocate 2 GiB\n(Worker pid=8) WARNING 11-24 17:00:07 "
                        "[scheduler.py:1] a vLLM warning nobody listed\nresult 42 1\n"), out
    assert out.count("\n") == 3  # the step knows it is filtered (1): an entry point in it adds no filter of its own
    assert "RuntimeWarning: invalid value encountered in divide: loss is nan" in err
    assert "step 1/2\rstep 2/2\nerror: real trouble\n" in err and "UserWarning: old api" in err, err
    kept = log.read_text()
    assert "VLLM_CPU_NUM_OF_RESERVED_CPU" in kept and "loading" in kept and "libiomp" in kept
    assert "Setting accelerator to CPU" in kept  # DeepSpeed's logger form


def test_vllm_logs_at_warning_unless_verbose(monkeypatch):
    from common import process

    # setenv first so that monkeypatch restores each variable afterwards (a delenv of an absent variable records
    # nothing): apply() sets them in this process, and a later test must not inherit INFO or TASE_VERBOSE from here
    for var in ("VLLM_LOGGING_LEVEL", "TASE_VERBOSE", "OMP_WAIT_POLICY", "VLLM_CPU_NUM_OF_RESERVED_CPU"):
        monkeypatch.setenv(var, "")
        monkeypatch.delenv(var)
    process.apply()
    assert os.environ["VLLM_LOGGING_LEVEL"] == "WARNING"
    process.apply(verbose=True)
    assert os.environ["VLLM_LOGGING_LEVEL"] == "INFO" and os.environ["TASE_VERBOSE"] == "1"


def test_grpo_output_dir_held_by_another_process(tmp_path, capsys):
    out = tmp_path / "run"
    p = holder(out)
    try:
        code, err = recipe_main("grpo", [*GRPO, "--output_dir", str(out), "--max_steps", "1"], capsys)
    finally:
        p.kill()
        p.wait()
    assert code == 2
    one_line(err, f"is being written by process {p.pid}")
    assert not out.exists()


def test_synth_never_writes_over_its_inputs(tmp_path, capsys):
    from synth.__main__ import main

    mix = tmp_path / "m.yaml"
    mix.write_text("weights: {freq_count: 1}\n")
    ex = tmp_path / "held.jsonl"
    ex.write_text(jl(GOOD))
    assert main(["-n", "2", "--mixture", str(mix), "--out", str(mix)]) == 2
    one_line(capsys.readouterr().err, "is an input of this command")
    assert main(["-n", "2", "--task", "freq_count", "--lang", "en", "--exclude-exact", str(ex), "--out", str(ex)]) == 2
    one_line(capsys.readouterr().err, "is an input of this command")
    assert mix.read_text() == "weights: {freq_count: 1}\n" and ex.read_text() == jl(GOOD)
