"""Issue 77: the proof seed by seed. A training stage is done only when its run says so (not when model.safetensors
exists), the wall-time table adds up across invocations, each seed's manifest records its precision and the pooled
table refuses units of different precision, and the shipped transfer configs plan the cuts (the best arm on every
seed, the sweeps on the first, two candidates per selected run). Hand-written files and dry runs only; the tiny
proof killed and resumed is in tests/test_proof_transfer.py."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_proof_start import FIXTURE, ROOT, commands, dry, headers, one, render


def write_model(folder: Path) -> None:
    """A whole (tiny) safetensors model file."""
    import torch
    from safetensors.torch import save_file

    folder.mkdir(parents=True, exist_ok=True)
    save_file({"w": torch.zeros(2)}, str(folder / "model.safetensors"))


def test_a_run_killed_inside_its_final_save_is_not_done(tmp_path):
    """model.safetensors alone (the run killed after the model, before trainer_state.json), a truncated
    trainer_state.json, one short of max_steps, or a truncated model: not done; a whole state at max_steps after a
    whole model (a run finished before the marker), or the proof's marker: done."""
    from recipes.proof_stages.train import DONE, trained

    run = tmp_path / "fine"
    write_model(run)
    assert not trained(run)
    (run / "trainer_state.json").write_text('{"global_step": 80, "max_st', encoding="utf-8")
    assert not trained(run)
    (run / "trainer_state.json").write_text(json.dumps({"global_step": 79, "max_steps": 80}), encoding="utf-8")
    assert not trained(run)
    (run / "trainer_state.json").write_text(json.dumps({"global_step": 80, "max_steps": 80}), encoding="utf-8")
    assert trained(run)
    data = (run / "model.safetensors").read_bytes()
    (run / "model.safetensors").write_bytes(data[:-4])  # killed inside the save of the weights
    assert not trained(run)
    (run / DONE).write_text("{}\n", encoding="utf-8")
    assert trained(run)


def test_a_finished_looking_arm_without_its_marker_trains_again(tmp_path):
    """The dry run of a proof whose arm folder holds model.safetensors but no complete state plans that arm again;
    with the marker it is skipped."""
    from common.paths import write_marker
    from recipes.proof_stages.train import DONE

    config = ROOT / "recipes" / "configs" / "proof_combine_cpu.yaml"
    out = tmp_path / "out"
    write_model(out / "fine")
    write_marker(out, "proof", [])  # an earlier proof's folder
    code, text, err = render(config, FIXTURE, out)
    assert code == 0, err
    assert "GRPO fine: skipped" not in text and "PY recipes/grpo.py " in one(commands(text), "--output_dir OUT/fine ")
    (out / "fine" / DONE).write_text("{}\n", encoding="utf-8")
    code, text, err = render(config, FIXTURE, out)
    assert code == 0 and "== 5/10 GRPO fine: skipped, OUT/fine/proof_trained.json says it finished" in text, text


def test_wall_times_add_up_across_invocations(tmp_path):
    """ProofSteps keeps each stage's seconds in OUT/wall_times.json after every step: a second invocation (after a
    kill) adds to the first's, per unit; a table of some units leaves the others out; a foreign file is one line."""
    from common.errors import TaseError
    from recipes.proof_stages.inputs import ProofSteps

    keep = tmp_path / "wall_times.json"
    a = ProofSteps("proof", 3, ROOT)
    a.load(keep)
    a.add("2 SFT warm-up", 10.0)
    a.unit = "s42 "
    a.add("6 GRPO fine_s42", 5.0)
    b = ProofSteps("proof", 3, ROOT)  # the rerun
    b.load(keep)
    b.add("2 SFT warm-up", 0.0)  # skipped
    b.unit = "s42 "
    b.add("6 GRPO fine_s42", 2.5)
    b.unit = "s7 "
    b.add("6 GRPO fine_s7", 4.0)
    assert json.loads(keep.read_text()) == {"2 SFT warm-up": 10.0, "s42 6 GRPO fine_s42": 7.5, "s7 6 GRPO fine_s7": 4.0}
    table = b.table_of(["s42 "])
    assert "| s42 6 GRPO fine_s42 | 8 |" in table and "s7" not in table and "| total | 18 |" in table
    keep.write_text('["x"]', encoding="utf-8")
    with pytest.raises(TaseError, match="not a table of stage: seconds"):
        ProofSteps("proof", 3, ROOT).load(keep)


def test_units_of_different_precision_are_not_pooled(tmp_path):
    """Two finished seeds whose manifests name different precisions: one line naming both; the same precision
    pools; a manifest of another shape is one line too."""
    from common.errors import TaseError
    from recipes.proof_stages.units import check_pooling, finished, manifest_path

    def manifest(seed: int, precision: str) -> None:
        manifest_path(tmp_path, seed).write_text(json.dumps({"complete": True, "precision": precision,
                                                             "models": [f"fine_s{seed}"]}), encoding="utf-8")

    manifest(42, "float32")
    manifest(7, "float32")
    check_pooling(tmp_path, [42, 7])
    manifest(11, "train bf16 autocast (grpo), eval float32")
    with pytest.raises(TaseError) as e:
        check_pooling(tmp_path, [42, 7, 11])
    assert str(e.value).count("\n") == 0 and "seed 42 ran float32, seed 11 train bf16 autocast" in str(e.value)
    assert finished(tmp_path, 42) and not finished(tmp_path, 3)
    manifest_path(tmp_path, 3).write_text('{"complete": "yes"}', encoding="utf-8")
    with pytest.raises(TaseError, match="remove it to run that seed's unit again"):
        finished(tmp_path, 3)


@pytest.mark.parametrize("name", ["proof_combine_transfer_cpu", "proof_digital_transfer_cpu"])
def test_the_transfer_configs_are_float32(name, tmp_path):
    """Each shipped transfer config trains and evaluates in float32 on any CPU (its manifests' precision)."""
    from recipes.proof import parse_args
    from recipes.proof_stages import inputs
    from recipes.proof_stages.units import precision

    config = ROOT / "recipes" / "configs" / f"{name}.yaml"
    pr = inputs.setup(parse_args(["--config", str(config), "--official", str(FIXTURE), "--out", str(tmp_path / "o"),
                                  "--dry-run"]))
    assert precision(pr) == "float32"
    bf16 = tmp_path / "bf16.yaml"  # the same with GRPO under bf16 autocast on any CPU: not float32, and says where
    bf16.write_text(config.read_text(encoding="utf-8").replace('cpu_bf16: "false"', 'cpu_bf16: "true"'),
                    encoding="utf-8")
    pr = inputs.setup(parse_args(["--config", str(bf16), "--official", str(FIXTURE), "--out", str(tmp_path / "o"),
                                  "--dry-run"]))
    assert precision(pr).startswith("train bf16 autocast (grpo") and precision(pr).endswith(", eval float32")


def test_the_combine_plan_is_seed_major_with_the_cuts(tmp_path):
    """en_combine: the shared stages, then seed 42 (three arms, the 3-rate control and RFT sweeps, nine selections),
    then seeds 7 and 11 (the best arm, one control and one RFT run at seed 42's chosen rates, three selections);
    every selected run saves at mid and final."""
    text = dry(tmp_path, ROOT / "recipes" / "configs" / "proof_combine_transfer_cpu.yaml")
    units = text.split("\n#### ")
    assert [u.splitlines()[0] for u in units[1:]] == ["seed 1 of 3: seed 42", "seed 2 of 3: seed 7",
                                                     "seed 3 of 3: seed 11"]
    assert not any(h.split(" ", 1)[1].startswith(("GRPO", "checkpoint selection")) for h in headers(units[0]))
    first, later = headers(units[1]), headers(units[2])
    assert [h.split(" (")[0] for h in first if h.split(" ", 1)[1].startswith("GRPO")] == [
        "6/13 GRPO grpo_s42", "6/13 GRPO grpo_dyn_s42", "6/13 GRPO grpo_lr_matched_s42"]
    assert sum("checkpoint selection" in h for h in first) == 9 and sum("checkpoint selection" in h for h in later) == 3
    trains = ("GRPO", "more-SFT control", "RFT rft", "checkpoint selection for sft_control")
    assert [h.split(" (")[0] for h in later if h.split(" ", 1)[1].startswith(trains)] == [
        "6/13 GRPO grpo_dyn_s7", "7/13 more-SFT control control_chosen_s7", "8/13 RFT rft_chosen_s7",
        "9/13 checkpoint selection for sft_control_chosen_s7 on heldout_select.jsonl"]
    cmds = commands(text)
    assert "--learning_rate '<the rate chosen for sft_control_s42 on heldout_select.jsonl>'" in one(
        cmds, "--output_dir OUT/control_chosen_s7 ")
    for needle, save in (("OUT/grpo_s42 ", 76), ("OUT/grpo_dyn_s11 ", 40), ("OUT/control_lr1e-05_s42 ", 165)):
        assert f"--save_steps {save} " in one(cmds, "--output_dir " + needle)
    assert "--save_strategy steps --save_steps 32 --save_total_limit 1 " in one(cmds, "--output_dir OUT/sft ")
    assert "OUT/manifest_s11.json" in text and "deletes the runs' checkpoint-N folders" in text


BAD = {
    ("      seeds: [42]\n", "      seeds: [5]\n"): "grpo arm 'grpo': seeds must list some of seeds: (42, 7, 11), each "
                                                  "once, got [5]",
    ("sweep_once: [control, rft]", "sweep_once: [arms]"): "control: sweep_once must list control and/or rft",
    ("seeds: [42, 7, 11]\n", ""): "control: sweep_once sweeps the first seed's rates and trains the later seeds at "
                                  "the chosen one: it needs seeds: and control: learning_rates",
    ("  rft: true ", "  rft: false "): "control: sweep_once names rft without control: rft: true",
    ("delete_checkpoints: true", "delete_checkpoints: sometimes"): "delete_checkpoints must be a bool",
}


def test_bad_arm_seeds_and_sweep_once_are_one_line(tmp_path):
    config = ROOT / "recipes" / "configs" / "proof_combine_transfer_cpu.yaml"
    text = config.read_text(encoding="utf-8")
    for i, ((old, new), want) in enumerate(BAD.items()):
        assert old in text, old
        p = tmp_path / f"bad{i}.yaml"
        p.write_text(text.replace(old, new, 1), encoding="utf-8")
        code, out, err = render(p, FIXTURE, tmp_path / "out")
        assert code == 2 and err.count("\n") == 1 and want in err and not out.strip(), (want, err, out[-300:])


def test_kl_from_start_is_zero_against_itself_and_positive_against_another_model(tmp_path, tiny_model, capsys):
    """recipes/proof_stages/kl.py on a tiny Llama's completions: against itself 0 on every row; against a model with
    other weights > 0; each row's token count is its completion's; a samples file without prompts is one line."""
    import torch
    from transformers import AutoModelForCausalLM

    from recipes.proof_stages.kl import main, pooled_kl, read_kl

    other = tmp_path / "other"
    m = AutoModelForCausalLM.from_pretrained(tiny_model, dtype=torch.float32)
    with torch.no_grad():
        for p in m.parameters():
            p.add_(0.05 * torch.randn_like(p))
    m.save_pretrained(other)
    samples = tmp_path / "samples.jsonl"
    rows = [{"id": "a/1", "prompt": "Count the letters of 'apple'.", "completion": "<answer>5</answer>"},
            {"id": "a/2", "prompt": "Split 'sunflower'.", "completion": ""}]
    samples.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    args = ["--model", str(tiny_model), "--samples", str(samples), "--batch-size", "2"]
    assert main([*args, "--reference", str(tiny_model), "--out", str(tmp_path / "self.json")]) == 0
    assert main([*args, "--reference", str(other), "--out", str(tmp_path / "other.json")]) == 0
    same, diff = read_kl(tmp_path / "self.json"), read_kl(tmp_path / "other.json")
    assert abs(same["kl_per_token"]) < 1e-5 and diff["kl_per_token"] > 1e-4
    assert ([r["tokens"] > 0 for r in diff["per_row"]] == [True, False]
            and diff["tokens"] == diff["per_row"][0]["tokens"])
    point, lo, hi = pooled_kl([tmp_path / "other.json", tmp_path / "self.json"], 200)
    assert abs(point - diff["kl_per_token"] / 2) < 1e-9 and lo <= point <= hi
    samples.write_text('{"id": "a/1"}\n', encoding="utf-8")
    capsys.readouterr()
    assert main([*args, "--reference", str(tiny_model), "--out", str(tmp_path / "x.json")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "line 1 has no prompt and completion text" in err
