"""What `make demo` says about its GRPO stage (issue 47): the mixed groups dynamic sampling trained on, and whether a
model answers from a prior (mostly one constant answer) rather than from the row."""
from __future__ import annotations

import json
import re

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
    assert "2 steps trained on 8 mixed groups" in line and "(62%" in line
    # issue 81: every group drawn is accounted for (24 = 8 kept + 15 dropped + 1 surplus), the surplus named
    assert "drew 24, kept those 8, dropped 15 whose strict verdicts were all equal" in line
    assert "and discarded 1 mixed group beyond the batches' need." in line
    said = [int(x) for x in re.findall(r"drew (\d+), kept those (\d+), dropped (\d+).*discarded (\d+)", line)[0]]
    assert said[0] == sum(said[1:]) == sum(r["tase/dynamic/groups_drawn"] for r in rows)
    # padding groups (uniform, no loss) are said; a log without surplus adds nothing to say
    padded = [{**r, "tase/dynamic/groups_drawn": 4.0 + r["tase/dynamic/groups_dropped"],
               "tase/dynamic/groups_padded": 1.0} for r in rows]
    line = grpo_signal(logged_steps(_metrics(tmp_path / "padded.jsonl", padded)))
    assert "drew 23, kept those 8, dropped 15 " in line and "; 2 of them filled batches whose re-draws ran out" in line
    assert "discarded" not in line
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


def test_stage_gains_print_the_difference_of_the_tables_numbers(tmp_path):
    """Issue 81: the demo printed tuned vs base +10.11 beside a table of 10.12 vs 0.00. The tables (results.json)
    round each file's accuracy to 4 places before averaging; the bootstrap's point does not. Three files of 27, 27
    and 26 rows, the tuned model right on 0, 4 and 4 of them: the table reads 10.06, the unrounded point 10.07; the
    gain line now prints the tables' difference. A run that scored other rows keeps the paired point, marked."""
    import synth
    from eval.__main__ import main as eval_main
    from eval.compare import load_run
    from recipes.demo import stage_gains
    from recipes.steps.pipeline import paired_gains
    from synth.gold import gold_completion

    records = [r for lang, n in (("en", 27), ("zh", 27), ("ko", 26))
               for r in synth.generate("component_count", lang, n, 5, max_len=12)]
    data = tmp_path / "data.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in records))
    right = {"base": (0, 0, 0), "warm-up": (1, 1, 3), "tuned": (0, 4, 4)}  # rows right per file (en, zh, ko)
    evals = tmp_path / "eval"
    for name, ks in right.items():
        seen: dict[str, int] = {}
        lines = []
        for r in records:
            k = ks[("en", "zh", "ko").index(r["lang"])]
            seen[r["lang"]] = seen.get(r["lang"], 0) + 1
            lines.append({"id": r["id"], "completion": gold_completion(r) if seen[r["lang"]] <= k else "none"})
        preds = tmp_path / f"{name}.jsonl"
        preds.write_text("".join(json.dumps(x) + "\n" for x in lines))
        assert eval_main(["score", "--data", str(data), "--predictions", str(preds), "--out", str(evals / name)]) == 0
    table = {name: load_run(evals / name)[1]["overall"] for name in right}
    assert table == {"base": 0.0, "warm-up": 6.31, "tuned": 10.06}
    g = paired_gains(evals, (("x", "base", "tuned"),), n_boot=200)["x"]
    assert g["same_rows"] and g["delta"] == 10.06  # the paired point alone rounds to 10.07
    text, _ = stage_gains(evals, n_boot=200)
    shown = {line[:22].strip(): float(re.search(r" ([+-]\d+\.\d\d) \[", line)[1]) for line in text.splitlines()[1:4]}
    assert shown == {"SFT warm-up vs base": 6.31, "GRPO vs warm-up": 3.75, "tuned vs base": 10.06}
    assert all("(n=80)" in line for line in text.splitlines()[1:4])
    # a run that scored fewer rows: the pair's delta is the paired point over the shared rows, and says so
    fewer = tmp_path / "fewer.jsonl"
    fewer.write_text("".join(json.dumps(r) + "\n" for r in records[:54]))
    (tmp_path / "more").mkdir()
    part = tmp_path / "part.jsonl"
    part.write_text("".join((tmp_path / "tuned.jsonl").read_text().splitlines(keepends=True)[:54]))
    assert eval_main(["score", "--data", str(fewer), "--predictions", str(part), "--out",
                      str(tmp_path / "more" / "tuned")]) == 0
    import shutil

    shutil.copytree(evals / "base", tmp_path / "more" / "base")
    g = paired_gains(tmp_path / "more", (("x", "base", "tuned"),), n_boot=200)["x"]
    assert not g["same_rows"] and g["n"] == 54
