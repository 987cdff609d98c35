"""Issue 51 ("Nothing lost, round four"), part B: user rewards checked on every batch, trackers known but not
installed, LoRA export against its base, YAML values and duplicate keys, eval score's list contents and header-only
CSVs. Each case is one line (a TaseError, exit 2 where a command runs) or a correct result. Fast: in-process calls."""
from __future__ import annotations

import importlib.util
import math
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from common.errors import TaseError
from rewards.trl import RewardInputError

ROOT = Path(__file__).resolve().parents[1]
PY = sys.executable


# --------------------------------------------------------------------------------------------- user rewards


@pytest.fixture(scope="module")
def batch() -> dict:
    """A real GRPO batch as TRL hands it to a reward function: 2 synth rows x 2 generations, chat prompts and
    completions, the row columns recipes/data.to_row writes."""
    from recipes.data import to_row
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
    from recipes.reward_funcs import load_reward_funcs

    funcs = load_reward_funcs(["accuracy_fine", "rewards:mine", "rewards:accuracy_fine", "rewards.accuracy_fine"])
    # ours keeps its name; the cwd's rewards.py is read (not our package of that name); a user accuracy_fine logs
    # under its import path, never merged into rewards/accuracy_fine/mean
    assert [f.__name__ for f in funcs] == ["accuracy_fine", "mine", "rewards.accuracy_fine", "rewards.accuracy_fine_2"]
    assert funcs[1](**batch) == [0.5] * 4 and funcs[2](**batch) == [1.0] * 4
    assert funcs[0](**batch) != [1.0] * 4  # ours still scores: the cwd's module did not replace our package
    assert load_reward_funcs(["rewards:skips"])[0](**batch) == [None, 1, 1, 1]  # None: allowed, as TRL allows it


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
    from recipes.reward_funcs import load_reward_funcs

    func = load_reward_funcs([f"rewards:{name}"])[0]
    with pytest.raises(RewardInputError) as e:
        func(**batch)
    msg = str(e.value)
    assert expect in msg and "\n" not in msg and len(msg) < 400, msg


def test_a_bad_reward_stops_training_in_one_line(user_module, batch):
    """recipes/grpo.py train() turns the first bad batch into the recipe's one line (TaseError), whatever the
    trainer: here a stand-in trainer whose train() calls the reward as GRPOTrainer does."""
    from recipes.grpo import train
    from recipes.reward_funcs import load_reward_funcs

    func = load_reward_funcs(["rewards:inf"])[0]
    trainer = SimpleNamespace(train=lambda resume_from_checkpoint=None: func(**batch))
    with pytest.raises(TaseError, match=r"^reward function rewards:inf: value 0 is inf"):
        train(trainer, None)


# --------------------------------------------------------------------------------------------- trackers


@pytest.mark.parametrize("tracker, package", [("comet_ml", "comet_ml"), ("mlflow", "mlflow"), ("flyte", "flytekit"),
                                              ("azure_ml", "azureml")])
def test_known_tracker_not_installed_is_refused_naming_the_package(tracker, package):
    from recipes.tracking import check_trackers

    if importlib.util.find_spec(package) is not None:
        pytest.skip(f"{package} is installed here")
    why = check_trackers(SimpleNamespace(report_to=["tensorboard", tracker]))
    assert why == (f"report_to {tracker}: the {package} package is not installed (pip install {package}), or set "
                   "--report_to none")


def test_every_tracker_transformers_knows_has_a_package():
    from transformers.integrations.integration_utils import INTEGRATION_TO_CALLBACK

    from recipes.tracking import TRACKERS

    assert set(INTEGRATION_TO_CALLBACK) <= set(TRACKERS)
