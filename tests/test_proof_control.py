"""Issue #28: the per-subtask data option (DataArgs.subtasks) and the proof's more-SFT control stage
(recipes/proof.py stage 4): real recipes, real CLIs, real files; nothing trains here except a two-step
transformers Trainer whose trainer_state.json is the format the control reads its time budget from."""
import itertools
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from common.errors import TaseError
from recipes.proof_stages.config import CONTROL, DATA_KEYS, load_config

ROOT = Path(__file__).resolve().parents[1]
PY = sys.executable
SEED = 777


def run(cmd: list[str], **kw) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=120, **kw)


# ---- DataArgs.subtasks ----


def test_subtasks_draw_only_those_cells_exactly_as_the_synth_cli(tmp_path):
    from recipes.shared.config import DataArgs
    from recipes.shared.data import iter_records

    args = DataArgs(tasks=["component_split"], langs=["en"], subtasks=["combine"], num_train_examples=40,
                    synth_seed=SEED, paraphrase=False)
    rows = list(iter_records(args))
    assert len(rows) == 40 and {r["subtask"] for r in rows} == {"combine"}
    out = tmp_path / "combine.jsonl"
    res = run([PY, "-m", "synth", "--task", "component_split", "--lang", "en", "--subtask", "combine", "-n", "40",
               "--seed", str(SEED), "--no-progress", "--out", str(out)])
    assert res.returncode == 0, res.stderr
    cli = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert [r["id"] for r in rows] == [r["id"] for r in cli] == [f"synth/component_split/en/combine/{SEED}/{i}"
                                                                 for i in range(40)]
    assert rows == cli


def test_subtasks_keep_each_task_s_listed_subtasks_round_robin():
    from recipes.shared.config import DataArgs
    from recipes.shared.data import iter_records

    args = DataArgs(tasks=["component_split"], langs=["en", "zh"], subtasks=["combine", "split"],
                    num_train_examples=8, synth_seed=SEED)
    assert [r["id"].rsplit("/", 2)[0] for r in iter_records(args)][:4] == [
        "synth/component_split/en/combine", "synth/component_split/en/split", "synth/component_split/zh/combine",
        "synth/component_split/zh/split"]


@pytest.mark.parametrize("kw", [
    dict(tasks=["component_count"], langs=["en", "zh", "ko"], paraphrase=False),
    dict(tasks=["component_split", "sort_lengths"], langs=["en", "all"], max_len=8),
    dict(tasks=["all"], langs=["en"], mixture="synth/data/mixture_default.yaml"),
])
def test_subtasks_unset_draws_the_same_records_as_before(kw):
    """The default path is the old one: one synth.generate stream per task x lang, round-robin."""
    import synth
    from recipes.shared.config import DataArgs
    from recipes.shared.data import iter_records
    from synth.mixture import load_mixture

    args = DataArgs(num_train_examples=60, synth_seed=SEED, **kw)
    weights = load_mixture(args.mixture) if args.mixture else None
    streams = [synth.generate(t, lang, sys.maxsize, SEED, paraphrase=args.paraphrase,
                              weights=weights if t == "all" else None, max_len=args.max_len)
               for t in args.tasks for lang in args.langs]
    before = list(itertools.islice((r for group in zip(*streams, strict=False) for r in group), 60))
    assert list(iter_records(args)) == before


def test_subtask_no_listed_task_has_is_a_value_error():
    from recipes.shared.config import DataArgs

    with pytest.raises(ValueError, match=r"^subtasks: task 'component_count' has none of combine"):
        DataArgs(tasks=["component_split", "component_count"], langs=["en"], subtasks=["combine"])
    with pytest.raises(ValueError, match=r"^subtasks: nothing to generate for task all lang en subtasks nosuch$"):
        DataArgs(tasks=["all"], langs=["en"], subtasks=["nosuch"])
    with pytest.raises(ValueError, match=r"^subtasks must be a non-empty list"):
        DataArgs(tasks=["component_split"], subtasks=[])


def test_subtask_errors_are_one_line_in_both_recipe_clis(tmp_path):
    """At parse time, before a model loads or an output folder appears: exit 2, one line, no traceback."""
    bad = ["--tasks", "component_split", "component_count", "--langs", "en", "--subtasks", "combine"]
    procs = [subprocess.Popen([PY, f"recipes/{script}", *bad, *extra, "--output_dir", str(tmp_path / script)],
                              cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for script, extra in (("grpo.py", ["--dry_run", "true"]), ("sft_warmup.py", []))]
    for p in procs:  # both at once: each start imports TRL
        _, err = p.communicate(timeout=180)
        assert p.returncode == 2 and err.splitlines() == [
            "error: subtasks: task 'component_count' has none of combine (it has no subtasks)"], err
    assert not any(tmp_path.iterdir())


# ---- the proof's control stage ----

CONTROL_CONFIG = """\
out: runs/proof_combine
files:
  - token_structure/component_split/en_combine.csv
sft:
  config: recipes/configs/sft_smollm2_cpu.yaml
  options:
    tasks: [component_split]
    langs: [en]
    subtasks: [combine]
    num_train_examples: 768
    synth_seed: 777
    paraphrase: false
    learning_rate: 1.0e-4
grpo:
  config: recipes/configs/grpo_combine_cpu.yaml
  arms: [coarse, fine]
  reward_funcs: [format, length_penalty]
  options: {{subtasks: [combine], synth_seed: 778, num_train_examples: 3232}}
control:
  options: {{learning_rate: 5.0e-5, lr_scheduler_type: constant, warmup_steps: 0, max_steps: 404}}
heldout:
  task: component_split
  lang: en
  subtask: combine
  n: 96
  seed: 4242
eval:
  backend: hf
  max_new_tokens: 32
compare:
  n_boot: 2000
"""


def proof_config(tmp_path: Path, control: bool = True) -> Path:
    text = CONTROL_CONFIG.format()
    if not control:
        text = text.replace(text[text.index("control:"):text.index("heldout:")], "")
    path = tmp_path / ("control.yaml" if control else "no_control.yaml")
    path.write_text(text, encoding="utf-8")
    return path


def dry_run(config: Path, official: Path, out: Path) -> str:
    res = run([PY, "recipes/proof.py", "--dry-run", "--config", str(config), "--official", str(official),
               "--out", str(out)])
    assert res.returncode == 0, res.stderr[-2000:]
    return res.stdout


def commands(stdout: str) -> list[str]:
    return [line[2:] for line in stdout.splitlines() if line.startswith("+ ")]


def test_proof_dry_run_plans_the_control_and_the_subtask_sets(tmp_path, fixture_root):
    out = tmp_path / "proof"
    text = dry_run(proof_config(tmp_path), fixture_root, out)
    assert [line.split()[1] for line in text.splitlines() if line.startswith("== ")][0] == "1/10"
    assert "== 6/10 more-SFT control" in text and "== 10/10 summary" in text
    cmds = commands(text)
    control = [c for c in cmds if f"--output_dir {out / 'control'}" in c]
    assert len(control) == 1 and "recipes/sft_warmup.py" in control[0]
    assert control[0].count("--learning_rate") == 1  # the sft options, then control.options: each key once
    assert (f"--config {out / 'control_config.yaml'} --model_name_or_path {out / 'sft'} --learning_rate 5e-05 "
            "--lr_scheduler_type constant --warmup_steps 0 --max_steps 404 "
            f"--max_train_seconds '<train_runtime of {out / 'fine' / 'trainer_state.json'}>' "
            f"--exclude official:{fixture_root}") in control[0]
    assert (f"# writes {out / 'control_config.yaml'}: recipes/configs/sft_smollm2_cpu.yaml with the GRPO arms' "
            'data options: train_data "synth", tasks ["component_split"], langs ["en"], subtasks ["combine"], '
            "mixture null, num_train_examples 3232, synth_seed 778, max_len null") in text
    assert not out.exists()  # a dry run writes nothing, the control config included
    # the training sets, one per subtask stream, and the held-out set: all --subtask combine
    synth = [c for c in cmds if " -m synth " in c]
    assert [c.split("--out ")[1].split()[0] for c in synth] == [
        str(out / "data" / "sft_component_split_en_combine.jsonl"),
        str(out / "data" / "grpo_component_split_en_combine.jsonl"), str(out / "heldout.jsonl")]
    assert all("--task component_split --lang en" in c and "--subtask combine" in c for c in synth)
    assert "-n 3232 --seed 778 --subtask combine" in synth[1] and synth[2].count("--exclude-exact") == 2
    # evaluated like the other models, compared, re-scored from OUT/completions/sft_control
    assert sum(f"--model {out / 'control'} " in c for c in cmds if " -m eval run " in c) == 2
    compare = [c for c in cmds if " -m eval compare " in c]
    assert len(compare) == 2 and all(c.split(" --out ")[0].endswith("/sft_control") for c in compare)
    assert any(f"{out / 'completions' / 'sft_control' / 'component_split' / 'en_combine.jsonl'}" in c
               for c in cmds if " -m eval score " in c)


def test_proof_without_control_is_the_same_plan_minus_the_control(tmp_path, fixture_root):
    """No control section: nine stages, and every command of the ten-stage plan but the control's own and
    those of its model (evaluations, re-scores; the comparisons lose it)."""
    out = tmp_path / "proof"
    with_control = dry_run(proof_config(tmp_path), fixture_root, out)
    without = dry_run(proof_config(tmp_path, control=False), fixture_root, out)
    assert "sft_control" not in without and "more-SFT control" not in without and "control_config" not in without
    assert [line.split()[1] for line in without.splitlines() if line.startswith("== ")][-1] == "9/9"

    def of_control(c: str) -> bool:
        return " -m eval compare " not in c and ("sft_control" in c or f"{out / 'control'} " in c)

    keep = [c.replace(f" {out / 'eval' / 'official' / 'sft_control'}", "")
            .replace(f" {out / 'eval' / 'heldout' / 'sft_control'}", "")
            for c in commands(with_control) if not of_control(c)]
    assert len(commands(with_control)) - len(keep) == 1 + 2 + 1  # its training, 2 evaluations, 1 re-score
    assert commands(without) == keep


def test_proof_control_config_errors_are_one_line(tmp_path, fixture_root):
    def one_line(text: str, want: str) -> None:
        bad = tmp_path / "bad.yaml"
        bad.write_text(text, encoding="utf-8")
        res = run([PY, "recipes/proof.py", "--dry-run", "--config", str(bad), "--official", str(fixture_root)])
        assert res.returncode == 2 and res.stderr.count("\n") == 1 and want in res.stderr, res.stderr

    good = proof_config(tmp_path).read_text(encoding="utf-8")
    one_line(good.replace("max_steps: 404}", "max_steps: 404, tasks: [component_count]}"),
             "control option 'tasks' is set by proof.py (the control trains on the GRPO arms' data")
    one_line(good.replace("max_steps: 404}", "max_steps: 404, max_train_seconds: 5}"),
             "control option 'max_train_seconds' is set by proof.py")
    one_line(good.replace("arms: [coarse, fine]", "arms: [coarse]"), "grpo arms must include fine")
    one_line(good.replace("  subtask: combine\n", "  subtask: [combine]\n"), "heldout: subtask must be a str")
    one_line(good.replace("control:\n  options", "control:\n  option"), "control: unknown key 'option'")
    one_line(good.replace("subtasks: [combine], synth_seed: 778", "subtasks: [count], synth_seed: 778"),
             "grpo: subtasks: task 'component_split' has none of count")
    empty = tmp_path / "empty_control.yaml"  # `control:` alone: the stage, with no extra options
    empty.write_text(good.replace(good[good.index("control:"):good.index("heldout:")], "control:\n"))
    assert "== 6/10 more-SFT control" in dry_run(empty, fixture_root, tmp_path / "p2")


def tiny_trainer_run(output_dir: Path) -> None:
    """Two optimizer steps of a real transformers Trainer on a one-layer model, then save_state(): the
    trainer_state.json every recipe (TRL's trainers are Trainers) leaves in its output folder."""
    import torch
    from torch import nn
    from transformers import Trainer, TrainingArguments

    class Tiny(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.w = nn.Linear(2, 1)

        def forward(self, x, labels):
            return {"loss": ((self.w(x).squeeze(-1) - labels) ** 2).mean()}

    rows = [{"x": torch.tensor([1.0, float(i)]), "labels": torch.tensor(float(i))} for i in range(8)]
    args = TrainingArguments(output_dir=str(output_dir), max_steps=2, per_device_train_batch_size=4,
                             report_to="none", use_cpu=True, save_strategy="no", logging_steps=1, disable_tqdm=True)
    trainer = Trainer(model=Tiny(), args=args, train_dataset=rows)
    trainer.train()
    trainer.save_state()


def test_control_trains_for_the_fine_arm_s_train_runtime(tmp_path, fixture_root):
    from common.paths import write_marker
    from recipes.proof_stages import inputs as proof_inputs, train as proof_train

    out = tmp_path / "proof"
    tiny_trainer_run(out / "fine")
    write_marker(out, "proof", [])  # an earlier proof's folder, as its first run marks it
    state = json.loads((out / "fine" / "trainer_state.json").read_text())
    seconds = proof_train.train_runtime(out / "fine")
    assert seconds == state["log_history"][-1]["train_runtime"] > 0
    control = [c for c in commands(dry_run(proof_config(tmp_path), fixture_root, out)) if "/control " in c]
    assert f"--max_train_seconds {seconds:g} --exclude" in control[0]
    # the control's recipe config parses (TrlParser, as sft_warmup.py does) to the GRPO arms' data
    from trl import ModelConfig, SFTConfig

    from recipes.sft_warmup import BudgetArgs
    from recipes.shared.config import DataArgs
    from recipes.shared.parser import parse_config

    cfg = load_config(str(proof_config(tmp_path)))
    grpo_data = proof_inputs.data_args(ROOT / cfg.grpo.config, cfg.grpo.options)
    written = tmp_path / "control_config.yaml"
    written.write_text(proof_train.control_config_text(ROOT / cfg.sft.config, grpo_data), encoding="utf-8")
    argv = control[0].split(" recipes/sft_warmup.py ")[1].replace(str(out / "control_config.yaml"), str(written))
    data, sft, _, budget = parse_config((DataArgs, SFTConfig, ModelConfig, BudgetArgs), argv.split())
    assert {k: getattr(data, k) for k in DATA_KEYS if k in grpo_data} == grpo_data and grpo_data["max_len"] is None
    assert "skip_examples" not in grpo_data and data.skip_examples == 0  # unset: not written, none skipped
    assert data.subtasks == ["combine"] and sft.learning_rate == 5e-5
    assert budget.max_train_seconds == float(f"{seconds:g}")
    # a state without it (a run that did not finish) is one line
    (out / "fine" / "trainer_state.json").write_text(json.dumps({**state, "log_history": state["log_history"][:-1]}))
    with pytest.raises(TaseError, match="no train_runtime in its log_history"):  # main prints it, exit 2
        proof_train.train_runtime(out / "fine")


def test_control_stage_fails_in_one_line_without_the_fine_arm_s_state_and_resumes(tmp_path, fixture_root):
    """A proof whose warm-up and arms finished (their markers) but whose fine arm left no trainer_state.json: the
    control stage stops in one line, before it trains; once the control finished it is skipped (a dry run shows
    the earlier stages skipped too). The stage is called as proof.py calls it, on the unit's view."""
    from common.paths import write_marker
    from recipes.proof import parse_args
    from recipes.proof_stages import inputs as proof_inputs
    from recipes.proof_stages.train import DONE, stage_control

    out = tmp_path / "proof"
    for name in ("sft", "coarse", "fine"):
        (out / name).mkdir(parents=True)
        (out / name / "model.safetensors").write_bytes(b"")
        (out / name / DONE).write_text("{}\n", encoding="utf-8")
    write_marker(out, "proof", [])  # an earlier proof's folder, as its first run marks it
    args = ["--config", str(proof_config(tmp_path)), "--official", str(fixture_root), "--out", str(out)]
    pr = proof_inputs.setup(parse_args(args))
    with pytest.raises(TaseError) as e:
        stage_control(pr.unit(None))
    assert str(e.value) == (f"{out / 'fine' / 'trainer_state.json'}: cannot read the fine arm's train_runtime (No such "
                            "file or directory); the control trains for as long as the fine arm did")
    assert not (out / "control").exists()
    (out / "control").mkdir()
    (out / "control" / "model.safetensors").write_bytes(b"")
    res = run([PY, "recipes/proof.py", *args, "--dry-run"])
    assert res.returncode == 0 and "== 6/10 more-SFT control: skipped" not in res.stdout  # model.safetensors alone
    (out / "control" / DONE).write_text("{}\n", encoding="utf-8")
    res = run([PY, "recipes/proof.py", *args, "--dry-run"])
    assert res.returncode == 0 and "== 5/10 GRPO fine: skipped" in res.stdout
    assert f"== 6/10 more-SFT control: skipped, {out / 'control' / DONE} says it finished" in res.stdout


def test_summary_puts_grpo_fine_against_the_control(tmp_path, fixture_root):
    """Stage 9 on evaluations faked with `eval score` (as tests/test_recipes_pipelines.py does for stages 7-8): the
    control is a row of the accuracy table, and GRPO fine vs control and control vs warm-up are paired-CI lines."""
    from eval.gold import gold_predictions
    from eval.runner import score_predictions
    from recipes.proof_stages import report as proof_report, train as proof_train
    from recipes.steps.pipeline import Steps
    from synth import generate
    from synth.readers import load_data

    cfg = load_config(str(proof_config(tmp_path)))
    out = tmp_path / "proof"
    proof_train.link_subset(fixture_root, cfg.files, out / "official", dry_run=False)
    held = tmp_path / "heldout.jsonl"
    held.write_text("".join(json.dumps(r) + "\n" for r in generate("component_split", "en", 8, 1, "combine")))
    models = ["base", "warm-up", "coarse", "fine", CONTROL]
    right = {"base": 0, "warm-up": 2, "coarse": 3, "fine": 4, CONTROL: 3}  # every k-th row right
    for dname, spec in (("official", f"official:{out / 'official'}"), ("heldout", str(held))):
        gold = list(gold_predictions(load_data(spec)))
        for name in models:
            preds = tmp_path / f"{dname}_{name}.jsonl"
            preds.write_text("".join(json.dumps({"id": g["id"], "completion": g["completion"] if right[name] and
                                                 i % (6 - right[name]) == 0 else "<answer>no</answer>"}) + "\n"
                                     for i, g in enumerate(gold)))
            score_predictions(spec, preds, out / "eval" / dname / name)
    text = proof_report.summary(out, cfg, models, 200, Steps("proof", 9, ROOT), 1.0)
    assert "| sft_control | " in text
    lines = [line for line in text.splitlines() if line.startswith("  GRPO fine vs control ")]
    assert len(lines) == 2  # official and held-out
    assert all(re.search(r"GRPO fine vs control +[+-]\d+\.\d\d \[[+-]\d+\.\d\d, [+-]\d+\.\d\d\]", line)
               for line in lines)
    assert sum(line.startswith("  control vs warm-up ") for line in text.splitlines()) == 2
    without = proof_report.summary(out, cfg, models[:-1], 200, Steps("proof", 8, ROOT), 1.0)
    assert "control" not in without.replace(str(out), "")


def test_model_card_names_the_subtasks_only_when_set(tmp_path):
    from recipes.export import model_card

    for subtasks, want in ((["combine"], "| subtasks | `['combine']` |"), (None, None)):
        run_dir = tmp_path / str(subtasks)
        run_dir.mkdir()
        (run_dir / "tase_config.json").write_text(json.dumps({"tase": {
            "train_data": "synth", "tasks": ["component_split"], "langs": ["en"], "subtasks": subtasks}}))
        card = model_card(run_dir, "m", [], None)
        assert "| tasks | `['component_split']` |" in card
        assert (want in card) if want else "subtasks" not in card


def test_the_en_combine_proof_config_trains_and_screens_combine_only():
    """recipes/configs/proof_combine_cpu.yaml (make proof PROOF_CONFIG=...) is #28's en_combine recipe: it loads,
    every training stream and the held-out set are component_split/en/combine, and it has the control stage."""
    from recipes.proof_stages import inputs as proof_inputs

    path = ROOT / "recipes" / "configs" / "proof_combine_cpu.yaml"
    cfg = load_config(str(path))
    assert cfg.files == ["token_structure/component_split/en_combine.csv"] and cfg.control is not None
    for part in (cfg.sft, cfg.grpo):
        data = proof_inputs.data_args(ROOT / part.config, part.options)
        assert (data["tasks"], data["langs"], data["subtasks"]) == (["component_split"], ["en"], ["combine"]), part
    assert (cfg.heldout.task, cfg.heldout.lang, cfg.heldout.subtask) == ("component_split", "en", "combine")


def test_the_char_classification_proof_config_weights_its_pool_and_pins_float32(tmp_path, capsys):
    """recipes/configs/proof_charcls_cpu.yaml (issue #41): dot_matrix/mul/char_classification everywhere, the
    GRPO pool's class weighting (repeat_answers) is a data option the control inherits, the evaluation dtype is
    pinned; a bad eval dtype is one line."""
    from recipes.proof_stages import inputs as proof_inputs, train as proof_train

    for name, arms in (("proof_charcls_cpu.yaml", ["fine", "coarse"]),):
        cfg = load_config(str(ROOT / "recipes" / "configs" / name))
        assert [a.name for a in cfg.grpo.arms] == arms and cfg.eval.dtype == "float32" and cfg.control is not None
        assert cfg.out == "runs/proof_charcls"
        for part in (cfg.sft, cfg.grpo):
            data = proof_inputs.data_args(ROOT / part.config, part.options)
            assert (data["tasks"], data["langs"], data["subtasks"]) == (["dot_matrix"], ["mul"],
                                                                         ["char_classification"]), part
        assert data["repeat_answers"] == ["kana=6", "greek=6", "symbol=2"]
        assert "repeat_answers:\n- kana=6\n" in proof_train.control_config_text(ROOT / cfg.sft.config, data)
    bad = tmp_path / "bad.yaml"
    bad.write_text((ROOT / "recipes" / "configs" / "proof_charcls_cpu.yaml").read_text().replace(
        "dtype: float32", "dtype: fp32"))
    with pytest.raises(TaseError) as e:  # proof.main prints it as its one line, exit 2
        load_config(str(bad))
    assert str(e.value) == f"--config {bad}: eval dtype must be one of float32, bfloat16, float16, got 'fp32'"


def test_repeat_answers_weights_the_drawn_rows_by_gold_answer(tmp_path):
    """num_train_examples rows are drawn, then each whose gold answer is named comes K times; a malformed
    entry is one ValueError line."""
    from recipes.shared.config import DataArgs
    from recipes.shared.data import iter_records

    f = tmp_path / "pool.jsonl"
    f.write_text("".join(json.dumps({"id": f"r{i}", "task": "dot_matrix", "subtask": "char_classification",
                                     "lang": "mul", "type": "MATCH_ANSWER", "prompt": f"p{i}", "answer": a}) + "\n"
                         for i, a in enumerate(["kana", "hanzi", "symbol", "kana", "greek"])))
    args = DataArgs(train_data=str(f), num_train_examples=4, repeat_answers=["kana=3", "symbol=2"])
    assert [r["id"] for r in iter_records(args)] == ["r0"] * 3 + ["r1"] + ["r2"] * 2 + ["r3"] * 3
    for bad in (["kana"], ["kana=0"], ["kana=2", "kana=3"], ["=2"]):
        with pytest.raises(ValueError, match="repeat_answers: "):
            DataArgs(train_data=str(f), repeat_answers=bad)


def test_per_class_accuracy_lines_for_a_classification_file(tmp_path):
    """The summary's per-class table: correct/rows per gold answer and model from samples.jsonl (official
    verdict), only for files with few distinct answers."""
    from recipes.proof_stages import report as proof_report

    f, g = "token_structure/dot_matrix/char_classification.csv", "token_structure/component_split/en_combine.csv"
    rows = [("kana", 1), ("kana", 0), ("greek", 0), ("hanzi", 1)] + [(f"w{i}", 1) for i in range(13)]
    for name, flip in (("warm-up", False), ("fine", True)):
        (tmp_path / name).mkdir()
        (tmp_path / name / "samples.jsonl").write_text("".join(
            json.dumps({"file": f if i < 4 else g, "answer": a, "coarse": bool(c) != (flip and a == "greek")}) + "\n"
            for i, (a, c) in enumerate(rows)))
    lines = proof_report.answer_class_lines(tmp_path, ["warm-up", "fine"], [f, g])
    assert lines == ["", "dot_matrix/char_classification: correct / rows per class (the gold answer; official "
                     "verdict):", "", "| model | kana | greek | hanzi |", "|---|---:|---:|---:|",
                     "| warm-up | 1/2 | 0/1 | 1/1 |", "| fine | 1/2 | 1/1 | 1/1 |"]


def test_proof_reads_each_config_once_and_takes_data_from_the_recipe_parser(tmp_path, fixture_root, monkeypatch):
    """setup() reads the proof config and each recipe config once (issue 48: the sft config was read three times,
    with DataArgs defaults merged by hand); the stages' data and base model are the recipe parser's values, and
    the control's config is written from the same read."""
    from collections import Counter

    import common.yamlfile
    from recipes import proof
    from recipes.proof_stages import inputs as proof_inputs, train as proof_train

    calls: list[str] = []
    real = common.yamlfile.read

    def counting(path, *a, **kw):  # the one YAML reader under read_yaml, whoever calls it
        calls.append(str(path))
        return real(path, *a, **kw)

    monkeypatch.setattr(common.yamlfile, "read", counting)
    pr = proof_inputs.setup(proof.parse_args(["--config", str(proof_config(tmp_path)), "--official",
                                              str(fixture_root), "--out", str(tmp_path / "p"), "--dry-run"]))
    assert Counter(calls) == Counter({str(proof_config(tmp_path)): 1, str(pr.sft_config): 1, str(pr.grpo_config): 1})
    assert pr.data["grpo"]["subtasks"] == ["combine"] and pr.data["grpo"]["num_train_examples"] == 3232
    assert pr.data["sft"]["num_train_examples"] == 768 and pr.data["sft"]["paraphrase"] is False
    assert pr.data["grpo"]["max_len"] is None and pr.base_model == "default"
    text = proof_train.control_config_text(pr.sft_config, pr.data["grpo"], pr.read)
    assert len(calls) == 3 and "num_train_examples: 3232\n" in text and "learning_rate:" in text
