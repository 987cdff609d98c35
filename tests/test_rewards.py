"""rewards: official verdicts on fixture rows, quirks, fine-credit properties, robustness, TRL wiring."""
import csv
import random
import re
import subprocess
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import rewards
import synth
from eval.data import load_official
from rewards import Score, score

MIRROR = Path("/work/.mirror/cyzcz+Tase/repo")


def tag(s: str) -> str:
    return f"<answer>{s}</answer>"


def gold_completion(r: dict) -> str:
    """A correct completion for any record, built here without the scorer."""
    if r["type"] == "SHUFFLE":
        line = re.search(r"[:：]\s*([^\n\r]*)", r["prompt"]).group(1)
        lang = "zh" if re.search(r"[\u4e00-\u9fff]", line) else "ko" if re.search(r"[\uac00-\ud7a3]", line) else "en"
        toks = (re.findall(r"[\u4e00-\u9fff]", line) if lang == "zh" else
                re.findall(r"[\uac00-\ud7a3]", line) if lang == "ko" else line.split())
        from synth.tasks._common import non_adjacent_order

        order = non_adjacent_order([t.lower() for t in toks])
        assert order is not None
        return tag((" " if lang == "en" else "").join(toks[i] for i in order))
    if r["type"] == "LENGTH":
        n = int(re.search(r"\d+", r["prompt"]).group())
        if re.search(r"[\u4e00-\u9fff]", r["prompt"]):
            return tag("好" * n)
        if re.search(r"[\uac00-\ud7a3]", r["prompt"]):
            return tag("가" * n)
        return tag(" ".join(["word"] * n))
    return tag(r["answer"])


@pytest.fixture(scope="module")
def fixture_rows(fixture_root):
    return list(load_official(fixture_root))


def test_every_fixture_row_gold_scores_one(fixture_rows):
    for r in fixture_rows:
        s = score(r, gold_completion(r))
        assert (s.coarse, s.fine, s.valid) == (1.0, 1.0, True), r["id"]


def test_known_wrong_answers_score_zero(fixture_rows):
    wrong = {"NUMBER": "<answer>99999</answer>", "MATCH_ANSWER": "<answer>zzzz</answer>",
             "SPLIT": "<answer>q, q</answer>", "DIFF": "<answer>zzzz</answer>",
             "SHUFFLE": "<answer>nothing like it</answer>", "LENGTH": "<answer></answer>"}
    for r in fixture_rows:
        s = score(r, wrong[r["type"]])
        assert s.coarse == 0.0 and s.fine < 1.0, r["id"]
        assert score(r, "").coarse == 0.0


def test_synth_gold_answers_score_one():
    for r in synth.generate("all", "all", 600, 5):
        comp = tag(r["meta"]["solution"]) if r["type"] == "SHUFFLE" else gold_completion(r)
        s = score(r, comp)
        assert (s.coarse, s.fine) == (1.0, 1.0), (r["id"], s)


def test_extraction_rules():
    assert rewards.extract_answer("a <answer> 5 </answer> b <answer>6</answer>") == "5"
    assert rewards.extract_answer("**7** and <answer>8</answer>") == "8"
    assert rewards.extract_answer("**7** text **8**") == "7"
    assert rewards.extract_answer("<answer>unclosed **9**") == "9"
    assert rewards.extract_answer("***x**") == "*x"
    assert rewards.extract_answer("nothing") == ""


@pytest.mark.parametrize("comp,label,ok", [
    ("<answer>It appears 12 times, not 3</answer>", "3", True),   # last integer wins
    ("<answer>3 or maybe 12</answer>", "3", False),
    ("<answer>05</answer>", "5", False),                          # string comparison
    ("<answer>five</answer>", "5", False),
])
def test_number_quirks(comp, label, ok):
    assert score({"type": "NUMBER", "prompt": "q", "answer": label}, comp).coarse == float(ok)


def test_match_answer_quirks():
    ex = {"type": "MATCH_ANSWER", "task": "sort_lengths", "prompt": "q", "answer": "CAB"}
    assert score(ex, tag("c, a, b")).coarse == 1.0          # punctuation and spaces stripped, lower-cased
    assert score(ex, tag("CABX")).coarse == 1.0             # substring test
    assert score(ex, "CAB").coarse == 1.0                   # nothing extracted: raw equality
    assert score(ex, "the answer is CAB").coarse == 0.0
    assert score(dict(ex, answer=""), tag("anything")).coarse == 1.0  # empty label passes (official quirk)
    assert 0 < score(ex, tag("CBA")).fine < 1


def test_split_and_diff_quirks():
    ex = {"type": "SPLIT", "prompt": "q", "answer": "人,列;亻,列"}
    assert score(ex, tag("亻 , 列")).coarse == 1.0
    assert score(ex, tag("亻,歹")).fine == 0.5
    d = {"type": "DIFF", "prompt": "q", "answer": "Eurasia", "variation": "modify"}
    assert score(d, tag("'Eurasia' was changed to 'Asia'")).coarse == 1.0
    assert score(d, tag("Eurasia Asia")).coarse == 1.0      # exactly two distinct tokens
    assert score(dict(d, variation="delete"), tag("'Eurasia' to 'Asia'")).coarse == 0.0
    assert score({"type": "DIFF", "prompt": "q", "answer": "是", "variation": "不变"}, tag("是")).coarse == 1.0
    assert score({"type": "DIFF", "prompt": "q", "answer": "yes", "variation": "unchanged"}, tag("Yes.")).coarse == 1.0


def test_length_and_shuffle_rules():
    ex = {"type": "LENGTH", "prompt": "Please randomly generate 5 English words with the topic of cat.", "answer": ""}
    assert score(ex, tag("one two three four five")).coarse == 1.0
    assert score(ex, tag("one two three four five 6 7")).coarse == 1.0  # digits are not valid words
    assert score(ex, tag("one two three four")).fine == pytest.approx(0.8)
    assert score({"type": "LENGTH", "prompt": "no number", "answer": ""}, tag("x")).valid is False
    sh = {"type": "SHUFFLE", "prompt": "Shuffle.\nInput: a b c d e", "answer": ""}
    assert score(sh, tag("b d a c e")).coarse == 1.0
    assert score(sh, tag("a b c d e")).fine == 0.0
    assert score(sh, tag("a c e d b")).fine == pytest.approx(0.75)
    assert score(sh, tag("b d a c")).fine == 0.0


# --- properties --------------------------------------------------------------------------------
TYPES_EX = [
    {"type": "NUMBER", "prompt": "How many?", "answer": "7"},
    {"type": "LENGTH", "prompt": "Please generate 12 English words.", "answer": ""},
    {"type": "SHUFFLE", "prompt": "Shuffle.\nInput: 我们都是好朋友", "answer": ""},
    {"type": "SPLIT", "prompt": "q", "answer": "手,军;扌,军"},
    {"type": "DIFF", "prompt": "q", "answer": "抖", "variation": "修改"},
    {"type": "MATCH_ANSWER", "task": "variant_normalize", "prompt": "q", "answer": "facile"},
    {"type": "EXACT", "task": "execute", "prompt": "q", "answer": "c h e v r o n"},
]
text_st = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=200)


@settings(max_examples=300, deadline=None)
@given(ex=st.sampled_from(TYPES_EX), body=text_st, tagged=st.booleans())
def test_score_ranges_and_consistency(ex, body, tagged):
    s = score(ex, tag(body) if tagged else body)
    assert s.coarse in (0.0, 1.0)
    assert 0.0 <= s.fine <= 1.0
    assert (s.fine == 1.0) == (s.coarse == 1.0)


@settings(max_examples=200, deadline=None)
@given(label=st.integers(0, 300), a=st.integers(0, 400), b=st.integers(0, 400))
def test_number_fine_monotone(label, a, b):
    ex = {"type": "NUMBER", "prompt": "q", "answer": str(label)}
    fa, fb = score(ex, tag(str(a))).fine, score(ex, tag(str(b))).fine
    if abs(a - label) <= abs(b - label):
        assert fa >= fb


@settings(max_examples=200, deadline=None)
@given(n=st.integers(1, 120), a=st.integers(0, 200), b=st.integers(0, 200))
def test_length_fine_monotone(n, a, b):
    ex = {"type": "LENGTH", "prompt": f"Write {n} words.", "answer": ""}
    fa, fb = score(ex, tag(" ".join(["w"] * a))).fine, score(ex, tag(" ".join(["w"] * b))).fine
    if abs(a - n) <= abs(b - n):
        assert fa >= fb


def test_fuzz_never_raises_and_is_fast():
    rng = random.Random(0)
    nasty = [
        "", "<answer>", "</answer>", "<answer><answer>1</answer>", "*" * 10001, "**" * 5000,
        "<answer>" * 20000, "9" * 10000, tag("9" * 10000), tag("\x00\ud7a3\U0010ffff"),
        "x" * (1 << 20), tag("가" * 300000), "'" * 50000, tag("no " * 20000), None,
        [{"role": "assistant", "content": tag("3")}], {"content": "7"},
    ]
    for _ in range(200):
        nasty.append("".join(chr(rng.randrange(1, 0x2FFFF)) for _ in range(rng.randrange(0, 400))))
    recs = TYPES_EX + [dict(TYPES_EX[0], answer="9" * 10000), {"type": "BOGUS"}, {}]
    worst = 0.0
    for r in recs:
        for c in nasty:
            t = time.perf_counter()
            s = score(r, c)
            worst = max(worst, time.perf_counter() - t)
            assert isinstance(s, Score) and s.coarse in (0.0, 1.0) and 0.0 <= s.fine <= 1.0
    assert worst < 2.0, f"slowest call {worst:.2f}s"


# --- differential test against the official evaluator -------------------------------------------
@pytest.mark.skipif(not MIRROR.is_dir(), reason="official TASE source not mirrored on this machine")
def test_coarse_equals_official_metrics(fixture_rows, tmp_path):
    src = subprocess.run(["git", "-C", str(MIRROR), "show", "HEAD:evaluate/metrics.py"],
                         capture_output=True, text=True, check=True).stdout
    ns: dict = {}
    exec(compile(src, "official_metrics.py", "exec"), ns)
    official = {
        "MATCH_ANSWER": lambda r, c: ns["match_answer"](r["prompt"], c, r["answer"]),
        "LENGTH": lambda r, c: ns["sentence_length"](r["prompt"], c, r["answer"]),
        "SHUFFLE": lambda r, c: all(ns["shuffle_tokens"](r["prompt"], c, r["answer"])),
        "SPLIT": lambda r, c: ns["split_components"](r["prompt"], c, r["answer"]),
        "NUMBER": lambda r, c: ns["match_number"](r["prompt"], c, r["answer"]),
        "DIFF": lambda r, c: ns["diff_judge"](r["prompt"], c, r["answer"], r["variation"]),
    }
    rng = random.Random(1)
    rows = fixture_rows + list(synth.generate("all", "all", 300, 9))
    n = 0
    for r in rows:
        gold = gold_completion(r) if r["type"] != "SHUFFLE" or "solution" not in r["meta"] else tag(r["meta"]["solution"])
        inner = gold[8:-9]
        cands = [gold, inner, "", tag(""), tag(inner.upper()), tag(inner[::-1]), f"**{inner}**",
                 tag(inner + " 12"), tag("'" + inner + "' vs 'x'"), tag(inner[: len(inner) // 2]),
                 tag(" ".join(inner)), "text " + tag(inner) + " <answer>zz</answer>",
                 tag(f"I think it is {inner}, not {rng.randint(0, 20)}")]
        for c in cands:
            s = score(r, c)
            try:
                ref = official[r["type"]](r, c)
            except Exception:
                ref = None
            if ref is None:
                assert not s.valid, (r["id"], c[:80])
            else:
                assert s.valid and s.coarse == float(bool(ref)), (r["id"], c[:80], s, ref)
            n += 1
    assert n > 5000


# --- TRL wiring --------------------------------------------------------------------------------
def test_reward_funcs_trl_signature():
    funcs = rewards.get_reward_funcs(["accuracy_coarse", "accuracy_fine", "format", "length_penalty"])
    assert [f.__name__ for f in funcs] == ["accuracy_coarse", "accuracy_fine", "format", "length_penalty"]
    prompts = [[{"role": "system", "content": "S"}, {"role": "user", "content": "Please generate 3 English words."}]] * 2
    comps = [[{"role": "assistant", "content": tag("a b c")}], [{"role": "assistant", "content": "a b"}]]
    cols = dict(type=["LENGTH", "LENGTH"], answer=["", ""], variation=["", ""], task=["sentence_length"] * 2,
                completion_ids=[[1], [2]], trainer_state=None)
    assert funcs[0](prompts, comps, **cols) == [1.0, 0.0]
    assert funcs[2](prompts, comps, **cols) == [1.0, 0.0]
    q = dict(cols, question=["Please generate 2 English words.", "Please generate 2 English words."])
    assert funcs[1](prompts, [tag("a b"), tag("a b c d")], **q) == [1.0, 0.0]
    with pytest.raises(ValueError, match="unknown reward function"):
        rewards.get_reward_funcs(["nope"])
