"""eval: score/compare tables to the digit, real hf backend on SmolLM2, kill-and-resume, bad input,
lm-eval export. Model resolution: test_eval_models.py; aggregation units: test_eval_aggregate.py."""
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from conftest import ROOT, call_main, run_module

from synth.gold import gold_completion
from synth.readers import load_official


def write_preds(path: Path, rows, correct) -> None:
    with path.open("w") as f:
        for r in rows:
            comp = gold_completion(r) if correct(r) else "<answer>@@@</answer>"
            f.write(json.dumps({"id": r["id"], "completion": comp}, ensure_ascii=False) + "\n")


@pytest.fixture(scope="module")
def rows(fixture_root):
    return list(load_official(fixture_root))


def score_cli(fixture_root, preds, out):
    res = run_module(["eval", "score", "--data", f"official:{fixture_root}", "--predictions", str(preds),
                      "--out", str(out)])
    assert res.returncode == 0, res.stderr
    return json.loads((out / "results.json").read_text())


def test_gold_answers_give_100_everywhere(fixture_root, rows, tmp_path):
    res = run_module(["eval", "gold", "--data", f"official:{fixture_root}", "--out", str(tmp_path / "p.jsonl")])
    assert res.returncode == 0, res.stderr
    preds = [json.loads(l) for l in (tmp_path / "p.jsonl").read_text().splitlines()]
    assert [p["id"] for p in preds] == [r["id"] for r in rows]
    res = score_cli(fixture_root, tmp_path / "p.jsonl", tmp_path / "gold")
    assert res["overall"] == 100.0 and res["micro"]["overall"] == 100.0
    assert set(res["by_task"].values()) == {100.0} and len(res["by_task"]) == 10
    assert res["by_lang"] == {"en": 100.0, "zh": 100.0, "ko": 100.0}
    assert set(res["by_category"].values()) == {100.0} and set(res["by_task_lang"].values()) == {100.0}
    assert {f: v["accuracy"] for f, v in res["by_file"].items()} == {f: 100.0 for f in res["by_file"]}
    assert len(res["by_file"]) == 36 and res["dot_official_adjusted"] == 100.0
    assert res["official"]["overall_dot_adjusted"] == 100.0
    assert res["n"] == 216 and res["n_invalid"] == 0 and res["complete"]
    lines = (tmp_path / "gold" / "samples.jsonl").read_text().splitlines()
    s = json.loads(lines[0])
    assert {"id", "task", "lang", "prompt", "completion", "extracted", "coarse", "fine"} <= set(s)
    # constructed answers where the release has no label: REORD reorderings and LENOP-generate texts
    built = {r["id"]: p["completion"] for r, p in zip(rows, preds, strict=False) if r["type"] in ("SHUFFLE", "LENGTH")}
    assert len(built) == 36 and all(c != "<answer></answer>" for c in built.values())


def test_tables_to_the_digit(fixture_root, rows, tmp_path):
    # half of every file right (even row index of 6): 50.00 everywhere
    write_preds(tmp_path / "half.jsonl", rows, lambda r: int(r["id"].rsplit("/", 1)[1]) % 2 == 0)
    half = score_cli(fixture_root, tmp_path / "half.jsonl", tmp_path / "half")
    assert half["overall"] == 50.0 and set(half["by_task"].values()) == {50.0}
    assert set(half["by_lang"].values()) == {50.0} and half["micro"]["overall"] == 50.0
    # awareness right, structural wrong: 6 awareness files of 11 in each language table
    write_preds(tmp_path / "aw.jsonl", rows, lambda r: r["category"] == "awareness")
    aw = score_cli(fixture_root, tmp_path / "aw.jsonl", tmp_path / "aw")
    assert aw["by_category"] == {"awareness": 100.0, "structural": 0.0}
    assert aw["overall"] == 50.0
    assert aw["by_lang"] == {"en": 54.55, "zh": 54.55, "ko": 60.0}  # 6 of 11 files; ko: digital left out -> 6/10
    assert aw["micro"]["by_lang"] == {"en": 54.55, "zh": 54.55, "ko": 60.0}  # 6 rows per file
    # official file-name rule: korean_generate.csv ("gen" holds "en") counts as English: en 7/12, ko 5/9
    assert aw["official"]["by_lang_filename_rule"] == {"en": 58.33, "zh": 54.55, "ko": 55.56}
    assert aw["by_task"]["LENOP"] == 100.0 and aw["by_task"]["DOT"] == 0.0
    assert aw["by_task_lang"]["LENOP/ko"] == 100.0 and aw["by_task_lang"]["COMPM/zh"] == 0.0
    assert aw["micro"]["overall"] == round(100 * 108 / 216, 2)
    # a structure that separates macro from micro: LENOP en-generate only -> LENOP = 1/6 files
    write_preds(tmp_path / "one.jsonl", rows, lambda r: r["id"].startswith("sentence_length/english_generate/"))
    one = score_cli(fixture_root, tmp_path / "one.jsonl", tmp_path / "one")
    assert one["by_task"]["LENOP"] == 16.67 and one["overall"] == 1.67 and one["micro"]["overall"] == 2.78
    assert one["by_lang"]["en"] == 9.09 and one["by_category"] == {"awareness": 3.33, "structural": 0.0}
    # DOT official adjustment: bitmap mean / char accuracy
    write_preds(tmp_path / "dot.jsonl", rows, lambda r: r["task"] == "dot_matrix" and (
        r["subtask"] == "char_classification" or int(r["id"].rsplit("/", 1)[1]) < 3))
    dot = score_cli(fixture_root, tmp_path / "dot.jsonl", tmp_path / "dot")
    assert dot["by_task"]["DOT"] == round(100 * (1 + 0.5 + 0.5) / 3, 2)
    assert dot["dot_official_adjusted"] == 50.0
    assert dot["overall"] == 6.67 and dot["official"]["overall_dot_adjusted"] == 5.0
    # compare: tables, deltas and CIs
    out = tmp_path / "cmp"
    cmd = ["eval", "compare", str(tmp_path / "half"), str(tmp_path / "aw"), str(tmp_path / "half"),
           "--out", str(out), "--n-boot", "200"]
    res = run_module(cmd)
    assert res.returncode == 0, res.stderr
    summary = json.loads((out / "comparison.json").read_text())
    d = summary["deltas"]["aw"]
    assert d["n_shared"] == 216 and d["overall"]["delta"] == 0.0
    assert d["by_task"]["FREQ"]["delta"] == 50.0 and d["by_task"]["DOT"]["delta"] == -50.0
    lo, hi = d["by_task"]["FREQ"]["ci95"]
    assert 0 < lo < 50 < hi <= 100  # half's FREQ rows are right on even indices: resampling moves it
    assert d["by_lang"]["en"]["delta"] == 4.55 and d["by_lang"]["ko"]["delta"] == 10.0
    same = summary["deltas"]["half-2"]
    assert same["overall"] == {"delta": 0.0, "ci95": [0.0, 0.0]}
    md = (out / "comparison.md").read_text()
    assert "| half | " + " | ".join(["50.00"] * 10) + " | 50.00 | 50.00 | 216 |" in md
    assert "| aw | " + " | ".join(["100.00"] * 5 + ["0.00"] * 5) + " | 50.00 | 50.00 | 216 |" in md
    assert "| aw | 54.55 | 54.55 | 60.00 | 56.36 |" in md
    assert "| aw | 216 | +0.00 [" in md and "+50.00* [" in md
    assert (out / "comparison.png").stat().st_size > 5000
    # each bar's own 95% interval (the plot's whiskers): aw is exact per task (all right or all wrong),
    # half varies by resampling around 50
    lv = summary["ci95"]
    assert lv["aw"]["by_task"]["FREQ"] == {"delta": 100.0, "ci95": [100.0, 100.0]}
    assert lv["aw"]["by_task"]["DOT"] == {"delta": 0.0, "ci95": [0.0, 0.0]}
    lo, hi = lv["half"]["overall"]["ci95"]
    assert lv["half"]["overall"]["delta"] == 50.0 and 30 < lo < 50 < hi < 70
    # deterministic: the same command gives the same intervals
    first = (out / "comparison.json").read_text()
    assert run_module(cmd).returncode == 0 and (out / "comparison.json").read_text() == first


def test_score_rejects_bad_predictions_and_keeps_existing_output(fixture_root, rows, tmp_path):
    out = tmp_path / "keep"
    write_preds(tmp_path / "ok.jsonl", rows[:5], lambda r: True)
    score_cli(fixture_root, tmp_path / "ok.jsonl", out)
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    cases = {
        "unknown.jsonl": ('{"id": "nope/x/0", "completion": "1"}\n', "line 1: unknown id 'nope/x/0'"),
        "dup.jsonl": (2 * (json.dumps({"id": rows[0]["id"], "completion": "x"}) + "\n"), "line 2: id"),
        "notjson.jsonl": ("{oops\n", "line 1: not JSON (Expecting property name enclosed in double quotes); "
                          "expected a JSON object with id and completion"),
        "empty.jsonl": ("\n", "no predictions"),
    }
    for name, (text, msg) in cases.items():
        (tmp_path / name).write_text(text)
        res = run_module(["eval", "score", "--data", f"official:{fixture_root}", "--predictions",
                          str(tmp_path / name), "--out", str(out)])
        assert res.returncode == 2 and res.stderr.count("\n") == 1 and msg in res.stderr, (name, res.stderr)
        assert res.stderr.startswith("error:") and "Traceback" not in res.stderr
        assert {p.name: p.read_bytes() for p in out.iterdir()} == before, name
    res = run_module(["eval", "score", "--data", f"official:{fixture_root}", "--predictions",
                      str(tmp_path / "missing.jsonl"), "--out", str(out)])
    assert res.returncode == 2 and "cannot read" in res.stderr and res.stderr.count("\n") == 1


def test_run_refuses_a_score_folder(fixture_root, rows, tmp_path, default_model):
    write_preds(tmp_path / "ok.jsonl", rows, lambda r: True)
    score_cli(fixture_root, tmp_path / "ok.jsonl", tmp_path / "s")
    before = (tmp_path / "s" / "samples.jsonl").read_bytes()
    res = run_module(["eval", "run", "--data", f"official:{fixture_root}", "--out", str(tmp_path / "s"),
                      "--max-new-tokens", "2", "--no-progress"])
    assert res.returncode == 2 and "without run_config.json" in res.stderr and res.stderr.count("\n") == 1
    assert (tmp_path / "s" / "samples.jsonl").read_bytes() == before


@pytest.mark.slow
def test_one_line_error_with_a_cold_model_cache(fixture_root, rows, tmp_path):
    """The regression a warm cache once hid: the first use of a GGUF (`--model default` where make install left
    no copy in the venv) converts it in the same process, and the error that follows is still the only line on
    stderr. The default GGUF is named by its path: `default` would take the venv's copy and convert nothing."""
    import os

    from common.models import find_default_gguf

    write_preds(tmp_path / "ok.jsonl", rows, lambda r: True)
    code, err = call_main(["-m", "eval", "score", "--data", f"official:{fixture_root}", "--predictions",
                           str(tmp_path / "ok.jsonl"), "--out", str(tmp_path / "s")])  # in-process: no 2nd start-up
    assert code == 0 and (tmp_path / "s" / "samples.jsonl").is_file(), err
    cold = tmp_path / "cold-cache"
    res = run_module(["eval", "run", "--model", str(find_default_gguf()), "--data", f"official:{fixture_root}", "--out",
                      str(tmp_path / "s"), "--max-new-tokens", "2", "--no-progress"],
                     env={**os.environ, "TASE_CACHE": str(cold)})
    assert (cold / "models" / "SmolLM2-135M-Instruct.Q4_1" / "model.safetensors").is_file(), res.stderr[-500:]
    assert res.returncode == 2 and res.stderr.count("\n") == 1, res.stderr[-2000:]
    assert "without run_config.json" in res.stderr and res.stdout == ""


def test_score_accepts_chat_message_completions(fixture_root, rows, tmp_path):
    with (tmp_path / "msgs.jsonl").open("w") as f:
        for r in rows[:4]:
            f.write(json.dumps({"id": r["id"], "completion": [{"role": "assistant", "content": gold_completion(r)}]},
                               ensure_ascii=False) + "\n")
    res = score_cli(fixture_root, tmp_path / "msgs.jsonl", tmp_path / "m")
    assert res["n"] == 4 and res["micro"]["overall"] == 100.0
    s = json.loads((tmp_path / "m" / "samples.jsonl").read_text().splitlines()[0])
    assert s["completion"] == gold_completion(rows[0])


@pytest.mark.parametrize("args,msg", [
    (["--model", "/nonexistent/model"], "no such model folder"),
    (["--data", "official:/nonexistent"], "no tasks/ folder"),
    (["--data", "/nonexistent.jsonl"], "no such file"),
    (["--device", "cuda"], "no CUDA GPU is visible"),
])
def test_run_bad_input_one_line(fixture_root, tmp_path, args, msg, default_model):
    import torch

    if "--device" in args and torch.cuda.is_available():
        pytest.skip("a GPU is visible here")
    base = {"--model": "default", "--data": f"official:{fixture_root}", "--backend": "hf"}
    for k, v in zip(args[::2], args[1::2], strict=False):
        base[k] = v
    out = tmp_path / "o"
    res = run_module(["eval", "run", *[x for kv in base.items() for x in kv], "--out", str(out),
                      "--limit", "1", "--max-new-tokens", "2"])
    assert res.returncode == 2, res.stderr
    assert res.stderr.startswith("error:") and res.stderr.count("\n") == 1, res.stderr
    assert msg in res.stderr and "Traceback" not in res.stderr
    assert not (out / "samples.jsonl").exists() and not (out / "run_config.json").exists()


def short_rows_file(rows, path: Path, n: int) -> Path:
    short = sorted((r for r in rows if r["answer"]), key=lambda r: len(r["prompt"]))[:n]
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in short))
    return path


@pytest.mark.slow
def test_real_hf_backend_and_kill_resume(rows, tmp_path, default_model):
    """Real SmolLM2 weights, real hf backend: SIGKILL after the first flushed batch, rerun the same
    command, no sample lost, duplicated or regenerated; then settings changes are refused."""
    data = short_rows_file(rows, tmp_path / "short.jsonl", 6)
    out = tmp_path / "run"
    cmd = [sys.executable, "-m", "eval", "run", "--model", "default", "--data", str(data), "--out", str(out),
           "--backend", "hf", "--batch-size", "2", "--max-new-tokens", "12"]
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    samples = out / "samples.jsonl"
    deadline = time.time() + 400
    while time.time() < deadline:
        if samples.exists() and len(samples.read_text().splitlines()) >= 2:
            break
        if proc.poll() is not None:
            pytest.fail(proc.stderr.read().decode()[-2000:])
        time.sleep(0.1)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    first = samples.read_text().splitlines()
    assert 2 <= len(first) < 6, "killed mid-run"
    res = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr
    assert "ex/s" in res.stderr or "s/ex" in res.stderr, "progress bar with a rate"
    assert f"{len(first)}/6" in res.stderr, "the bar starts from the finished samples"
    lines = samples.read_text().splitlines()
    ids = [json.loads(l)["id"] for l in lines]
    assert len(ids) == len(set(ids)) == 6, "no sample lost or duplicated"
    assert lines[: len(first)] == first, "finished samples are not regenerated"
    result = json.loads((out / "results.json").read_text())
    assert result["n"] == 6 and result["complete"] and result["backend"] == "hf"
    assert result["generation"]["max_new_tokens"] == 12 and result["versions"]["transformers"]
    samples_ = [json.loads(l) for l in lines]
    assert all(isinstance(s["completion"], str) and s["completion"] for s in samples_)
    # greedy: the two rows of one batch decode as they would alone (left padding is right)
    import torch

    from common.prompts import build_messages
    from eval.backends import GenConfig, HFBackend

    threads = torch.get_num_threads()
    try:  # 1 thread: this process has no passive OpenMP wait (see eval/__main__.py)
        be = HFBackend(default_model, GenConfig(max_new_tokens=12), threads=1)
        recs = {r["id"]: r for r in map(json.loads, data.read_text().splitlines())}
        one = samples_[-1]
        assert be.generate([build_messages(recs[one["id"]])]) == [one["completion"]]
    finally:
        torch.set_num_threads(threads)
    # same command again: nothing to do, same results
    again = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert again.returncode == 0 and samples.read_text().splitlines() == lines
    # other settings into the same folder: refused, nothing changed
    other = subprocess.run([*cmd[:-1], "20"], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert other.returncode == 2 and "different max_new_tokens (12 -> 20)" in other.stderr
    assert samples.read_text().splitlines() == lines
    # the data file changed under the finished samples: refused too
    recs_l = [json.loads(l) for l in data.read_text().splitlines()]
    recs_l[0]["prompt"] += " (edited)"
    data.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in recs_l))
    edited = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert edited.returncode == 2 and "the data changed" in edited.stderr and edited.stderr.count("\n") == 1
    assert samples.read_text().splitlines() == lines


def test_export_lm_eval(fixture_root, tmp_path):
    """The folder's structure (test_lm_eval.py runs it inside real lm-eval): relative paths only."""
    res = run_module(["eval", "export-lm-eval", "--data", f"official:{fixture_root}", "--out", str(tmp_path / "lm")])
    assert res.returncode == 0, res.stderr

    class Loader(yaml.SafeLoader):
        pass

    Loader.add_constructor("!function", lambda loader, node: ("function", loader.construct_scalar(node)))
    lm = tmp_path / "lm"
    load = lambda name: yaml.load((lm / f"{name}.yaml").read_text(), Loader=Loader)  # noqa: E731
    group = load("tase")
    assert group["group"] == "tase" and group["task"] == [f"tase_{c.lower()}" for c in
                                                          "FREQ LENOP DIFF SORT REORD COMPC COMPM DOT RIDL VAR".split()]
    assert [m["metric"] for m in group["aggregate_metric_list"]] == ["overall", "en", "zh", "ko"]
    assert all(m["weight_by_size"] is False for m in group["aggregate_metric_list"])
    files = [t for g in group["task"] for t in load(g)["task"]]
    assert len(files) == len(set(files)) == 36 and len(load("tase_lenop")["task"]) == 6
    n_docs = 0
    weights = 0.0
    lang_weights = {"en": 0.0, "zh": 0.0, "ko": 0.0}
    for name in files:
        task = load(name)
        assert task["task"] == name and task["output_type"] == "generate_until" and task["test_split"] == "test"
        assert task["custom_dataset"] == ("function", "utils.load_rows") and "dataset_path" not in task
        assert task["description"] == "You need to put the final result inside <answer></answer>."
        assert task["generation_kwargs"]["do_sample"] is False
        kw = task["dataset_kwargs"]
        weights += kw["weight"]
        # every file reports every language metric (no lm-eval warning of a missing group metric); only its
        # own language has a share (the language's files' shares add up to the number of leaves)
        assert {m["metric"] for m in task["metric_list"]} == {"acc", "fine", "overall", "en", "zh", "ko"}
        assert kw["langs"] == "en,zh,ko" and (kw["lang_weight"] > 0) == bool(kw["lang_metric"])
        if kw["lang_metric"]:
            lang_weights[kw["lang_metric"]] += kw["lang_weight"]
        path = lm / "data" / kw["data_file"]
        assert not Path(kw["data_file"]).is_absolute() and path.is_file()
        n_docs += len(path.read_text().splitlines())
    assert n_docs == 216 and abs(weights - 36) < 1e-9  # the leaf mean of `overall` is the mean over tasks
    n_lang = {lang: sum(load(f)["dataset_kwargs"]["lang_metric"] == lang for f in files) for lang in lang_weights}
    assert all(abs(w - 36) < 1e-9 and n_lang[lang] for lang, w in lang_weights.items())


def test_strict_accuracy_and_loophole_passes_in_results_and_compare(fixture_root, rows, tmp_path):
    """A model that hedges (every order for SORT, the unsplit word for COMPM split, every class for DOT)
    keeps its official accuracy, and shows it: strict accuracy falls and the loophole passes are counted,
    per file in results.json and side by side in `eval compare`."""
    from rewards.split import split_word

    every_order = "ABC ACB BAC BCA CAB CBA"
    classes = "digit latin hanzi hangul kana greek symbol"
    hedged = {"sort_lengths": lambda r: every_order,
              "component_split": lambda r: split_word(r["prompt"]) if r["subtask"] == "split" and r["lang"] == "en"
              else None,
              "dot_matrix": lambda r: classes if r["subtask"] == "bitmap_type_classification" else None}
    with (tmp_path / "hedge.jsonl").open("w") as f:
        for r in rows:
            h = hedged.get(r["task"], lambda r: None)(r)
            comp = f"<answer>{h}</answer>" if h else gold_completion(r)
            f.write(json.dumps({"id": r["id"], "completion": comp}, ensure_ascii=False) + "\n")
    write_preds(tmp_path / "gold.jsonl", rows, lambda r: True)
    gold = score_cli(fixture_root, tmp_path / "gold.jsonl", tmp_path / "gold")
    hedge = score_cli(fixture_root, tmp_path / "hedge.jsonl", tmp_path / "hedge")
    assert gold["strict"]["overall"] == 100.0 and gold["loophole"]["n"] == 0
    assert hedge["overall"] == 100.0 and hedge["micro"]["overall"] == 100.0      # the official verdict is fooled
    assert hedge["loophole"]["n"] == 18 + 6 + 6                                   # 3 SORT files, en_split, DOT type
    assert hedge["loophole"]["by_task"]["SORT"] == 18 and hedge["strict"]["by_task"]["SORT"] == 0.0
    assert hedge["loophole"]["by_file"]["token_structure/component_split/en_split.csv"] == 6
    assert hedge["strict"]["by_file"]["token_structure/component_split/en_split.csv"] == 0.0
    assert hedge["strict"]["by_task"]["COMPM"] == 83.33 and hedge["strict"]["by_task"]["DOT"] == 66.67
    assert hedge["strict"]["overall"] == 85.0     # (0 + 83.33 + 66.67 + 7 * 100) / 10
    line = json.loads((tmp_path / "hedge" / "samples.jsonl").read_text().splitlines()[0])
    assert "strict" in line
    res = run_module(["eval", "compare", str(tmp_path / "gold"), str(tmp_path / "hedge"), "--out",
                      str(tmp_path / "cmp")])
    assert res.returncode == 0, res.stderr
    md = (tmp_path / "cmp" / "comparison.md").read_text()
    table = md[md.index("## Table 3"):].splitlines()
    assert any(l.startswith("| hedge |") and "| 100.00 |" in l and "| 30 | 216 |" in l for l in table), table
    assert any(l.startswith("| gold |") and "| 0 | 216 |" in l for l in table), table
    assert "en_split.csv 6" in md
    summary = json.loads((tmp_path / "cmp" / "comparison.json").read_text())
    assert summary["loophole"]["hedge"]["n"] == 30 and summary["strict"]["gold"]["overall"] == 100.0
