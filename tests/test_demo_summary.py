"""What `make demo` says about its GRPO stage (issue 47): the mixed groups dynamic sampling trained on, and whether a
model answers from a prior (mostly one constant answer) rather than from the row."""
from __future__ import annotations

import json

from recipes.demo import answer_spread, grpo_signal, logged_steps


def _metrics(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def test_grpo_signal_sums_the_dynamic_sampling_counts(tmp_path):
    rows = [{"step": s, "reward": 0.3, "tase/dynamic/groups_drawn": d, "tase/dynamic/groups_kept": 4.0,
             "tase/dynamic/groups_dropped": p, "tase/dynamic/rounds": r}
            for s, d, p, r in ((1, 16.0, 11.0, 3.0), (2, 8.0, 4.0, 1.0))]
    m = logged_steps(_metrics(tmp_path / "metrics.jsonl", rows))
    line = grpo_signal(m)
    assert "2 steps trained on 8 mixed groups" in line and "drew 24 and dropped the 15" in line and "(62%" in line
    # the reading follows the GRPO stage's verdict: a delta beyond its interval either way is not called "little"
    assert "A few steps move a model little" in line
    down, up = grpo_signal(m, "loss"), grpo_signal(m, "gain")
    assert "down beyond the interval" in down and "noise rather than a result" in down and "little" not in down
    assert "up beyond the interval" in up and "not read as a result" in up and "little" not in up
    assert all(x.endswith("took 100+ steps (make proof, docs/results.md)") for x in (line, down, up))
    assert grpo_signal(logged_steps(_metrics(tmp_path / "plain.jsonl", [{"step": 1, "reward": 0.1}]))).endswith(
        "no dynamic sampling metrics logged")
    assert logged_steps(tmp_path / "missing.jsonl") == []


def test_answer_spread_flags_a_constant_answer_only(tmp_path):
    for name, answers in (("warm-up", ["0", "5", "1", "0", "3"]), ("tuned", ["1", "1", "1", "5"])):
        (tmp_path / name).mkdir()
        (tmp_path / name / "samples.jsonl").write_text(
            "".join(json.dumps({"id": i, "extracted": a}) + "\n" for i, a in enumerate(answers)), encoding="utf-8")
    line = answer_spread(tmp_path)
    warm, tuned = line.removeprefix("answers on the evaluation rows: ").split("; ")
    assert warm == "warm-up 4 distinct, top '0' on 40% of rows"  # no majority: no warning
    assert tuned == "tuned 2 distinct, top '1' on 75% of rows: mostly one constant, an answer from a prior"
    assert answer_spread(tmp_path / "missing") == ""
