"""recipes/ablate.py's grid (recipes/steps/ablate_grid.py): `--vary` axes over any grpo.py option expand into arms that
keep the data, seeds and warm-up equal; every arm's options are parsed before anything trains; and the one
comparison table is written from real evaluation folders (`eval score` of predictions: right on some rows, wrong
on others), with paired intervals against the base model and each arm's wall time. The full 2 x 2 run (train,
export, eval, compare) is run by hand (docs/training.md, "Ablation", gives its time); the two-arm granularity run is
tests/test_recipes_pipelines.py::test_ablate_two_arms_same_data_and_comparison."""
import json

import pytest
from conftest import call_main

from common.errors import TaseError
from recipes.shared.parser import deprecation_note
from recipes.steps.ablate_grid import comparison_table, expand, parse_vary


def test_two_by_two_grid_and_refusals():
    axes = parse_vary(["loss_type=dapo,dr_grpo", "--importance-sampling-level=token,sequence"])
    arms = expand(axes)
    assert [a.name for a in arms] == ["dapo-token", "dapo-sequence", "dr_grpo-token", "dr_grpo-sequence"]
    assert arms[3].argv() == ["--loss_type", "dr_grpo", "--importance_sampling_level", "sequence"]
    assert [a.name for a in expand(parse_vary(["reward_granularity=coarse,fine"]))] == ["coarse", "fine"]
    for spec, fragment in [("seed=1,2", "seed cannot be an axis"), ("tasks=a,b", "tasks cannot be an axis"),
                           ("loss_type", "expected OPTION=VALUE1,VALUE2"), ("beta=0.1,0.1", "listed twice"),
                           ("beta=,0.1", "expected OPTION")]:
        with pytest.raises(TaseError, match=fragment):
            parse_vary([spec])
    with pytest.raises(TaseError, match="given twice"):
        parse_vary(["beta=0,0.1", "beta=0.2"])
    with pytest.raises(TaseError, match="share a folder name"):
        expand(parse_vary(["top_p=a b,a/b"]))


def test_every_arm_is_parsed_before_training(tmp_path):
    out = tmp_path / "abl"
    code, err = call_main(["recipes/ablate.py", "--config", "recipes/configs/grpo_smollm2_cpu.yaml", "--out", str(out),
                           "--eval-data", "x.jsonl", "--vary", "loss_type=dapo,dr_grpo", "--vary", "lerning_rate=1,2"])
    assert code == 2 and err.strip().startswith("error: arm dapo-1 (--loss_type dapo --lerning_rate 1): ")
    assert "lerning_rate" in err and not out.exists()  # refused before any arm trained (nor the folder made)
    for flag in ("--reward_granularity", "--granularity"):  # the former name is the same axis, with one note
        code, err = call_main(["recipes/ablate.py", "--config", "recipes/configs/grpo_smollm2_cpu.yaml", "--out",
                               str(out), "--eval-data", "x.jsonl", flag, "fine", "--vary", "reward_granularity=coarse"])
        assert code == 2 and err.splitlines() == [
            *([deprecation_note("granularity", "reward_granularity")] if flag == "--granularity" else []),
            "error: --reward_granularity and --vary reward_granularity=... name the same axis; give one"], err


def test_arms_that_start_vllm_are_known_before_training(tmp_path):
    """ablate --in-process runs these arms' training in its own process (vLLM rollouts, the async trainer's worker)."""
    from recipes.steps.ablate_grid import arms_with_vllm, check_arms

    cfg = "recipes/configs/grpo_smollm2_cpu.yaml"
    for vary, want in (("use_vllm=true,false", {"true"}), ("trainer=sync,async", {"async"})):
        arms = expand(parse_vary([vary]))
        assert arms_with_vllm(arms, check_arms(cfg, arms, [], tmp_path / "abl")) == want, vary


def test_comparison_table_from_real_eval_folders(tmp_path):
    import synth
    from eval.__main__ import main as eval_main
    from synth.gold import gold_completion

    records = list(synth.generate("sort_lengths", "en", 8, 5, max_len=6))
    data = tmp_path / "data.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in records))
    arms = expand(parse_vary(["loss_type=dapo,dr_grpo", "importance_sampling_level=token,sequence"]))
    right = {"base": 2, "dapo-token": 8, "dapo-sequence": 4, "dr_grpo-token": 2, "dr_grpo-sequence": 0}
    evals = tmp_path / "eval"
    for name, k in right.items():  # the first k rows answered right, the rest wrong
        preds = tmp_path / f"{name}.jsonl"
        preds.write_text("".join(json.dumps({"id": r["id"], "completion": gold_completion(r) if i < k else
                                             "<answer>none</answer>"}) + "\n" for i, r in enumerate(records)))
        assert eval_main(["score", "--data", str(data), "--predictions", str(preds), "--out", str(evals / name)]) == 0
    times = {a.name: {"train_s": 10.0 + i, "eval_s": 2.0} for i, a in enumerate(arms)} | {"base": {"eval_s": 1.5}}
    table = comparison_table(evals, arms, times, n_boot=200)
    rows = [line for line in table.splitlines() if line.startswith("| ") and not line.startswith("| arm")]
    assert [r.split(" | ")[0][2:] for r in rows] == ["base", *(a.name for a in arms)]  # one table, base + 4 arms
    assert table.splitlines()[0] == ("| arm | loss_type | importance_sampling_level | Avg | strict | vs base [95% CI] "
                                     "| train s | eval s |")
    cells = {r.split(" | ")[0][2:]: r.strip("| ").split(" | ") for r in rows}
    assert cells["dapo-token"][1:4] == ["dapo", "token", "100.00"] and cells["base"][3] == "25.00"
    assert cells["dapo-token"][5].startswith("+75.00 [") and cells["dapo-token"][5].endswith("*")  # all 8 rows gained
    assert cells["dr_grpo-token"][5].startswith("+0.00 [") and not cells["dr_grpo-token"][5].endswith("*")
    assert cells["dr_grpo-sequence"][5].startswith("-25.00 [")
    assert cells["dapo-sequence"][6:] == ["11", "2"] and cells["base"][6:] == ["", "2"]
    # the footer says which rows the accuracies are of (issue 81: "the whole file" under --eval-limit 1)
    assert "accuracy (%) of each model on 8 rows, each of 1 file whole;" in table
    limited = comparison_table(evals, arms, times, n_boot=200, limit=8)
    assert "on 8 rows, at most 8 of each of 1 file (--eval-limit 8);" in limited and "whole" not in limited


def test_out_follows_the_one_output_rule(tmp_path):
    """ablate.py --out is refused in one line, before anything trains, where it is a user's file or another command's
    output (an `eval score` folder); neither is touched (issue 51: every writer takes the rule)."""
    from common.paths import MARKER, write_marker

    user_file = tmp_path / "notes.txt"
    user_file.write_text("mine\n")
    scores = tmp_path / "scores"
    scores.mkdir()
    (scores / "results.json").write_text("{}\n")
    write_marker(scores, "score")
    before = {p: p.read_bytes() for p in (user_file, scores / "results.json", scores / MARKER)}
    for out, fragment in ((user_file, "is a file"), (scores, "eval score")):
        code, err = call_main(["recipes/ablate.py", "--config", "recipes/configs/grpo_smollm2_cpu.yaml", "--out",
                               str(out), "--eval-data", "x.jsonl", "--reward_granularity", "fine"])
        assert code == 2 and len(err.strip().splitlines()) == 1 and err.startswith("error: --out "), err
        assert fragment in err, err
    assert {p: p.read_bytes() for p in before} == before and sorted(p.name for p in scores.iterdir()) == sorted(
        ["results.json", MARKER])
