"""Reward levels have one home (issue 48): rewards/levels.py declares coarse, strict and fine and is the only code
that turns a level into a reward name; each accuracy reward carries its own level; a run's rewards are resolved once
(recipes/grpo_core/reward_funcs.resolve_rewards) into names, functions, weights and the level that tracking, dynamic
sampling and the async worker read.

The source checks walk every library module and script (not tests/, not docstrings): a string that names an
accuracy reward (`"accuracy_fine"`, `f"accuracy_{level}"`, `"accuracy_" + x`, `name.removeprefix("accuracy_")`)
and, in the training code (rewards/, recipes/), a literal collection of the level words (`("coarse", "fine")`,
a choices list) may appear in rewards/levels.py only. eval/'s `coarse`/`strict`/`fine` are the verdict columns of
a scored sample (Score's fields), not reward levels, and are left to their own modules.
"""
from __future__ import annotations

import ast
import dataclasses
import math
import re
from pathlib import Path
from types import SimpleNamespace

import pytest

from tests.conftest import code_strings

ROOT = Path(__file__).resolve().parent.parent
HOME = ROOT / "rewards" / "levels.py"
SOURCES = ("common", "rewards", "synth", "eval", "recipes", "bench")
# a reward name spelled from a level: the whole name, or the prefix a name is built from or parsed by
NAME = re.compile(r"\baccuracy_(?:(?:coarse|strict|fine)\b|$)")
WORDS = {"coarse", "strict", "fine"}


def _files(dirs: tuple[str, ...] = SOURCES) -> list[Path]:
    return [p for d in dirs for p in sorted((ROOT / d).rglob("*.py")) if p != HOME]


def _where(path: Path, line: int) -> str:
    return f"{path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}:{line}"


def reward_name_spellings(path: Path) -> list[str]:
    """`file:line text` of every string in `path`'s code (docstrings aside) that spells an accuracy reward name."""
    return [f"{_where(path, n.lineno)} {n.value!r}" for n in code_strings(ast.parse(path.read_text(encoding="utf-8")))
            if NAME.search(n.value)]


def level_collections(path: Path) -> list[str]:
    """`file:line` of every literal tuple, list, set or dict (keys or values) in `path` holding two or more level
    words."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        groups = [node.keys, node.values] if isinstance(node, ast.Dict) else [node.elts] if isinstance(
            node, (ast.Tuple, ast.List, ast.Set)) else []
        for items in groups:
            if len({i.value for i in items if isinstance(i, ast.Constant) and i.value in WORDS}) >= 2:
                found.append(_where(path, node.lineno))
    return found


def test_no_code_outside_the_levels_module_spells_a_reward_name():
    assert [hit for p in _files() for hit in reward_name_spellings(p)] == []


def test_level_words_are_listed_in_the_levels_module_only():
    assert [hit for p in _files(("rewards", "recipes")) for hit in level_collections(p)] == []


def test_the_source_checks_see_the_old_spellings(tmp_path):
    """The checks catch what the code did before issue 48: config.py's f-string, tracking.py's and
    dynamic_sampling.py's name-to-level maps, proof.py's arms and the --granularity choices."""
    old = tmp_path / "old.py"
    old.write_text('"""accuracy_fine in a docstring is prose."""\n'
                   'names = [f"accuracy_{granularity}"]\n'
                   'LEVELS = {"accuracy_fine": "fine", "accuracy_strict": "strict"}\n'
                   'ARMS = ("coarse", "fine")\n'
                   'level = name.removeprefix("accuracy_")\n'
                   'ok = "accuracy_<granularity> (+ format)", "tase/official_acc", "accuracy_by_fragmentation"\n',
                   encoding="utf-8")
    assert sorted(h.split(" ", 1)[0].rsplit(":", 1)[1] for h in reward_name_spellings(old)) == ["2", "3", "3", "5"]
    assert [h.rsplit(":", 1)[1] for h in level_collections(old)] == ["3", "4"]


def test_levels_are_score_verdicts_and_each_accuracy_reward_carries_its_own():
    from rewards import REWARD_FUNCS, Score
    from rewards.levels import DEFAULT, LEVELS, accuracy_reward_name

    assert set(LEVELS) <= {f.name for f in dataclasses.fields(Score)} and DEFAULT in LEVELS
    carried = {f.level: name for name, f in REWARD_FUNCS.items() if hasattr(f, "level")}
    assert carried == {lv: accuracy_reward_name(lv) for lv in LEVELS}
    row = {"type": ["NUMBER"], "answer": ["2"], "question": ["How many?"]}
    for lv in LEVELS:
        assert REWARD_FUNCS[accuracy_reward_name(lv)](None, ["<answer>2</answer>"], **row) == [1.0]
    with pytest.raises(ValueError, match="unknown accuracy level 'medium'"):
        accuracy_reward_name("medium")


def test_a_mismatched_name_is_refused_where_the_reward_is_defined():
    from rewards.trl import _pays

    def accuracy_fine_v2(prompts, completions, **columns):
        return [0.0] * len(completions)

    with pytest.raises(TypeError, match="accuracy_fine_v2 pays fine: name it accuracy_fine"):
        _pays("fine")(accuracy_fine_v2)


def test_level_helpers():
    from rewards.levels import binary, check_level, watched

    assert [binary(x) for x in ("coarse", "strict", "fine", None)] == ["coarse", "strict", "strict", "strict"]
    assert [watched(x) for x in ("coarse", "strict", "fine", None)] == ["coarse", "strict", "fine", "strict"]
    assert check_level("strict") == "strict"
    with pytest.raises(ValueError, match=r"^reward_granularity must be coarse, strict or fine, got 'finer'$"):
        check_level("finer")


def _args(**kw):
    from recipes.shared.config import TaseArgs

    return TaseArgs(tasks=["freq_count"], langs=["en"], **kw)


def _cfg(**kw):
    return SimpleNamespace(**{"max_completion_length": 256, "reward_weights": None, **kw})


def test_resolve_rewards_from_the_granularity():
    from recipes.grpo_core.reward_funcs import resolve_rewards
    from rewards import REWARD_FUNCS

    run = resolve_rewards(_args(), _cfg())
    assert (run.names, run.weights, run.level) == (["accuracy_fine", "format"], [1.0, 0.2], "fine")
    assert run.funcs == [REWARD_FUNCS["accuracy_fine"], REWARD_FUNCS["format"]]
    run = resolve_rewards(_args(reward_granularity="coarse", format_reward=False, soft_overlong=True,
                                format_weight=0.5), _cfg(max_completion_length=100))
    assert (run.names, run.weights, run.level) == (["accuracy_coarse", "soft_overlong"], [1.0, 1.0], "coarse")
    assert run.funcs[1].__name__ == "soft_overlong"


def test_resolve_rewards_from_explicit_names_reads_each_functions_level():
    """The level is the first function's own `.level`; a user's function (by import path, even of one of ours, as
    before) carries none; the granularity is not read when names are given."""
    from recipes.grpo_core.reward_funcs import resolve_rewards

    run = resolve_rewards(_args(reward_funcs=["format", "accuracy_strict", "accuracy_coarse"]), _cfg())
    assert (run.level, run.weights) == ("strict", [0.2, 1.0, 1.0])
    run = resolve_rewards(_args(reward_granularity="coarse", reward_funcs=["tests.user_rewards:brevity",
                                                                           "rewards.trl.accuracy_fine"]), _cfg())
    assert run.names == ["tests.user_rewards:brevity", "rewards.trl.accuracy_fine"] and run.level is None
    assert [f.__name__ for f in run.funcs] == ["brevity", "rewards.trl.accuracy_fine"]


def test_resolve_rewards_weights_and_refusals():
    from common.errors import TaseError
    from recipes.grpo_core.reward_funcs import resolve_rewards

    given = [1.0, 0.5]
    cfg = _cfg(reward_weights=given)
    assert resolve_rewards(_args(), cfg).weights is given and cfg.reward_weights is given  # read, never changed
    with pytest.raises(TaseError,
                       match=r"^reward_weights has 3 values for 2 reward functions \(accuracy_fine, format\)$"):
        resolve_rewards(_args(), _cfg(reward_weights=[1.0, 1.0, 1.0]))
    with pytest.raises(TaseError, match="reward_weights must be finite"):
        resolve_rewards(_args(), _cfg(reward_weights=[1.0, math.nan]))
    with pytest.raises(TaseError, match="accuracy_finest: unknown reward function"):
        resolve_rewards(_args(reward_funcs=["accuracy_finest"]), _cfg())
    assert not hasattr(SimpleNamespace(max_completion_length=8), "reward_weights")  # AsyncGRPOConfig: no such field
    assert resolve_rewards(_args(), SimpleNamespace(max_completion_length=8)).weights == [1.0, 0.2]


def test_coarse_is_the_verdict_and_official_acc_its_mean():
    """Coarse and official are one idea (issue 61): `coarse` names the verdict and the level, `official_acc` its
    mean, from rewards/levels.METRICS, in the training log and in eval's headline alike."""
    from eval.headline import KEYS as HEADLINE
    from recipes.features.tracking.metrics import KEYS as TRACKED, Verdict, batch_metrics
    from rewards.levels import COARSE, FINE, METRICS, STRICT

    assert METRICS == {COARSE: "official_acc", STRICT: "strict_acc", FINE: "fine_credit"}
    assert TRACKED[:3] == HEADLINE[:3] == tuple(METRICS.values())
    vs = [Verdict("g", "t", "en", 1.0, 0.0, 0.5, "a"), Verdict("g", "t", "en", 0.0, 0.0, 0.0, "b")]
    m = batch_metrics(vs)
    assert (m["tase/official_acc"], m["tase/strict_acc"], m["tase/fine_credit"]) == (0.5, 0.0, 0.25)
    assert (m["tase/task/t/official_acc"], m["tase/lang/en/strict_acc"]) == (0.5, 0.0)
