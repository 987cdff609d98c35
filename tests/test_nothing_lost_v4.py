"""Nothing lost, round four (issue 51, part A): output names never taken as globs, nothing written outside
--out, the one output rule for plot-training and select_checkpoint, a guard that always ends, and JSON errors
worded the same way by every reader. Each case calls the real entry point in-process and checks the exit code,
the one stderr line and that nothing was lost."""
from __future__ import annotations

import json
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

    mine = [Path(tempfile.mkdtemp(prefix=".*.tmp-", dir=tmp_path)), Path(tempfile.mkdtemp(prefix=".*.old-", dir=tmp_path))]
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
    """A bounded number of drops in a row, then GuardError (one line, exit 2 through every entry point), never a
    loop over an endless generator."""
    import itertools

    from common.errors import TaseError
    from common.guard import Guard, GuardError

    bench = [{"task": "freq_count", "lang": "en", "type": "NUMBER", "prompt": f"How many a in {'a ' * k}?",
              "answer": str(k)} for k in range(1, 4)]
    g = Guard.from_records(bench)
    g.max_drops_in_a_row = 50
    endless = itertools.cycle([dict(bench[0], id="x")])
    with pytest.raises(GuardError, match="dropped 50 generated examples in a row") as e:
        list(g.filter(endless))
    assert isinstance(e.value, TaseError) and "\n" not in str(e.value) and g.dropped_exact == 50
    fresh = dict(bench[0], prompt="How many b in b?")
    kept = list(itertools.islice(g.filter(itertools.cycle([dict(bench[0]), fresh])), 5))
    assert len(kept) == 5  # drops between kept rows never add up to the bound
