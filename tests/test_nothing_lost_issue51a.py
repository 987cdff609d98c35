"""Nothing lost (issue 51, part A): output names never taken as globs, nothing written outside
--out, the one output rule for plot-training and select_checkpoint, a guard that always ends, and JSON errors
worded the same way by every reader. Each case calls the real entry point (in-process where it can) and checks
the exit code, the one stderr line and that nothing was lost."""
from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

import pytest
from conftest import FIXTURES, ROOT


def one_line(err: str, fragment: str) -> None:
    """Exactly one stderr line, starting with "error:" and containing `fragment`, no traceback."""
    assert "Traceback" not in err, err[-2000:]
    assert len(err.strip().splitlines()) == 1 and err.startswith("error: "), err[-2000:]
    assert fragment in err, err


def rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


# --- 1. output names are never globs ----------------------------------------------------------------------


def test_two_synth_writers_whose_names_differ_by_glob_characters_both_finish(tmp_path, capsys):
    """`synth --out 'data[1].jsonl'` once deleted the live temp file of a concurrent `synth --out data1.jsonl`
    (glob `.data[1].jsonl.tmp-*` matches `.data1.jsonl.tmp-*`), which then failed after generating everything.
    Here the second writer runs whole while the first is half way through its stream."""
    from synth.__main__ import main, write_atomic

    first, second = tmp_path / "data1.jsonl", tmp_path / "data[1].jsonl"
    ran = []

    def stream():
        yield {"k": 0}
        ran.append(main(["-n", "2", "--task", "freq_count", "--lang", "en", "--no-progress", "--out", str(second)]))
        yield {"k": 1}

    write_atomic(first, stream())
    assert ran == [0]
    assert rows(first) == [{"k": 0}, {"k": 1}]
    assert len(rows(second)) == 2 and all(r["task"] == "freq_count" for r in rows(second))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data1.jsonl", "data[1].jsonl"]


def test_leftovers_are_the_outputs_own_and_nobody_elses(tmp_path):
    """Cleanup takes `.NAME.tmp-XXXXXXXX` of NAME only: not a glob match of another name, not the temp of an
    output whose name starts with NAME."""
    from common.paths import leftovers, recover_replace

    mine = [Path(tempfile.mkdtemp(prefix=f".*.{tag}-", dir=tmp_path)) for tag in ("tmp", "old")]
    others = [tmp_path / ".x.tmp-abcdefgh", tmp_path / ".x.old-abcdefgh", tmp_path / ".x.tmp-y.tmp-abcdefgh",
              tmp_path / ".data1.tmp-abcdefgh"]
    for d in others:
        d.mkdir()
        (d / "keep").write_text("live")
    assert leftovers(tmp_path / "*", "tmp") == [mine[0]]
    assert leftovers(tmp_path / "data[1]", "tmp") == []
    assert leftovers(tmp_path / "x", "tmp") == [others[0]]  # not x.tmp-y's
    recover_replace(tmp_path / "*")  # what `export.py RUN --out 'dir/*'` runs first
    assert not any(d.exists() for d in mine)
    assert all((d / "keep").read_text() == "live" for d in others)


def test_score_into_a_glob_name_keeps_another_scores_temp_and_backup(tmp_path, capsys):
    """eval score cleans `.NAME.tmp-*`/`.NAME.old-*` by exact name: `res[1]` leaves `res1`'s alone."""
    from eval.__main__ import main

    data = tmp_path / "d.jsonl"
    data.write_text(json.dumps({"id": "r0", "task": "freq_count", "lang": "en", "type": "NUMBER",
                                "prompt": "How many a in a a?", "answer": "2"}) + "\n")
    preds = tmp_path / "p.jsonl"
    preds.write_text(json.dumps({"id": "r0", "completion": "<answer>2</answer>"}) + "\n")
    live = [tmp_path / ".res1.tmp-abcdefgh", tmp_path / ".res1.old-abcdefgh"]
    for d in live:
        (d / "res1").mkdir(parents=True)
        (d / "res1" / "samples.jsonl").write_text("live\n")
    assert main(["score", "--data", str(data), "--predictions", str(preds), "--out", str(tmp_path / "res[1]")]) == 0
    assert (tmp_path / "res[1]" / "results.json").is_file()
    assert all((d / "res1" / "samples.jsonl").read_text() == "live\n" for d in live)


# --- 5. the guard always ends -------------------------------------------------------------------------------


def test_a_one_row_exclude_file_finishes_in_seconds_and_says_so(tmp_path):
    """One excluded row of a task/language is all wording and all content: indexing its 13-grams dropped every
    generated example and `synth` never finished. Now its rows are matched by exact prompt and answer only, and
    one stderr line says so."""
    import subprocess
    import sys

    from synth.__main__ import main

    one = tmp_path / "one.jsonl"
    assert main(["--task", "sort_lengths", "--lang", "en", "-n", "1", "--no-progress", "--out", str(one)]) == 0
    out = tmp_path / "two.jsonl"
    r = subprocess.run([sys.executable, "-m", "synth", "--task", "sort_lengths", "--lang", "en", "-n", "2",
                        "--exclude", str(one), "--no-progress", "--out", str(out)],
                       cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert "fewer than 2 prompts" in r.stderr and "sort_lengths/en" in r.stderr
    got = rows(out)
    assert len(got) == 2 and rows(one)[0]["prompt"] not in {g["prompt"] for g in got}


def test_guard_that_drops_everything_ends_in_one_line():
    """A bounded number of n-gram or answer drops in a row, then GuardError (one line, exit 2 through every entry
    point), never a loop over an endless generator. Exact drops end by themselves (a stream's prompts are
    distinct): skipping a whole excluded file of the same seed is no error."""
    import itertools

    from common.errors import TaseError
    from common.guard import Guard, GuardError

    bench = [{"task": "component_split", "lang": "en", "subtask": "combine", "type": "MATCH_ANSWER",
              "prompt": f"Combine piece {k}.", "answer": f"zebra{k}"} for k in range(100)]
    g = Guard.from_records(bench, ngram=False)
    g.max_drops_in_a_row = 50
    same_answer = ({**bench[0], "id": str(i), "prompt": f"Another prompt {i}."} for i in itertools.count())
    with pytest.raises(GuardError, match="dropped 50 generated examples in a row") as e:
        list(g.filter(same_answer))
    assert isinstance(e.value, TaseError) and "\n" not in str(e.value) and g.dropped_answer == 50
    fresh = ({**bench[0], "prompt": f"Fresh {i}.", "answer": f"new{i}"} for i in itertools.count())
    kept = list(itertools.islice(g.filter(itertools.chain(bench, fresh)), 5))  # 100 exact drops, then kept
    assert [r["answer"] for r in kept] == [f"new{i}" for i in range(5)] and g.dropped_exact == 100


# --- 6. JSON errors: one wording for every reader, never a traceback ---------------------------------------

HUGE = "1" * 5000  # past Python's 4,300-digit limit: int() raises a ValueError without `.msg`
GOOD = {"id": "r0", "task": "freq_count", "lang": "en", "type": "NUMBER", "prompt": "How many a in a a?",
        "answer": "2"}


def eval_main(argv: list[str], capsys) -> tuple[int, str]:
    from eval.__main__ import main

    return main(argv), capsys.readouterr().err


def scored(tmp_path: Path, name: str, capsys) -> Path:
    """An `eval score` folder of two rows."""
    data = tmp_path / "d.jsonl"
    data.write_text(json.dumps(GOOD) + "\n" + json.dumps({**GOOD, "id": "r1", "answer": "3"}) + "\n")
    preds = tmp_path / "p.jsonl"
    preds.write_text('{"id": "r0", "completion": "<answer>2</answer>"}\n{"id": "r1", "completion": "2"}\n')
    assert eval_main(["score", "--data", str(data), "--predictions", str(preds), "--out", str(tmp_path / name)],
                     capsys)[0] == 0
    return tmp_path / name


def test_a_huge_integer_is_one_line_in_the_same_words_in_every_reader(tmp_path, capsys):
    """`e.msg` of the int() ValueError crashed every reader with an AttributeError."""
    from synth.__main__ import main as synth_main

    want = "line 1: not JSON (an integer of more than 4300 digits)"
    data = tmp_path / "big.jsonl"
    data.write_text(json.dumps(GOOD).replace('"2"}', HUGE + "}") + "\n")
    code, err = eval_main(["gold", "--data", str(data), "--out", str(tmp_path / "g.jsonl")], capsys)
    assert code == 2
    one_line(err, want)
    assert synth_main(["-n", "1", "--task", "freq_count", "--exclude", str(data),
                       "--out", str(tmp_path / "s.jsonl")]) == 2
    one_line(capsys.readouterr().err, want)
    good = tmp_path / "d.jsonl"
    good.write_text(json.dumps(GOOD) + "\n")
    preds = tmp_path / "p.jsonl"
    preds.write_text('{"id": "r0", "completion": ' + HUGE + "}\n")
    code, err = eval_main(["score", "--data", str(good), "--predictions", str(preds), "--out", str(tmp_path / "s")],
                          capsys)
    assert code == 2
    one_line(err, want)
    run = tmp_path / "run"
    run.mkdir()
    (run / "metrics.jsonl").write_text(f'{{"step": 1, "reward": {HUGE}}}\n{{"step": 2, "reward": 0.5}}\n')
    code, err = eval_main(["plot-training", str(run), "--out", str(tmp_path / "t.png")], capsys)
    assert code == 2
    one_line(err, want)
    a = scored(tmp_path, "a", capsys)
    b = tmp_path / "b"
    b.mkdir()
    (b / "results.json").write_bytes((a / "results.json").read_bytes())
    (b / "samples.jsonl").write_text('{"id": ' + HUGE + "}\n" + (a / "samples.jsonl").read_text())
    code, err = eval_main(["compare", str(a), str(b), "--out", str(tmp_path / "c")], capsys)
    assert code == 2
    one_line(err, want)
    assert not (tmp_path / "c").exists() and not (tmp_path / "s").exists() and not (tmp_path / "t.png").exists()


def test_plot_training_on_huge_numbers(tmp_path, capsys):
    """A 401-digit reward (no float holds it) is left out like NaN, the plot still drawn; a 401-digit step
    is one line."""
    run = tmp_path / "run"
    run.mkdir()
    big = "9" * 401
    (run / "metrics.jsonl").write_text("".join(f'{{"step": {s}, "reward": {big if s == 2 else 0.5}}}\n'
                                               for s in (1, 2, 3)))
    code, err = eval_main(["plot-training", str(run), "--out", str(tmp_path / "t.png")], capsys)
    assert code == 0, err
    assert (tmp_path / "t.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    from eval.plot_training import curve, read_run

    assert curve(read_run(run), ("reward",))[1:] == ([1, 3], [0.5, 0.5])
    (run / "metrics.jsonl").write_text(f'{{"step": {big}, "reward": 0.5}}\n{{"step": 2, "reward": 0.5}}\n')
    code, err = eval_main(["plot-training", str(run), "--out", str(tmp_path / "u.png")], capsys)
    assert code == 2
    one_line(err, "line 1: step 99999999999999999999... is not a training step")


@pytest.mark.parametrize("verdict,shown", [("NaN", "coarse nan"), ('"1"', "coarse 1"), ("1.5", "coarse 1.5"),
                                           ("true", "coarse True")])
def test_compare_on_a_sample_whose_verdict_is_no_number(tmp_path, capsys, verdict, shown):
    """`coarse: NaN` gave a TypeError in compare's table; every reader of samples (compare, robustness, a
    resumed run) now refuses a verdict that is not a number from 0 to 1."""
    a = scored(tmp_path, "a", capsys)
    b = tmp_path / "b"
    b.mkdir()
    (b / "results.json").write_bytes((a / "results.json").read_bytes())
    lines = (a / "samples.jsonl").read_text().splitlines(keepends=True)
    (b / "samples.jsonl").write_text(lines[0] + json.dumps(json.loads(lines[1])).replace(
        '"coarse": 0.0', f'"coarse": {verdict}') + "\n")
    code, err = eval_main(["compare", str(a), str(b), "--out", str(tmp_path / "c")], capsys)
    assert code == 2
    one_line(err, f"line 2: {shown} is not a verdict")
    assert not (tmp_path / "c").exists()


def test_markers_and_headers_nested_too_deeply_are_no_traceback(tmp_path):
    """RecursionError is no ValueError: the readers of markers and earlier outputs caught only the latter."""
    from common.paths import MARKER, jsonl_with_keys, output_kind, read_marker

    deep = "[" * 100_000
    (tmp_path / MARKER).write_text(deep)
    assert read_marker(tmp_path) is None and output_kind(tmp_path) is None
    (tmp_path / "x.jsonl").write_text(deep + "\n")
    assert jsonl_with_keys(tmp_path / "x.jsonl", ("id",)) is False


# --- 3. plot-training and select_checkpoint follow the one output rule -------------------------------------


def metrics_run(d: Path) -> Path:
    d.mkdir(parents=True)
    (d / "metrics.jsonl").write_text("".join(json.dumps({"step": s, "reward": 0.5}) + "\n" for s in (1, 2)))
    return d


def test_plot_training_replaces_only_its_own_png(tmp_path, capsys):
    """It replaced a user's photo.png and a file inside an `eval compare` output; now only a PNG it wrote (its
    tEXt tag) is replaced, and a training run (where the default --out lies) is the one output it writes into."""
    from eval.plot_training import PNG_TAG, is_plot

    run = metrics_run(tmp_path / "run")
    photo = tmp_path / "photo.png"
    photo.write_bytes(b"\x89PNG\r\n\x1a\nmy holiday")
    code, err = eval_main(["plot-training", str(run), "--out", str(photo)], capsys)
    assert code == 2
    one_line(err, f"--out {photo} holds something eval plot-training did not write")
    assert photo.read_bytes() == b"\x89PNG\r\n\x1a\nmy holiday"
    a = scored(tmp_path, "a", capsys)
    code, err = eval_main(["plot-training", str(run), "--out", str(a / "results.png")], capsys)
    assert code == 2
    one_line(err, "an `eval score` output")
    assert not (a / "results.png").exists()
    code, err = eval_main(["plot-training", str(run), "--out", str(tmp_path / "a")], capsys)
    assert code == 2
    one_line(err, "a .png file is expected")
    for _ in range(2):  # its own PNG, in the run folder (the default --out): written, then replaced
        assert eval_main(["plot-training", str(run)], capsys)[0] == 0
        assert is_plot(run / "training.png") and PNG_TAG.encode() in (run / "training.png").read_bytes()
    assert sorted(p.name for p in run.iterdir()) == ["metrics.jsonl", "training.png"]  # no lock or temp left


def _select_run(tmp: Path) -> Path:
    """A run with one checkpoint whose (empty) safetensors file is whole: a candidate for --dry-run."""
    ck = tmp / "run" / "checkpoint-2"
    ck.mkdir(parents=True)
    (ck / "model.safetensors").write_bytes(b"\2" + b"\0" * 7 + b"{}")
    return tmp / "run"


def test_select_checkpoint_follows_the_one_output_rule(tmp_path, capsys):
    """It overwrote a user's selection.md and wrote its runs into an `eval score` folder; now --out is refused for
    those, and its own folder (marker, `eval run` outputs in step-N) is accepted for a rerun."""
    from conftest import call_main

    from recipes.select_checkpoint import OWN_FILES, mark

    run = _select_run(tmp_path)
    held = tmp_path / "h.jsonl"
    held.write_text(json.dumps(GOOD) + "\n")
    sel = ["recipes/select_checkpoint.py", str(run), "--heldout", str(held), "--dry-run", "--out"]
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "selection.md").write_text("my notes\n")
    code, err = call_main([*sel, str(mine)])
    assert code == 2
    one_line(err, f"{mine / 'selection.md'} holds something select_checkpoint did not write")
    a = scored(tmp_path, "a", capsys)
    code, err = call_main([*sel, str(a)])
    assert code == 2
    one_line(err, f"--out {a} is an `eval score` output")
    code, err = call_main([*sel, str(held)])
    assert code == 2
    one_line(err, "is a file, not a folder")
    code, err = call_main([*sel, str(tmp_path / "new")])
    assert code == 0, err
    assert not (tmp_path / "new").exists()  # a dry run writes nothing
    own = tmp_path / "own"
    (own / "step-2").mkdir(parents=True)
    (own / "step-2" / "run_config.json").write_text("{}")  # its `eval run` of checkpoint-2
    for f in OWN_FILES:
        (own / f).write_text("earlier\n")
    (own / "notes.txt").write_text("kept\n")
    mark(own, [*OWN_FILES, "step-2"])
    assert call_main([*sel, str(own)])[0] == 0
    mark(own, [])  # a later run's marker keeps what the earlier ones wrote, and never takes the user's notes
    from common.paths import read_marker

    assert read_marker(own)["files"] == sorted([*OWN_FILES, "step-2"])


# --- 2. nothing written outside --out unless named for the run ----------------------------------------------


def test_proof_writes_nothing_outside_out(tmp_path, fixture_root, capsys):
    """The shipped configs sent the completion files into docs/results/ whatever --out said (a 2-step proof replaced
    4 committed files). Every path the plan writes is now under --out, --completions names another place for one
    run, a config cannot, and the repository's `git status` is unchanged."""
    import subprocess

    from recipes.proof import main

    def status() -> str:
        return subprocess.run(["git", "status", "--porcelain", "--untracked-files=all"], cwd=ROOT,
                              capture_output=True, text=True, check=True).stdout

    before = status()
    out = tmp_path / "proof"
    assert main(["--dry-run", "--official", str(fixture_root), "--out", str(out)]) == 0
    lines = capsys.readouterr().out.splitlines()
    writes = [line.split("# writes ", 1)[1].split()[0].rstrip(":") for line in lines if line.startswith("# writes ")]
    outs = [c.split(" --out ", 1)[1].split()[0] for c in lines if c.startswith("+ ") and " --out " in c]
    outs += [c.split(" --output_dir ", 1)[1].split()[0] for c in lines if " --output_dir " in c]
    assert writes and outs and all(Path(p).is_relative_to(out) for p in writes + outs), [
        p for p in writes + outs if not Path(p).is_relative_to(out)]
    assert f"{out / 'completions' / 'fine'}/<task>/<file>.jsonl" in writes
    assert status() == before and not out.exists()
    named = tmp_path / "elsewhere"
    assert main(["--dry-run", "--official", str(fixture_root), "--out", str(out), "--completions", str(named)]) == 0
    assert f"# writes {named / 'fine'}/<task>/<file>.jsonl" in capsys.readouterr().out
    bad = tmp_path / "bad.yaml"
    bad.write_text((ROOT / "recipes/configs/proof_cpu.yaml").read_text()
                   + "completions: ../docs/results/component_count_proof_cpu\n")
    assert main(["--dry-run", "--official", str(fixture_root), "--config", str(bad)]) == 2
    one_line(capsys.readouterr().err, "completions must be a folder inside out (relative, without ..), got "
             "'../docs/results/component_count_proof_cpu'")


# --- 4. a symlinked --out is followed, by every writer ----------------------------------------------------


def test_score_force_onto_a_symlinked_out_replaces_the_target_and_keeps_the_link(tmp_path, capsys):
    """`eval score --force` onto a symlink replaced the link with a folder and left the old scores at the target.
    The rule (docs/evaluation.md): a symlinked --out is followed; the target is replaced, the link stays. synth's
    file and plot-training's PNG the same way."""
    import os

    target = scored(tmp_path, "target", capsys)
    (target / "notes.txt").write_text("mine\n")
    link = tmp_path / "link"
    link.symlink_to(target)
    preds = tmp_path / "p2.jsonl"
    preds.write_text("".join(json.dumps({"id": i, "completion": f"<answer>{a}</answer>"}) + "\n"
                             for i, a in (("r0", 2), ("r1", 3))))
    code, err = eval_main(["score", "--data", str(tmp_path / "d.jsonl"), "--predictions", str(preds), "--out",
                           str(link), "--force"], capsys)
    assert code == 0, err
    assert link.is_symlink() and os.readlink(link) == str(target)
    assert json.loads((target / "results.json").read_text())["overall"] == 100.0  # was 50: the target holds the new
    assert (target / "notes.txt").read_text() == "mine\n"
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []  # no temp, backup or lock left
    from synth.__main__ import main as synth_main

    data = tmp_path / "data.jsonl"
    assert synth_main(["-n", "1", "--task", "freq_count", "--lang", "en", "--no-progress", "--out", str(data)]) == 0
    dlink = tmp_path / "dlink.jsonl"
    dlink.symlink_to(data)
    assert synth_main(["-n", "3", "--task", "freq_count", "--lang", "en", "--no-progress", "--out", str(dlink)]) == 0
    assert dlink.is_symlink() and len(rows(data)) == 3
    gold, glink = tmp_path / "gold.jsonl", tmp_path / "glink.jsonl"
    gold.write_text(json.dumps({"id": "r0", "completion": "old"}) + "\n")
    glink.symlink_to(gold)
    assert eval_main(["gold", "--data", str(data), "--out", str(glink)], capsys)[0] == 0
    assert glink.is_symlink() and len(rows(gold)) == 3
    run = metrics_run(tmp_path / "run")
    png = tmp_path / "plots" / "t.png"
    assert eval_main(["plot-training", str(run), "--out", str(png)], capsys)[0] == 0
    plink = tmp_path / "t.png"
    plink.symlink_to(png)
    assert eval_main(["plot-training", str(run), str(run), "--out", str(plink)], capsys)[0] == 0
    assert plink.is_symlink() and png.stat().st_size > 0


def test_synth_stats_json_replaces_only_its_own_file(tmp_path, capsys):
    """A writer the issue did not list: `synth stats --json FILE` wrote over any file. Now the one output rule:
    a user's file is refused before the statistics run; its own earlier file is replaced."""
    from synth.stats import is_stats_json, main

    notes = tmp_path / "notes.json"
    notes.write_text("my notes\n")
    assert main(["--official", str(FIXTURES), "-n", "1", "--json", str(notes)]) == 2
    one_line(capsys.readouterr().err, f"--json {notes} holds something synth stats did not write")
    assert notes.read_text() == "my notes\n"
    mine = tmp_path / "stats.json"
    for _ in range(2):
        assert main(["--official", str(FIXTURES), "-n", "1", "--json", str(mine)]) == 0
        assert is_stats_json(mine)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.json", "stats.json"]


def test_error_after_an_open_progress_bar_is_a_line_of_its_own(capsys):
    """An async run whose rollout worker died printed `  0%|  | 0/2 [...]error: the rollout worker died ...`: the
    trainer's step bar was open, so the error continued its line. The one line starts a line of its own; without an
    open bar nothing is added."""
    from tqdm.auto import tqdm

    from common.errors import TaseError, one_line

    assert one_line(TaseError("before any bar")) == 2
    assert capsys.readouterr().err == "error: before any bar\n"
    bar = tqdm(total=2, file=sys.stderr)
    try:
        assert one_line(TaseError("the worker died")) == 2
    finally:
        bar.close()
    head, found, _ = capsys.readouterr().err.partition("error: the worker died\n")
    assert found and "0/2" in head and head.endswith("\n"), repr(head)  # the bar was drawn, then a new line
