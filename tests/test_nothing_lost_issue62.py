"""Issue 62 (nothing lost on the newer surfaces): the ablation grid, the proof's stages, curriculum and selection state,
presets and gpu_memory_table under bad input. One test per class of failure: the output rule (a user's file is never
replaced), names that become paths, state files read on resume, dry runs that refuse what the real start refuses
(compared on the same inputs; the real start refuses before anything trains), presets composed with explicit
options, dry-run arithmetic, and the re-draw cap. Fast: in-process calls at parse and validate level; one slow test
resumes the tiniest run."""
from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml
from conftest import call_main
from hypothesis import HealthCheck, given, settings, strategies as st

from common.errors import TaseError

ROOT = Path(__file__).resolve().parents[1]
GRPO = ["recipes/grpo.py", "--config", "recipes/configs/grpo_smollm2_cpu.yaml"]
PROOF_CFG = ROOT / "recipes/configs/proof_cpu.yaml"


def one_line(err: str, fragment: str) -> None:
    """Exactly one line on stderr, `error: ...` holding `fragment`, no traceback."""
    assert err.count("\n") == 1 and err.startswith("error: ") and "Traceback" not in err, err
    assert fragment in err, err


# ------------------------------------------------------------------------------------------- 1. the output rule


def test_ablate_and_proof_never_replace_a_users_file(tmp_path, fixture_root):
    """A folder holding the user's own ablation.md / summary.md is not an earlier output of the command: refused in
    one line by the dry run and the real start alike, the file untouched, no marker written."""
    d = tmp_path / "mine"
    d.mkdir()
    (d / "ablation.md").write_text("my notes\n")
    (d / "summary.md").write_text("my summary\n")
    data = str(fixture_root / "tasks/token_awareness/freq_count/english.csv")
    for dry in (["--dry-run"], []):
        code, err = call_main(["recipes/ablate.py", *GRPO[1:], "--out", str(d), "--eval-data", data, *dry])
        assert code == 2, err
        one_line(err, f"--out {d} is not an earlier recipes/ablate.py folder (it holds ablation.md)")
        code, err = call_main(["recipes/proof.py", "--official", str(fixture_root), "--out", str(d), *dry])
        assert code == 2, err
        one_line(err, f"--out {d} is not an earlier recipes/proof.py folder (it holds ablation.md)")
    assert (d / "ablation.md").read_text() == "my notes\n" and (d / "summary.md").read_text() == "my summary\n"
    assert sorted(p.name for p in d.iterdir()) == ["ablation.md", "summary.md"]


def test_an_earlier_output_is_resumed_and_known_without_its_marker(tmp_path):
    from common.paths import out_folder_refusal, write_marker

    mine = tmp_path / "abl"
    (mine / "coarse").mkdir(parents=True)
    (mine / "coarse" / "trainer_state.json").write_text("{}")
    write_marker(mine, "ablate", [])
    assert out_folder_refusal(mine, "ablate", True) is None  # its own arms' runs inside
    assert "is an `recipes/ablate.py` output" in out_folder_refusal(mine, "proof", True)
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "n.txt").write_text("x")
    assert "not an earlier recipes/proof.py folder" in out_folder_refusal(tmp_path / "notes", "proof", True)
    old = tmp_path / "proof"  # a proof from before its marker: OUT/official and OUT/sft
    (old / "official").mkdir(parents=True)
    (old / "sft").mkdir()
    (old / "sft" / "trainer_state.json").write_text("{}")
    assert out_folder_refusal(old, "proof", True) is None
    assert out_folder_refusal(tmp_path / "new", "proof", True) is None
    (tmp_path / "empty").mkdir()
    assert out_folder_refusal(tmp_path / "empty", "proof", True) is None


def test_gpu_memory_table_bad_input_is_one_line(tmp_path, capsys):
    prep = tmp_path / "prep"
    (prep / "model").mkdir(parents=True)
    (prep / "data").mkdir()
    (prep / "model" / "tokenizer_config.json").write_text("{}")
    (prep / "data" / "train.jsonl").write_text("")
    sys.path.insert(0, str(ROOT / "bench"))
    try:
        import gpu_memory_table
    finally:
        sys.path.remove(str(ROOT / "bench"))
    afile = tmp_path / "a_file"
    afile.write_text("keep")
    for extra, fragment in ((["--out", str(afile)], f"--out {afile / 'gpu_memory_table.json'}: {afile} is a file"),
                            (["--host-gib", "-5"], "--host-gib must be a number > 0, got -5.0"),
                            (["--host-gib", "nan"], "--host-gib must be a number > 0, got nan"),
                            (["--budget", "nan"], "--budget must be a number > 0, got nan")):
        with pytest.raises(SystemExit) as e:
            gpu_memory_table.main(["--prep", str(prep), "--dry-run", "--out", str(tmp_path / "o"), *extra])
        assert e.value.code == 2
        one_line(capsys.readouterr().err, fragment)
    assert afile.read_text() == "keep" and not (tmp_path / "o").exists()


# ------------------------------------------------------------------------------------------- 2. names that become paths


@pytest.mark.parametrize("value, fragment", [
    ("..", "not a single file name"), ("times.json", "the name of this command's own times.json"),
    ("export", "own export"), ("eval", "own eval"), ("comparison", "own comparison"), ("base", "own base"),
    ("x" * 300, "a name of 300 bytes"),
])
def test_an_arm_name_that_is_no_folder_of_its_own_is_one_line(value, fragment):
    from recipes.steps.ablate_grid import expand, parse_vary

    with pytest.raises(TaseError, match="^--vary: arm ") as e:
        expand(parse_vary([f"run_name={value}"]))
    assert fragment in str(e.value) and "\n" not in str(e.value)


def test_options_ablate_sets_cannot_follow_the_double_dash(tmp_path):
    out = tmp_path / "abl"
    for opt in ("--output_dir", "--output-dir", "--config", "--resume_from_checkpoint", "--model_name_or_path"):
        code, err = call_main(["recipes/ablate.py", *GRPO[1:], "--out", str(out), "--eval-data", "x.jsonl", "--",
                               opt, str(tmp_path / "elsewhere")])
        assert code == 2, err
        one_line(err, f"-- {opt}: ")
    assert not out.exists() and not (tmp_path / "elsewhere").exists()


def test_proof_files_entries_stay_inside_tasks(tmp_path):
    from recipes.proof_stages.config import load_config

    cfg = yaml.safe_load(PROOF_CFG.read_text())
    for entry in ("../../x.csv", "token_awareness/../x.csv", "./freq_count/x.csv"):
        cfg["files"] = [entry]
        p = tmp_path / "c.yaml"
        p.write_text(yaml.safe_dump(cfg))
        with pytest.raises(TaseError, match=r"files entry .*not a single file name"):
            load_config(str(p))


# ------------------------------------------------------------------------------------------- 3. state read on resume


def _ckpt(tmp_path: Path, own: object | None, copy: dict | None) -> Path:
    ckpt = tmp_path / "checkpoint-2"
    ckpt.mkdir(exist_ok=True)
    if own is not None:
        (ckpt / "curriculum.json").write_text(own if isinstance(own, str) else json.dumps(own))
    cb = {"CurriculumCallback": {"args": {}, "attributes": {"saved": copy}}} if copy else {}
    (ckpt / "trainer_state.json").write_text(json.dumps({"global_step": 2, "stateful_callbacks": cb}))
    return ckpt


@pytest.mark.parametrize("own", ["[]", "null", "5", '{"moves": "x"}', '{"levels": {"sentence_length": "x"}}',
                                 '{"levels": {"sentence_length": [1]}}', '{"levels": {}, "moves": [1]}', "{not json"])
def test_a_curriculum_json_of_the_wrong_shape_falls_back_to_trainer_state(tmp_path, capsys, own):
    from recipes.features.curriculum.levels import saved_state

    copy = {"levels": {"sentence_length": 3}, "scores": {"sentence_length": [0.5]}, "moves": 1}
    assert saved_state(_ckpt(tmp_path, own, copy)) == copy
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("note: ") and "using the curriculum levels saved in" in err, err
    (tmp_path / "checkpoint-2" / "trainer_state.json").write_text('{"global_step": 2}')  # no copy either: one line
    with pytest.raises(TaseError, match=r"curriculum.json: .*holds no copy of the curriculum") as e:
        saved_state(tmp_path / "checkpoint-2")
    assert "\n" not in str(e.value)


def test_curriculum_json_that_is_a_folder_is_one_line(tmp_path):
    from recipes.features.curriculum.levels import saved_state

    ckpt = _ckpt(tmp_path, None, None)
    (ckpt / "curriculum.json").mkdir()
    with pytest.raises(TaseError, match="a folder where a state file belongs"):
        saved_state(ckpt)


@pytest.mark.parametrize("sel", [
    {"chosen": {"path": "x", "step": "3", "heldout": 1.0}},
    {"chosen": {"path": "x", "step": 3, "heldout": 1.0}, "candidates": [1, 2]},
    {"chosen": {"path": "x", "step": 3, "heldout": "high"}}, {"chosen": None}, [], "x", None,
])
def test_a_corrupted_selection_json_is_one_line(tmp_path, sel):
    """The former name of the chosen-checkpoint file (read for one more release, issue 61)."""
    from recipes.proof_stages.selection import read_selection

    (tmp_path / "selection.json").write_text(json.dumps(sel))
    with pytest.raises(TaseError, match="selection.json: cannot read the chosen checkpoint") as e:
        read_selection(tmp_path)
    assert "\n" not in str(e.value) and "remove the folder to select again" in str(e.value)


GOOD_BEST = {"metric": "tase/heldout/official_acc", "value": 0.5, "step": 3, "path": "x",
             "evaluations": [{"step": 3, "value": 0.5}]}


@pytest.mark.parametrize("sel", [
    {**GOOD_BEST, "step": "3"}, {**GOOD_BEST, "value": "high"}, {**GOOD_BEST, "path": None},
    {**GOOD_BEST, "evaluations": [1, 2]}, {k: v for k, v in GOOD_BEST.items() if k != "metric"}, [], "x", None,
])
def test_a_corrupted_best_checkpoint_json_is_one_line(tmp_path, sel):
    from recipes.proof_stages.selection import read_selection

    (tmp_path / "best_checkpoint.json").write_text(json.dumps(GOOD_BEST))
    assert read_selection(tmp_path) == GOOD_BEST  # the shape it breaks is read as written
    (tmp_path / "best_checkpoint.json").write_text(json.dumps(sel))
    with pytest.raises(TaseError, match="best_checkpoint.json: cannot read the chosen checkpoint") as e:
        read_selection(tmp_path)
    assert "\n" not in str(e.value) and "remove the folder to select again" in str(e.value)


def test_dynamic_sampling_state_of_the_wrong_shape_is_one_line():
    from recipes.features.dynamic_sampling.sampling import saved_counts

    assert saved_counts(None, 6) == {"pos": 6, "extra": 0, "prompts": 0, "short_epochs": 0}
    assert saved_counts([{"attributes": {"pos": 3, "extra": 1}}], 6)["extra"] == 1
    for bad in ("x", -1, 1.5, None, [1]):
        with pytest.raises(TaseError, match="DynamicSamplingState pos is .*not a whole number"):
            saved_counts({"attributes": {"pos": bad}}, 6)


def test_a_folder_named_best_checkpoint_json_is_refused_before_training(tmp_path, tiny_model):
    out = tmp_path / "o"
    (out / "best_checkpoint.json").mkdir(parents=True)
    args = [*GRPO, "--model_name_or_path", str(tiny_model), "--output_dir", str(out), "--held_out_rows", "4",
            "--eval_strategy", "steps", "--eval_steps", "1"]
    for dry in (["--dry_run", "true"], []):
        code, err = call_main([*args, *dry])
        assert code == 2, err
        one_line(err, "best_checkpoint.json is a folder, where the run writes its best checkpoint")
    assert sorted(p.name for p in out.iterdir()) == ["best_checkpoint.json"]


@pytest.mark.slow
def test_resuming_a_run_made_without_the_curriculum_with_it(tiny_model, tmp_path):
    """A checkpoint's trainer_state.json without the curriculum's entry: transformers indexed it at the first save
    (KeyError: 'CurriculumCallback') and no final model was written."""
    out = tmp_path / "run"
    cmd = [sys.executable, "recipes/grpo.py", "--model_name_or_path", str(tiny_model), "--output_dir", str(out),
           "--save_steps", "1", "--use_cpu", "true", "--bf16", "false", "--dtype", "float32", "--tasks",
           "sentence_length", "--langs", "en", "--max_len", "6", "--num_generations", "2",
           "--per_device_train_batch_size", "2", "--max_completion_length", "4", "--report_to", "none", "--seed", "0",
           "--gradient_checkpointing", "false", "--streaming", "true"]
    first = subprocess.run([*cmd, "--max_steps", "1", "--keep_optimizer_state", "true"], cwd=ROOT,  # trained on below
                           capture_output=True, text=True, timeout=600)
    assert first.returncode == 0, first.stderr[-2000:]
    res = subprocess.run([*cmd, "--max_steps", "2", "--curriculum", "true", "--resume_from_checkpoint", "true"],
                         cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert res.returncode == 0 and "KeyError" not in res.stderr, res.stderr[-3000:]
    assert "holds no curriculum state" in res.stderr
    assert (out / "model.safetensors").is_file() and (out / "curriculum.json").is_file()
    state = json.loads((out / "checkpoint-2" / "trainer_state.json").read_text())
    assert "CurriculumCallback" in state["stateful_callbacks"]


# ------------------------------------------------------------------------------------------- 4. dry run == real start


GRPO_BAD = [
    (["--vllm_gpus", "-2"], "vllm_gpus must be >= 0, got -2"),
    (["--exclude", "official:/etc"], "exclude official:/etc: /etc: no tasks/ folder"),
    (["--preset", "gspo", "--epsilon", "1e-3"], "epsilon_high 0.0004 is below epsilon 0.001"),
    (["--dynamic_sampling", "true", "--dynamic_sampling_max_rounds", "100000"],
     "dynamic_sampling_max_rounds must be an integer from 0 to 32, got 100000"),
    (["--reward_funcs", "accuracy_fine", "format", "accuracy_fine"], "reward_funcs: accuracy_fine given twice"),
    (["--preset", "dapo", "--reward_funcs", "accuracy_fine", "--reward_weights", "1"],
     "reward_weights has 1 values for 2 reward functions (accuracy_fine, soft_overlong)"),
]


@pytest.mark.parametrize("extra, fragment", GRPO_BAD)
def test_grpo_dry_run_refuses_what_the_real_start_refuses(tmp_path, tiny_model, extra, fragment):
    out = tmp_path / "o"
    lines = []
    for dry in (["--dry_run", "true"], []):
        code, err = call_main([*GRPO, "--model_name_or_path", str(tiny_model), "--output_dir", str(out), *extra, *dry])
        assert code == 2, err
        one_line(err, fragment)
        lines.append(err)
    assert lines[0] == lines[1] and not out.exists()  # the real start refused before it trained or wrote


def test_grpo_refuses_a_conversational_jsonl_as_exclude_in_a_dry_run_too(tmp_path, tiny_model):
    conv = tmp_path / "chat.jsonl"
    conv.write_text(json.dumps({"messages": [{"role": "user", "content": "hi"}]}) + "\n")
    for dry in (["--dry_run", "true"], []):
        code, err = call_main([*GRPO, "--model_name_or_path", str(tiny_model), "--output_dir", str(tmp_path / "o"),
                               "--exclude", str(conv), *dry])
        assert code == 2, err
        one_line(err, f"exclude {conv}: {conv}: line 1: missing key(s)")


ABLATE_BAD = [
    (["--vary", "learning_rate=1e-5,-1"], "arm _1 (--learning_rate -1): learning_rate must be >= 0"),
    (["--vary", "held_out_rows=0,4"], "arm 4 (--held_out_rows 4): held_out_rows 4 is scored at each evaluation"),
    (["--eval-limit", "0"], "argument --eval-limit: expected a positive integer, got '0'"),
    (["--max-new-tokens", "0"], "argument --max-new-tokens: expected a positive integer"),
    (["--vary", "run_name=.."], "not a single file name"),
]


@pytest.mark.parametrize("extra, fragment", ABLATE_BAD)
def test_ablate_dry_run_refuses_what_the_real_start_refuses(tmp_path, fixture_root, extra, fragment):
    out = tmp_path / "abl"
    data = str(fixture_root / "tasks/token_awareness/freq_count/english.csv")
    lines = []
    for dry in (["--dry-run"], []):
        code, err = call_main(["recipes/ablate.py", *GRPO[1:], "--out", str(out), "--eval-data", data, *extra, *dry])
        assert code == 2, err
        one_line(err, fragment)
        lines.append(err)
    assert lines[0] == lines[1] and not out.exists()


def test_ablate_checks_its_eval_data_before_any_arm_trains(tmp_path):
    out = tmp_path / "abl"
    for spec, what in (("missing.jsonl", "file"), ("official:/no/such", "folder")):
        for dry in (["--dry-run"], []):
            code, err = call_main(["recipes/ablate.py", *GRPO[1:], "--out", str(out), "--eval-data", spec, *dry])
            assert code == 2, err
            one_line(err, f"--eval-data {spec}: no such {what}")
    assert not out.exists()


def _proof_config(tmp_path: Path, change) -> Path:
    cfg = yaml.safe_load(PROOF_CFG.read_text())
    change(cfg)
    p = tmp_path / "proof.yaml"
    p.write_text(yaml.safe_dump(cfg))
    return p


PROOF_BAD = [
    (lambda c: c["heldout"].update(n=-5), "heldout: n must be at least 1, got -5"),
    (lambda c: c["heldout"].update(task="no_such_task"), "heldout: "),
    (lambda c: c["heldout"].update(lang="fr"), "heldout: "),
    (lambda c: c["eval"].update(max_new_tokens=0), "eval: max_new_tokens must be at least 1, got 0"),
    (lambda c: c["eval"].update(batch_size=0), "eval: batch_size must be at least 1, got 0"),
    (lambda c: c["compare"].update(n_boot=0), "compare: n_boot must be at least 1, got 0"),
    (lambda c: c.update(select={"n": None, "seed": 3}), "select: give n and seed together"),
    (lambda c: c.update(control={"steps": 0}), "control: steps must be a whole number of steps >= 1, got 0"),
]


@pytest.mark.parametrize("change, fragment", PROOF_BAD)
def test_proof_dry_run_refuses_what_the_real_start_refuses(tmp_path, fixture_root, change, fragment):
    cfg = _proof_config(tmp_path, change)
    out = tmp_path / "proof"
    lines = []
    for dry in (["--dry-run"], []):
        code, err = call_main(["recipes/proof.py", "--config", str(cfg), "--official", str(fixture_root), "--out",
                               str(out), *dry])
        assert code == 2, err
        one_line(err, fragment)
        lines.append(err)
    assert lines[0] == lines[1] and not out.exists()


def test_proof_null_optional_keys_mean_their_defaults(tmp_path):
    from recipes.proof_stages.config import control_steps, load_config

    cfg = load_config(str(_proof_config(tmp_path, lambda c: c.update(control={"steps": None},
                                                                        select={"n": None, "seed": None}))))
    assert control_steps(cfg) is None and cfg.select is not None and cfg.select.n is None


# ------------------------------------------------------------------------------------------- 5. presets, arithmetic


def test_preset_dapo_adds_soft_overlong_to_explicit_reward_funcs():
    from recipes.grpo_core.args import parse
    from recipes.grpo_core.reward_funcs import resolve_rewards

    tase, cfg, _ = parse([*GRPO[1:], "--preset", "dapo", "--reward_funcs", "accuracy_fine", "format", "--dry-run"])
    assert tase.soft_overlong and resolve_rewards(tase, cfg).names == ["accuracy_fine", "format", "soft_overlong"]
    tase, cfg, _ = parse([*GRPO[1:], "--preset", "dapo", "--reward_funcs", "accuracy_fine", "soft_overlong",
                          "--dry-run"])
    assert resolve_rewards(tase, cfg).names == ["accuracy_fine", "soft_overlong"]  # not twice


def test_dry_run_length_counts_a_fractional_epoch(tmp_path, tiny_model, capsys):
    from recipes.grpo import main

    assert main([*GRPO[1:], "--model_name_or_path", str(tiny_model), "--output_dir", str(tmp_path / "o"),
                 "--num_train_epochs", "0.5", "--max_steps", "-1", "--num_train_examples", "512",
                 "--dry_run", "true"]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("training length"))
    assert line.startswith("training length: ~128 optimizer steps"), line  # 512 / 2 prompts per step x 0.5


# ------------------------------------------------------------------------------------------- 6. held-out rows


def test_held_out_rows_come_from_the_training_files_tasks(tmp_path):
    from recipes.features.heldout.rows import records
    from synth.core import generate

    f = tmp_path / "train.jsonl"
    f.write_text("".join(json.dumps(r) + "\n" for r in generate("sentence_length", "zh", 6, seed=1)))
    args = SimpleNamespace(tasks=["freq_count"], langs=["en"], subtasks=None, mixture=None, held_out_seed=None,
                           synth_seed=5, held_out_rows=8, max_len=None, paraphrase=True, exclude=[], train_data=str(f))
    rows = records(args)
    assert len(rows) == 8 and {(r["task"], r["lang"]) for r in rows} == {("sentence_length", "zh")}


# ------------------------------------------------------------------------------------------- 7. properties

_SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-3, 3), st.floats(allow_nan=True), st.text(max_size=6))
_JSON = st.recursive(_SCALARS, lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                       st.dictionaries(st.text(max_size=8), inner, max_size=3)),
                     max_leaves=8)


def _with_some(base: dict, keys: list[str]) -> st.SearchStrategy:
    """`base` with some of `keys` replaced by arbitrary JSON values (or removed)."""
    return st.fixed_dictionaries({k: st.one_of(st.just(base.get(k)), _JSON) for k in keys}).map(
        lambda d: {**base, **d})


CURRICULUM_STATES = st.one_of(
    _JSON, _with_some({"levels": {"sentence_length": 2}, "scores": {"sentence_length": [0.5]}, "moves": 1},
                      ["levels", "scores", "moves"]),
    st.fixed_dictionaries({"levels": st.dictionaries(st.sampled_from(["sentence_length", "component_split", "x"]),
                                                     st.one_of(st.integers(-2, 9), _SCALARS), max_size=3)}))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(own=CURRICULUM_STATES)
def test_any_curriculum_json_gives_state_a_fallback_or_one_line(tmp_path, own):
    from recipes.features.curriculum.levels import Curriculum, saved_state, state_problem

    copy = {"levels": {"sentence_length": 1}}
    (tmp_path / "c").mkdir(exist_ok=True)
    (tmp_path / "c" / "curriculum.json").write_text(json.dumps(own))
    (tmp_path / "c" / "trainer_state.json").write_text(json.dumps(
        {"stateful_callbacks": {"CurriculumCallback": {"attributes": {"saved": copy}}}}))
    import contextlib
    import io

    with contextlib.redirect_stderr(io.StringIO()):
        state = saved_state(tmp_path / "c")
    assert state == (copy if state_problem(own) else own)
    cur = Curriculum({"sentence_length": 5, "component_split": 4})
    cur.load(state)  # whatever was accepted loads
    assert all(0 <= lv < cur.counts[t] for t, lv in cur.levels.items())


SELECTIONS = st.one_of(_JSON, _with_some(
    {"chosen": {"path": "run/checkpoint-2", "step": 2, "heldout": 50.0},
     "candidates": [{"step": 2, "heldout": 50.0}, {"step": 4, "heldout": 40.0}]}, ["chosen", "candidates"]),
    st.fixed_dictionaries({"chosen": _with_some({"path": "p", "step": 2, "heldout": 1.0},
                                                ["path", "step", "heldout"])}))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(sel=SELECTIONS)
def test_any_selection_json_is_read_or_refused_in_one_line(tmp_path, sel):
    from recipes.proof_stages.selection import read_selection

    (tmp_path / "selection.json").write_text(json.dumps(sel))
    try:
        got = read_selection(tmp_path)  # the former file, as best_checkpoint.json's fields (issue 61)
    except TaseError as e:
        assert "\n" not in str(e)
        return
    # what the summary formats: step, path, and held-out scores of every evaluation, percent from 0-1 shares
    last = max(got["evaluations"] or [got], key=lambda x: x["step"])
    assert f"{got['step']} {got['path']} {100 * got['value']:.2f} {100 * last['value']:.2f}"
    assert got["value"] == round(sel["chosen"]["heldout"] / 100, 6)


_BASE_PROOF = yaml.safe_load(PROOF_CFG.read_text())
PROOF_CONFIGS = st.one_of(
    _with_some(_BASE_PROOF, ["files", "heldout", "eval", "compare", "control", "select", "start"]),
    st.builds(lambda h, e, c: {**_BASE_PROOF, "heldout": h, "eval": e, "compare": c},
              _with_some(_BASE_PROOF["heldout"], ["task", "lang", "n", "seed", "max_len", "subtask"]),
              _with_some(_BASE_PROOF["eval"], ["backend", "max_new_tokens", "batch_size", "dtype"]),
              _with_some(_BASE_PROOF["compare"], ["n_boot"])),
    st.builds(lambda ctl, sel: {**_BASE_PROOF, "control": ctl, "select": sel},
              _with_some({"steps": 10}, ["steps", "follows", "options"]), _with_some({}, ["n", "seed", "metric"])),
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(cfg=PROOF_CONFIGS)
def test_any_proof_config_is_checked_or_refused_in_one_line(tmp_path, cfg):
    """load_config on arbitrary values under every key: a checked config or one TaseError line, never a TypeError
    (control: {steps: null} and select: {n: null} once crashed the check)."""
    from recipes.proof_stages.config import load_config

    p = tmp_path / "cfg.yaml"
    p.write_text(yaml.safe_dump(cfg))
    try:
        got = load_config(str(p))
    except TaseError as e:
        assert "\n" not in str(e)
        return
    assert got.heldout.n >= 1 and got.eval.max_new_tokens >= 1 and got.compare.n_boot >= 1
    assert all(".." not in f.split("/") for f in got.files)
    if got.control is not None and got.control.steps is not None:
        assert got.control.steps >= 1
    assert not math.isnan(float(got.heldout.n))
