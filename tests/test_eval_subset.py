"""`eval run` on a subset of the release (issue 81): --tasks/--files by the names the tables print, one official CSV
as a release of one file, the files scored named in results.json and the printed lines, --limit beyond a file's rows
said in one line, and `eval compare` over such runs."""
from __future__ import annotations

import json
import os
import socket

import pytest
from conftest import call_main, run_module

from synth.readers import load_official

CSV = "tasks/token_structure/component_count/english.csv"
KEY = "token_structure/component_count/english.csv"


def _ids(fixture_root, key: str = KEY) -> list[str]:
    return [r["id"] for r in load_official(fixture_root) if r["meta"]["file"] == key]


def _run(model, data: str, out, *extra: str):
    return run_module(["eval", "run", "--model", str(model), "--data", data, "--backend", "hf", "--out", str(out),
                      "--max-new-tokens", "2", "--no-progress", *extra], timeout=600)


def _scored(out) -> list[str]:
    return [json.loads(line)["id"] for line in (out / "samples.jsonl").read_text().splitlines()]


@pytest.mark.slow  # two hf runs of a tiny model (6 rows each) and a comparison: ~40 s on 2 busy cores
def test_tasks_files_and_a_single_csv_score_exactly_that_file_and_compare(fixture_root, tiny_model, tmp_path):
    want = _ids(fixture_root)
    assert len(want) == 6
    a, b = tmp_path / "a", tmp_path / "b"
    res = _run(tiny_model, f"official:{fixture_root}", a, "--tasks", "component_count", "--files", "english",
               "--limit", "20")
    assert res.returncode == 0, res.stderr[-2000:]
    assert sorted(_scored(a)) == sorted(want)
    notes = [line for line in res.stderr.splitlines() if "--limit 20" in line]
    assert notes == ["note: --limit 20: the file holds fewer rows (6); all their rows are scored"], res.stderr
    out = json.loads((a / "results.json").read_text())
    assert out["files_scored"] == [KEY] and out["subset"] == {"tasks": ["component_count"], "files": ["english"]}
    assert out["n"] == 6 and list(out["by_task"]) == ["COMPC"]
    assert f"files: {KEY}" in res.stdout.splitlines()
    res = _run(tiny_model, f"official:{fixture_root / CSV}", b)  # the CSV alone: a release of one file
    assert res.returncode == 0, res.stderr[-2000:]
    assert sorted(_scored(b)) == sorted(want)  # the same ids as in the release: the two runs pair row by row
    assert json.loads((b / "results.json").read_text())["files_scored"] == [KEY]
    cmp = run_module(["eval", "compare", str(a), str(b), "--out", str(tmp_path / "cmp")], timeout=300)
    assert cmp.returncode == 0, cmp.stderr[-2000:]
    assert f"Files scored (every run): {KEY}." in cmp.stdout
    assert "| b | 6 |" in cmp.stdout  # six shared rows in the paired differences
    assert json.loads((tmp_path / "cmp" / "comparison.json").read_text())["deltas"]["b"]["n_shared"] == 6


def test_paper_codes_and_task_qualified_file_names_pick_the_same_rows(fixture_root):
    from eval.runner import subset

    rows = list(load_official(fixture_root))
    by_name = subset(rows, ["component_count"], ["english"])
    assert [r["id"] for r in by_name] == _ids(fixture_root)
    assert subset(rows, ["compc"], ["english.csv"]) == by_name == subset(rows, None, ["component_count/english"])
    assert {r["meta"]["file"] for r in subset(rows, None, ["english"])} == {
        r["meta"]["file"] for r in rows if r["meta"]["file"].endswith("/english.csv")}
    assert subset(rows, ["COMPC,FREQ"], None) == [r for r in rows if r["task"] in ("component_count", "freq_count")]
    assert subset(rows, None, None) == rows


@pytest.mark.parametrize("args,msg", [
    (["--tasks", "nope"], "--tasks: no task 'nope' in the data; valid names: "),
    (["--files", "englsh"], "--files: no file 'englsh' in the data; valid names: chinese, english, korean, "),
    (["--tasks", "COMPC", "--files", "en_split"],
     "--files: no file 'en_split' in the data of the chosen tasks; valid names: chinese, english, korean (or "
     "task/name)"),
])
def test_bad_subset_names_are_one_line_exit_2_listing_the_valid_names(fixture_root, tmp_path, args, msg):
    code, err = call_main(["-m", "eval", "run", "--data", f"official:{fixture_root}", "--backend", "hf",
                           "--out", str(tmp_path / "o"), *args])
    assert code == 2 and err.startswith(f"error: {msg}") and err.count("\n") == 1, err
    assert "component_count" in err or "english" in err
    assert not (tmp_path / "o").exists()


def test_a_single_csv_outside_its_task_folder_is_one_line(fixture_root, tmp_path):
    loose = tmp_path / "english.csv"
    loose.write_bytes((fixture_root / CSV).read_bytes())
    code, err = call_main(["-m", "eval", "run", "--data", f"official:{loose}", "--backend", "hf",
                           "--out", str(tmp_path / "o")])
    assert code == 2 and "must sit in its task's folder" in err and err.count("\n") == 1, err
    copy = tmp_path / "component_count" / "english.csv"  # a copy in a folder named for its task: fine
    copy.parent.mkdir()
    copy.write_bytes(loose.read_bytes())
    assert [r["id"] for r in load_official(copy)] == _ids(fixture_root)


@pytest.mark.slow  # retries against a closed port: a few seconds
def test_the_openai_backend_runs_the_same_subset(fixture_root, tmp_path):
    """Every backend sees the subset: nothing listens on the port, so each picked row is one recorded failure."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    r = run_module(["eval", "run", "--backend", "openai", "--base-url", f"http://127.0.0.1:{port}/v1",
                    "--model-name", "m", "--data", f"official:{fixture_root}", "--tasks", "COMPC", "--files",
                    "english", "--out", str(tmp_path / "o"), "--no-progress", "--max-retries", "0"],
                   env={**os.environ, "OPENAI_API_KEY": "x"}, timeout=120)
    assert r.returncode == 1, r.stderr
    fails = [json.loads(line)["id"] for line in (tmp_path / "o" / "failures.jsonl").read_text().splitlines()]
    assert sorted(fails) == sorted(_ids(fixture_root))
