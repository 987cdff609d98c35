"""The adaptive curriculum (issue 47): levels declared by the task modules, the move rule on scripted accuracies, the
reward wrapper on a real batch, the contamination guard at every level, and a CPU GRPO run that logs the levels,
is killed after a checkpoint and resumes at the saved levels."""
import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import ROOT
from killing import checkpoint_whole, kill_when

PY = sys.executable


def _cur(counts, **kw):
    from recipes.features.curriculum.levels import Curriculum

    return Curriculum(counts, **kw)


def test_levels_move_by_window_thresholds_and_bounds():
    cur = _cur({"a": 3, "b": 2, "static": 0}, start=0, window=2, up=0.5, down=0.25)
    assert cur.level("static") is None and cur.levels == {"a": 0, "b": 0}
    assert cur.record("a", 0, 1.0) is None and cur.level("a") == 0  # fewer groups than the window: no move
    assert cur.record("a", 0, 0.0) == 1  # mean 0.5 >= up (inclusive): up one, the window empties
    assert list(cur.scores["a"]) == []
    assert cur.record("a", 0, 1.0) is None and not cur.scores["a"]  # a group drawn at the old level does not count
    assert [cur.record("a", 1, x) for x in (0.25, 0.5, 0.5)] == [None, None, 2]  # 0.375 stays; then last 2: 0.5
    assert [cur.record("a", 2, x) for x in (1.0, 1.0, 1.0)] == [None, None, None]  # top level: stays
    assert len(cur.scores["a"]) == 2  # the window keeps rolling (the last 2 groups)
    assert [cur.record("a", 2, x) for x in (0.0, 0.5)] == [None, 1]  # 0.5 (no move at the top), then 0.25 <= down
    assert [cur.record("b", 0, 0.0) for _ in range(3)] == [None, None, None]  # bottom level: stays
    assert cur.record("static", 0, 1.0) is None and cur.record("nope", 0, 1.0) is None
    saved = json.loads(json.dumps(cur.state()))
    again = _cur({"a": 3, "b": 2}, start=0, window=2)
    again.load(saved)
    assert again.levels == {"a": 1, "b": 0} and list(again.scores["b"]) == [0.0, 0.0] and again.moves == 3
    capped = _cur({"a": 2}, start=5)  # a start past a task's top is its top (the official range)
    assert capped.level("a") == 1
    capped.load({"levels": {"a": 9, "gone": 1}})
    assert capped.levels == {"a": 1}


def test_curriculum_options_are_one_line():
    from recipes.shared.config import TaseArgs

    base = dict(tasks=["sentence_length"], langs=["en"], streaming=True, curriculum=True)
    TaseArgs(**base)  # fine
    TaseArgs(**base, trainer="async")  # the rollout worker moves the levels (issue 79)
    for extra, want in (({"streaming": False}, "--streaming true"), ({"curriculum_up": 0.1}, "0 <= down < up <= 1"),
                        ({"curriculum_window": 0}, "curriculum_window must be an integer >= 1"),
                        ({"tasks": ["freq_count"]}, "has difficulty levels; these do: component_split")):
        with pytest.raises(ValueError, match=want.replace("(", r"\(")):
            TaseArgs(**{**base, **extra})


def test_task_levels_declared_in_their_modules():
    """The last level of every task draws exactly what the task draws without a curriculum (the official range); the
    easiest levels are easier on the knobs they name; a task without levels ignores `level`."""
    import synth
    from synth.core import SynthError, available, level_count, spec

    with_levels = sorted(t for t, g in available().items() if g.levels)
    assert {"component_split", "sentence_length", "sort_lengths"} <= set(with_levels)
    for task in with_levels:
        top = level_count(task) - 1
        plain = [r["prompt"] for r in synth.generate(task, "all", 12, 3)]
        assert plain == [r["prompt"] for r in synth.generate(task, "all", 12, 3, level=lambda t, top=top: top)], task
    easy = list(synth.generate("component_split", "all", 60, 3, level=lambda t: 0))
    assert {r["meta"]["level"] for r in easy} == {0}
    for r in easy:
        if r["lang"] == "en":
            assert len(r["meta"]["word"]) <= 7 and len(r["meta"]["parts"]) == 2
        elif r["lang"] == "ko":
            assert len(r["meta"]["jamo"]) == 2
        elif r["subtask"] == "combine":
            assert len(r["meta"]["parts"]) == 2
        else:
            assert all(len(d) == 2 for d in r["meta"]["decompositions"])
    counts = [int(r["answer"]) for r in synth.generate("sentence_length", "all", 30, 3, "count", level=lambda t: 0)]
    assert max(counts) <= 10 and min(counts) >= 5
    static = list(synth.generate("freq_count", "en", 4, 3, level=lambda t: 0))
    assert static == list(synth.generate("freq_count", "en", 4, 3)) and "level" not in static[0]["meta"]
    with pytest.raises(SynthError, match="no level 9"):
        spec("sentence_length").at_level(spec("sentence_length").Config(), 9)
    capped = spec("sentence_length").at_level(spec("sentence_length").Config(max_len=6), 2)  # the run's cap wins
    assert capped.max_len == 6 and spec("sentence_length").at_level(spec("sentence_length").Config(), 2).max_len == 60


def test_registry_refuses_levels_of_unknown_knobs():
    from synth.core import GENERATORS, Generator, RegistryError, register

    class Bad(Generator):
        task = "toy_bad_levels"
        levels = ({"max_len": 5}, {"word_len": 9})

    with pytest.raises(RegistryError, match=r"levels\[1\] must be a dict of Config fields"):
        register(Bad)
    assert "toy_bad_levels" not in GENERATORS


def test_reward_wrapper_moves_levels_from_group_verdicts():
    """CurriculumReward on a real batch (rows drawn at a level, two GRPO groups of 2): returns the wrapped reward
    unchanged, moves the task by each group's strict accuracy, logs tase/curriculum/<task>/level."""
    from recipes.features.curriculum.levels import CurriculumReward
    from recipes.shared import data
    from recipes.shared.config import TaseArgs
    from rewards.trl import accuracy_strict

    args = TaseArgs(tasks=["sentence_length"], langs=["en"], subtasks=["count"], streaming=True, curriculum=True)
    cur = _cur({"sentence_length": 5}, start=2, window=1, up=0.7, down=0.1)
    rows = [r for r in data.rows(args, limit=2, level=cur.level) for _ in range(2)]  # 2 groups of 2 completions
    assert [r[data.LEVEL_COLUMN] for r in rows] == [2, 2, 2, 2]
    completions = [f"<answer>{rows[0]['answer']}</answer>"] * 2 + ["<answer>0</answer>"] * 2
    cols = {k: [r[k] for r in rows] for k in rows[0] if k != "prompt"}
    logged = {}
    f = CurriculumReward(accuracy_strict, cur)
    out = f(prompts=[r["prompt"] for r in rows], completions=completions, log_metric=logged.__setitem__, **cols)
    assert out == accuracy_strict([r["prompt"] for r in rows], completions, **cols) == [1.0, 1.0, 0.0, 0.0]
    assert f.__name__ == "accuracy_strict"
    # group 1 (all right) moved 2 -> 3; group 2 was drawn at 2, a stale level now: not counted
    assert cur.level("sentence_length") == 3
    assert logged == {"tase/curriculum/sentence_length/level": 3.0, "tase/curriculum/sentence_length/drawn_level": 2.0}


def test_guard_applies_at_every_level(tmp_path, fixture_root):
    """Held-out and official rows never reach training at any level: a held-out file of the very rows the stream draws
    first at that level, and the official sample, are both excluded from what the curriculum stream yields."""
    from common.guard import normalize_prompt
    from recipes.shared import data
    from recipes.shared.config import TaseArgs, data_streams, level_counts
    from synth.guard import guard_from_specs

    official = guard_from_specs([f"official:{fixture_root}"])
    base = dict(tasks=["component_split", "sentence_length", "sort_lengths"], langs=["all"], streaming=True,
                curriculum=True, paraphrase=False, max_len=None)
    counts = level_counts(data_streams(base["tasks"], base["langs"], None))
    for lv in range(max(counts.values())):
        cur = _cur(counts, start=lv)
        plain = list(data.iter_records(TaseArgs(**base), limit=30, level=cur.level))
        assert {r["meta"]["level"] for r in plain} == {min(lv, counts[t] - 1) for t in counts}
        held = tmp_path / f"heldout{lv}.jsonl"
        held.write_text("".join(json.dumps(r) + "\n" for r in plain[:10]), encoding="utf-8")
        args = TaseArgs(**base, exclude=[f"official:{fixture_root}", str(held)])
        kept = list(data.iter_records(args, limit=30, level=cur.level))
        held_prompts = {normalize_prompt(r["prompt"]) for r in plain[:10]}
        assert len(kept) == 30 and not held_prompts & {normalize_prompt(r["prompt"]) for r in kept}, lv
        guard = guard_from_specs(args.exclude)  # the run's own guard: what it drops, it drops at every level
        assert all(guard.reason(r["prompt"]) is None and guard.answer_reason(r) is None for r in kept), lv
        assert not {normalize_prompt(r["prompt"]) for r in kept} & official.prompts, lv
        assert {r["meta"]["level"] for r in kept} == {r["meta"]["level"] for r in plain}


def _metrics(out: Path) -> list[dict]:
    return [json.loads(l) for l in (out / "metrics.jsonl").read_text().splitlines()]


@pytest.mark.slow
def test_curriculum_run_logs_levels_and_resumes_at_saved_levels(tiny_model, tmp_path):
    """A CPU curriculum run (every group moves a level down: window 1, down 0.5, a random model scores 0) logs a level
    per task with levels (none for a static task); killed with SIGKILL after a checkpoint, it resumes at the levels
    that checkpoint saved, and its stream draws them."""
    from recipes.features.curriculum.levels import saved_state
    from recipes.shared.run_dir import checkpoint_problem

    out = tmp_path / "cur"
    cmd = [PY, "recipes/grpo.py", "--model_name_or_path", str(tiny_model), "--output_dir", str(out), "--max_steps", "4",
           "--save_steps", "1", "--use_cpu", "true", "--bf16", "false", "--dtype", "float32", "--tasks",
           "sentence_length", "component_split", "freq_count", "--langs", "en", "--max_len", "6",
           "--num_generations", "2", "--per_device_train_batch_size", "6", "--max_completion_length", "8",
           "--logging_steps", "1", "--report_to", "none", "--learning_rate", "1e-3", "--seed", "0",
           "--gradient_checkpointing", "false", "--streaming", "true", "--curriculum", "true", "--curriculum_window",
           "1", "--curriculum_up", "1.0", "--curriculum_down", "0.5", "--curriculum_start_level", "4"]
    kill_when(cmd, checkpoint_whole(out / "checkpoint-1"), timeout=300)
    first = [m for m in _metrics(out) if "reward" in m]
    assert first and first[0]["tase/curriculum/sentence_length/level"] == 3.0  # 4 -> 3 (top: 4 of 0..4)
    assert first[0]["tase/curriculum/component_split/level"] == 2.0  # start 4 capped at its top 3, then 3 -> 2
    assert not any(k.startswith("tase/curriculum/freq_count") for k in first[0])  # static: no levels
    ckpt = max((p for p in out.glob("checkpoint-*")
                if p.name.split("-", 1)[1].isdigit() and checkpoint_problem(p) is None),
               key=lambda p: int(p.name.split("-")[1]))  # the one a resume takes: the newest complete checkpoint
    saved = saved_state(ckpt)["levels"]
    assert saved["sentence_length"] < 4 and saved["component_split"] < 3
    res = subprocess.run(cmd + ["--resume_from_checkpoint", "true"], cwd=ROOT, capture_output=True, text=True,
                         timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    assert f"curriculum (restored from {ckpt})" in res.stderr
    step = int(ckpt.name.split("-")[1])
    after = [m for m in _metrics(out) if "reward" in m and m["step"] == step + 1][0]
    for task, lv in saved.items():  # the first batch after the resume was drawn at the saved level
        assert after[f"tase/curriculum/{task}/drawn_level"] == float(lv), (task, after)
    last = [m for m in _metrics(out) if "reward" in m][-1]
    assert last["step"] == 4 and json.loads((out / "curriculum.json").read_text())["levels"] == {
        t: int(last[f"tase/curriculum/{t}/level"]) for t in saved}  # the final model's folder holds the last state


def test_start_restores_from_curriculum_json_or_trainer_state(tmp_path, capsys):
    """A resumed run takes the checkpoint's curriculum.json, or the copy the Trainer wrote into trainer_state.json when
    a kill came before curriculum.json; a checkpoint without either starts at the start level. The buffered shuffle is
    turned off (it would read 1,000 rows ahead of every level change)."""
    from types import SimpleNamespace

    from common.errors import TaseError
    from recipes.features.curriculum.levels import STATE_FILE, start
    from recipes.shared.config import TaseArgs

    tase = TaseArgs(tasks=["sentence_length", "component_split", "freq_count"], langs=["en"], streaming=True,
                    curriculum=True, curriculum_start_level=1)
    cfg = SimpleNamespace(shuffle_dataset=True)
    state = {"levels": {"sentence_length": 3, "component_split": 0}, "scores": {"sentence_length": [0.5]}, "moves": 4}
    ckpt = tmp_path / "checkpoint-2"
    ckpt.mkdir()
    (ckpt / "trainer_state.json").write_text(json.dumps(
        {"global_step": 2, "stateful_callbacks": {"CurriculumCallback": {"args": {}, "attributes": {"saved": state}}}}))
    cur = start(tase, cfg, str(ckpt))
    assert cur.levels == {"sentence_length": 3, "component_split": 0} and list(cur.scores["sentence_length"]) == [0.5]
    assert cfg.shuffle_dataset is False
    err = capsys.readouterr().err
    assert f"curriculum (restored from {ckpt}): component_split 0/3, sentence_length 3/4; static: freq_count" in err
    (ckpt / STATE_FILE).write_text(json.dumps({**state, "levels": {"sentence_length": 2}}))
    assert start(tase, cfg, str(ckpt)).levels == {"sentence_length": 2, "component_split": 1}  # the file wins
    (ckpt / STATE_FILE).write_text("{not json")  # unreadable: the copy in trainer_state.json, said in one line
    assert start(tase, cfg, str(ckpt)).levels == {"sentence_length": 3, "component_split": 0}
    assert "curriculum.json: not valid JSON" in capsys.readouterr().err
    (ckpt / "trainer_state.json").write_text("{}")  # and no copy: one line
    with pytest.raises(TaseError, match="holds no copy of the curriculum"):
        start(tase, cfg, str(ckpt))
    bare = tmp_path / "checkpoint-1"
    bare.mkdir()
    (bare / "trainer_state.json").write_text(json.dumps({"global_step": 1}))
    assert start(tase, cfg, str(bare)).levels == {"sentence_length": 1, "component_split": 1}
    assert "holds no curriculum state" in capsys.readouterr().err
    assert start(TaseArgs(tasks=["sentence_length"], langs=["en"]), cfg, None) is None  # off: nothing


def test_async_worker_moves_the_level_its_stream_draws_and_sends_it_back():
    """trainer: async (issue 79): the curriculum reaches the rollout worker in one pickle with the streaming dataset
    (both are the worker loop's arguments), so the worker's copy is one object: its rollout hook moves the level from a
    group's strict verdicts (TRL's real _score_group) and the next row that stream draws is at the new level; the
    trainer's copy is untouched until it drains the state the worker sent."""
    import asyncio
    import pickle

    from test_async_guard import _scored_loop
    from trl.experimental.async_grpo.async_rollout_worker import RolloutGroup, TrainingSequence

    from recipes.async_grpo.cpu_engine import WeightedReward
    from recipes.features.curriculum.levels import WorkerCurriculum, WorkerLevels
    from recipes.shared import data
    from recipes.shared.config import TaseArgs
    from rewards.trl import accuracy_strict

    args = TaseArgs(tasks=["sentence_length"], langs=["en"], subtasks=["count"], streaming=True, curriculum=True)
    levels = WorkerLevels(_cur({"sentence_length": 5}, start=2, window=1, up=0.7, down=0.1))
    sent = {"dataset": data.build_dataset(args, level=levels.cur.level),
            "tase_hooks": [WorkerCurriculum(levels.cur, levels.queue)]}
    child = pickle.loads(pickle.dumps(sent))  # the spawn pickles the loop's arguments together, as here
    hook = child["tase_hooks"][0]
    assert hook.updates is None  # a plain pickle leaves the queue behind (TRL's picklability check)
    hook.updates = levels.queue
    rows = iter(child["dataset"])
    row = next(rows)
    assert row[data.LEVEL_COLUMN] == 2
    loop, _, pushed = _scored_loop([hook], [WeightedReward(accuracy_strict, 1.0)])
    group = RolloutGroup(
        prompts=[row["prompt"]] * 2, reward_kwargs={k: [v] * 2 for k, v in row.items() if k != "prompt"},
        completions=[[{"role": "assistant", "content": "<answer>none</answer>"}]] * 2, completions_ids=[[1], [1]],
        completions_sequences=[[TrainingSequence([0, 1], [0, 1], [0.0, -1.0], "a")],
                               [TrainingSequence([0, 1], [0, 1], [0.0, -1.0], "b")]],
        tool_call_counts=[0, 0], tool_failure_counts=[0, 0], model_version=0, group_id=0,
        env_rewards=[None, None], rollout_rewards=[None, None])
    assert len(asyncio.run(loop._score_group(group))) == 2  # the hook keeps every sample
    assert pushed[-1] == {"tase/curriculum/sentence_length/drawn_level": 2.0,
                          "tase/curriculum/sentence_length/level": 1.0}
    assert next(rows)[data.LEVEL_COLUMN] == 1  # the worker's stream reads the worker's level
    assert levels.cur.level("sentence_length") == 2  # the trainer's copy, until it drains
    deadline = time.time() + 10
    while not levels.drain():  # a spawn queue's put lands after its feeder thread ran
        assert time.time() < deadline
        time.sleep(0.05)
    assert levels.cur.level("sentence_length") == 1 and levels.cur.moves == 1
