"""Issue 49's SFT then GRPO as a proof configuration (recipes/configs/proof_combine_sft_grpo_cpu.yaml): the `start:`
stage (a fixed-step SFT from the warm-up on the GRPO data drawn with its own synth_seed, which the arms and the
control train from), named GRPO arms with options of their own, and `control: follows`. Dry runs in this process and
hand-written files only; nothing trains. Also pins every shipped proof config's dry run to its golden text
(tests/fixtures/proof_dry_runs; after an intended change, `PYTHONPATH=. python tests/test_proof_start.py --update`)."""
from __future__ import annotations

import contextlib
import io
import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
GOLDEN = ROOT / "tests" / "fixtures" / "proof_dry_runs"
CONFIG = ROOT / "recipes" / "configs" / "proof_combine_sft_grpo_cpu.yaml"
FIXTURE = ROOT / "tests" / "fixtures" / "tase_official_sample"
# the configs shipped before the start stage: their dry runs must not change; and issue 64's transfer, seeds, sweep,
# RFT and lr-matched configs (en_combine, digital), pinned from their first version
SHIPPED = ("proof_cpu", "proof_charcls_cpu", "proof_charcls_fast_cpu", "proof_combine_cpu", "proof_combine_gpu",
           "proof_combine_long_cpu", "proof_combine_transfer_cpu", "proof_digital_transfer_cpu")


def render(config: Path, official: Path, out: Path) -> tuple[int, str, str]:
    """recipes/proof.py --dry-run in this process, vLLM taken as installed (the plan, not this machine): exit code,
    stdout with OUT, OFFICIAL and PY for the run's paths, stderr."""
    import eval.backends
    from recipes import proof

    real = eval.backends.default_backend
    eval.backends.default_backend = lambda: "vllm"
    o, e = io.StringIO(), io.StringIO()
    try:
        with contextlib.redirect_stdout(o), contextlib.redirect_stderr(e):
            code = proof.main(["--config", str(config), "--official", str(official), "--out", str(out), "--dry-run"])
    finally:
        eval.backends.default_backend = real
    text = o.getvalue().replace(str(out), "OUT").replace(str(official.resolve()), "OFFICIAL")
    return code, text.replace(sys.executable, "PY"), e.getvalue()


def timed_by_grpo(tmp_path: Path) -> Path:
    """The SFT then GRPO config with its control timed by the grpo arm (control: follows grpo) instead of its
    fixed 329 steps (control: steps)."""
    text = CONFIG.read_text(encoding="utf-8")
    assert text.count("  steps: 329\n") == 1
    cfg = tmp_path / "timed.yaml"
    cfg.write_text(text.replace("  steps: 329\n", "  follows: grpo       # the grpo arm's train_runtime\n"),
                   encoding="utf-8")
    return cfg


def dry(tmp_path: Path, config: Path = CONFIG) -> str:
    code, text, err = render(config, FIXTURE, tmp_path / "out")
    assert code == 0, err
    return text


def commands(text: str) -> list[str]:
    return [line[2:] for line in text.splitlines() if line.startswith("+ ")]


def headers(text: str) -> list[str]:
    return [line[3:] for line in text.splitlines() if line.startswith("== ")]


def one(cmds: list[str], needle: str) -> str:
    mine = [c for c in cmds if needle in c]
    assert len(mine) == 1, (needle, mine)
    return mine[0]


ARM_OPTS = {"grpo": "--max_steps 150 --save_steps 50",
            "grpo_dyn": "--max_steps 80 --dynamic_sampling true --save_steps 20",
            "grpo_dyn_s7": "--max_steps 80 --dynamic_sampling true --save_steps 20 --seed 7"}


def test_the_sft_then_grpo_config_plans_the_committed_run(tmp_path):
    """The committed run's commands (docs/results/en_combine_sft_then_grpo_cpu/run*.sh): the start from the warm-up,
    300 fixed steps on seed-778 prompts; three named arms from the start on seed-779 prompts, each with its own
    steps, dynamic sampling and seed; the control from the start for the grpo arm's train_runtime; selection on
    300 rows of seed 4243 guarded against every prompt set; the start evaluated as it is."""
    text = dry(tmp_path)
    heads = headers(text)
    assert heads[0].startswith("1/12 ") and heads[-1] == "12/12 summary"
    assert heads[2] == "3/12 start (gold answers on the GRPO data with synth_seed 778, from the warm-up)"
    cmds = commands(text)
    warm = one(cmds, "--output_dir OUT/sft ")
    assert "--num_train_examples 768 --synth_seed 777 --paraphrase false --learning_rate 0.0001" in warm
    start = one(cmds, "--output_dir OUT/start ")
    assert start == ("PY recipes/sft_warmup.py --config OUT/start_config.yaml --model_name_or_path OUT/sft "
                     "--learning_rate 5e-05 --logging_steps 8 --lr_scheduler_type constant --warmup_steps 0 "
                     "--max_steps 300 --save_strategy no --exclude official:OFFICIAL --output_dir OUT/start "
                     "--resume_from_checkpoint true")  # fixed steps: no --max_train_seconds
    assert ("# writes OUT/start_config.yaml: recipes/configs/sft_smollm2_cpu.yaml with the GRPO arms' data options, "
            'synth_seed 778 (start: synth_seed): train_data "synth", tasks ["component_split"], langs ["en"], '
            'subtasks ["combine"], mixture null, num_train_examples 2000, synth_seed 778, max_len null') in text
    for arm, opts in ARM_OPTS.items():
        c = one(cmds, f"--output_dir OUT/{arm} ")
        assert c == ("PY recipes/grpo.py --config recipes/configs/grpo_combine_cpu.yaml --model_name_or_path OUT/start "
                     f"--exclude official:OFFICIAL --output_dir OUT/{arm} --reward_funcs accuracy_fine format "
                     "length_penalty --cpu_bf16 false --subtasks combine --synth_seed 779 --num_iterations 2 "
                     f"--save_total_limit 10 {opts} --resume_from_checkpoint true"), c
    assert [h for h in heads if h.startswith("6/12 ")] == [
        f"6/12 GRPO {arm} (accuracy_fine + format + length_penalty)" for arm in ARM_OPTS]
    control = one(cmds, "--output_dir OUT/control ")
    assert control == ("PY recipes/sft_warmup.py --config OUT/control_config.yaml --model_name_or_path OUT/start "
                       "--learning_rate 5e-05 --logging_steps 8 --lr_scheduler_type constant --warmup_steps 0 "
                       "--save_strategy steps --save_steps 100 --save_total_limit 30 --max_steps 329 --exclude "
                       "official:OFFICIAL --output_dir OUT/control --resume_from_checkpoint true")  # control: steps
    assert "== 7/12 more-SFT control (gold answers on the GRPO data, 329 steps)" in text
    assert "with the GRPO arms' data options: train_data \"synth\"" in text and ", synth_seed 779, " in text
    # the sets: every prompt pool written out, the selection's rows guarded against all of them
    sets = {c.split("--out ")[1].split()[0]: c for c in cmds if " -m synth " in c}
    assert "-n 2000 --seed 778 --subtask combine" in sets["OUT/data/start_component_split_en_combine.jsonl"]
    assert "-n 2000 --seed 779 --subtask combine" in sets["OUT/data/grpo_component_split_en_combine.jsonl"]
    assert sets["OUT/heldout_select.jsonl"] == (
        "PY -m synth --task component_split --lang en -n 300 --seed 4243 --subtask combine --no-progress --out "
        "OUT/heldout_select.jsonl --exclude official:OFFICIAL --exclude-exact "
        "OUT/data/sft_component_split_en_combine.jsonl --exclude-exact OUT/data/start_component_split_en_combine.jsonl "
        "--exclude-exact OUT/data/grpo_component_split_en_combine.jsonl --exclude-exact OUT/heldout.jsonl")
    # selection of every arm and the control, never of the start, which is evaluated as it is
    select = [c.split(" --heldout")[0].split()[-1] for c in cmds if "recipes/select_checkpoint.py" in c]
    assert select == ["OUT/grpo", "OUT/grpo_dyn", "OUT/grpo_dyn_s7", "OUT/control"]
    evals = [c for c in cmds if " -m eval run " in c and "--data official:" in c]
    assert [c.split("--model ")[1].split(" --data")[0] for c in evals] == [
        "default", "OUT/sft", "OUT/start", *(f"'<chosen checkpoint in OUT/select_{r}/best_checkpoint.json>'" for r in
                                            ("grpo", "grpo_dyn", "grpo_dyn_s7", "control"))]
    compare = one(cmds, "--out OUT/comparison/official ")
    assert [p.rsplit("/", 1)[1] for p in compare.split(" compare ")[1].split(" --out")[0].split()] == [
        "base", "warm-up", "start", "grpo", "grpo_dyn", "grpo_dyn_s7", "sft_control"]


def test_the_sft_then_grpo_config_parses_with_each_recipe_s_parser(tmp_path):
    """Each named arm's options are parsed over grpo options by the GRPO recipe's own parser, the start's over the
    sft options by the SFT recipe's, and the start's data is the GRPO data with its own seed."""
    from recipes.proof import parse_args
    from recipes.proof_stages import inputs as proof_inputs

    pr = proof_inputs.setup(parse_args(["--config", str(CONFIG), "--official", str(FIXTURE), "--out",
                                        str(tmp_path / "out"), "--dry-run"]))
    assert pr.start and pr.control and pr.select and pr.origin == tmp_path / "out" / "start"
    assert list(pr.arms) == ["grpo", "grpo_dyn", "grpo_dyn_s7"] and {a.level for a in pr.arms.values()} == {"fine"}
    assert pr.data["start"] == {**pr.data["grpo"], "synth_seed": 778} and pr.data["grpo"]["synth_seed"] == 779
    assert list(pr.data) == ["sft", "start", "grpo"]
    parsed = proof_inputs.check_recipe_options(pr.cfg, pr.sft_config, pr.grpo_config, pr.read)
    for arm, steps, dyn, seed, save in (("grpo", 150, False, 42, 50), ("grpo_dyn", 80, True, 42, 20),
                                        ("grpo_dyn_s7", 80, True, 7, 20)):
        tase, grpo, _ = parsed[f"grpo:{arm}"]
        assert (grpo.max_steps, tase.dynamic_sampling, grpo.seed, grpo.save_steps, grpo.num_iterations,
                grpo.save_total_limit) == (steps, dyn, seed, save, 2, 10), arm
    start = parsed["start"][1]
    assert (start.max_steps, str(start.save_strategy.value), start.learning_rate, str(start.lr_scheduler_type.value),
            start.warmup_steps) == (300, "no", 5e-5, "constant", 0)
    budget = next(o for o in parsed["start"][3:] if hasattr(o, "max_train_seconds"))  # among the features' options
    assert budget.max_train_seconds is None  # not time-capped
    control = parsed["control"][1]
    assert (control.save_steps, control.save_total_limit) == (100, 30)  # its 329 steps: control: steps, a flag


def test_the_start_s_config_is_the_sft_config_with_the_grpo_data_and_its_seed(tmp_path):
    """OUT/start_config.yaml (as the stage writes it): the sft recipe config with every data option the GRPO
    arms', synth_seed the start's; it parses to those with the SFT recipe's parser."""
    import yaml

    from recipes.proof import parse_args
    from recipes.proof_stages import inputs as proof_inputs, train as proof_train

    pr = proof_inputs.setup(parse_args(["--config", str(CONFIG), "--official", str(FIXTURE), "--out",
                                        str(tmp_path / "out"), "--dry-run"]))
    text = proof_train.control_config_text(pr.sft_config, pr.data["start"], pr.read,
                                           "the GRPO arms' data options, synth_seed 778 (start: synth_seed)")
    written = yaml.safe_load(text)
    sft_recipe = yaml.safe_load(pr.sft_config.read_text(encoding="utf-8"))
    assert written == {**sft_recipe, **pr.data["grpo"], "synth_seed": 778}
    assert written["num_train_examples"] == 2000 and written["subtasks"] == ["combine"] and written["max_len"] is None
    f = tmp_path / "start_config.yaml"
    f.write_text(text, encoding="utf-8")
    assert proof_inputs.data_args(f, {}) == pr.data["start"]


def test_the_control_trains_for_the_followed_arm_s_train_runtime(tmp_path):
    """control: follows grpo: --max_train_seconds is OUT/grpo's train_runtime, whatever the other arms logged; its
    absence is one line naming that arm."""
    from common.paths import write_marker

    out = tmp_path / "out"
    for arm, seconds in (("grpo", 936.0624), ("grpo_dyn", 686.6), ("grpo_dyn_s7", 726.5)):
        (out / arm).mkdir(parents=True)
        write_marker(out, "proof", [])  # an earlier proof's folder, as its first run marks it
        (out / arm / "trainer_state.json").write_text(json.dumps({"log_history": [{"loss": 1.0},
                                                                                  {"train_runtime": seconds}]}))
    control = one(commands(dry(tmp_path, timed_by_grpo(tmp_path))), "--output_dir OUT/control ")
    assert "--model_name_or_path OUT/start " in control and "--max_train_seconds 936.062 --exclude" in control
    assert "--max_steps" not in control
    from common.errors import TaseError
    from recipes.proof_stages.train import train_runtime

    (out / "grpo" / "trainer_state.json").write_text(json.dumps({"log_history": [{"loss": 1.0}]}))
    with pytest.raises(TaseError, match=r"no train_runtime in its log_history \(did the grpo arm finish\?\); the "
                                        r"control trains for as long as the grpo arm did$"):
        train_runtime(out / "grpo")


def test_a_finished_start_is_skipped_and_the_summary_measures_against_it(tmp_path):
    """A rerun after the start: its stage says skipped; the summary's pairs take the start as the baseline, every
    arm against the control (the followed arm first), then start vs warm-up and warm-up vs base."""
    from common.paths import write_marker
    from recipes.proof_stages.config import load_config
    from recipes.proof_stages.report import summary_pairs

    out = tmp_path / "out"
    (out / "start").mkdir(parents=True)
    (out / "start" / "model.safetensors").write_bytes(b"")
    write_marker(out, "proof", [])  # an earlier proof's folder, as its first run marks it
    assert "start: skipped" not in dry(tmp_path)  # model.safetensors alone: a kill inside the final save leaves it
    (out / "start" / "proof_trained.json").write_text("{}\n", encoding="utf-8")  # the step returned 0
    text = dry(tmp_path)
    assert "== 3/12 start: skipped, OUT/start/proof_trained.json says it finished" in text
    assert "# writes OUT/start_config.yaml" not in text  # a skipped start writes nothing
    models = ["base", "warm-up", "start", "grpo", "grpo_dyn", "grpo_dyn_s7", "sft_control"]
    assert [p[0] for p in summary_pairs(load_config(str(CONFIG)), models)] == [
        "GRPO grpo_dyn_s7 vs start", "GRPO grpo_dyn vs start", "GRPO grpo vs start", "GRPO grpo vs control",
        "GRPO grpo_dyn vs control", "GRPO grpo_dyn_s7 vs control", "control vs start", "start vs warm-up",
        "warm-up vs base"]
    # without a start the pairs are those before it, plus every other arm against the control
    plain = load_config(str(ROOT / "recipes" / "configs" / "proof_combine_cpu.yaml"))
    assert summary_pairs(plain, ["base", "warm-up", "coarse", "fine", "sft_control"]) == (
        ("GRPO fine vs warm-up", "warm-up", "fine"), ("GRPO coarse vs warm-up", "warm-up", "coarse"),
        ("fine vs coarse", "coarse", "fine"), ("GRPO fine vs control", "sft_control", "fine"),
        ("GRPO coarse vs control", "sft_control", "coarse"), ("control vs warm-up", "warm-up", "sft_control"),
        ("warm-up vs base", "base", "warm-up"))


BAD = {
    # start:
    "start:\n  options: {max_steps: 300}\n": "start: missing key 'synth_seed'",
    "start:\n  synth_seed: '778'\n": "start: synth_seed must be an integer, got '778'",
    "start:\n  synth_seed: 778\n  seed: 1\n": "start: unknown key 'seed' (known: synth_seed, num_train_examples, "
                                            "skip_examples, options)",
    "start:\n  synth_seed: 778\n  skip_examples: many\n": "start: skip_examples must be an integer, got 'many'",
    "start:\n  synth_seed: 778\n  skip_examples: -1\n": "skip_examples must be an integer >= 0, got -1",
    "start:\n  synth_seed: 778\n  options: {skip_examples: 5}\n": "start option 'skip_examples' is set by proof.py",
    "start:\n  synth_seed: 778\n  options: {synth_seed: 5}\n":
        "start option 'synth_seed' is set by proof.py (the start trains on the GRPO arms' data with start: synth_seed)",
    "start:\n  synth_seed: 778\n  options: {model_name_or_path: x}\n": "start option 'model_name_or_path' is set by "
                                                                     "proof.py",
    "start:\n  synth_seed: 778\n  options: {max_step: 300}\n":
        "start options (for recipes/configs/sft_smollm2_cpu.yaml): unknown option 'max_step'",
    "start:\n  synth_seed: 778\n  options: {max_steps: 0}\n": "start options (for "
                                                              "recipes/configs/sft_smollm2_cpu.yaml): ",
}
ARM_BAD = {
    "{name: extra}": "grpo arm 2: missing key 'reward_granularity'",
    "{name: extra, reward_granularity: fine, steps: 80}":
        "grpo arm 2: unknown key 'steps' (known: name, reward_granularity, options, seeds)",
    "{name: extra, reward_granularity: strict}":
        "grpo arm 'extra': reward_granularity must be one of coarse, fine, got 'strict'",
    "{name: start, reward_granularity: fine}":
        "grpo arm 2: name must be letters, digits, _ or - (a folder of out), not one of",
    "{name: extra, reward_granularity: fine, accuracy: fine}":
        "grpo arm 'extra': accuracy is the former name of reward_granularity; give one",
    "{name: fine, reward_granularity: fine}": "grpo arm 2: name must be letters, digits, _ or -",
    "{name: a/b, reward_granularity: fine}": "got 'a/b'",
    "{name: grpo, reward_granularity: fine}": "grpo arm 'grpo' is given twice",
    "{name: extra, reward_granularity: fine, options: {synth_seed: 5}}":
        "grpo arm 'extra' option 'synth_seed' is set by proof.py (every arm trains on the same GRPO data",
    "{name: extra, reward_granularity: fine, options: {reward_funcs: [x]}}":
        "grpo arm 'extra' option 'reward_funcs' is set by proof.py",
    "{name: extra, reward_granularity: fine, options: {dynamic_sampl: true}}":
        "grpo arm 'extra' options (for recipes/configs/grpo_combine_cpu.yaml): unknown option 'dynamic_sampl'",
    "{name: extra, reward_granularity: fine, options: {max_steps: 0}}":
        "grpo arm 'extra' options (for recipes/configs/grpo_combine_cpu.yaml): max_steps",
    "{name: extra, reward_granularity: fine, options: {max_steps: {a: 1}}}":
        "grpo arm 'extra' option 'max_steps' must be a value or a list of values",
}


def test_bad_start_arm_and_follows_keys_are_one_line(tmp_path):
    """Each refusal: exit 2, one line, before anything runs."""
    fixed = CONFIG.read_text(encoding="utf-8")
    good = timed_by_grpo(tmp_path).read_text(encoding="utf-8")
    start = good[good.index("start:\n"):good.index("grpo:\n")]
    cases = {good.replace(start, section): want for section, want in BAD.items()}
    first = "    - name: grpo\n      reward_granularity: fine\n      options: {max_steps: 150, save_steps: 50}\n"
    assert first in good
    cases.update({good.replace(first, first + f"    - {arm}\n"): want for arm, want in ARM_BAD.items()})
    cases[good.replace("follows: grpo ", "follows: nope ")] = (
        "the control trains for the nope arm's train_runtime: grpo arms must include nope")
    cases[good.replace("follows: grpo ", "follows: 3 ")] = "control: follows must be a str, got 3"
    cases[good.replace("  follows: grpo ", "  # ")] = (
        "the control trains for the fine arm's train_runtime: grpo arms must include fine (or name another arm in "
        "control: follows)")
    # control: steps, a fixed step count, excludes the two other ways of ending the control
    cases[fixed.replace("  steps: 329\n", "  steps: 0\n")] = (
        "control: steps must be a whole number of steps >= 1, got 0")
    cases[fixed.replace("  steps: 329\n", "  steps: 329\n  follows: grpo\n")] = (
        "control: steps fixes the control's step count; drop control: follows times the control by an arm")
    cases[fixed.replace("    warmup_steps: 0\n    save_strategy: steps", "    warmup_steps: 0\n    max_steps: 9\n"
                        "    save_strategy: steps")] = (
        "control: steps fixes the control's step count; drop control: options: max_steps")
    cases[fixed.replace("  steps: 329\n", "  steps: many\n")] = "control: steps must be an integer, got 'many'"
    for i, (text, want) in enumerate(cases.items()):
        bad = tmp_path / f"bad{i}.yaml"
        bad.write_text(text, encoding="utf-8")
        code, out, err = render(bad, FIXTURE, tmp_path / "out")
        assert code == 2 and err.count("\n") == 1 and want in err and not out.strip(), (want, err)
    assert not (tmp_path / "out").exists()


def test_level_arms_mix_with_named_ones(tmp_path):
    """`arms: [fine, {name: ..., reward_granularity: coarse, options: ...}]`: the plain fine arm as before, the named
    one with its options; the control follows fine by default. The key's former name `accuracy` (one name for the
    reward's granularity) still works, with exactly one deprecation line on stderr."""
    from recipes.shared.parser import deprecation_note

    good = CONFIG.read_text(encoding="utf-8")
    arms = good[good.index("  arms:\n"):good.index("  reward_funcs:")]
    for key in ("reward_granularity", "accuracy"):
        text = good.replace(arms, f"  arms:\n    - fine\n    - {{name: coarse_dyn, {key}: coarse, options: "
                                  "{dynamic_sampling: true}}\n    - {name: fine2, " + key + ": fine}\n"
                            ).replace("  steps: 329\n", "")
        cfg = tmp_path / f"mixed_{key}.yaml"
        cfg.write_text(text, encoding="utf-8")
        code, out, err = render(cfg, FIXTURE, tmp_path / "out")
        assert code == 0 and err.splitlines() == (
            [] if key == "reward_granularity" else [deprecation_note("grpo arms' accuracy", "reward_granularity")]), err
    cmds = commands(out)
    fine, coarse = one(cmds, "--output_dir OUT/fine "), one(cmds, "--output_dir OUT/coarse_dyn ")
    assert "--reward_funcs accuracy_fine format length_penalty" in fine and "dynamic_sampling" not in fine
    assert "--reward_funcs accuracy_coarse format length_penalty" in coarse and coarse.endswith(
        "--save_total_limit 10 --dynamic_sampling true --resume_from_checkpoint true")
    assert "--max_train_seconds '<train_runtime of OUT/fine/trainer_state.json>'" in one(
        cmds, "--output_dir OUT/control ")


@pytest.mark.parametrize("name", SHIPPED)
def test_the_shipped_proof_configs_dry_runs_are_unchanged(name, tmp_path):
    """Every proof config shipped before the start stage plans exactly the commands it planned then (the golden
    texts were written by the code before that change, commit 5641b9d; since then changed only where a config
    fixed its control's step count, control: steps)."""
    code, text, err = render(ROOT / "recipes" / "configs" / f"{name}.yaml", FIXTURE, tmp_path / "out")
    assert code == 0, err
    assert text == (GOLDEN / f"{name}.txt").read_text(encoding="utf-8")


if __name__ == "__main__":  # PYTHONPATH=. python tests/test_proof_start.py --update: rewrite the golden texts
    import tempfile

    if sys.argv[1:] != ["--update"]:
        raise SystemExit("usage: python tests/test_proof_start.py --update")
    GOLDEN.mkdir(parents=True, exist_ok=True)
    for name in SHIPPED:
        with tempfile.TemporaryDirectory() as tmp:
            code, text, err = render(ROOT / "recipes" / "configs" / f"{name}.yaml", FIXTURE, Path(tmp) / "out")
        assert code == 0, err
        (GOLDEN / f"{name}.txt").write_text(text, encoding="utf-8")
        print(f"wrote {GOLDEN / name}.txt")
