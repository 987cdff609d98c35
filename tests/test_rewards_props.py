"""rewards: properties (hypothesis) of coarse/strict/fine on every type, the substring distance against a
dynamic programme, a fuzz test over random and adversarial completions, prompts and labels with a loose
time bound per call. The loophole bound (hedges, echoes, constants): test_rewards_loopholes.py."""
import random
import re
import time

import pytest
from hypothesis import given, settings, strategies as st

from rewards import Score, diff, length, score, shuffle, text as text_mod
from rewards.match_answer import levenshtein, substring_distance


def tag(s: str) -> str:
    return f"<answer>{s}</answer>"


EXAMPLES = [
    {"type": "NUMBER", "prompt": "How many?", "answer": "7"},
    {"type": "NUMBER", "prompt": "How many?", "answer": "120"},
    {"type": "LENGTH", "prompt": "Please generate 12 English words.", "answer": ""},
    {"type": "LENGTH", "prompt": "请给我随机生成5个中文汉字", "answer": ""},
    {"type": "SHUFFLE", "prompt": "Shuffle.\nInput: 我们都是好朋友", "answer": ""},
    {"type": "SHUFFLE", "prompt": "Shuffle.\nInput: a b a c d b", "answer": ""},
    {"type": "SPLIT", "prompt": "q", "answer": "手,军;扌,军"},
    {"type": "DIFF", "prompt": "q", "answer": "抖", "variation": "修改"},
    {"type": "DIFF", "prompt": "q", "answer": "yes", "variation": "unchanged"},
    {"type": "MATCH_ANSWER", "task": "variant_normalize", "prompt": "q", "answer": "facile"},
    {"type": "MATCH_ANSWER", "task": "sort_lengths", "prompt": "q", "answer": "CAB"},
    {"type": "MATCH_ANSWER", "task": "dot_matrix", "prompt": "q", "answer": "symbol"},
    {"type": "EXACT", "task": "execute", "prompt": "q", "answer": "c h e v r o n"},
]
# text near the answers above, so that hits and near misses are common, plus arbitrary code points
ALPHABET = st.sampled_from(list("0123456789 abcABCfile我们都是好朋友手扌军抖,;:'\"*<>/\n")
                           + ["<answer>", "</answer>", "**"])
near_text = st.lists(ALPHABET, max_size=40).map("".join)
any_text = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=200)


def check(s: Score) -> None:
    assert s.coarse in (0.0, 1.0) and s.strict in (0.0, 1.0)
    assert 0.0 <= s.fine <= 1.0
    assert (s.fine == 1.0) == (s.strict == 1.0)      # full training credit exactly for a strict pass...
    assert s.strict <= s.coarse                      # ...which the official verdict passes too
    assert s.loophole == (s.coarse == 1.0 and s.strict == 0.0)
    assert isinstance(s.extracted, str)


@settings(max_examples=600, deadline=None)
@given(ex=st.sampled_from(EXAMPLES), body=st.one_of(near_text, any_text), tagged=st.booleans())
def test_score_ranges_and_consistency(ex, body, tagged):
    check(score(ex, tag(body) if tagged else body))


@settings(max_examples=300, deadline=None)
@given(ex=st.sampled_from(EXAMPLES), prompt=any_text, answer=any_text, body=any_text)
def test_any_prompt_and_label(ex, prompt, answer, body):
    s = score(dict(ex, prompt=prompt, answer=answer), tag(body))
    check(s)
    if not s.valid:
        assert (s.coarse, s.fine) == (0.0, 0.0)


@settings(max_examples=300, deadline=None)
@given(label=st.integers(0, 300), a=st.integers(0, 400), n=st.integers(1, 120), k=st.integers(0, 200))
def test_number_and_length_pay_only_the_exact_value(label, a, n, k):
    """No near-miss credit: it paid a central constant (a count, a text length) on every row."""
    num = score({"type": "NUMBER", "prompt": "q", "answer": str(label)}, tag(str(a)))
    assert num.fine == num.strict == num.coarse == float(a == label)
    ln = score({"type": "LENGTH", "prompt": f"Write {n} words.", "answer": ""}, tag("w " * k))
    assert ln.fine == ln.coarse == float(k == n)


@settings(max_examples=300, deadline=None)
@given(a=st.text("abc", max_size=12), b=st.text("abcd", max_size=12))
def test_levenshtein_matches_dynamic_programme(a, b):
    prev = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        cur = [i]
        for j, cb in enumerate(b, 1):
            cur.append(min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (ca != cb)))
        prev = cur
    assert levenshtein(a, b) == prev[-1] == levenshtein(b, a)


@settings(max_examples=300, deadline=None)
@given(text=st.text("abcd", max_size=14), pat=st.text("abc", max_size=8))
def test_substring_distance_is_the_best_stretch(text, pat):
    """The echo baseline: the closest substring of the prompt, by brute force over every substring."""
    subs = {text[i:j] for i in range(len(text) + 1) for j in range(i, len(text) + 1)}
    assert substring_distance(text, pat) == min(levenshtein(s, pat) for s in subs)


@settings(max_examples=200, deadline=None)
@given(perm=st.permutations(list(range(8))))
def test_shuffle_fine_counts_kept_pairs(perm):
    ex = {"type": "SHUFFLE", "prompt": "Input: " + " ".join("abcdefgh"), "answer": ""}
    kept = sum(abs(x - y) == 1 for x, y in zip(perm, perm[1:], strict=False))
    s = score(ex, tag(" ".join("abcdefgh"[i] for i in perm)))
    assert s.fine == pytest.approx(1 - kept / 7) and s.coarse == float(kept == 0)


@settings(max_examples=300, deadline=None)
@given(data=st.data(), n=st.integers(0, 70), alphabet=st.sampled_from(["abcde", "好人学生大", "가나다라마"]))
def test_shuffle_numpy_path_equals_python_path(data, n, alphabet):
    """Long inputs go through numpy on integer keys; it must agree with the plain-Python greedy rule."""
    word = alphabet == "abcde"
    toks = data.draw(st.lists(st.sampled_from(list(alphabet)), min_size=n, max_size=n))
    ans = data.draw(st.one_of(st.permutations(toks), st.lists(st.sampled_from(list(alphabet) + ["z", "好"]),
                                                            min_size=max(0, n - 1), max_size=n + 1)))
    join = " ".join if word else "".join
    orig = shuffle.Original.of(join(toks))
    answer = join(ans)
    assert shuffle.kept_numpy(orig, answer) == shuffle.kept_python(orig, shuffle.tokens(answer))


@settings(max_examples=500, deadline=None)
@given(text=st.one_of(st.text(st.sampled_from(list("abZ '-_1.,!?;:\"()\t\n\x0bé") + ["ﬁ", "\u00a0"]), max_size=60),
                      any_text))
def test_length_word_count_fast_path_equals_official_rule(text):
    words = re.findall(r"\b[\w'-]+\b", text)
    want = sum(1 for w in words if re.fullmatch(r"[a-zA-Z]+(?:[-'][a-zA-Z]+)*", w))
    if not re.search(r"[\u4e00-\u9fff\uac00-\ud7a3]", text):
        assert length.count_units(text) == want


@settings(max_examples=500, deadline=None)
@given(text=st.one_of(st.text(st.sampled_from(list("abZ09 '-_.,!?;:\"()\t\n\x0bé") + ["ﬁ", "\u00a0"]), max_size=60),
                      any_text))
def test_word_tokens_fast_path_equals_regex(text):
    assert text_mod.words(text) == re.findall(r"\b[\w'-]+\b", text)


@settings(max_examples=500, deadline=None)
@given(text=st.one_of(st.lists(st.sampled_from(list("noNOab 不是好人,.。:'\"‘’“”;、İK") + ["no", "No", "不是"]),
                               max_size=40).map("".join), any_text))
def test_diff_cleaning_and_tokens_equal_the_plain_rule(text):
    plain = re.sub(r"\bno\b", "", text.lower().replace("不是", ""), flags=re.IGNORECASE)
    for ch in ",.。:：、；;\"'‘’“”":
        plain = plain.replace(ch, "")
    assert diff.clean_text(text) == plain.lower().strip()
    toks = set(re.findall(r"[\u4e00-\u9fa5]|[a-zA-Z]+", plain))
    assert diff.two_tokens(plain) == (toks if len(toks) == 2 else None)


def adversarial(rng: random.Random) -> list:
    big = 1 << 20
    out = [
        "", " ", "<answer>", "</answer>", "<answer></answer>", "<answer><answer>1</answer>", "**", "***",
        "*" * 10001, "**" * 50000, "<answer>" * 20000, "</answer>" * 20000, "<answer>**" * 10000,
        "9" * 10000, tag("9" * 10000), tag("1" * 100000 + " " + "2" * 100000), tag("\x00\ud7a3\U0010ffff"),
        "x" * big, tag("a" * big), tag("가" * 300000), tag("好" * 300000), "'" * 50000, tag("'" * 50000),
        tag("a'" * 50000), tag("-a" * 50000), tag("no " * 20000), tag("'x' " * 20000), tag('"' * 50000),
        tag("a b " * 100000), tag("CAB" * 100000), tag("\u0130" * 10000), "\ufeff" + tag("7"),
        tag(" ".join("abcdefgh") * 5000), tag("٣" * 5000), tag("１２３"), None, 12345, 3.5,
        [{"role": "assistant", "content": tag("3")}], [{"role": "assistant", "content": None}], [], [None],
        {"content": "7"}, [{"role": "assistant", "content": [{"type": "text", "text": tag("3")}, {"x": 1}]}],
    ]
    for _ in range(150):
        out.append("".join(chr(rng.randrange(1, 0x2FFFF)) for _ in range(rng.randrange(0, 400))))
        out.append("".join(rng.choice(["<answer>", "</answer>", "**", "a", "1", " ", "'", ",", "好"])
                           for _ in range(rng.randrange(0, 60))))
    return out


def test_fuzz_never_raises_and_is_fast():
    rng = random.Random(0)
    comps = adversarial(rng)
    recs = EXAMPLES + [
        dict(EXAMPLES[0], answer="9" * 10000), dict(EXAMPLES[2], prompt="write " + "9" * 10000 + " words"),
        dict(EXAMPLES[9], answer="x" * 5000), dict(EXAMPLES[7], variation=None), dict(EXAMPLES[7], variation=3),
        dict(EXAMPLES[6], answer=";" * 1000), {"type": "BOGUS"}, {}, {"type": "NUMBER"},
    ]
    huge_prompts = [dict(EXAMPLES[4], prompt="Input: " + "好" * 200000),   # beyond the memo's size limit
                    dict(EXAMPLES[4], prompt="Input: " + "ab " * 100000),
                    dict(EXAMPLES[2], prompt="Write " + "x " * 500000 + "7 words")]
    pairs = [(r, c) for r in recs for c in comps]
    pairs += [(r, c) for r in huge_prompts for c in comps[:16] + [tag("好" * 200000), tag("ab " * 100000)]]
    worst, slowest = 0.0, None
    for r, c in pairs:
        # this thread's CPU time, not the wall clock: on a shared machine a wall-clock call once took 1.29 s while
        # another process held the core (load 5), though the scorer did the same work
        t = time.thread_time()
        s = score(r, c)
        dt = time.thread_time() - t
        if dt > worst:
            worst, slowest = dt, (r.get("type"), repr(c)[:40])
        check(s)
    # a 1 MB completion takes tens of milliseconds; the bound is loose for a shared, busy CI machine
    assert worst < 1.0, f"slowest call {worst:.3f}s on {slowest}"
