"""Issue 49: held-out checkpoint selection as a stage of recipes/proof.py (`select:`), and the named long configuration
(recipes/configs/proof_combine_long_cpu.yaml, `make proof PROOF_LONG=1`). Dry runs and hand-written selection files,
and one real selection stage on a fake run of tiny checkpoints (slow); nothing trains here."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT, call_main
from test_proof_control import CONTROL_CONFIG, commands, dry_run

PY = sys.executable
SELECT = "select:\n  n: 300\n  seed: 4243\n"


def config(tmp_path: Path, select: str | None = SELECT, name: str = "select.yaml") -> Path:
    """test_proof_control's en_combine proof config (two arms and the control), with `select` before heldout:."""
    text = CONTROL_CONFIG.format()
    if select is not None:
        text = text.replace("heldout:", select + "heldout:")
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def headers(text: str) -> list[str]:
    return [line[3:] for line in text.splitlines() if line.startswith("== ")]


def test_dry_run_selects_every_arm_and_the_control_on_held_out_rows_then_evaluates_the_choice(tmp_path,
                                                                                               fixture_root):
    out = tmp_path / "proof"
    text = dry_run(config(tmp_path), fixture_root, out)
    heads = headers(text)
    assert heads[0].startswith("1/11 ") and heads[-1] == "11/11 summary" and not out.exists()
    assert [h for h in heads if h.startswith("7/11 ")] == [
        f"7/11 checkpoint selection for {name} on heldout_select.jsonl (held-out rows only)"
        for name in ("coarse", "fine", "sft_control")]
    cmds = commands(text)
    # the selection's own rows: 300, seed 4243, guarded like the held-out set and against it
    sel_set = [c for c in cmds if f"--out {out / 'heldout_select.jsonl'} " in c]
    assert len(sel_set) == 1 and "-m synth --task component_split --lang en -n 300 --seed 4243 --subtask combine" \
        in sel_set[0]
    assert sel_set[0].endswith(f"--exclude official:{fixture_root} "
                               f"--exclude-exact {out / 'data' / 'sft_component_split_en_combine.jsonl'} "
                               f"--exclude-exact {out / 'data' / 'grpo_component_split_en_combine.jsonl'} "
                               f"--exclude-exact {out / 'heldout.jsonl'}")
    select = [c for c in cmds if "recipes/select_checkpoint.py" in c]
    assert [c.split("recipes/select_checkpoint.py ")[1] for c in select] == [
        f"{out / run} --heldout {out / 'heldout_select.jsonl'} --out {out / ('select_' + run)} --backend hf "
        "--max-new-tokens 32" for run in ("coarse", "fine", "control")]
    assert not any("official" in c for c in select)  # held-out rows only
    # the selection runs after the sets and before the evaluations of the arms (the baseline's come before the arms)
    assert cmds.index(sel_set[0]) < cmds.index(select[0]) < min(i for i, c in enumerate(cmds) if " -m eval run " in c
                                                                and "/coarse" in c)
    evals = [c for c in cmds if " -m eval run " in c]
    for name, run in (("coarse", "coarse"), ("fine", "fine"), ("sft_control", "control")):
        mine = [c for c in evals if f"--out {out / 'eval'}/" in c and c.split(" --out ")[1].split()[0].endswith(
            f"/{name}")]
        assert len(mine) == 2 and all(
            f"--model '<chosen checkpoint in {out / ('select_' + run) / 'best_checkpoint.json'}>' " in c
            for c in mine), mine
    assert sum(f"--model {out / 'sft'} " in c for c in evals) == 2  # the warm-up is not selected
    assert "per selected run, the chosen checkpoint and its held-out score" in text


def test_without_select_the_plan_is_the_selected_one_less_the_selection(tmp_path, fixture_root):
    """No select section: ten stages, and every command of the eleven-stage plan but the selection's set and its
    select_checkpoint runs, each selected run evaluated as its final model (the plan before select: existed; its
    exact commands are pinned by tests/test_proof_control.py)."""
    out = tmp_path / "proof"
    with_select = dry_run(config(tmp_path), fixture_root, out)
    without = dry_run(config(tmp_path, None, "plain.yaml"), fixture_root, out)
    assert "select" not in without.replace(str(tmp_path), "").replace(str(ROOT), "")
    assert headers(without)[-1] == "10/10 summary"
    keep = [c for c in commands(with_select) if "recipes/select_checkpoint.py" not in c and "heldout_select" not in c]
    for run, name in (("coarse", "coarse"), ("fine", "fine"), ("control", "control")):
        placeholder = f"'<chosen checkpoint in {out / ('select_' + run) / 'best_checkpoint.json'}>'"
        keep = [c.replace(placeholder, str(out / name)) for c in keep]
    assert commands(without) == keep
    # the stage numbers: those before the selection keep theirs, those after move up by one
    assert [h.split(" ", 1)[1] for h in headers(without)] == [
        h.split(" ", 1)[1] for h in headers(with_select) if "checkpoint selection" not in h
        and "for checkpoint selection" not in h]


def test_select_without_n_and_seed_uses_the_held_out_set(tmp_path, fixture_root):
    from recipes.proof_stages.config import load_config
    from recipes.proof_stages.sections import Select

    for section in ("select:\n", "select: {}\n"):  # the section alone: the stage with its defaults
        assert load_config(str(config(tmp_path, section, "empty.yaml"))).select == Select()
    out = tmp_path / "proof"
    text = dry_run(config(tmp_path, "select:\n  metric: strict_acc\n"), fixture_root, out)
    cmds = commands(text)
    assert "heldout_select" not in text and headers(text)[-1] == "11/11 summary"
    select = [c for c in cmds if "recipes/select_checkpoint.py" in c]
    assert len(select) == 3 and all(f"--heldout {out / 'heldout.jsonl'} " in c and c.endswith(" --metric strict_acc")
                                    for c in select)


def test_bad_select_values_are_one_line(tmp_path, fixture_root):
    cases = {
        "select:\n  n: 300\n": "select: give n and seed together (its own held-out set) or neither",
        "select:\n  seed: 4243\n": "select: give n and seed together",
        "select:\n  n: 0\n  seed: 4243\n": "select: n must be at least 1, got 0",
        "select:\n  n: '300'\n  seed: 4243\n": "select: n must be an integer, got '300'",
        "select:\n  n: true\n  seed: 4243\n": "select: n must be an integer, got True",
        "select:\n  metric: best\n": "select: metric must be one of official_acc, strict_acc, got 'best'",
        "select:\n  rows: 300\n": "select: unknown key 'rows' (known: n, seed, metric)",
        "select: [300]\n": "select: must be a mapping of key: value",
    }
    for section, want in cases.items():
        bad = config(tmp_path, section, "bad.yaml")
        code, err = call_main(["recipes/proof.py", "--dry-run", "--config", str(bad), "--official", str(fixture_root)])
        assert code == 2 and err.count("\n") == 1 and want in err, (section, err)


def selection_json(out: Path, run: str, chosen: int, scores: dict[int, float], former: bool = False) -> None:
    """OUT/select_<run>/best_checkpoint.json as recipes/select_checkpoint.py writes it (its paths as given: relative
    to the repository root, where proof.py runs it; percent scores given, 0-1 shares written), or with `former` the
    selection.json it wrote before issue 61 (percent under `heldout`, the choice under `chosen`)."""
    folder = out / f"select_{run}"
    folder.mkdir(parents=True)
    rel = (out / run).relative_to(ROOT) if (out / run).is_relative_to(ROOT) else out / run

    def cand(step: int) -> dict:
        score = {"heldout": scores[step]} if former else {"value": round(scores[step] / 100, 6)}
        return {"step": step, "path": str(rel / f"checkpoint-{step}"), **score, "n": 300}

    if former:
        (folder / "selection.json").write_text(json.dumps({"run": str(rel), "heldout": "h", "rule": "r",
                                                           "candidates": [cand(s) for s in sorted(scores)],
                                                           "chosen": cand(chosen)}))
        return
    c = cand(chosen)
    (folder / "best_checkpoint.json").write_text(json.dumps({
        "metric": "tase/heldout/official_acc", "value": c["value"], "step": chosen, "path": c["path"],
        "greater_is_better": True, "run": str(rel), "heldout": "h", "rule": "r",
        "evaluations": [cand(s) for s in sorted(scores)]}))


def test_a_finished_selection_is_skipped_and_its_choice_evaluated_and_summarised(tmp_path, fixture_root, capsys):
    """A rerun (here a dry run) after the selection: the stage says skipped, the evaluations take the chosen folder
    from best_checkpoint.json, and the summary's selection table names the step and both held-out scores (percent,
    as the evaluation tables). A former selection.json (the control's here) is read the same way, with one
    deprecation line."""
    from common.paths import write_marker
    from recipes.proof import parse_args
    from recipes.proof_stages import inputs as proof_inputs
    from recipes.proof_stages.selection import selection_lines

    out = tmp_path / "proof"
    selection_json(out, "fine", 250, {50: 20.33, 250: 32.0, 300: 31.0})
    write_marker(out, "proof", [])  # an earlier proof's folder, as its first run marks it
    selection_json(out, "coarse", 300, {150: 20.0, 300: 24.0})
    selection_json(out, "control", 300, {150: 26.33, 300: 29.33, 751: 25.33}, former=True)
    cfg = config(tmp_path)
    res = subprocess.run([sys.executable, "recipes/proof.py", "--dry-run", "--config", str(cfg), "--official",
                          str(fixture_root), "--out", str(out)], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    text = res.stdout
    deprecated = (f"{out / 'select_control' / 'selection.json'} is deprecated: select_checkpoint.py writes "
                  "best_checkpoint.json (a 0-1 share under `value`) since issue 61 (the old file is read for one more "
                  "release)")
    assert [line for line in res.stderr.splitlines() if "deprecated" in line] == [deprecated]  # read thrice, one line
    assert f"== 7/11 checkpoint selection for fine: skipped, {out / 'select_fine' / 'best_checkpoint.json'} exists" \
        in text
    assert f"checkpoint selection for sft_control: skipped, {out / 'select_control' / 'selection.json'} exists" in text
    evals = [c for c in commands(text) if " -m eval run " in c]
    assert sum(f"--model {out / 'fine' / 'checkpoint-250'} " in c for c in evals) == 2
    assert sum(f"--model {out / 'control' / 'checkpoint-300'} " in c for c in evals) == 2
    assert "<chosen checkpoint" not in text
    pr = proof_inputs.setup(parse_args(["--config", str(cfg), "--official", str(fixture_root), "--out", str(out),
                                        "--dry-run"]))
    lines = selection_lines(pr)
    assert f"| fine | 250 | {out / 'fine' / 'checkpoint-250'} | 32.00 | 300 | 31.00 |" in lines
    assert f"| sft_control | 300 | {out / 'control' / 'checkpoint-300'} | 29.33 | 751 | 25.33 |" in lines
    assert not any("not an independent measure" in line for line in lines)  # its own held-out rows
    notes = [line for line in capsys.readouterr().err.splitlines() if "deprecated" in line]
    assert notes == [deprecated], notes  # in this process too: one line, however often it is read
    (out / "select_coarse" / "best_checkpoint.json").write_text("{\"step\": 3}")  # unreadable: one line
    code, err = call_main(["recipes/proof.py", "--dry-run", "--config", str(cfg), "--official", str(fixture_root),
                           "--out", str(out)])
    assert code == 2 and err.count("\n") == 1 and \
        "select_coarse/best_checkpoint.json: cannot read the chosen checkpoint" in err, err


def test_the_long_config_is_the_committed_300_step_run(fixture_root):
    """recipes/configs/proof_combine_long_cpu.yaml loads and parses with every recipe's own parser (setup, dry run):
    the fine arm only, 300 steps with num_iterations 2 and a checkpoint every 50; the control for the 751 steps the
    fine arm's train_runtime bought on 2026-11-26 (control: steps), lr 5e-5 constant, a checkpoint every 150;
    selection on 300 rows of seed 4243; evaluation float32 vLLM."""
    from recipes.proof import parse_args
    from recipes.proof_stages import config as proof_config, inputs as proof_inputs, sections

    path = ROOT / "recipes" / "configs" / "proof_combine_long_cpu.yaml"
    cfg = proof_config.load_config(str(path))
    assert [a.name for a in cfg.grpo.arms] == ["fine"] and cfg.select == sections.Select(n=300, seed=4243)
    assert cfg.eval == sections.Eval(backend="vllm", max_new_tokens=32, dtype="float32")
    short = proof_config.load_config(str(ROOT / "recipes" / "configs" / "proof_combine_cpu.yaml"))
    assert cfg.sft == short.sft and cfg.heldout == short.heldout  # the same warm-up and held-out set
    pr = proof_inputs.setup(parse_args(["--config", str(path), "--official", str(fixture_root), "--dry-run"]))
    assert pr.select and pr.control and pr.select_heldout == pr.out / "heldout_select.jsonl"
    assert pr.out == ROOT / "runs" / "proof_combine_long"
    parsed = proof_inputs.check_recipe_options(pr.cfg, pr.sft_config, pr.grpo_config)
    grpo, control = parsed["grpo"][1], parsed["control"][1]
    assert (grpo.max_steps, grpo.num_iterations, grpo.save_steps, grpo.save_total_limit) == (300, 2, 50, 10)
    assert (str(control.save_strategy.value), control.save_steps, control.save_total_limit) == ("steps", 150, 30)
    assert proof_config.control_steps(pr.cfg) == 751 and "max_steps" not in pr.cfg.control.options
    assert (control.learning_rate, str(control.lr_scheduler_type.value), control.warmup_steps) == (5e-5, "constant", 0)
    assert pr.data["grpo"]["subtasks"] == ["combine"] and pr.data["grpo"]["synth_seed"] == 778


def test_make_proof_long_names_the_long_config():
    def plan(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(["make", "-n", "proof", "TASE=/x", *args], cwd=ROOT, capture_output=True, text=True,
                              timeout=60)

    assert "for c in recipes/configs/proof_combine_long_cpu.yaml;" in plan("PROOF_LONG=1").stdout
    default = plan().stdout
    assert "for c in recipes/configs/proof_charcls_cpu.yaml recipes/configs/proof_combine_cpu.yaml;" in default
    assert "proof_combine_long_cpu" not in default
    for bad, want in ((("PROOF_LONG=1", "PROOF_CONFIG=a.yaml"),
                       "PROOF_LONG=1 names its own config; give it or PROOF_CONFIG, not both"),
                      (("PROOF_LONG=yes",), "PROOF_LONG must be 1 (or 0), got 'yes'")):
        res = subprocess.run(["make", "--no-print-directory", "proof", "TASE=/x", *bad], cwd=ROOT, capture_output=True,
                             text=True, timeout=60)
        assert res.returncode == 2 and res.stderr.startswith(f"error: {want}\n"), res.stderr


@pytest.mark.slow
def test_selection_stage_runs_select_checkpoint_and_the_evaluations_take_its_choice(tmp_path, fixture_root, tiny_model,
                                                                                   capsys):
    """The stage for real on a fake fine arm (checkpoint-1 and a final model at step 2, copies of the tiny model) and
    three held-out rows: select_checkpoint.py runs, its best_checkpoint.json gives the folder the evaluation commands
    take,
    and the summary's table names it."""
    import shutil

    from recipes.proof import parse_args
    from recipes.proof_stages import inputs as proof_inputs
    from recipes.proof_stages.evaluate import stage_evaluate
    from recipes.proof_stages.selection import selection_lines, stage_select
    from recipes.steps.pipeline import Steps
    from synth import generate

    text = CONTROL_CONFIG.format().replace("arms: [coarse, fine]", "arms: [fine]").replace("max_new_tokens: 32",
                                                                                             "max_new_tokens: 4")
    text = text.replace(text[text.index("control:"):text.index("heldout:")], "select:\n")
    cfg = tmp_path / "select.yaml"
    cfg.write_text(text, encoding="utf-8")
    out = tmp_path / "proof"
    shutil.copytree(tiny_model, out / "fine" / "checkpoint-1")
    for f in tiny_model.iterdir():
        shutil.copy(f, out / "fine" / f.name)
    (out / "fine" / "trainer_state.json").write_text(json.dumps({"global_step": 2}))
    (out / "heldout.jsonl").write_text("".join(json.dumps(r) + "\n" for r in generate("component_split", "en", 3, 5,
                                                                                      "combine")))
    pr = proof_inputs.setup(parse_args(["--config", str(cfg), "--official", str(fixture_root), "--out", str(out)]))
    chosen = stage_select(pr)
    sel = json.loads((out / "select_fine" / "best_checkpoint.json").read_text())
    assert [c["step"] for c in sel["evaluations"]] == [1, 2] and sel["heldout"] == str(out / "heldout.jsonl")
    assert chosen == {"fine": sel["path"]} and Path(sel["path"]).parent == out / "fine"
    capsys.readouterr()
    pr.step = Steps("proof", 9, ROOT, dry_run=True, quote=True)  # the evaluations' commands, not run
    stage_evaluate(pr, out / "heldout.jsonl", chosen)
    evals = commands(capsys.readouterr().out)
    assert sum(f"--model {sel['path']} " in c for c in evals) == 2
    lines = selection_lines(pr)
    assert f"| fine | {sel['step']} | {sel['path']} | {100 * sel['value']:.2f} | 2 |" in "\n".join(lines)
    assert any("not an independent measure" in line for line in lines)  # chosen on the held-out set itself
