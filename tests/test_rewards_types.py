"""A scoring type is its catalogue row (common.types) and its scorer module's registration (rewards.types):
everything that routes, golds, validates, guards or checks rows reads them from there. Shown with a test-only
type that is declared and registered, run end to end through the data reader, the gold builder, the router
and `eval score`, and removed again."""
import json

import pytest

import rewards
from common.readers import DataError
from common.record import make_record
from common.types import TYPE_INFO, TypeInfo, TypeRegistryError, declare_type, undeclare_type
from eval.gold import gold_predictions
from eval.runner import score_predictions
from rewards.base import INVALID, Score, label_of
from rewards.extract import extract_answer
from rewards.types import REGISTRY, ScoringType, register_type, unregister_type
from synth.readers import load_data


def _score_reversed(example, completion):
    """Test-only rule: correct when the extracted answer is the label spelt backwards; no label: invalid."""
    label = label_of(example)
    if not label:
        return INVALID
    got = extract_answer(completion)
    ok = float(got == label[::-1])
    return Score(ok, ok, got)


REVERSED_INFO = TypeInfo("REVERSED", invalid_reason="REVERSED row without a label")
REVERSED = ScoringType("REVERSED", _score_reversed, gold=lambda ex: [label_of(ex)[::-1]])


def _write_rows(path):
    rows = [make_record(id=f"rev/{i}", task="freq_count", lang="en", type="REVERSED", prompt=f"Reverse {a!r}.",
                        answer=a) for i, a in enumerate(["abc", "hello", ""])]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return rows


def test_a_test_only_type_scores_golds_and_validates_end_to_end(tmp_path):
    data = tmp_path / "rev.jsonl"
    rows = _write_rows(data)
    with pytest.raises(TypeRegistryError, match="no catalogue row"):
        register_type(REVERSED)  # behaviour for a type the catalogue does not declare
    declare_type(REVERSED_INFO)
    register_type(REVERSED)
    try:
        from common.record import TYPES

        assert TYPES[-1] == "REVERSED" and "REVERSED" in rewards.SCORERS
        assert rewards.score(rows[0], "<answer>cba</answer>").coarse == 1.0
        assert rewards.score(rows[0], "<answer>abc</answer>").coarse == 0.0
        assert list(load_data(str(data))) == rows  # the reader accepts the registered type
        gold = tmp_path / "gold.jsonl"
        gold.write_text("".join(json.dumps(p) + "\n" for p in gold_predictions(rows)), encoding="utf-8")
        assert json.loads(gold.read_text().splitlines()[1])["completion"] == "<answer>olleh</answer>"
        res = score_predictions(str(data), gold, tmp_path / "scored")
        assert (res["overall"], res["n"], res["n_invalid"]) == (100.0, 3, 1)
        assert res["invalid_by_reason"] == {"REVERSED row without a label": 1}
        wrong = tmp_path / "wrong.jsonl"
        wrong.write_text("".join(json.dumps({"id": r["id"], "completion": "<answer>abc</answer>"}) + "\n"
                                 for r in rows), encoding="utf-8")
        assert score_predictions(str(data), wrong, tmp_path / "wrong")["overall"] == 0.0
        with pytest.raises(TypeRegistryError, match="already registered"):
            register_type(REVERSED)
    finally:
        unregister_type("REVERSED")
        undeclare_type("REVERSED")
    assert "REVERSED" not in REGISTRY and "REVERSED" not in rewards.SCORERS and "REVERSED" not in TYPE_INFO
    assert rewards.score(rows[0], "<answer>cba</answer>") == INVALID
    with pytest.raises(DataError, match="unknown type 'REVERSED'"):
        list(load_data(str(data)))


def test_every_type_declares_its_rules_in_its_own_module():
    """The router's keys are the catalogue's, in its order, each registered by the module of its scorer; the
    two types whose official rows hold no label build a gold answer instead of reading one."""
    from common.record import TYPES, UNLABELLED_TYPES

    assert TYPES == ("NUMBER", "LENGTH", "SHUFFLE", "SPLIT", "DIFF", "MATCH_ANSWER", "EXACT")
    assert tuple(REGISTRY) == TYPES and all(t.info is TYPE_INFO[n] for n, t in REGISTRY.items())
    assert set(UNLABELLED_TYPES) == {"SHUFFLE", "LENGTH"}
    for name, t in REGISTRY.items():
        mod = __import__(t.score.__module__, fromlist=["TYPE"])
        assert mod.TYPE is t, name
    assert REGISTRY["LENGTH"].gold({"prompt": "Write a sentence of exactly 3 words.", "lang": "en",
                                    "answer": "x"}) == ["word word word"]
