"""load_official (synth.readers; the contract's `eval.data.load_official` is its alias) reads the official layout;
malformed input gives one clear line."""
import csv
import shutil
from collections import Counter

import pytest
from conftest import run_module

from common.readers import DataError
from synth.readers import load_data, load_official


def test_the_contract_name_is_an_alias_of_the_real_home():
    """`eval.data.load_official` (../shared/CONTRACT.md) keeps working, as the one documented alias."""
    import eval.data

    assert eval.data.load_official is load_official
    assert eval.data.__all__ == ["load_official"]


def test_reads_every_fixture_file(fixture_root):
    recs = list(load_official(fixture_root))
    by_file = Counter(r["meta"]["file"] for r in recs)
    csvs = sorted(fixture_root.glob("tasks/*/*/*.csv"))
    assert len(by_file) == len(csvs) == 36
    for path in csvs:
        with path.open(encoding="utf-8", newline="") as f:
            n_rows = sum(1 for _ in csv.reader(f)) - 1
        rel = path.relative_to(fixture_root / "tasks").as_posix()
        assert by_file[rel] == n_rows, rel


def test_record_fields(fixture_root):
    recs = {r["id"]: r for r in load_official(fixture_root)}
    r = recs["dot_matrix/bitmap_classification_final/0"]
    assert (r["task"], r["subtask"], r["lang"], r["type"], r["category"]) == (
        "dot_matrix", "bitmap_classification", "mul", "MATCH_ANSWER", "structural")
    r = recs["variant_normalize/digital/0"]
    assert (r["lang"], r["subtask"], r["answer"]) == ("ko", "digital", "8874")
    r = recs["sentence_length/korean_generate/0"]
    assert (r["type"], r["subtask"], r["answer"]) == ("LENGTH", "generate", "")
    r = recs["sentence_length/english/1"]
    assert (r["type"], r["subtask"], r["answer"]) == ("NUMBER", "count", "46")
    r = recs["component_split/zh_split/2"]
    assert (r["type"], r["lang"], r["answer"]) == ("SPLIT", "zh", "人,列;亻,列")
    r = recs["component_split/kor_combine/0"]
    assert (r["type"], r["lang"], r["answer"]) == ("MATCH_ANSWER", "ko", "쇽")
    r = recs["diff_tokens/chinese/1"]
    assert (r["type"], r["variation"], r["answer"]) == ("DIFF", "删除", "抖")
    r = recs["structure_riddle/chinese/0"]
    assert r["answer"] == "研" and "explanation" in r["meta"]
    assert {x["type"] for x in recs.values() if x["task"] == "shuffle_tokens"} == {"SHUFFLE"}


def _copy(fixture_root, tmp_path):
    dst = tmp_path / "rel"
    shutil.copytree(fixture_root, dst)
    return dst


def test_missing_column(fixture_root, tmp_path):
    root = _copy(fixture_root, tmp_path)
    p = root / "tasks/token_awareness/freq_count/english.csv"
    p.write_text("question,answer\nhow many?,3\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"freq_count/english.csv: missing column\(s\) input"):
        list(load_official(root))


def test_unknown_file_and_bad_row(fixture_root, tmp_path):
    root = _copy(fixture_root, tmp_path)
    (root / "tasks/token_awareness/freq_count/french.csv").write_text("input,answer\n", encoding="utf-8")
    with pytest.raises(DataError, match="french.csv: unknown file name"):
        list(load_official(root))
    (root / "tasks/token_awareness/freq_count/french.csv").unlink()
    p = root / "tasks/token_awareness/sort_lengths/korean.csv"
    p.write_text("input,answer\nq1,ABC\nq2,ABC,extra\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"sort_lengths/korean.csv: row 1: expected 2 fields"):
        list(load_official(root))


def test_cli_reports_bad_data_in_one_line(fixture_root, tmp_path):
    root = _copy(fixture_root, tmp_path)
    (root / "tasks/token_awareness/diff_tokens/chinese.csv").write_text("input,answer\nx,是\n", encoding="utf-8")
    res = run_module(["synth", "--task", "freq_count", "--lang", "en", "-n", "2",
                      "--exclude", f"official:{root}", "--out", str(tmp_path / "o.jsonl")])
    assert res.returncode == 2
    assert res.stderr.strip() == "error: token_awareness/diff_tokens/chinese.csv: missing column(s) variation"


def test_load_data_specs(fixture_root, tmp_path):
    assert sum(1 for _ in load_data(f"official:{fixture_root}")) == 216
    with pytest.raises(DataError, match="use official:"):
        load_data(str(fixture_root))
    bad = tmp_path / "b.jsonl"
    bad.write_text('{"id": "x"}\n')
    with pytest.raises(DataError, match=r"line 1: missing key\(s\) task, lang, type, prompt, answer"):
        list(load_data(str(bad)))
