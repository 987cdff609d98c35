"""Guided GRPO (recipes/features/guidance/hints.py, issue 63): which groups are guided (all strict verdicts fail,
scripted), hints declared by the task modules from each row's own gold, no hint reaching evaluation, held-out or
official rows, the options, and CPU GRPO runs that log guided groups and hint levels (with dynamic sampling,
num_iterations 2 and gradient accumulation) and resume the hint schedule after kill -9."""
import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT, call_main, tree_env
from killing import checkpoint_whole, kill_when

PY = sys.executable



def test_only_groups_whose_strict_verdicts_all_fail_are_hinted():
    """Scripted completions of real rows, scored by the real verdicts: a group of wrong answers (right format or not)
    fails and gets a hinted prompt (its own gold's hint at the schedule's level); a group with one right answer is
    mixed and does not, nor does an all-right group, nor a failed group of a row that is not a synth row."""
    import synth
    from recipes.features.guidance.hints import failed_groups, plan_hints
    from recipes.shared.data import to_row
    from rewards.trl import batch_scores, reward_columns
    from synth.core import HINT_PREFIX

    recs = [r for r in synth.generate("freq_count", "en", 200, 1234, max_len=6) if r["answer"] == "2"][:4]
    official = {**recs[3], "id": "freq_count/english/7"}
    wrong = ["<answer>7</answer>", "the answer is **9**", "7", "<answer>9"]
    mixed = ["<answer>2</answer>", "<answer>7</answer>", "<answer>9</answer>", "<answer>7</answer>"]
    right = ["<answer>2</answer>"] * 4
    groups = [(recs[0], wrong), (recs[1], mixed), (recs[2], right), (official, wrong)]
    inputs = [to_row(r, "sys") for r, comps in groups for _ in comps]
    strict = []
    for r, comps in groups:
        cols = {k: [v] * 4 for k, v in reward_columns(r).items()}
        strict += [s.strict for s in batch_scores(None, comps, **cols)]
    assert failed_groups(strict, 4) == [True, False, False, True]
    plan = plan_hints(inputs, strict, 4, lambda task: 1)
    assert list(plan) == [0]
    prompt, level = plan[0]
    assert level == 1 and prompt[:-1] == inputs[0]["prompt"][:-1]
    assert prompt[-1]["content"] == f"{recs[0]['prompt']}\n\n{HINT_PREFIX}the count is between 0 and 5."
    assert "Hint" not in inputs[0]["prompt"][-1]["content"]  # the input rows are left as they were
    assert plan_hints(inputs, strict, 4, lambda task: None) == {}  # a task without hints
    with pytest.raises(ValueError, match="groups of 4"):
        failed_groups(strict[:6], 4)


def test_hints_are_declared_by_task_modules_from_the_rows_gold_only():
    """component_split and freq_count declare graded hints (level 0 the strongest): each names pieces of the row's
    own answer and never the whole answer; another question with the same answer gets the same hint (built from the
    answer, not the prompt); one-character answers (ko/zh combine) and tasks without hints get none."""
    import synth
    from synth.core import HINT_PREFIX, hint_count, spec, task_hint

    assert hint_count("component_split") == 3 and hint_count("freq_count") == 2 and hint_count("shuffle_tokens") == 0
    for g in synth.core.available().values():  # a task with hints implements them in its own module
        assert (g.hint_levels > 0) == ("hint" in g.__dict__), g.task
    rec = next(synth.generate("component_split", "en", 1, 3, "split"))
    pieces = rec["answer"].split(", ")
    hints = [task_hint(rec, lv) for lv in range(3)]
    assert all(h.startswith(HINT_PREFIX) for h in hints) and len(set(hints)) == 3
    assert pieces[0] in hints[0] and pieces[0] in hints[1] and pieces[-1] not in hints[0].split('"')[1]
    assert task_hint({**rec, "prompt": "another question"}, 1) == hints[1]
    assert task_hint(rec, 99) == hints[2]  # capped at the weakest
    for lang in ("ko", "zh"):
        one = next(synth.generate("component_split", lang, 1, 3, "combine"))
        assert task_hint(one, 0) is None
    word = next(synth.generate("component_split", "en", 1, 3, "combine"))
    assert word["answer"] not in task_hint(word, 0) and word["answer"][:2] in task_hint(word, 0)
    assert task_hint(next(synth.generate("shuffle_tokens", "en", 1, 3)), 0) is None
    assert spec("freq_count").hint({"answer": "5"}, 0) == "the count is between 4 and 6."


def test_no_hint_reaches_evaluation_heldout_or_official_rows(fixture_root, tmp_path):
    """Hints exist only in recipes/features/guidance/hints.py: no evaluation or held-out module imports it or the synth
    hint builder; official rows (every file of the fixture release) and held-out rows get no hint from it (only synth
    training ids are hinted), and the prompts eval builds for them carry no hint text."""
    from common.prompts import build_messages
    from eval.data import load_official
    from recipes.features.guidance.hints import gold_text, hint_for
    from recipes.features.heldout.rows import records
    from recipes.shared.config import TaseArgs
    from recipes.shared.data import to_row
    from synth.core import HINT_PREFIX

    users = []
    for path in [*(ROOT / "eval").rglob("*.py"), *(ROOT / "recipes/features/heldout").glob("*.py"),
                 ROOT / "recipes/select_checkpoint.py", ROOT / "recipes/proof_stages/evaluate.py"]:
        tree = ast.parse(path.read_text())
        names = {a.name for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom)) for a in n.names}
        mods = {n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
        if ({"guidance", "task_hint", "hint_for", "HINT_PREFIX"} & names
                or "recipes.features.guidance.hints" in mods | names):
            users.append(str(path))
    assert not users, users
    official = list(load_official(fixture_root))
    assert len(official) > 100
    for r in official:
        row = to_row(r, "sys")
        assert hint_for(row, 0) is None and gold_text(row) is None, r["id"]
        assert HINT_PREFIX not in json.dumps(build_messages(r), ensure_ascii=False)
    args = TaseArgs(tasks=["component_split", "freq_count"], langs=["en"], held_out_rows=6)
    held = records(args)
    assert held
    for r in held:
        assert HINT_PREFIX not in json.dumps(build_messages(r), ensure_ascii=False)


def test_options_are_checked_in_one_line(tmp_path):
    from recipes.shared.config import TaseArgs

    for kw, msg in (({"guidance": "hints"}, "guidance must be one of none, hint, gold, both"),
                    ({"guidance": "hint", "guidance_window": 0}, "guidance_window must be an integer >= 1"),
                    ({"guidance": "hint", "guidance_up": 0.1, "guidance_down": 0.2}, "guidance_down and guidance_up"),
                    ({"guidance": "gold", "guidance_schedule": "steps"}, "guidance_schedule must be one of")):
        with pytest.raises(ValueError, match=msg):
            TaseArgs(**kw)
    base = ["recipes/grpo.py", "--dry-run", "--model_name_or_path", "default", "--output_dir", str(tmp_path / "o")]
    code, err = call_main(base + ["--guidance", "hints"])
    assert code == 2 and "guidance" in err and "Traceback" not in err, err[-500:]
    assert len(err.strip().splitlines()) == 1, err
    for mode in ("gold", "both"):  # async runs them in the rollout worker (issue 79)
        code, err = call_main(base + ["--guidance", mode, "--trainer", "async"])
        assert code == 0, err[-1500:]


def test_hint_schedule_moves_by_unhinted_success_and_by_step():
    from recipes.features.guidance.hints import HintSchedule

    s = HintSchedule({"a": 3, "none": 0}, "success", start=0, window=2, up=0.5, down=0.0)
    assert s.level("none") is None and s.level("a") == 0
    s.record("a", 0.5)
    s.record("a", 0.5)
    assert s.level("a") == 1  # mean unhinted success 0.5 >= up: a weaker hint
    s.record("a", 0.0)
    s.record("a", 0.0)
    assert s.level("a") == 0
    t = HintSchedule({"a": 3}, "step", start=0, every=10)
    t.step = 25
    assert t.level("a") == 2
    u = HintSchedule({"a": 3}, "fixed", start=1)
    u.record("a", 1.0)
    assert u.level("a") == 1
    v = HintSchedule({"a": 3}, "success", start=0, window=2)
    v.load({**s.state(), "levels": {"a": 2}, "step": 7})
    assert v.level("a") == 2 and v.step == 7


def _args(tiny_model: Path, data: Path, extra: list[str]) -> list[str]:
    return [PY, "recipes/grpo.py", "--model_name_or_path", str(tiny_model), "--use_cpu", "true", "--bf16", "false",
            "--dtype", "float32", "--train_data", str(data), "--logging_steps", "1", "--report_to", "none",
            "--learning_rate", "1e-3", "--seed", "0", "--gradient_checkpointing", "false", *extra]


def _metrics(out: Path) -> list[dict]:
    return [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines() if "reward" in x]


@pytest.mark.slow
def test_guided_run_hints_all_fail_groups_only_with_dynamic_sampling(tiny_model, tmp_path):
    """3 steps, guidance both with dynamic sampling, num_iterations 2 and gradient accumulation 2, on freq_count rows
    whose answer is 1 or 2, the model restricted to '**', '1', '2' and the tags (so some groups mix): every generation
    logs its guided groups and hint level, exactly the failed groups are hinted (a mixed one is not), and the
    held-out evaluation's samples carry no hint."""
    from test_dynamic_sampling import restricted_vocab

    import synth
    from synth.core import HINT_PREFIX

    rows = [r for r in synth.generate("freq_count", "en", 200, 1234, max_len=6) if r["answer"] in ("1", "2")][:24]
    data = tmp_path / "train.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    cfg = tmp_path / "gen.yaml"
    cfg.write_text("generation_kwargs: " + json.dumps(restricted_vocab(tiny_model, ["**", "1", "2", "<answer>",
                                                                                  "</answer>"])) + "\n")
    out = tmp_path / "run"
    res = subprocess.run(_args(tiny_model, data, [
        "--config", str(cfg), "--output_dir", str(out), "--max_steps", "3", "--num_train_examples", "24",
        "--num_generations", "4", "--per_device_train_batch_size", "4", "--gradient_accumulation_steps", "2",
        "--num_iterations", "2", "--max_completion_length", "8", "--guidance", "both",
        "--dynamic_sampling", "true", "--dynamic_sampling_max_rounds", "1", "--held_out_rows", "4",
        "--eval_strategy", "steps", "--eval_steps", "2", "--save_steps", "2"]),
        cwd=ROOT, env=tree_env(), capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    assert "guidance both (start): hint levels " in res.stderr
    steps = _metrics(out)
    assert [m["step"] for m in steps if "tase/guide/groups" in m] == [1, 3]
    steps = [m for m in steps if "tase/guide/groups" in m]
    for m in steps:
        g = {k.removeprefix("tase/guide/"): v for k, v in m.items() if k.startswith("tase/guide/")}
        assert {"groups", "groups_failed", "groups_hinted", "groups_gold", "groups_guided", "guided_share",
                "success_unhinted", "gold_share", "hint_level", "freq_count/hint_level"} <= set(g), g
        # every freq_count row has a hint: exactly the failed groups are hinted; gold goes to those still failing
        assert g["groups_hinted"] == g["groups_failed"] <= g["groups"] and g["hint_level"] == 0.0
        assert g["groups_gold"] <= g["groups_failed"] and g["gold_share"] == g["groups_gold"] / (4 * g["groups"])
    assert sum(m["tase/guide/groups_hinted"] for m in steps) > 0
    # generation (hence guidance) runs every 2 steps: num_iterations 2 x steps_per_generation 2 micro-batches
    assert any(m["tase/guide/groups_failed"] < m["tase/guide/groups"] for m in steps)  # a mixed group: not hinted
    held = [json.loads(x) for p in (out / "heldout").glob("step-*/samples.jsonl") for x in p.read_text().splitlines()]
    assert held and not any(HINT_PREFIX in json.dumps(x, ensure_ascii=False) for x in held)


@pytest.mark.slow
def test_kill_then_resume_continues_the_hint_schedule(tiny_model, tmp_path):
    """A guided run (hint + gold) on component_split en split whose schedule moves one level stronger after every
    group (window 1, down 0.5, start at the weakest level 2; a random model never succeeds) logs guided groups and
    hint levels; killed with SIGKILL after a checkpoint, it resumes at the level that checkpoint saved."""
    import synth
    from recipes.features.guidance.hints import saved_state
    from recipes.shared.run_dir import checkpoint_problem

    rows = list(synth.generate("component_split", "en", 40, 1234, "split", max_len=8))
    data = tmp_path / "train.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "run"
    cmd = _args(tiny_model, data, [
        "--output_dir", str(out), "--max_steps", "4", "--save_steps", "1", "--num_train_examples", "40",
        "--num_generations", "2", "--per_device_train_batch_size", "2", "--max_completion_length", "16",
        "--guidance", "both", "--guidance_start_level", "2", "--guidance_window", "1", "--guidance_down", "0.5",
        "--guidance_up", "1.0"])
    kill_when(cmd, checkpoint_whole(out / "checkpoint-1"), env=tree_env(), timeout=300)
    first = _metrics(out)
    assert first[0]["tase/guide/groups_hinted"] == 1 and first[0]["tase/guide/hint_level"] == 2.0
    assert first[0]["tase/guide/groups_gold"] == 1 and first[0]["tase/guide/gold_share"] == 0.5
    assert first[0]["tase/guide/component_split/hint_level"] == 1.0  # 2 -> 1 after the first group failed
    ckpt = max((p for p in out.glob("checkpoint-*") if checkpoint_problem(p) is None),
               key=lambda p: int(p.name.split("-")[1]))
    saved = saved_state(ckpt)["levels"]["component_split"]
    res = subprocess.run(cmd + ["--resume_from_checkpoint", "true"], cwd=ROOT, env=tree_env(), capture_output=True,
                         text=True, timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    assert f"guidance both (restored from {ckpt}): hint levels component_split {saved}/2" in res.stderr
    step = int(ckpt.name.split("-")[1])
    after = [m for m in _metrics(out) if m["step"] == step + 1][0]
    assert after["tase/guide/hint_level"] == float(saved)  # the first group after the resume: the saved level
    last = _metrics(out)[-1]
    assert last["step"] == 4 and json.loads((out / "guidance.json").read_text())["levels"]["component_split"] == \
        int(last["tase/guide/component_split/hint_level"])


@pytest.mark.slow
def test_guided_run_with_the_curriculum(tiny_model, tmp_path):
    """Guidance beside the adaptive curriculum (synth rows drawn as the run reads them): 2 steps on component_split en
    split log both the guided groups with their hint level and the curriculum's level, and the run saves both states
    (the curriculum's draws the rows, guidance hints the groups that all fail)."""
    out = tmp_path / "run"
    res = subprocess.run(_args(tiny_model, tmp_path / "unused.jsonl", [
        "--train_data", "synth", "--streaming", "true", "--tasks", "component_split", "--langs", "en",
        "--subtasks", "split", "--max_len", "8", "--curriculum", "true", "--output_dir", str(out), "--max_steps", "2",
        "--save_steps", "2", "--num_generations", "2", "--per_device_train_batch_size", "2",
        "--max_completion_length", "8", "--guidance", "hint"]), cwd=ROOT, env=tree_env(), capture_output=True,
        text=True, timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    steps = _metrics(out)
    assert [m["step"] for m in steps] == [1, 2]
    for m in steps:  # a random model never succeeds: every group hinted, the curriculum stays at level 0
        assert m["tase/guide/groups_hinted"] == m["tase/guide/groups"] == 1 and m["tase/guide/hint_level"] == 0.0
        assert m["tase/curriculum/component_split/level"] == 0.0
    names = {p.name for p in (out / "checkpoint-2").iterdir()}
    assert {"guidance.json", "curriculum.json"} <= names, names
