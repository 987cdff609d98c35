"""Issue 51 ("Nothing lost"), part B: user rewards checked on every batch, trackers known but not
installed, LoRA export against its base, YAML values and duplicate keys, eval score's list contents and header-only
CSVs. Each case is one line (a TaseError, exit 2 where a command runs) or a correct result. Fast: in-process calls."""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from common.errors import TaseError
from rewards.trl import RewardInputError

ROOT = Path(__file__).resolve().parents[1]


# --------------------------------------------------------------------------------------------- user rewards


@pytest.fixture(scope="module")
def batch() -> dict:
    """A real GRPO batch as TRL hands it to a reward function: 2 synth rows x 2 generations, chat prompts and
    completions, the row columns recipes/shared/data.to_row writes."""
    from recipes.shared.data import to_row
    from synth.core import generate

    rows = [to_row(r, "system") for r in generate("freq_count", "en", 2, seed=3)]
    rows = [r for r in rows for _ in range(2)]
    columns = {k: [r[k] for r in rows] for k in rows[0] if k != "prompt"}
    completions = [[{"role": "assistant", "content": f"<answer>{i}</answer>"}] for i in range(len(rows))]
    return {"prompts": [r["prompt"] for r in rows], "completions": completions, **columns}


@pytest.fixture()
def user_module(tmp_path, monkeypatch):
    """A `rewards.py` in the current directory (the name of our package) with good and bad reward functions."""
    (tmp_path / "rewards.py").write_text(
        "import math\n"
        "def mine(completions, **kw): return [0.5] * len(completions)\n"
        "def accuracy_fine(completions, **kw): return [1.0] * len(completions)\n"
        "def skips(completions, **kw): return [None] + [1] * (len(completions) - 1)\n"
        "def flags(completions, **kw): return [True, False] * (len(completions) // 2)\n"
        "def nan(completions, **kw): return [math.nan] * len(completions)\n"
        "def inf(completions, **kw): return [math.inf] * len(completions)\n"
        "def short(completions, **kw): return [1.0]\n"
        "def strings(completions, **kw): return ['1'] * len(completions)\n"
        "def scalar(completions, **kw): return 1.0\n"
        "def nested(completions, **kw): return [[1.0]] * len(completions)\n"
        "def raises(completions, **kw): raise KeyError('x' * 5000)\n"
        "def bomb(completions, **kw): return [10 ** 5000] * len(completions)\n", encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    yield tmp_path
    sys.modules.pop("tase_user_rewards", None)


def test_user_rewards_from_the_current_directory_come_first_and_log_apart(user_module, batch):
    from recipes.grpo_core.reward_funcs import load_reward_funcs

    funcs = load_reward_funcs(["accuracy_fine", "rewards:mine", "rewards:accuracy_fine", "rewards.accuracy_fine"])
    # ours keeps its name; the cwd's rewards.py is read (not our package of that name); a user accuracy_fine logs
    # under its import path, never merged into rewards/accuracy_fine/mean
    assert [f.__name__ for f in funcs] == ["accuracy_fine", "mine", "rewards.accuracy_fine", "rewards.accuracy_fine_2"]
    assert funcs[1](**batch) == [0.5] * 4 and funcs[2](**batch) == [1.0] * 4
    assert funcs[0](**batch) != [1.0] * 4  # ours still scores: the cwd's module did not replace our package
    assert load_reward_funcs(["rewards:skips"])[0](**batch) == [None, 1, 1, 1]  # None: allowed, as TRL allows it
    assert load_reward_funcs(["rewards:flags"])[0](**batch) == [True, False] * 2  # bools: TRL's tensor takes them


@pytest.mark.parametrize("name, expect", [
    ("nan", "rewards:nan: value 0 is nan (rewards must be finite, within float32"),
    ("inf", "rewards:inf: value 0 is inf"),
    ("short", "rewards:short returned 1 values for 4 completions"),
    ("strings", "rewards:strings: value 0 is a str ('1')"),
    ("scalar", "rewards:scalar returned float 1.0; it must return a list of 4 numbers"),
    ("nested", "rewards:nested: value 0 is a list ([1.0])"),
    ("raises", "rewards:raises raised KeyError: 'xxx"),
    ("bomb", "rewards:bomb: value 0 is an integer past float32's range"),
])
def test_bad_user_reward_output_is_one_line_naming_the_function(user_module, batch, name, expect):
    from recipes.grpo_core.reward_funcs import load_reward_funcs

    func = load_reward_funcs([f"rewards:{name}"])[0]
    with pytest.raises(RewardInputError) as e:
        func(**batch)
    msg = str(e.value)
    assert expect in msg and "\n" not in msg and len(msg) < 400, msg


def test_a_bad_reward_stops_training_in_one_line(user_module, batch):
    """recipes/grpo_core/run.py train() turns the first bad batch into the recipe's one line (TaseError), whatever the
    trainer: here a stand-in trainer whose train() calls the reward as GRPOTrainer does."""
    from recipes.grpo_core.reward_funcs import load_reward_funcs
    from recipes.grpo_core.run import train

    func = load_reward_funcs(["rewards:inf"])[0]
    trainer = SimpleNamespace(train=lambda resume_from_checkpoint=None: func(**batch))
    with pytest.raises(TaseError, match=r"^reward function rewards:inf: value 0 is inf"):
        train(trainer, None)


# --------------------------------------------------------------------------------------------- trackers


@pytest.mark.parametrize("tracker, package", [("comet_ml", "comet_ml"), ("mlflow", "mlflow"), ("flyte", "flytekit"),
                                              ("azure_ml", "azureml")])
def test_known_tracker_not_installed_is_refused_naming_the_package(tracker, package):
    from recipes.features.tracking.metrics import check_trackers

    why = check_trackers(SimpleNamespace(report_to=["tensorboard", tracker]))
    if importlib.util.find_spec(package) is not None:  # not in the lock; where someone installed it, it is taken
        assert why is None
    else:
        assert why == (f"report_to {tracker}: the {package} package is not installed (pip install {package}), or set "
                       "--report_to none")


def test_every_tracker_transformers_knows_has_a_package():
    from transformers.integrations.integration_utils import INTEGRATION_TO_CALLBACK

    from recipes.features.tracking.metrics import TRACKERS

    assert set(INTEGRATION_TO_CALLBACK) <= set(TRACKERS)


# --------------------------------------------------------------------------------------------- YAML configs

BOMB = "".join([
    "generation_kwargs:\n",
    '  a: &a ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]\n',
    *(f"  {n}: &{n} [{', '.join([f'*{p}'] * 9)}]\n" for p, n in zip("abcdef", "bcdefg", strict=False)),
])


def grpo_parse(tmp_path: Path, yaml_text: str) -> tuple:
    from trl import GRPOConfig, ModelConfig

    from recipes.shared.config import TaseArgs
    from recipes.shared.parser import parse_config

    cfg = tmp_path / "recipe.yaml"
    cfg.write_text(yaml_text, encoding="utf-8")
    return parse_config((TaseArgs, GRPOConfig, ModelConfig),
                        ["--config", str(cfg), "--output_dir", str(tmp_path / "o")])


def test_recipe_yaml_duplicate_key_alias_bomb_and_mappings(tmp_path):
    with pytest.raises(TaseError) as e:
        grpo_parse(tmp_path, "learning_rate: 1.0e-5\nseed: 1\nlearning_rate: 1.0\n")
    assert str(e.value) == (f"--config {tmp_path / 'recipe.yaml'}: not valid YAML (duplicate key 'learning_rate' on "
                            "line 3)")
    with pytest.raises(TaseError) as e:  # the message quotes the value bounded, never its expansion
        grpo_parse(tmp_path, BOMB)
    assert "generation_kwargs holds over 10,000 values" in str(e.value) and len(str(e.value)) < 400
    with pytest.raises(TaseError) as e:  # the same bomb where a number goes
        grpo_parse(tmp_path, BOMB.replace("generation_kwargs", "anchors") + "seed: *g\n")
    assert str(e.value).startswith(f"--config {tmp_path / 'recipe.yaml'}: seed expects an integer, got [[[")
    assert len(str(e.value)) < 400, str(e.value)[:500]
    # a mapping for an option whose field takes a dict is what TRL accepts: taken as it is
    _, cfg, _ = grpo_parse(tmp_path, "use_cpu: true\ngeneration_kwargs:\n  top_k: 5\n")
    assert cfg.generation_kwargs == {"top_k": 5}
    with pytest.raises(TaseError, match=r"seed expects an integer, got \[\[1, 2\]\]$"):
        grpo_parse(tmp_path, "seed: [[1, 2]]\n")


def test_mixture_duplicate_key_is_one_line(tmp_path):
    from synth.core import SynthError
    from synth.mixture import load_mixture

    (tmp_path / "m.yaml").write_text("weights:\n  freq_count: 1\n  freq_count: 2\n", encoding="utf-8")
    with pytest.raises(SynthError) as e:
        load_mixture(str(tmp_path / "m.yaml"))
    assert str(e.value) == f"mixture file {tmp_path / 'm.yaml'} is not valid YAML: duplicate key 'freq_count' on line 3"
    (tmp_path / "m.yaml").write_text("base: &b {freq_count: 1}\nweights:\n  <<: *b\n  freq_count: 2\n",
                                     encoding="utf-8")
    assert load_mixture(str(tmp_path / "m.yaml")) == {"freq_count": 2.0}  # a merge key may be overridden


PROOF = """\
out: runs/proof
completions: docs/results/component_count_proof_cpu
files: [token_structure/component_count/english.csv]
sft:
  config: recipes/configs/sft_smollm2_cpu.yaml
  options: {tasks: TASKS}
grpo: {config: recipes/configs/grpo_proof_cpu.yaml, arms: [coarse, fine], reward_funcs: [format], options: {}}
heldout: {task: component_count, lang: all, n: 30, seed: 4242}
eval: {backend: hf, max_new_tokens: 16}
compare: {n_boot: 10}
"""


@pytest.mark.parametrize("tasks, expect", [
    ("5", "error: sft: tasks/langs: unknown task '5'; choose from: all, "),
    ("[[component_count]]", "sft option 'tasks' must be a value or a list of values, got [['component_count']]"),
    ("{a: 1}", "sft option 'tasks' must be a value or a list of values, got {'a': 1}"),
])
def test_proof_dry_run_with_a_bad_option_type_is_one_line(tmp_path, capsys, tasks, expect):
    from recipes import proof

    cfg = tmp_path / "proof.yaml"
    cfg.write_text(PROOF.replace("TASKS", tasks), encoding="utf-8")
    code = proof.main(["--config", str(cfg), "--official", str(ROOT / "tests/fixtures/tase_official_sample"),
                       "--out", str(tmp_path / "out"), "--dry-run"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and expect in err and len(err.splitlines()) == 1, err


def test_proof_duplicate_key_and_bad_arms_are_one_line(tmp_path):
    from recipes.proof_stages.config import load_config

    cfg = tmp_path / "proof.yaml"
    cfg.write_text(PROOF.replace("TASKS", "[component_count]") + "compare: {n_boot: 5}\n", encoding="utf-8")
    with pytest.raises(TaseError, match=r"not valid YAML \(duplicate key 'compare' on line 11\)$"):
        load_config(str(cfg))
    cfg.write_text(PROOF.replace("TASKS", "[x]").replace("arms: [coarse, fine]", "arms: [[coarse]]"), encoding="utf-8")
    with pytest.raises(TaseError, match=r"grpo arms must be some of coarse, fine, each once; got \[\['coarse'\]\]$"):
        load_config(str(cfg))


# --------------------------------------------------------------------------------------------- LoRA export


@pytest.fixture(scope="module")
def lora_adapter(tmp_path_factory, tiny_model) -> Path:
    """A real LoRA adapter (PEFT, r 4 on q_proj/v_proj) of the tiny model, saved as a training run saves one."""
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    out = tmp_path_factory.mktemp("lora") / "adapter"
    model = AutoModelForCausalLM.from_pretrained(tiny_model)
    get_peft_model(model, LoraConfig(r=4, target_modules=["q_proj", "v_proj"])).save_pretrained(out)
    return out


def test_lora_export_checks_the_adapter_against_its_base(lora_adapter, tiny_model, default_model, tmp_path, capsys):
    import json
    import shutil

    from recipes.export import main
    from recipes.shared.lora_check import check_adapter

    assert check_adapter(lora_adapter, None, False) == (str(tiny_model), str(tiny_model))  # the adapter's own base fits
    null = tmp_path / "null"
    shutil.copytree(lora_adapter, null)
    cfg = json.loads((null / "adapter_config.json").read_text())
    (null / "adapter_config.json").write_text(json.dumps({**cfg, "base_model_name_or_path": None}))
    assert main([str(null), "--out", str(tmp_path / "e1")]) == 2
    err = capsys.readouterr().err.strip()
    assert err == (f"error: {null / 'adapter_config.json'}: base_model_name_or_path is null, so the adapter does not "
                   "say which model it was trained on; pass --base MODEL (that model's folder)"), err
    # SmolLM2-135M (hidden 576) is not the tiny model (hidden 64): named before either is loaded
    assert main([str(lora_adapter), "--out", str(tmp_path / "e2"), "--base", str(default_model)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "does not fit the base model" in err, err
    assert ("model.layers.0.self_attn.q_proj has input size 64, the base model's "
            "model.layers.0.self_attn.q_proj.weight has shape [576, 576]") in err, err
    assert not (tmp_path / "e1").exists() and not (tmp_path / "e2").exists()


def test_select_checkpoint_says_it_cannot_select_lora_checkpoints(lora_adapter, tmp_path):
    import shutil

    from recipes.select_checkpoint import candidates

    shutil.copytree(lora_adapter, tmp_path / "run" / "checkpoint-2")
    with pytest.raises(TaseError, match=r"no final model; it holds LoRA adapters, which select_checkpoint does not "
                                        r"merge: export each checkpoint"):
        candidates(tmp_path / "run")


# --------------------------------------------------------------------------------------------- eval score


def test_eval_score_refuses_a_content_list_of_numbers(tmp_path):
    import json

    from conftest import call_main

    data = tmp_path / "d.jsonl"
    rec = {"id": "a", "task": "freq_count", "lang": "en", "type": "NUMBER", "prompt": "How many?", "answer": "3"}
    data.write_text(json.dumps(rec) + "\n", encoding="utf-8")
    preds = tmp_path / "p.jsonl"
    preds.write_text(json.dumps({"id": "a", "completion": [{"role": "assistant", "content": [3]}]}) + "\n")
    code, err = call_main(["-m", "eval", "score", "--data", str(data), "--predictions", str(preds),
                           "--out", str(tmp_path / "s")])
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert "line 1: completion is a list but item 0's content is a list holding a int ([3])" in err, err
    assert not (tmp_path / "s").exists()
    # content parts as chat APIs write them are read, not refused
    preds.write_text(json.dumps({"id": "a", "completion": [{"role": "assistant", "content": [
        {"type": "text", "text": "<answer>3</answer>"}]}]}) + "\n")
    code, err = call_main(["-m", "eval", "score", "--data", str(data), "--predictions", str(preds),
                           "--out", str(tmp_path / "s")])
    assert code == 0, err
    assert json.loads((tmp_path / "s" / "results.json").read_text())["overall"] == 100.0


def test_a_header_only_official_file_is_named_on_stderr(tmp_path, capsys):
    import shutil

    from synth import readers

    root = tmp_path / "Tase"
    shutil.copytree(ROOT / "tests/fixtures/tase_official_sample", root)
    f = root / "tasks/token_awareness/freq_count/korean.csv"
    f.write_text(f.read_text(encoding="utf-8").splitlines()[0] + "\n", encoding="utf-8")
    readers._NOTED.discard("token_awareness/freq_count/korean.csv")
    recs = list(readers.load_official(root))
    assert recs and not any(r["meta"]["file"].endswith("freq_count/korean.csv") for r in recs)
    list(readers.load_official(root))  # read twice in one command: named once
    err = capsys.readouterr().err
    assert err == "note: token_awareness/freq_count/korean.csv: header only, no rows; left out of its task's mean\n"


# --------------------------------------------------------------------------------------------- hub ids


def test_a_hub_id_is_refused_alike_by_a_dry_run_and_a_real_start(tmp_path, tiny_model):
    """A hub id resolves from the local hub cache only (what `hf download` fills), in a dry run and a real start
    alike: not there, the same one line from both; there, the snapshot folder is the model."""
    import shutil

    from conftest import call_main, stub_hub_snapshot
    from huggingface_hub import constants

    from recipes.shared.model import resolve

    repo = "HuggingFaceTB/SmolLM2-135M-Instruct"
    line = (f"{repo}: no such model folder or GGUF file, nor a hub model of that id in the local Hugging Face cache "
            f"($HF_HOME/hub); runs read local files only: download a hub model first (`hf download {repo}`)")
    with pytest.raises(TaseError) as e:
        resolve(repo)
    assert str(e.value) == line
    base = ["recipes/grpo.py", "--config", "recipes/configs/grpo_smollm2_cpu.yaml", "--output_dir", str(tmp_path / "o"),
            "--model_name_or_path"]
    code, err = call_main([*base, repo, "--dry_run", "true"])
    assert code == 2 and err.strip() == f"error: model_name_or_path {line}", err
    # in the cache (a test repo id of the session's cache): the dry run takes it, a real start resolves it to the
    # snapshot
    snap = stub_hub_snapshot(Path(constants.HF_HUB_CACHE), "tase-test/tiny", {})
    for f in tiny_model.iterdir():
        shutil.copy(f, snap / f.name)
    assert resolve("tase-test/tiny") == str(snap)
    code, err = call_main([*base, "tase-test/tiny", "--dry_run", "true"])
    assert code == 0, err


# --------------------------------------------------------------------------------------------- CI skips


def test_ci_prints_every_skip_and_fails_on_one_the_install_prevents(tmp_path, capsys):
    spec = importlib.util.spec_from_file_location("ci_skips", ROOT / ".ci" / "skips.py")
    skips = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(skips)
    case = '<testcase classname="tests.{0}" name="{1}"><skipped type="pytest.skip" message="{2}"/></testcase>'
    optional = [case.format("test_tracking", "test_wandb", "wandb is not installed (pip install -e .[track])"),
                case.format("test_rewards_official", "test_diff", "TASE_OFFICIAL_SRC is not set (path of ...)")]
    report = tmp_path / "junit.xml"
    report.write_text(f'<testsuites><testsuite>{"".join(optional)}<testcase classname="a" name="ok"/></testsuite>'
                      f'</testsuites>', encoding="utf-8")
    assert skips.main([str(report)]) == 0
    out = capsys.readouterr().out
    assert ("skipped tests.test_tracking::test_wandb: wandb is not installed" in out
            and "2 skipped, 0 not allowed" in out)
    missing = case.format("test_gpu_smoke", "test_shellcheck_clean", "shellcheck is not installed (make install ...)")
    report.write_text(f'<testsuites><testsuite>{"".join(optional)}{missing}</testsuite></testsuites>', encoding="utf-8")
    assert skips.main([str(report)]) == 1
    out = capsys.readouterr().out
    assert ("skipped tests.test_gpu_smoke::test_shellcheck_clean: shellcheck is not installed (make install ...) "
            "[NOT ALLOWED: the install provides it]") in out and "3 skipped, 1 not allowed" in out
    assert skips.main([str(tmp_path / "none.xml")]) == 2


def test_the_install_provides_shellcheck_for_the_lint_tests():
    """make install unpacks Debian's ShellCheck into .cache/shellcheck as it does Unifont: the recipe is in the
    Makefile, and the tests look there first (tests/conftest.find_shellcheck)."""
    from conftest import SHELLCHECK, find_shellcheck

    make = (ROOT / "Makefile").read_text(encoding="utf-8")
    assert "apt-get download -q shellcheck" in make and "SHELLCHECK := .cache/shellcheck/usr/bin/shellcheck" in make
    assert str(SHELLCHECK).endswith(".cache/shellcheck/usr/bin/shellcheck")
    if SHELLCHECK.is_file():
        assert find_shellcheck() == str(SHELLCHECK)


def test_a_dry_run_refuses_a_tracker_that_is_not_installed(tmp_path, tiny_model):
    from conftest import call_main

    if importlib.util.find_spec("mlflow") is not None:
        return  # installed here (the lock has it not): nothing to refuse
    code, err = call_main(["recipes/grpo.py", "--config", "recipes/configs/grpo_smollm2_cpu.yaml",
                           "--model_name_or_path", str(tiny_model), "--output_dir", str(tmp_path / "o"), "--report_to",
                           "mlflow", "--dry_run", "true"])
    assert code == 2 and err.strip() == ("error: report_to mlflow: the mlflow package is not installed (pip install "
                                         "mlflow), or set --report_to none"), err


def test_the_training_rewards_refuse_content_that_is_not_text_parts():
    from rewards.trl import accuracy_fine

    cols = {"type": ["NUMBER"], "answer": ["3"], "question": ["How many?"]}
    with pytest.raises(RewardInputError, match=r"^accuracy_fine reward: completion 0 has a message whose content holds "
                                               r"a int \(3\)"):
        accuracy_fine(None, [[{"role": "assistant", "content": [3]}]], **cols)
    assert accuracy_fine(None, [[{"role": "assistant", "content": [{"type": "text", "text": "<answer>3</answer>"}]}]],
                         **cols) == [1.0]


def test_a_dry_run_checks_a_model_folder_as_a_real_start_does(tmp_path, tiny_model):
    """A folder with pickle weights only, or torn safetensors, passed --dry_run and was refused by the real start."""
    import shutil

    from conftest import call_main

    for name, make, expect in (
            ("pickle", lambda d: (d / "model.safetensors").rename(d / "pytorch_model.bin"), "safetensors"),
            ("torn", lambda d: (d / "model.safetensors").write_bytes((d / "model.safetensors").read_bytes()[:100]),
             "truncated")):
        d = tmp_path / name
        shutil.copytree(tiny_model, d)
        make(d)
        code, err = call_main(["recipes/grpo.py", "--config", "recipes/configs/grpo_smollm2_cpu.yaml",
                               "--model_name_or_path", str(d), "--output_dir", str(tmp_path / "o"), "--dry_run",
                               "true"])
        assert code == 2 and len(err.strip().splitlines()) == 1 and expect in err, (name, err)
