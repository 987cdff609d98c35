"""Nothing silent (issue 36): inputs that were scored as empty answers, trained on as NaN, dropped
from a table or ended in a traceback now give one line and exit 2 (or a correct result), one test per class.

The entry points run in-process (`eval.__main__.main`, `synth.__main__.main`, the recipes' `main`), as
tests/test_nothing_lost.py does; a subprocess only where a process limit is the point (the full disk)."""
from __future__ import annotations

import json
import resource
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT

PY = sys.executable
GOOD = {"id": "r0", "task": "freq_count", "lang": "en", "type": "NUMBER", "prompt": "How many a in a a?",
        "answer": "2"}
GOOD2 = {**GOOD, "id": "r1", "prompt": "How many b in b?", "answer": "1"}
GOOD3 = {**GOOD, "id": "r2", "prompt": "How many c in c c c?", "answer": "3"}
DEEP = "[" * 100_000


def jl(*recs) -> str:
    return "".join((r if isinstance(r, str) else json.dumps(r, ensure_ascii=False)) + "\n" for r in recs)


def one_line(err: str, fragment: str) -> None:
    """Exactly one stderr line, starting with "error:" and containing `fragment`, no traceback."""
    assert "Traceback" not in err, err[-2000:]
    assert len(err.strip().splitlines()) == 1 and err.startswith("error: "), err[-2000:]
    assert fragment in err, err


OUT: list[str] = []  # the stdout of the latest `call`


def call(main, argv: list[str], capsys) -> tuple[int, str]:
    try:
        code = main(argv)
    except SystemExit as e:
        code = e.code
    got = capsys.readouterr()
    OUT[:] = [got.out]
    return code, got.err


def eval_main(argv, capsys):
    from eval.__main__ import main

    return call(main, argv, capsys)


@pytest.fixture
def data(tmp_path) -> Path:
    p = tmp_path / "d.jsonl"
    p.write_text(jl(GOOD, GOOD2, GOOD3))
    return p


# --- eval score: a prediction that is no answer is refused, not scored as "" ------------------------------

@pytest.mark.parametrize("line,fragment", [
    ({"id": "r0", "completion": [1, 2, 3]}, "item 0 is not a chat message"),
    ({"id": "r0", "completion": [{"role": "user", "content": "2"}]}, "without an assistant message"),
    ({"id": "r0", "completion": "<answer>2</answer>", "completions": ["<answer>3</answer>"]}, "both completion"),
    ({"id": ["r0"], "completion": "2"}, "id must be a string"),
    ('{"id": "r0", "completion": ' + DEEP, "nested too deeply"),
])
def test_score_refuses_predictions_that_are_no_answer(data, tmp_path, capsys, line, fragment):
    preds = tmp_path / "p.jsonl"
    preds.write_text(jl(line))
    code, err = eval_main(["score", "--data", str(data), "--predictions", str(preds), "--out", str(tmp_path / "s")],
                          capsys)
    assert code == 2
    one_line(err, fragment)
    assert not (tmp_path / "s").exists()


def test_score_still_reads_chat_messages_with_an_assistant_answer(data, tmp_path, capsys):
    preds = tmp_path / "p.jsonl"
    preds.write_text(jl({"id": "r0", "completion": [{"role": "user", "content": "q"},
                                                    {"role": "assistant", "content": "<answer>2</answer>"}]}))
    code, err = eval_main(["score", "--data", str(data), "--predictions", str(preds), "--out", str(tmp_path / "s")],
                          capsys)
    assert code == 0, err
    assert json.loads((tmp_path / "s" / "results.json").read_text())["overall"] == 100.0


def test_a_data_line_nested_too_deeply_is_one_line(tmp_path, capsys):
    bad = tmp_path / "deep.jsonl"
    bad.write_text(jl(GOOD, DEEP))
    code, err = eval_main(["gold", "--data", str(bad), "--out", str(tmp_path / "g.jsonl")], capsys)
    assert code == 2
    one_line(err, "line 2: JSON nested too deeply")


def test_yaml_nested_too_deeply_is_one_line(tmp_path, capsys, fixture_root):
    """The recipes' --config (proof.py, grpo.py, sft_warmup.py read it the same way) and synth's --mixture."""
    from recipes.proof import main
    from synth.__main__ import main as synth_main

    deep = tmp_path / "deep.yaml"
    deep.write_text(DEEP)
    code, err = call(main, ["--config", str(deep), "--official", str(fixture_root), "--dry-run"], capsys)
    assert code == 2
    one_line(err, "nested too deeply to read")
    code, err = call(synth_main, ["--task", "freq_count", "--lang", "en", "-n", "1", "--mixture", str(deep),
                                  "--out", str(tmp_path / "s.jsonl")], capsys)
    assert code == 2
    one_line(err, "nested too deeply to read")


# --- eval gold / data: repeated ids, unknown task or language ---------------------------------------------

@pytest.mark.parametrize("rows,fragment", [
    ([GOOD, GOOD2, {**GOOD3, "id": "r0"}], "'r0' appears twice"),
    ([GOOD, {**GOOD2, "task": "frequency_count"}], "line 2: unknown task 'frequency_count'"),
    ([GOOD, {**GOOD2, "lang": "fr"}], "line 2: unknown lang 'fr' for task freq_count"),
    ([GOOD, {**GOOD2, "lang": "mul"}], "unknown lang 'mul'"),  # mul is for the language-free task only
])
def test_gold_refuses_data_it_would_write_wrong_predictions_for(tmp_path, capsys, rows, fragment):
    d = tmp_path / "d.jsonl"
    d.write_text(jl(*rows))
    out = tmp_path / "g.jsonl"
    code, err = eval_main(["gold", "--data", str(d), "--out", str(out)], capsys)
    assert code == 2
    one_line(err, fragment)
    assert not out.exists()
    # the same data in `score` and `run`: refused there too (before, an unknown task became a task of its own in
    # `overall` and an unknown language left the language table without a word)
    preds = tmp_path / "p.jsonl"
    preds.write_text(jl({"id": "r0", "completion": "<answer>2</answer>"}))
    code, err = eval_main(["score", "--data", str(d), "--predictions", str(preds), "--out", str(tmp_path / "s")],
                          capsys)
    assert code == 2 and "Traceback" not in err and err.count("\n") == 1, err


# --- eval run: an absurd sample count is refused before any work -------------------------------------------

def test_run_refuses_a_billion_samples_per_row_up_front(data, tmp_path, capsys):
    code, err = eval_main(["run", "--data", str(data), "--out", str(tmp_path / "r"), "--num-samples", "1000000000",
                           "--temperature", "1"], capsys)
    assert code == 2
    one_line(err, "from 1 to 1,024")
    assert not (tmp_path / "r").exists()


# --- eval compare: a folder cut short, a run that scored nothing, runs over different rows ------------------

def _scored(data: Path, out: Path, ids: list[str], capsys) -> Path:
    preds = out.parent / f"{out.name}.preds.jsonl"
    preds.write_text(jl(*({"id": i, "completion": "<answer>2</answer>"} for i in ids)))
    code, err = eval_main(["score", "--data", str(data), "--predictions", str(preds), "--out", str(out)], capsys)
    assert code == 0, err
    return out


def test_compare_refuses_a_run_whose_samples_were_cut_short(data, tmp_path, capsys):
    a = _scored(data, tmp_path / "a", ["r0", "r1", "r2"], capsys)
    b = _scored(data, tmp_path / "b", ["r0", "r1", "r2"], capsys)
    lines = (b / "samples.jsonl").read_text().splitlines(keepends=True)
    (b / "samples.jsonl").write_text("".join(lines[:2]))
    code, err = eval_main(["compare", str(a), str(b), "--out", str(tmp_path / "c"), "--n-boot", "10"], capsys)
    assert code == 2
    one_line(err, "holds 2 rows but results.json counts 3")


def test_compare_refuses_an_api_run_where_every_request_failed(data, tmp_path, capsys):
    import socket

    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens there: every request fails at once (connection refused)
    api = tmp_path / "api"
    code, err = eval_main(["run", "--backend", "openai", "--base-url", f"http://127.0.0.1:{port}/v1", "--model-name",
                           "m", "--data", str(data), "--out", str(api), "--max-retries", "0", "--timeout", "5",
                           "--no-progress"], capsys)
    out = OUT[0]
    assert code == 1 and err.startswith("error: 3 requests failed"), err  # incomplete: exit 1
    assert "overall 0.00" not in out and "nothing scored yet (n=0 of 3 rows)" in out
    a = _scored(data, tmp_path / "a", ["r0", "r1", "r2"], capsys)
    code, err = eval_main(["compare", str(a), str(api), "--out", str(tmp_path / "c"), "--n-boot", "10"], capsys)
    assert code == 2
    one_line(err, "no scored rows (every request failed")


def test_compare_of_runs_over_different_rows_says_so(data, tmp_path, capsys):
    a = _scored(data, tmp_path / "a", ["r0", "r1", "r2"], capsys)
    b = _scored(data, tmp_path / "b", ["r0", "r1"], capsys)
    code, err = eval_main(["compare", str(a), str(b), "--out", str(tmp_path / "c"), "--n-boot", "10"], capsys)
    assert code == 0
    assert err.startswith("warning: b and a scored different rows (2 and 3 valid; 2 shared)"), err
    md = (tmp_path / "c" / "comparison.md").read_text()
    assert "the differences only the 2 shared ones" in md


# --- eval tokstats --results of another data set ------------------------------------------------------------

def test_tokstats_refuses_results_of_other_data(data, tmp_path, capsys):
    run = _scored(data, tmp_path / "a", ["r0", "r1"], capsys)
    other = tmp_path / "other.jsonl"
    other.write_text(jl({**GOOD, "id": "x0"}, {**GOOD2, "id": "x1"}))
    code, err = eval_main(["tokstats", "--data", str(other), "--results", str(run), "--out", str(tmp_path / "t")],
                          capsys)
    assert code == 2
    one_line(err, "none of its 2 rows is in --data")
    assert not (tmp_path / "t").exists()


# --- rewards.trl: a missing or NaN gold answer raises, never scores 0.0 -------------------------------------

@pytest.mark.parametrize("answer", [None, float("nan"), float("inf"), True, ["2"]])
def test_trl_rewards_refuse_a_missing_or_nan_answer(answer):
    from rewards.trl import REWARD_FUNCS, RewardInputError

    for name in ("accuracy_coarse", "accuracy_strict", "accuracy_fine"):
        with pytest.raises(RewardInputError, match=r"row 1 \(NUMBER\) has answer"):
            REWARD_FUNCS[name](None, ["<answer>2</answer>", "<answer>2</answer>"], type=["NUMBER", "NUMBER"],
                               answer=["2", answer], question=["q", "q"])
    assert REWARD_FUNCS["accuracy_coarse"](None, ["<answer>2</answer>"], type=["NUMBER"], answer=["2"],
                                           question=["q"]) == [1.0]


# --- synth: a garbage TASE_UNIFONT ---------------------------------------------------------------------------

@pytest.mark.parametrize("content,fragment", [
    (bytes(range(256)) * 8, "not a unifont.hex file (a byte that is not ASCII"),
    (b"0041:00000000\n", "line 1 is not a unifont.hex glyph line"),
    (b"\n\n", "holds no glyphs"),
])
def test_garbage_unifont_is_one_line_naming_file_and_variable(tmp_path, capsys, monkeypatch, content, fragment):
    from synth.__main__ import main
    from synth.structural import glyphs

    font = tmp_path / "font.hex"
    font.write_bytes(content)
    monkeypatch.setenv("TASE_UNIFONT", str(font))
    for f in (glyphs.unifont_path, glyphs.unifont, glyphs.dot_charset):
        f.cache_clear()
    try:
        code, err = call(main, ["--task", "dot_matrix", "--lang", "mul", "-n", "1", "--no-progress", "--out",
                                str(tmp_path / "d.jsonl")], capsys)
    finally:
        for f in (glyphs.unifont_path, glyphs.unifont, glyphs.dot_charset):
            f.cache_clear()
    assert code == 2
    one_line(err, fragment)
    assert str(font) in err and "TASE_UNIFONT" in err


# --- GRPO: what a real start checks, --dry_run checks too; bad weights and sampling settings -----------------

def grpo(argv: list[str], capsys) -> tuple[int, str]:
    from recipes.grpo import main

    return call(main, argv, capsys)


def test_grpo_dry_run_checks_what_a_real_start_checks(tmp_path, capsys):
    cfg = str(ROOT / "recipes/configs/grpo_smollm2_cpu.yaml")
    base = ["--config", cfg, "--output_dir", str(tmp_path / "o"), "--dry_run", "true"]
    empty, binary, typo = tmp_path / "empty.jsonl", tmp_path / "bin.jsonl", tmp_path / "typo.jsonl"
    empty.write_text("\n\n")
    binary.write_bytes(bytes(range(256)) * 4)
    typo.write_text(jl(GOOD, {**GOOD2, "type": "NUMBERS"}))
    cases = [
        (["--format_weight", "nan"], "format_weight must be a finite number"),
        (["--format_weight", "inf"], "format_weight must be a finite number"),
        (["--train_data", str(empty)], "holds no records"),
        (["--train_data", str(binary)], "train_data: "),
        (["--train_data", str(typo)], "unknown type 'NUMBERS'"),
        (["--reward_funcs", "accuracy_fine", "acuracy_strict"], "acuracy_strict: unknown reward function"),
        (["--streaming", "true", "--max_steps", "-1"], "streaming: true needs --max_steps"),
        (["--temperature", "-1"], "temperature must be > 0"),
        (["--top_p", "0"], "top_p must be in (0, 1]"),
        (["--reward_weights", "1", "2", "3", "4"], "reward_weights has 4 values for 2 reward functions"),
        (["--reward_weights", "1", "nan"], "reward_weights must be finite"),
    ]
    for extra, fragment in cases:
        code, err = grpo([*base, *extra], capsys)
        assert code == 2, (extra, err[-2000:])
        one_line(err, fragment)
    assert not (tmp_path / "o").exists()
    code, err = grpo([*base, "--train_data", str(typo.with_name("ok.jsonl"))], capsys)  # control: a bad path
    assert code == 2 and "no such file" in err
    (tmp_path / "ok.jsonl").write_text(jl(GOOD, GOOD2))  # and good inputs pass the same checks
    from recipes.grpo_core.args import parse, validate

    validate(*parse([*base, "--train_data", str(tmp_path / "ok.jsonl"), "--reward_weights", "1", "0.5",
                         "--temperature", "0.7"]))


# --- proof.py: every stage's recipe options are parsed before stage 1 -----------------------------------------

@pytest.mark.parametrize("section,fragment", [
    ("control:\n  options:\n    learning_rat: 5.0e-5\n", "control options (for recipes/configs/sft_smollm2_cpu.yaml): "
                                                         "unknown option 'learning_rat'"),
    ("control:\n  options:\n    max_steps: -5\n", "control options (for recipes/configs/sft_smollm2_cpu.yaml): "
                                                  "max_steps must be -1 (epochs) or >= 1, got -5"),
    ("control:\n  options:\n    max_steps: many\n", "control options"),
    ("control:\n  options:\n    lr_scheduler_type: sideways\n", "control options"),
])
def test_proof_dry_run_checks_the_control_stage_options(tmp_path, capsys, fixture_root, section, fragment):
    from recipes.proof import main

    text = (ROOT / "recipes/configs/proof_cpu.yaml").read_text() + section
    cfg = tmp_path / "proof.yaml"
    cfg.write_text(text)
    code, err = call(main, ["--config", str(cfg), "--official", str(fixture_root), "--out", str(tmp_path / "o"),
                            "--dry-run"], capsys)
    assert code == 2
    one_line(err, fragment)
    bad_grpo = text.replace('  options: {cpu_bf16: "false"}', '  options: {cpu_bf16: "false", learning_rate: -1}')
    assert bad_grpo != text
    cfg.write_text(bad_grpo.replace(section, ""))
    code, err = call(main, ["--config", str(cfg), "--official", str(fixture_root), "--out", str(tmp_path / "o"),
                            "--dry-run"], capsys)
    assert code == 2
    one_line(err, "grpo options (for recipes/configs/grpo_proof_cpu.yaml): learning_rate must be >= 0")


# --- SFT: rerunning a finished run says so, it does not train again from step 0 ------------------------------

def test_rerun_of_a_finished_sft_run_without_checkpoints_trains_nothing(tmp_path, capsys):
    """The SFT warm-up saves no checkpoints (save_strategy: no): its final folder holds the model and, written
    after it, trainer_state.json. Before, `--resume_from_checkpoint true` found no checkpoint and started again
    from step 0, overwriting the model."""
    import torch
    from safetensors.torch import save_file

    from recipes.sft_warmup import main

    out = tmp_path / "sft"
    out.mkdir()
    save_file({"w": torch.zeros(2)}, out / "model.safetensors")
    (out / "trainer_state.json").write_text(json.dumps({"global_step": 12, "max_steps": 12, "log_history": []}))
    before = (out / "model.safetensors").read_bytes()
    argv = ["--config", str(ROOT / "recipes/configs/sft_smollm2_cpu.yaml"), "--output_dir", str(out),
            "--resume_from_checkpoint", "true"]
    code, err = call(main, argv, capsys)
    assert code == 0, err[-2000:]
    assert "already trained (step 12 of 12) and saved; nothing to do" in OUT[0]
    assert "starting from step 0" not in err
    assert (out / "model.safetensors").read_bytes() == before
    # more steps than it planned, and no checkpoint to go on from: one line, nothing replaced
    code, err = call(main, [*argv, "--max_steps", "20"], capsys)
    assert code == 2
    one_line(err, "holds a finished run (step 12 of 12) and no checkpoint")
    assert (out / "model.safetensors").read_bytes() == before


@pytest.mark.parametrize("extra,fragment", [
    (["--learning_rate", "nan"], "learning_rate must be >= 0, got nan"),
    (["--max_steps", "-5"], "max_steps must be -1 (epochs) or >= 1, got -5"),
    (["--max_train_seconds", "0"], "max_train_seconds must be > 0, got 0.0"),
])
def test_sft_refuses_values_it_would_train_on_silently(tmp_path, capsys, extra, fragment):
    from recipes.sft_warmup import main

    code, err = call(main, ["--config", str(ROOT / "recipes/configs/sft_smollm2_cpu.yaml"), "--output_dir",
                            str(tmp_path / "o"), *extra], capsys)
    assert code == 2
    one_line(err, fragment)
    assert not (tmp_path / "o").exists()


# --- export.py on a full disk ------------------------------------------------------------------------------------

def _fsize_limit() -> None:  # in the child: a "full disk" at 200 kB per file, as EFBIG rather than a kill
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (200_000, 200_000))


def test_export_on_a_full_disk_is_one_line_and_keeps_the_old_export(tmp_path, default_model):
    """safetensors' writer raises its own SafetensorError (not an OSError) when the disk is full: it was a
    traceback. A file-size limit on the child is the full disk here (no root needed for a small filesystem)."""
    import torch
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    tok = AutoTokenizer.from_pretrained(default_model)
    cfg = LlamaConfig(vocab_size=len(tok), hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                      num_attention_heads=2, num_key_value_heads=1, tie_word_embeddings=True)
    torch.manual_seed(0)
    ckpt = tmp_path / "run"
    LlamaForCausalLM(cfg).save_pretrained(ckpt)  # ~1.6 MB of weights in bf16: over the limit
    tok.save_pretrained(ckpt)
    out = tmp_path / "export"
    out.mkdir()
    (out / "config.json").write_text("{}")  # an earlier export, as --force may replace it
    (out / "model.safetensors").write_bytes(b"old")
    from common.paths import write_marker

    write_marker(out, "export")  # marked as export.py marks its output (issue 36's output rule)
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    res = subprocess.run([PY, "recipes/export.py", str(ckpt), "--out", str(out), "--force"], cwd=ROOT,
                         capture_output=True, text=True, preexec_fn=_fsize_limit, timeout=600)
    assert res.returncode == 2, res.stderr[-3000:]
    one_line(res.stderr.strip().splitlines()[-1] + "\n", "cannot write the export")
    assert "Traceback" not in res.stderr and f"{out} is unchanged" in res.stderr
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["export", "run"]  # no temp folder left


def test_write_blocker_names_what_os_stat_cannot_answer(tmp_path, monkeypatch):
    """os.stat raises instead of answering "no" for a name past the file system's limit (ENAMETOOLONG: the first
    such name is blamed) and under a folder that cannot be searched (EACCES: that folder is unwritable). Root
    passes every permission check, so EACCES comes from a stand-in for os.stat on one path."""
    import errno
    import os

    from common.paths import write_blocker

    long = tmp_path / ("x" * 300)
    assert write_blocker(long / "a" / "b") == (long, "too long")
    assert write_blocker(long, include_self=True) == (long, "too long")
    locked = tmp_path / "locked"
    real_stat = os.stat

    def stat(path, *a, **kw):
        if str(path).startswith(str(locked) + os.sep):
            raise PermissionError(errno.EACCES, "Permission denied", str(path))
        return real_stat(path, *a, **kw)

    monkeypatch.setattr(os, "stat", stat)
    assert write_blocker(locked / "run" / "x") == (locked, "unwritable")
    assert write_blocker(tmp_path / "fine" / "x") is None


def test_an_output_name_near_the_limit_still_gets_its_lock(tmp_path):
    """`.NAME.lock` is 6 bytes longer than NAME: for an output name of 250-255 bytes the lock beside it gets a
    shortened name with a digest of the whole one, so the write lock is taken (before: os.open raised
    ENAMETOOLONG, or the lock was skipped)."""
    import os

    from common.paths import hold_output, lock_path

    a, b = tmp_path / ("y" * 252), tmp_path / ("y" * 251 + "z")
    assert lock_path(a) != lock_path(b) and lock_path(a).parent == tmp_path
    assert all(len(os.fsencode(lock_path(p).name)) <= 255 for p in (a, b))
    assert lock_path(tmp_path / "run") == tmp_path / ".run.lock"  # short names keep the plain lock name
    with hold_output(a) as lock:
        assert lock == lock_path(a) and lock.read_text() == f"{os.getpid()}\n"
        a.write_text("written under its lock\n")
    assert not lock.exists() and a.read_text() == "written under its lock\n"
