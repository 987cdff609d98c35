"""Issue 49's third file as proof configurations (recipes/configs/proof_digital_cpu.yaml and its SFT then GRPO,
proof_digital_sft_grpo_cpu.yaml): `skip_examples`, the data option that lets stages draw consecutive, disjoint
slices of one seed's rows; the digital config's plan, whose three training stages are the hand run's three slices
of one 4,000-row stream (docs/results/digital_proof_cpu/commands.sh); and `start:` as a list of stages, each from
the one before. Real synth rows and dry runs; nothing trains."""
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
    from recipes.shared.config import DataArgs
    from recipes.shared.data import iter_records

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
    from recipes.shared.config import DataArgs

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
    from recipes.proof import parse_args
    from recipes.proof_stages import inputs as proof_inputs

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


SFT_GRPO = ROOT / "recipes" / "configs" / "proof_digital_sft_grpo_cpu.yaml"


def test_a_list_of_start_stages_chains_them(tmp_path):
    """`start:` as a list: start1 from the warm-up, start from start1; the arms and the control from the last.
    start is proof_digital_cpu.yaml's control (the same data, options and step count), and every stage is evaluated,
    guarded against and summarised."""
    text = dry(tmp_path, SFT_GRPO)
    cmds = commands(text)
    start1, start = one(cmds, "--output_dir OUT/start1 "), one(cmds, "--output_dir OUT/start ")
    assert "--config OUT/start1_config.yaml --model_name_or_path OUT/sft " in start1 and "--max_steps" not in start1
    assert "--config OUT/start_config.yaml --model_name_or_path OUT/start1 " in start and "--max_steps 88 " in start
    assert "== 3/11 start (gold answers on the GRPO data with synth_seed 777, num_train_examples 928, skip_examples " \
           "3072, from start1)" in text
    fine, control = one(cmds, "--output_dir OUT/fine "), one(cmds, "--output_dir OUT/control ")
    assert "--model_name_or_path OUT/start " in fine and "--synth_seed 779 --num_train_examples 928 " in fine
    assert "--model_name_or_path OUT/start " in control and "--max_steps 88 " in control
    # start here = proof_digital_cpu.yaml's control: the same flags but the config's and folders' names
    digital_control = one(commands(dry(tmp_path / "d", CONFIG)), "--output_dir OUT/control ")
    assert start.split("--model_name_or_path")[1].split("--exclude")[0].replace("OUT/start1", "M") == \
        digital_control.split("--model_name_or_path")[1].split("--exclude")[0].replace("OUT/start", "M")
    assert [c.split(" -n ")[1].split()[0] for c in cmds if " -m synth " in c and "--out OUT/data/" in c] == \
        ["1536", "3072", "4000", "928"]  # sft, start1, start, grpo (seed 779)
    assert sum(f"--model OUT/{m} " in c for c in cmds for m in ("start1", "start")) == 4  # official and held-out


def test_the_list_start_s_configs_are_the_single_configs_data(tmp_path):
    """Each stage's written config has its own slice, as the single digital config's start and control do."""
    from recipes.proof import parse_args
    from recipes.proof_stages import inputs as proof_inputs

    def setup(config):
        return proof_inputs.setup(parse_args(["--config", str(config), "--official", str(FIXTURE), "--out",
                                              str(tmp_path / "out"), "--dry-run"]))

    chain, single = setup(SFT_GRPO), setup(CONFIG)
    assert list(chain.data) == ["sft", "start1", "start", "grpo"]
    assert chain.data["start1"] == single.data["start"] and chain.data["start"] == single.data["grpo"]
    assert chain.data["grpo"]["synth_seed"] == 779 and "skip_examples" not in chain.data["grpo"]


@pytest.mark.parametrize("section, want", [
    ("start: []\n", "start: give a mapping (one stage) or a list of them, got an empty list"),
    ("start:\n  - synth_seed: 1\n  - seed: 2\n", "start: unknown key 'seed'"),
    ("start:\n  - synth_seed: 1\n  - 7\n", "start: must be a mapping of key: value"),
    ("start:\n  - synth_seed: 1\n    options: {model_name_or_path: x}\n  - synth_seed: 2\n",
     "start1 option 'model_name_or_path' is set by proof.py"),
    ("start:\n  - synth_seed: 1\n    options: {skip_examples: 3}\n  - synth_seed: 2\n",
     "start1 option 'skip_examples' is set by proof.py (the start1 stage trains on the GRPO arms' data with its own "
     "synth_seed)"),
    ("start: 5\n", "start must be a dict or a list, got 5"),
])
def test_bad_start_lists_are_one_line(tmp_path, section, want):
    from tests.test_proof_start import render

    text = SFT_GRPO.read_text(encoding="utf-8")
    old = text[text.index("start:\n"):text.index("grpo:\n")]
    bad = tmp_path / "bad.yaml"
    bad.write_text(text.replace(old, section), encoding="utf-8")
    code, out, err = render(bad, FIXTURE, tmp_path / "out")
    assert code == 2 and err.count("\n") == 1 and want in err and not out.strip(), err


def test_an_arm_cannot_take_a_start_stage_s_name(tmp_path):
    from tests.test_proof_start import render

    text = SFT_GRPO.read_text(encoding="utf-8")
    bad = tmp_path / "bad.yaml"
    bad.write_text(text.replace("  arms: [fine]\n", "  arms: [fine, {name: start2, reward_granularity: fine}]\n"),
                   encoding="utf-8")
    code, _, err = render(bad, FIXTURE, tmp_path / "out")
    assert code == 2 and "nor select_* or start<N>; got 'start2'" in err


def test_the_summary_walks_the_start_chain():
    """With start stages the paired gains go start vs start1, start1 vs warm-up (the single start: start vs
    warm-up), after every arm and the control against the last start."""
    from recipes.proof_stages.config import load_config
    from recipes.proof_stages.report import summary_pairs

    cfg = load_config(str(SFT_GRPO))
    models = ["base", "warm-up", "start1", "start", "fine", "sft_control"]
    assert [p[0] for p in summary_pairs(cfg, models)] == [
        "GRPO fine vs start", "GRPO fine vs control", "control vs start", "start vs start1", "start1 vs warm-up",
        "warm-up vs base"]
    assert [p[0] for p in summary_pairs(load_config(str(CONFIG)), ["base", "warm-up", "start", "fine",
                                                                   "sft_control"])][-2:] == [
        "start vs warm-up", "warm-up vs base"]
