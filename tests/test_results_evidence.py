"""The committed results hold together: every docs/results/<experiment>/ folder has a manifest whose numbers are the
ones its committed summaries and comparisons print, whose completion files are whole official files, and whose
accuracies re-score with `python -m eval score` where the official release is at hand (TASE_OFFICIAL_SRC); the
README's results table agrees with those manifests; and no text speaks of how the project was made."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "docs" / "results"
FOLDERS = sorted(p for p in RESULTS.iterdir() if p.is_dir())
MANIFESTS = [p / "manifest.json" for p in FOLDERS]
KEYS = {"experiment", "claim", "holds", "made_by", "history", "data", "completions", "numbers"}
VALUE = re.compile(r"[+-]?\d+\.\d\d(?: \[[+-]?\d+\.\d\d, [+-]?\d+\.\d\d\])?")


def load(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def completion_files(folder: Path) -> list[str]:
    """Every committed `{id, completion}` file of a folder (training logs excepted), relative to it."""
    return sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*.jsonl") if p.name != "metrics.jsonl")


def test_every_results_folder_has_a_manifest():
    assert len(FOLDERS) >= 21
    for folder, path in zip(FOLDERS, MANIFESTS, strict=False):
        assert path.is_file(), f"{folder.name}: no manifest.json"
        man = load(path)
        assert KEYS <= set(man), f"{folder.name}: missing {KEYS - set(man)}"
        assert man["experiment"] == folder.name and man["claim"].strip() and man["made_by"].strip()
        history = man["history"].split()[0]
        assert (ROOT / history).is_file(), f"{folder.name}: history {history} is not a file"
        assert sorted(man["completions"]) == completion_files(folder), f"{folder.name}: completion files not listed"
        assert man["completions"] or man["numbers"] or folder.name.startswith("gpu_smoke"), folder.name


def committed_line(source: str, label: str) -> str:
    src = ROOT / source
    assert src.is_file(), source
    line = next((l for l in src.read_text(encoding="utf-8").splitlines() if label in l), None)
    assert line is not None, f"{source}: no line with {label!r}"
    return line.replace("*", "")


@pytest.mark.parametrize("path", MANIFESTS, ids=[p.parent.name for p in MANIFESTS])
def test_manifest_numbers_are_the_committed_summaries(path):
    """Each number, and each completion file's accuracy where a committed summary prints it, names the committed file
    and line it comes from (a summary.md, an `eval compare` table, or the experiment's own table)."""
    man = load(path)
    for num in man["numbers"]:
        assert num["value"] in committed_line(num["source"], num["line"]), num
    for rel, c in man["completions"].items():
        if "evidence" in c:
            line = committed_line(c["evidence"]["source"], c["evidence"]["line"])
            assert f"{c['accuracy']:.2f}" in line, f"{rel}: {c['accuracy']:.2f} not in {line!r}"
    evidenced = sum("evidence" in c for m in map(load, MANIFESTS) for c in m["completions"].values())
    assert evidenced >= 70  # all but the few files no committed table prints


@pytest.mark.parametrize("path", MANIFESTS, ids=[p.parent.name for p in MANIFESTS])
def test_completion_files_are_whole_official_files(path):
    """One `{id, completion}` line per row of the official file, ids 0..n-1, and an accuracy that n rows can give."""
    for rel, c in load(path)["completions"].items():
        task, stem = Path(c["official_file"]).parts[-2], Path(c["official_file"]).stem
        rows = [json.loads(l) for l in (path.parent / rel).read_text(encoding="utf-8").splitlines() if l.strip()]
        assert all(set(r) == {"id", "completion"} and isinstance(r["completion"], str) for r in rows), rel
        ids = [r["id"] for r in rows]
        assert len(ids) == len(set(ids)) == c["n"], f"{rel}: {len(ids)} lines, {len(set(ids))} ids, n = {c['n']}"
        assert set(ids) == {f"{task}/{stem}/{i}" for i in range(c["n"])}, f"{rel}: not the whole official file"
        for key in ("accuracy", "strict"):
            assert any(round(100 * k / c["n"], 2) == c[key] for k in range(c["n"] + 1)), f"{rel}: {key} {c[key]}"


@pytest.mark.slow
def test_manifest_accuracies_rescore_with_the_official_release(tmp_path):
    """`python -m eval score` on each committed completion file gives the manifest's accuracy, strict and n."""
    src = os.environ.get("TASE_OFFICIAL_SRC")
    if not src:
        pytest.skip("TASE_OFFICIAL_SRC is not set (path of the official TASE release): the manifests' "
                    "completeness and summaries are checked without it")
    def one_file(official_file: str) -> Path:
        """The release's layout holding only that file (and the release's data/): half the time of the whole one."""
        folder = tmp_path / "official" / official_file.replace("/", "_")
        if not folder.is_dir():
            (folder / official_file).parent.mkdir(parents=True)
            (folder / official_file).symlink_to(Path(src) / official_file)
            if (Path(src) / "data").is_dir():
                (folder / "data").symlink_to(Path(src) / "data")
        return folder

    checked = 0
    for path in MANIFESTS:
        for rel, c in load(path)["completions"].items():
            out = tmp_path / f"s{checked}"
            data = one_file("tasks/" + c["official_file"])
            res = subprocess.run([sys.executable, "-m", "eval", "score", "--data", f"official:{data}", "--predictions",
                                  str(path.parent / rel), "--out", str(out)], capture_output=True, text=True,
                                 cwd=ROOT, timeout=600)
            assert res.returncode == 0, res.stderr[-1000:]
            r = json.loads((out / "results.json").read_text(encoding="utf-8"))
            got = (r["by_file"][c["official_file"]]["accuracy"], r["strict"]["by_file"][c["official_file"]], r["n"])
            assert got == (c["accuracy"], c["strict"], c["n"]), f"{path.parent.name}/{rel}: {got}"
            checked += 1
    assert checked >= 80


def readme_results_rows() -> list[str]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split("\n## Results", 1)[1].split("\n## ", 1)[0]
    return [l for l in section.splitlines() if l.startswith("|") and "docs/results/" in l]


def test_readme_results_table_agrees_with_the_committed_files():
    """Every number of the README's results table is one of its linked manifests' numbers or accuracies."""
    rows = readme_results_rows()
    assert len(rows) >= 5
    for row in rows:
        folders = re.findall(r"docs/results/([\w.-]+)/", row)
        assert folders and all((RESULTS / f / "manifest.json").is_file() for f in folders), row
        allowed = set()
        for f in folders:
            man = load(RESULTS / f / "manifest.json")
            allowed |= {n["value"] for n in man["numbers"]}
            allowed |= {f"{c['accuracy']:.2f}" for c in man["completions"].values()}
        cells = row.split("|")[1:-1]
        values = [v for cell in cells[:-1] for v in VALUE.findall(cell.replace("*", ""))]
        assert len(values) >= 4, row
        assert not [v for v in values if v not in allowed], f"{row}\nnot in {folders}: " + \
            ", ".join(v for v in values if v not in allowed)


def test_readme_is_a_short_page():
    assert len((ROOT / "README.md").read_text(encoding="utf-8").splitlines()) <= 210


def test_no_text_speaks_of_how_the_project_was_made():
    """Docs, configs, scripts and tests name issues, not the working sessions that made them."""
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=ROOT, capture_output=True,
                           text=True, check=True).stdout.split()
    bad = []
    for name in files:
        if not name.endswith((".md", ".py", ".yaml", ".sh")) or not (ROOT / name).is_file():
            continue
        text = (ROOT / name).read_text(encoding="utf-8", errors="replace")
        bad += [f"{name}: {m.group(0)}"
                for m in re.finditer(r"(?i)\bsessions?\s+\d+|\bround (?:two|three|four|five)\b", text)]
    assert not bad, "\n".join(bad[:20])
