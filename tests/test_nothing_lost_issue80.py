"""Issue 80 ("Nothing lost", round six), the iso part: one path rule for every name from a config, an old state file
or a launcher's command line (common/paths.relative_refusal and inside_refusal, common/state.read_state's links,
the launchers' empty values), and every state file saved with a checkpoint read through common/state in one
declared fallback order (common/state.FALLBACK): one line or the declared fallback, never a traceback, never a
silent default. In-process steps as isolated as subprocesses: tests/test_steps_in_process.py."""
from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, example, given, settings, strategies as st

from common.errors import TaseError

ROOT = Path(__file__).resolve().parents[1]
PROOF_CFG = ROOT / "recipes/configs/proof_cpu.yaml"


# --------------------------------------------------------------------------------------------- 1. paths


@pytest.mark.parametrize("entry", ["../../x.csv", "token_awareness/../x.csv", "./freq_count/x.csv"])
def test_transfer_files_entries_stay_inside_tasks_as_files_entries_do(tmp_path, entry):
    """`transfer: files: ['../../x.csv']` skipped the `..` check `files:` has, and the run linked a file from outside
    the release into OUT."""
    from recipes.proof_stages.config import load_config

    cfg = yaml.safe_load(PROOF_CFG.read_text())
    cfg["transfer"] = {"files": [entry]}
    p = tmp_path / "c.yaml"
    p.write_text(yaml.safe_dump(cfg))
    with pytest.raises(TaseError, match=r"transfer: files entry .*not a single file name") as e:
        load_config(str(p))
    assert "\n" not in str(e.value)


def test_a_selection_file_linked_from_outside_out_does_not_choose_etc(tmp_path):
    """An old selection.json that is a symlink out of OUT, holding "path": "/etc", made /etc the chosen model."""
    from recipes.proof_stages.selection import chosen_model, read_selection

    outside = tmp_path / "elsewhere"
    outside.mkdir()
    planted = {"chosen": {"path": "/etc", "step": 3, "heldout": 50.0}}
    (outside / "selection.json").write_text(json.dumps(planted))
    sel = tmp_path / "out" / "select_grpo_fine"
    sel.mkdir(parents=True)
    (sel / "selection.json").symlink_to(outside / "selection.json")
    with pytest.raises(TaseError, match=r"selection.json: a link to .*outside .*state file belongs") as e:
        read_selection(sel)
    assert "\n" not in str(e.value)
    (sel / "selection.json").unlink()  # the file itself inside OUT, still naming /etc: not the run's checkpoint
    (sel / "selection.json").write_text(json.dumps(planted))
    run = tmp_path / "out" / "grpo_fine"
    (run / "checkpoint-3").mkdir(parents=True)
    with pytest.raises(TaseError, match=r"the chosen checkpoint: '/etc' is outside .*grpo_fine") as e:
        chosen_model(read_selection(sel)["path"], run, sel / "selection.json")
    assert "\n" not in str(e.value)
    inside = chosen_model(str(run / "checkpoint-3"), run)  # the run's own checkpoint: as before
    assert inside.endswith("grpo_fine/checkpoint-3")
    (run / "checkpoint-3" / "up").symlink_to("/etc")  # a link inside the run that leads out: followed, refused
    with pytest.raises(TaseError, match="is outside"):
        chosen_model(str(run / "checkpoint-3" / "up"), run)


@pytest.mark.parametrize("case", ["folder", "link"])
def test_the_proof_plan_refuses_a_chosen_checkpoint_file_that_is_no_file_of_its_own(tmp_path, fixture_root, case):
    """The selection stage as proof.py plans it (a dry run of an earlier proof's OUT): a best_checkpoint.json that is
    a folder was skipped as done and `<chosen checkpoint in ...>` became the evaluated model; a selection.json linked
    from outside OUT, holding "path": "/etc", made /etc the evaluated model. Both: one line, exit 2."""
    from conftest import call_main
    from test_proof_select import config

    from common.paths import write_marker

    out = tmp_path / "proof"
    (out / "select_fine").mkdir(parents=True)
    write_marker(out, "proof", [])
    if case == "folder":
        (out / "select_fine" / "best_checkpoint.json").mkdir()
        why = "select_fine/best_checkpoint.json: a folder where a state file belongs"
    else:
        (tmp_path / "planted.json").write_text(json.dumps({"chosen": {"path": "/etc", "step": 3, "heldout": 50.0}}))
        (out / "select_fine" / "selection.json").symlink_to(tmp_path / "planted.json")
        why = "select_fine/selection.json: a link to "
    code, err = call_main(["recipes/proof.py", "--dry-run", "--config", str(config(tmp_path)), "--official",
                           str(fixture_root), "--out", str(out)])
    assert code == 2 and err.count("\n") == 1 and why in err and "Traceback" not in err, err


@pytest.mark.parametrize("launcher,flag", [("launch/cpu.sh", "--out"), ("launch/cpu.sh", "--reward_granularity"),
                                           ("launch/local.sh", "--config")])
def test_an_empty_value_in_a_launcher_is_one_line_not_a_plan_at_the_root(launcher, flag):
    """`launch/cpu.sh --out ''` planned `--output_dir /sft`, `/grpo` and `export.py /grpo --out /export --force`."""
    res = subprocess.run(["bash", launcher, flag, "", "--dry-run"], cwd=ROOT, capture_output=True, text=True,
                         timeout=60)
    assert res.returncode == 2 and res.stdout == "", res.stdout
    assert res.stderr == f"error: {flag} needs a value, got an empty one (see --help)\n"


# --------------------------------------------------------------------------------------------- 2. state files


def _ckpt(tmp_path: Path, own: str | None, callback: str, copy: object | None, name: str) -> Path:
    ckpt = tmp_path / "checkpoint-2"
    ckpt.mkdir(exist_ok=True)
    if own is not None:
        (ckpt / name).write_text(own)
    elif (ckpt / name).exists():
        (ckpt / name).unlink()
    cb = {callback: {"args": {}, "attributes": {"saved": copy}}} if copy is not None else {}
    (ckpt / "trainer_state.json").write_text(json.dumps({"global_step": 2, "stateful_callbacks": cb}))
    return ckpt


SAVED_GUIDANCE = {"mode": "success", "step": 7, "levels": {"component_split": 2}, "scores": {"component_split": [0.5]},
                  "moves": 1}


@pytest.mark.parametrize("own", ["[]", "null", '{"levels": "x"}', '{"levels": {"component_split": -5}}',
                                 '{"levels": {"component_split": 1}, "step": "x"}', "{not json"])
def test_a_guidance_json_of_the_wrong_shape_falls_back_to_trainer_state(tmp_path, capsys, own):
    """A checkpoint's guidance.json holding [] or null restarted the schedule at its start level, though
    trainer_state.json holds the saved one; {"levels": "x"} was a traceback; {"levels": {"component_split": -5}}
    printed "restored" and used the start level."""
    from recipes.features.guidance.hints import saved_state

    assert saved_state(_ckpt(tmp_path, own, "GuidanceCallback", SAVED_GUIDANCE, "guidance.json")) == SAVED_GUIDANCE
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("note: ") and "guidance.json" in err, err
    assert "using the guidance hint levels saved in" in err
    ckpt = _ckpt(tmp_path, own, "GuidanceCallback", None, "guidance.json")  # no copy either: one line
    with pytest.raises(TaseError, match=r"guidance.json: .*holds no copy of the guidance hint levels") as e:
        saved_state(ckpt)
    assert "\n" not in str(e.value)


def test_guidance_restored_from_its_own_file_and_from_the_copy_alone(tmp_path, capsys):
    from recipes.features.guidance.hints import saved_state

    own = dict(SAVED_GUIDANCE, step=9)
    assert saved_state(_ckpt(tmp_path, json.dumps(own), "GuidanceCallback", SAVED_GUIDANCE, "guidance.json")) == own
    assert saved_state(_ckpt(tmp_path, None, "GuidanceCallback", SAVED_GUIDANCE, "guidance.json")) == SAVED_GUIDANCE
    assert saved_state(_ckpt(tmp_path, None, "GuidanceCallback", None, "guidance.json")) is None  # no guidance
    assert capsys.readouterr().err == ""


def test_a_dynamic_sampling_entry_of_another_shape_is_one_line_not_a_silent_start():
    from recipes.features.dynamic_sampling.sampling import saved_counts

    for bad in ("x", 5, {"attributes": 5}, {"args": {}}, []):
        with pytest.raises(TaseError, match="DynamicSamplingState is .*not a callback state") as e:
            saved_counts(bad, 6)
        assert "\n" not in str(e.value)


# A property (issue 80: "random JSON of the right and wrong shapes to every state reader"): each reader of a state
# file the project wrote returns a value of its declared shape (from the file, or the declared fallback, said in a
# note line) or raises one TaseError line; never another exception, never a value the file did not hold.

JSON = st.recursive(st.none() | st.booleans() | st.integers(-10, 10) | st.floats(allow_nan=True) | st.text(max_size=4),
                    lambda kids: st.lists(kids, max_size=3) | st.dictionaries(st.text(max_size=8), kids, max_size=3),
                    max_leaves=8)
LEVELS = st.dictionaries(st.sampled_from(["component_split", "freq_count"]), st.integers(-2, 4) | JSON, max_size=2)
CURRICULUM_LIKE = st.fixed_dictionaries({"levels": LEVELS}, optional={
    "scores": st.dictionaries(st.sampled_from(["component_split"]), st.lists(st.floats(0, 1)) | JSON, max_size=1),
    "moves": st.integers(-1, 3) | JSON, "step": st.integers(-1, 3) | JSON,
    "mode": st.sampled_from(["success", "step", "fixed", "x"]) | JSON})
STATE_VALUES = JSON | CURRICULUM_LIKE


def same(a: object, b: object) -> bool:
    """Equal as JSON: a NaN the file held is the NaN read back (nan != nan as Python floats)."""
    return json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)


def _reader_case(tmp_path: Path, reader: str, own: object, copy: object) -> tuple[object, str]:
    """Run one reader on `own` (the feature's own file, as JSON) and `copy` (trainer_state's copy, or absent)."""
    from recipes.features.curriculum import levels as curriculum
    from recipes.features.guidance import hints as guidance

    mod, name, callback = {"curriculum": (curriculum, "curriculum.json", "CurriculumCallback"),
                           "guidance": (guidance, "guidance.json", "GuidanceCallback")}[reader]
    ckpt = _ckpt(tmp_path, json.dumps(own), callback, copy, name)
    return mod.saved_state(ckpt), mod.state_problem


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(reader=st.sampled_from(["curriculum", "guidance"]), own=STATE_VALUES,
       copy=st.none() | STATE_VALUES)
@example(reader="curriculum", own=None, copy={"levels": {}, "step": float("nan")})  # a fresh clone's draw: NaN kept
def test_checkpoint_state_readers_give_one_line_or_the_declared_fallback(tmp_path, capsys, reader, own, copy):
    capsys.readouterr()
    try:
        got, problem = _reader_case(tmp_path, reader, own, copy)
    except TaseError as e:
        assert "\n" not in str(e), str(e)
        from recipes.features.curriculum import levels as curriculum
        from recipes.features.guidance import hints as guidance

        problem = {"curriculum": curriculum, "guidance": guidance}[reader].state_problem
        assert problem(own) is not None  # refused: the own file was unusable...
        assert copy is None or problem(copy) is not None  # ...and so was the copy (or there was none)
        return
    err = capsys.readouterr().err
    if problem(own) is None:
        assert same(got, own) and err == ""  # the file as written
    else:
        assert copy is not None and problem(copy) is None and same(got, copy)  # the declared fallback, said once
        assert err.count("\n") == 1 and err.startswith("note: "), err


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(name=st.sampled_from(["best_checkpoint.json", "selection.json"]),
       value=JSON | st.fixed_dictionaries({"chosen": JSON | st.fixed_dictionaries(
           {"path": JSON, "step": st.integers(-1, 3) | JSON, "heldout": st.floats(0, 100) | JSON})}) |
       st.fixed_dictionaries({"metric": JSON, "value": st.floats(0, 1) | JSON, "step": st.integers(-1, 3) | JSON,
                              "path": JSON, "evaluations": st.lists(JSON, max_size=2)}))
def test_the_chosen_checkpoint_reader_gives_one_line_or_the_file(tmp_path, name, value):
    from recipes.shared import best_checkpoint

    for old in ("best_checkpoint.json", "selection.json"):
        (tmp_path / old).unlink(missing_ok=True)
    (tmp_path / name).write_text(json.dumps(value))
    check = best_checkpoint.problem if name == "best_checkpoint.json" else best_checkpoint.former_problem
    try:
        got = best_checkpoint.read(tmp_path)
    except TaseError as e:
        assert "\n" not in str(e) and check(value) is not None
        return
    assert check(value) is None and best_checkpoint.problem(got) is None
    if name == "best_checkpoint.json":
        assert same(got, value)


@settings(max_examples=150, deadline=None)
@given(entry=st.none() | JSON | st.fixed_dictionaries({"attributes": st.dictionaries(
    st.sampled_from(["pos", "extra", "prompts", "short_epochs"]), st.integers(-2, 5) | JSON, max_size=4)}))
def test_the_dynamic_sampling_reader_gives_one_line_or_the_saved_counters(entry):
    from recipes.features.dynamic_sampling.sampling import saved_counts

    try:
        got = saved_counts(entry, 6)
    except TaseError as e:
        assert "\n" not in str(e)
        return
    last = entry[-1] if isinstance(entry, list) and entry else entry
    if last is None:
        assert got == {"pos": 6, "extra": 0, "prompts": 0, "short_epochs": 0}  # a run without dynamic sampling
    else:
        attrs = last["attributes"]
        assert all(got[k] == attrs.get(k, {"pos": 6}.get(k, 0)) for k in got), (got, attrs)


def test_a_state_file_linked_out_of_its_folder_is_one_line(tmp_path):
    from common.state import StateError, read_state

    (tmp_path / "out").mkdir()
    (tmp_path / "real.json").write_text('{"a": 1}')
    (tmp_path / "out" / "s.json").symlink_to(tmp_path / "real.json")
    with pytest.raises(StateError, match="a link to .*outside"):
        read_state(tmp_path / "out" / "s.json", lambda v: None)
    os.replace(tmp_path / "real.json", tmp_path / "out" / "real.json")  # a link beside it: the folder's own file
    (tmp_path / "out" / "s.json").unlink()
    (tmp_path / "out" / "s.json").symlink_to("real.json")
    assert read_state(tmp_path / "out" / "s.json", lambda v: None) == {"a": 1}
