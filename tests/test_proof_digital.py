"""Issue 49's third file as a proof configuration (recipes/configs/proof_digital_cpu.yaml): `skip_examples`, the data
option that lets stages draw consecutive, disjoint slices of one seed's rows, and the digital config's plan, whose
three training stages are the hand run's three slices of one 4,000-row stream (docs/results/proof_cpu_digital/
commands.sh). Real synth rows and dry runs; nothing trains."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.test_proof_start import commands, dry, one

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "recipes" / "configs" / "proof_digital_cpu.yaml"
FIXTURE = ROOT / "tests" / "fixtures" / "tase_official_sample"
DIGITAL = dict(tasks=["variant_normalize"], langs=["ko"], subtasks=["digital"], paraphrase=False, synth_seed=777,
               exclude=[f"official:{FIXTURE}"])


def records(**kw) -> list[dict]:
    from recipes.config import DataArgs
    from recipes.data import iter_records

    return list(iter_records(DataArgs(**kw)))


def test_skip_examples_draws_the_rows_after_the_skipped_ones(tmp_path):
    """From synth (after the guard) and from a file alike: skip k, keep n is rows k+1..k+n of the unskipped draw."""
    whole = records(**DIGITAL, num_train_examples=12)
    assert len({r["prompt"] for r in whole}) == 12  # distinct rows: equal slices would prove nothing
    assert records(**DIGITAL, num_train_examples=5, skip_examples=4) == whole[4:9]
    assert records(**DIGITAL, num_train_examples=4, skip_examples=0) == whole[:4]
    f = tmp_path / "rows.jsonl"
    f.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in whole), encoding="utf-8")
    assert records(train_data=str(f), num_train_examples=3, skip_examples=10) == whole[10:12]  # to the file's end


def test_a_negative_skip_examples_is_one_line():
    from recipes.config import DataArgs

    with pytest.raises(ValueError, match=r"^skip_examples must be an integer >= 0, got -1$"):
        DataArgs(skip_examples=-1)


def test_the_digital_config_plans_the_hand_run_s_three_slices(tmp_path):
    """The warm-up, the start and the GRPO arm draw rows 1-1536, 1537-3072 and 3073-4000 of synth_seed 777; the
    start and the control continue with the hand run's lr 3e-4 constant; the control trains the 88 steps the hand
    run's did; the held-out set is guarded against all 4,000 rows."""
    text = dry(tmp_path, CONFIG)
    cmds = commands(text)
    sft = one(cmds, "--output_dir OUT/sft ")
    assert "--num_train_examples 1536 --synth_seed 777 --paraphrase false --learning_rate 0.0001" in sft
    assert "skip_examples" not in sft
    assert ("writes OUT/start_config.yaml" in text and "num_train_examples 1536, skip_examples 1536, synth_seed 777"
            in text)
    start = one(cmds, "--output_dir OUT/start ")
    assert "--model_name_or_path OUT/sft --learning_rate 0.0003 --logging_steps 16 --lr_scheduler_type constant " \
           "--warmup_steps 0 " in start
    fine = one(cmds, "--output_dir OUT/fine ")
    assert "--model_name_or_path OUT/start " in fine and "--reward_funcs accuracy_fine format length_penalty " in fine
    assert "--synth_seed 777 --skip_examples 3072 --num_train_examples 928 --dynamic_sampling true " \
           "--num_iterations 2 --max_steps 80 " in fine
    control = one(cmds, "--output_dir OUT/control ")
    assert "--model_name_or_path OUT/start " in control and "--max_steps 88 " in control
    assert "--learning_rate 0.0003" in control and "max_train_seconds" not in control
    sets = [c for c in cmds if " -m synth " in c and "--seed 777 " in c]
    assert [c.split(" -n ")[1].split()[0] for c in sets] == ["1536", "3072", "4000"]  # skip + n: each a superset
    held = one(cmds, "--out OUT/heldout.jsonl ")
    assert held.count("--exclude-exact ") == 3 and "-n 96 --seed 4242 --subtask digital" in held


def test_the_digital_config_s_slices_partition_one_stream(tmp_path):
    """The data each stage's recipe parses (the proof's own reading of the config) draws, with the real generator,
    three disjoint slices whose concatenation is the first 4,000 rows of the seed: the hand run's one file."""
    from recipes import proof_inputs
    from recipes.proof import parse_args

    pr = proof_inputs.setup(parse_args(["--config", str(CONFIG), "--official", str(FIXTURE), "--out",
                                        str(tmp_path / "out"), "--dry-run"]))
    assert pr.data["start"]["skip_examples"] == 1536 and pr.data["grpo"]["skip_examples"] == 3072
    assert "skip_examples" not in pr.data["sft"]  # unset: not written, so configs written before it are unchanged
    guard = [f"official:{FIXTURE}"]
    parts = [records(**{**pr.data[p], "exclude": guard}) for p in ("sft", "start", "grpo")]
    assert [len(p) for p in parts] == [1536, 1536, 928]
    whole = records(**{**pr.data["grpo"], "exclude": guard, "skip_examples": 0, "num_train_examples": 4000})
    assert parts[0] + parts[1] + parts[2] == whole
    assert len({r["prompt"] for r in whole}) == 4000
