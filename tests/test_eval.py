"""eval: score/compare tables to the digit, real hf backend on SmolLM2, kill-and-resume, bad input."""
import importlib.util
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from eval.data import load_official
from tests.conftest import ROOT, run_module
from tests.test_rewards import gold_completion


def write_preds(path: Path, rows, correct) -> None:
    with path.open("w") as f:
        for r in rows:
            comp = gold_completion(r) if correct(r) else "<answer>@@@</answer>"
            f.write(json.dumps({"id": r["id"], "completion": comp}, ensure_ascii=False) + "\n")


@pytest.fixture(scope="module")
def rows(fixture_root):
    return list(load_official(fixture_root))


def score_cli(fixture_root, preds, out):
    res = run_module(["eval", "score", "--data", f"official:{fixture_root}", "--predictions", str(preds), "--out", str(out)])
    assert res.returncode == 0, res.stderr
    return json.loads((out / "results.json").read_text())


def test_gold_answers_give_100_everywhere(fixture_root, rows, tmp_path):
    write_preds(tmp_path / "p.jsonl", rows, lambda r: True)
    res = score_cli(fixture_root, tmp_path / "p.jsonl", tmp_path / "gold")
    assert res["overall"] == 100.0 and res["micro"]["overall"] == 100.0
    assert set(res["by_task"].values()) == {100.0} and len(res["by_task"]) == 10
    assert res["by_lang"] == {"en": 100.0, "zh": 100.0, "ko": 100.0}
    assert set(res["by_category"].values()) == {100.0}
    assert res["n"] == 216 and res["n_invalid"] == 0
    lines = (tmp_path / "gold" / "samples.jsonl").read_text().splitlines()
    s = json.loads(lines[0])
    assert {"id", "task", "lang", "prompt", "completion", "extracted", "coarse", "fine"} <= set(s)


def test_tables_to_the_digit(fixture_root, rows, tmp_path):
    # half of every file right (even row index): 50.00 everywhere
    write_preds(tmp_path / "half.jsonl", rows, lambda r: int(r["id"].rsplit("/", 1)[1]) % 2 == 0)
    half = score_cli(fixture_root, tmp_path / "half.jsonl", tmp_path / "half")
    assert half["overall"] == 50.0 and set(half["by_task"].values()) == {50.0}
    # awareness right, structural wrong: 6 awareness files of 11 in each language table
    write_preds(tmp_path / "aw.jsonl", rows, lambda r: r["category"] == "awareness")
    aw = score_cli(fixture_root, tmp_path / "aw.jsonl", tmp_path / "aw")
    assert aw["by_category"] == {"awareness": 100.0, "structural": 0.0}
    assert aw["overall"] == 50.0
    assert aw["by_lang"] == {"en": 54.55, "zh": 54.55, "ko": 60.0}  # 6 of 11 files; ko: digital left out -> 6/10
    assert aw["by_task"]["LENOP"] == 100.0 and aw["by_task"]["DOT"] == 0.0
    assert aw["micro"]["overall"] == round(100 * 108 / 216, 2)
    # DOT official adjustment: bitmap mean / char accuracy
    write_preds(tmp_path / "dot.jsonl", rows, lambda r: r["task"] == "dot_matrix" and (
        r["subtask"] == "char_classification" or int(r["id"].rsplit("/", 1)[1]) < 3))
    dot = score_cli(fixture_root, tmp_path / "dot.jsonl", tmp_path / "dot")
    assert dot["by_task"]["DOT"] == round(100 * (1 + 0.5 + 0.5) / 3, 2)
    assert dot["dot_official_adjusted"] == 50.0
    # compare: deltas and CIs
    out = tmp_path / "cmp"
    res = run_module(["eval", "compare", str(tmp_path / "half"), str(tmp_path / "aw"), str(tmp_path / "half"),
                      "--out", str(out), "--n-boot", "200"])
    assert res.returncode == 0, res.stderr
    summary = json.loads((out / "comparison.json").read_text())
    d = summary["deltas"]["aw"]
    assert d["overall"]["delta"] == 0.0
    assert d["by_task"]["FREQ"]["delta"] == 50.0 and d["by_task"]["DOT"]["delta"] == -50.0
    same = summary["deltas"]["half-2"]
    assert same["overall"] == {"delta": 0.0, "ci95": [0.0, 0.0]}
    md = (out / "comparison.md").read_text()
    assert "| half | 50.00 | 50.00 |" in md and "| aw | " in md
    assert (out / "comparison.png").stat().st_size > 5000


def test_score_rejects_unknown_ids_and_keeps_existing_output(fixture_root, rows, tmp_path):
    out = tmp_path / "keep"
    write_preds(tmp_path / "ok.jsonl", rows[:5], lambda r: True)
    score_cli(fixture_root, tmp_path / "ok.jsonl", out)
    before = (out / "results.json").read_bytes()
    (tmp_path / "bad.jsonl").write_text('{"id": "nope/x/0", "completion": "1"}\n')
    res = run_module(["eval", "score", "--data", f"official:{fixture_root}", "--predictions",
                      str(tmp_path / "bad.jsonl"), "--out", str(out)])
    assert res.returncode == 2 and res.stderr.count("\n") == 1 and "unknown id 'nope/x/0'" in res.stderr
    assert (out / "results.json").read_bytes() == before


@pytest.mark.parametrize("args,msg", [
    (["--model", "/nonexistent/model"], "no such model folder"),
    (["--data", "official:/nonexistent"], "no tasks/ folder"),
    (["--backend", "vllm"], "vllm"),
])
def test_run_bad_input_one_line(fixture_root, tmp_path, args, msg):
    base = {"--model": "default", "--data": f"official:{fixture_root}", "--backend": "hf"}
    for k, v in zip(args[::2], args[1::2]):
        base[k] = v
    res = run_module(["eval", "run", *[x for kv in base.items() for x in kv], "--out", str(tmp_path / "o"),
                      "--limit", "1", "--max-new-tokens", "2"])
    assert res.returncode == 2, res.stderr
    assert res.stderr.startswith("error:") and msg in res.stderr and "Traceback" not in res.stderr


def short_rows_file(rows, path: Path, n: int) -> Path:
    short = sorted((r for r in rows if r["answer"]), key=lambda r: len(r["prompt"]))[:n]
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in short))
    return path


@pytest.mark.slow
def test_real_hf_backend_and_kill_resume(rows, tmp_path):
    data = short_rows_file(rows, tmp_path / "short.jsonl", 6)
    out = tmp_path / "run"
    cmd = [sys.executable, "-m", "eval", "run", "--model", "default", "--data", str(data), "--out", str(out),
           "--batch-size", "1", "--max-new-tokens", "12", "--no-progress"]
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    samples = out / "samples.jsonl"
    deadline = time.time() + 300
    while time.time() < deadline:
        if samples.exists() and len(samples.read_text().splitlines()) >= 2:
            break
        if proc.poll() is not None:
            pytest.fail(proc.stderr.read().decode()[-2000:])
        time.sleep(0.2)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    first = samples.read_text().splitlines()
    assert 2 <= len(first) < 6, "killed mid-run"
    res = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr
    lines = samples.read_text().splitlines()
    ids = [json.loads(l)["id"] for l in lines]
    assert len(ids) == len(set(ids)) == 6, "no sample lost or duplicated"
    assert lines[: len(first)] == first, "finished samples are not regenerated"
    result = json.loads((out / "results.json").read_text())
    assert result["n"] == 6 and result["complete"] and result["backend"] == "hf"
    assert all(isinstance(json.loads(l)["completion"], str) and json.loads(l)["completion"] for l in lines)
    # same command again: nothing to do, same results
    again = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert again.returncode == 0 and samples.read_text().splitlines() == lines


def test_export_lm_eval(fixture_root, tmp_path):
    res = run_module(["eval", "export-lm-eval", "--data", f"official:{fixture_root}", "--out", str(tmp_path / "lm")])
    assert res.returncode == 0, res.stderr

    class Loader(yaml.SafeLoader):
        pass

    Loader.add_constructor("!function", lambda loader, node: ("function", loader.construct_scalar(node)))
    group = yaml.load((tmp_path / "lm" / "tase.yaml").read_text(), Loader=Loader)
    assert group["group"] == "tase" and len(group["task"]) == 36
    task = yaml.load((tmp_path / "lm" / f"{group['task'][0]}.yaml").read_text(), Loader=Loader)
    assert task["output_type"] == "generate_until" and task["process_results"] == ("function", "utils.process_results")
    docs = [json.loads(l) for l in (tmp_path / "lm" / task["dataset_kwargs"]["data_files"]["test"]).read_text().splitlines()]
    spec = importlib.util.spec_from_file_location("tase_utils", tmp_path / "lm" / "utils.py")
    utils = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(utils)
    doc = docs[0]
    assert utils.doc_to_text(doc) == doc["prompt"]
    assert utils.process_results(doc, [gold_completion(dict(doc, meta={}))])["acc"] == 1.0
    assert utils.process_results(doc, ["<answer>@@@</answer>"])["acc"] == 0.0
