"""Property-based tests (Hypothesis; issue 51): whatever a user hands the readers, the scorers and the config checks,
the answer is a result or one TaseError line of bounded length, never a traceback. Modest example counts and a
deadline keep the file to seconds (tests/test_rewards_props.py covers the scorers' ranges and rules)."""
from __future__ import annotations

import json
import tempfile
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, example, given, settings, strategies as st

from common.errors import TaseError
from common.readers import load_jsonl
from eval.runner import read_predictions
from recipes.proof_stages.config import load_config
from recipes.shared.parser import ConfigFile
from rewards.trl import REWARD_FUNCS, RewardInputError
from synth.mixture import load_mixture

SCRATCH = Path(tempfile.mkdtemp(prefix="tase-props-"))  # @given runs many examples per test: one folder for them
FAST = settings(max_examples=60, deadline=2000, suppress_health_check=[HealthCheck.too_slow])

# any JSON value: what a JSON line, a chat message's content or a YAML value can hold
scalars = st.one_of(st.none(), st.booleans(), st.integers(-10**30, 10**30), st.floats(allow_nan=True),
                    st.text(max_size=30))
values = st.recursive(scalars, lambda kids: st.one_of(st.lists(kids, max_size=4),
                                                      st.dictionaries(st.text(max_size=10), kids, max_size=4)),
                      max_leaves=12)
# records: the contract's keys with any values, so some lines are valid records and most are near misses
KEYS = ("id", "task", "lang", "type", "prompt", "answer", "subtask", "variation", "meta")
near_records = st.dictionaries(st.sampled_from(KEYS), st.one_of(values, st.sampled_from(
    ["freq_count", "en", "zh", "NUMBER", "LENGTH", "SHUFFLE", "a", "3", "x" * 5000])), max_size=len(KEYS))


def one_line(e: BaseException) -> None:
    msg = str(e)
    assert msg and "\n" not in msg and len(msg) < 1000, msg[:3000]  # bounded: a 5,000-character value is cut


def write(name: str, text: str) -> Path:
    p = SCRATCH / name
    p.write_text(text, encoding="utf-8", errors="surrogatepass")
    return p


def jsonl_text(value: object) -> str:
    return json.dumps(value, allow_nan=True) + "\n"


@FAST
@given(line=st.one_of(values, near_records).map(jsonl_text) | st.text(max_size=80))
def test_a_jsonl_line_gives_records_or_one_line(line):
    path = write("data.jsonl", line)
    try:
        recs = list(load_jsonl(path))
    except TaseError as e:
        one_line(e)
    else:
        assert all(isinstance(r, dict) for r in recs)


@FAST
@given(completion=values, extra=st.dictionaries(st.sampled_from(["completions", "id", "x"]), values, max_size=2))
def test_a_prediction_line_gives_a_prediction_or_one_line(completion, extra):
    rec = {"id": "a", "task": "freq_count", "lang": "en", "type": "NUMBER", "prompt": "How many?", "answer": "3"}
    path = write("preds.jsonl", jsonl_text({"id": "a", "completion": completion, **extra}))
    try:
        preds = read_predictions(path, {"a": rec}, "data.jsonl")
    except TaseError as e:
        one_line(e)
    else:
        assert [p for p, _ in preds] == ["a"]


ROWS = [
    {"type": "NUMBER", "question": "How many?", "answer": "7"},
    {"type": "LENGTH", "question": "Please generate 12 English words.", "answer": ""},
    {"type": "SHUFFLE", "question": "Shuffle.\nInput: a b a c d b", "answer": ""},
    {"type": "SPLIT", "question": "q", "answer": "手,军;扌,军"},
    {"type": "DIFF", "question": "q", "answer": "抖", "variation": "修改"},
    {"type": "MATCH_ANSWER", "question": "q", "answer": "kana"},
    {"type": "EXACT", "question": "q", "answer": "abc"},
]


@FAST
@given(row=st.sampled_from(ROWS), text=st.text(max_size=200),
       shape=st.sampled_from(["string", "chat", "chat-any"]), content=values)
def test_the_training_rewards_score_any_completion_or_refuse_in_one_line(row, text, shape, content):
    """rewards.trl's functions on a batch of one: a float in range for a string or chat messages, whatever they
    say; a completion of another shape (chat content that is not text) is one RewardInputError line."""
    completion = {"string": text, "chat": [{"role": "assistant", "content": text}],
                  "chat-any": [{"role": "assistant", "content": content}]}[shape]
    columns = {k: [v] for k, v in row.items()}
    for name, func in REWARD_FUNCS.items():
        try:
            out = func(prompts=None, completions=[completion], **columns)
        except RewardInputError as e:
            one_line(e)
            continue
        assert len(out) == 1 and (-1.0 <= out[0] <= 1.0), (name, out)


@pytest.fixture(scope="module")
def grpo_parser():
    from trl import GRPOConfig, ModelConfig

    from recipes.shared.config import TaseArgs
    from recipes.shared.parser import RecipeParser

    return RecipeParser((TaseArgs, GRPOConfig, ModelConfig))


OPTIONS = ("learning_rate", "seed", "tasks", "report_to", "generation_kwargs", "max_steps", "bf16", "reward_funcs")


@settings(max_examples=60, deadline=3000, suppress_health_check=[HealthCheck.too_slow,
                                                                  HealthCheck.function_scoped_fixture])
@given(key=st.sampled_from(OPTIONS), value=values)
def test_any_yaml_value_of_a_recipe_option_is_checked_in_one_line(grpo_parser, key, value):
    """The recipe's YAML type check (recipes/shared/parser.py check_types) on any value of a few options: accepted, or
    one bounded line naming the key."""
    try:
        text = yaml.safe_dump({key: value, "use_cpu": True})
    except yaml.YAMLError:
        return
    path = write("recipe.yaml", text)
    config = ConfigFile(["--config", str(path), "--output_dir", str(SCRATCH / "out")])
    try:
        grpo_parser.check_types(str(path), config.values)
    except TaseError as e:
        one_line(e)
        assert key in str(e)


@FAST
@given(value=values)
@example(value={"\n": False})  # found by a fresh clone's run: an unknown task name holding a newline, quoted as it was
def test_any_mixture_value_is_weights_or_one_line(value):
    try:
        text = yaml.safe_dump({"weights": value})
    except yaml.YAMLError:
        return
    try:
        weights = load_mixture(str(write("mix.yaml", text)))
    except TaseError as e:
        one_line(e)
    else:
        assert all(isinstance(w, float) and w >= 0 for w in weights.values())


PROOF = {"out": "runs/proof", "completions": "docs/results/component_count_proof_cpu",
         "files": ["token_structure/component_count/english.csv"],
         "sft": {"config": "recipes/configs/sft_smollm2_cpu.yaml", "options": {"tasks": ["component_count"]}},
         "grpo": {"config": "recipes/configs/grpo_proof_cpu.yaml", "arms": ["coarse", "fine"],
                  "reward_funcs": ["format"]},
         "heldout": {"task": "component_count", "lang": "all", "n": 30, "seed": 1},
         "eval": {"backend": "hf", "max_new_tokens": 16}, "compare": {"n_boot": 10}}
PLACES = [("sft", "options", "tasks"), ("grpo", "arms"), ("grpo", "reward_funcs"), ("heldout", "n"), ("files",),
          ("eval", "dtype"), ("sft", "options"), ("control",)]


@FAST
@given(place=st.sampled_from(PLACES), value=values)
def test_any_yaml_value_in_a_proof_config_is_checked_in_one_line(place, value):
    """recipes/proof.py load_config with any value at a few places of a valid config: a config or one line."""
    import copy


    cfg = copy.deepcopy(PROOF)
    node = cfg
    for k in place[:-1]:
        node = node[k]
    node[place[-1]] = value
    try:
        text = yaml.safe_dump(cfg)
    except yaml.YAMLError:
        return
    try:
        load_config(str(write("proof.yaml", text)))
    except TaseError as e:
        one_line(e)
