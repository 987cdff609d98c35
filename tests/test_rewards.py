"""rewards: official verdicts on the fixture rows, every documented quirk by hand, worked examples of
the fine credit, the TRL wiring. Properties and fuzzing: test_rewards_props.py; the differential test
against the official evaluator: test_rewards_official.py."""
import dataclasses
import random
import re
from collections import Counter

import pytest

import rewards
import synth
from rewards import Score, score
from synth.readers import load_official

CJK = re.compile(r"[\u4e00-\u9fff]")
HANGUL = re.compile(r"[\uac00-\ud7a3]")


def tag(s: str) -> str:
    return f"<answer>{s}</answer>"


# --- an independent oracle for REORD answers, written from the paper's rule -------------------
def reord_tokens(s: str) -> list[str]:
    s = s.lower().strip()
    if CJK.search(s):
        return CJK.findall(s)
    if HANGUL.search(s):
        return HANGUL.findall(s)
    return re.findall(r"\b[\w'-]+\b", s)


def reord_ok(orig: list[str], ans: list[str]) -> bool:
    """Same multiset; greedy first-unused position mapping; no consecutive pair maps to neighbours."""
    if Counter(orig) != Counter(ans):
        return False
    used: set[int] = set()
    pos = []
    for t in ans:
        p = next(i for i, o in enumerate(orig) if o == t and i not in used)
        used.add(p)
        pos.append(p)
    return all(abs(a - b) != 1 for a, b in zip(pos, pos[1:], strict=False))


def reord_answer(prompt: str, seed: int = 0) -> str:
    """A valid shuffle of a prompt's input line, found by seeded random search with the oracle."""
    line = re.search(r"[:：]\s*([^\n\r]*)", prompt).group(1)
    toks = reord_tokens(line)
    sep = "" if (CJK.search(line) or HANGUL.search(line)) else " "
    rng = random.Random(seed)
    for _ in range(20000):
        cand = toks[:]
        rng.shuffle(cand)
        if reord_ok(toks, cand):
            return sep.join(cand)
    raise AssertionError(f"no valid shuffle found for {line!r}")


def gold_completion(r: dict) -> str:
    """A correct completion for a fixture or synth record, constructed without the scorer."""
    if r["type"] == "SHUFFLE":
        return tag(reord_answer(r["prompt"]))
    if r["type"] == "LENGTH":
        n = int(re.search(r"\d+", r["prompt"]).group())
        if CJK.search(r["prompt"]):
            return tag("好" * n)
        if HANGUL.search(r["prompt"]):
            return tag("가" * n)
        return tag(" ".join(["word"] * n))
    return tag(r["answer"])


@pytest.fixture(scope="module")
def fixture_rows(fixture_root):
    rows = list(load_official(fixture_root))
    assert {r["type"] for r in rows} == {"NUMBER", "LENGTH", "SHUFFLE", "SPLIT", "DIFF", "MATCH_ANSWER"}
    return rows


def test_every_fixture_row_gold_scores_one(fixture_rows):
    for r in fixture_rows:
        s = score(r, gold_completion(r))
        assert (s.coarse, s.fine, s.valid) == (1.0, 1.0, True), (r["id"], s)
        # the bold fallback and chat-message completions give the same verdict
        inner = gold_completion(r)[len("<answer>") : -len("</answer>")]
        assert score(r, f"Reasoning first.\n**{inner}**").coarse == 1.0, r["id"]
        assert score(r, [{"role": "assistant", "content": gold_completion(r)}]).coarse == 1.0, r["id"]


WRONG = {"NUMBER": tag("99999"), "MATCH_ANSWER": tag("zzzz"), "SPLIT": tag("q, q"), "DIFF": tag("zzzz"),
         "SHUFFLE": tag("nothing like it"), "LENGTH": tag("")}


def test_known_wrong_answers_score_zero(fixture_rows):
    for r in fixture_rows:
        for comp in (WRONG[r["type"]], "", "I do not know.", tag("")):
            s = score(r, comp)
            assert s.coarse == 0.0 and s.fine < 1.0 and s.valid, (r["id"], comp, s)
        if r["type"] == "SHUFFLE":  # the input itself, unchanged, is the worst shuffle
            line = re.search(r"[:：]\s*([^\n\r]*)", r["prompt"]).group(1)
            assert score(r, tag(line)) == Score(0.0, 0.0, line.strip()), r["id"]


def test_synth_gold_answers_score_one():
    for r in synth.generate("all", "all", 400, 5):
        comp = tag(r["meta"]["solution"]) if r["type"] == "SHUFFLE" else gold_completion(r)
        s = score(r, comp)
        assert (s.coarse, s.fine, s.valid) == (1.0, 1.0, True), (r["id"], s)


def test_sft_targets_score_one():
    """The SFT warm-up's targets (synth.gold.sft_completion: reasoning line + tagged gold) are correct
    answers for every task, official and paraphrased wording alike."""
    from synth.gold import sft_completion

    for paraphrase in (False, True):
        rows = list(synth.generate("all", "all", 200, 5, paraphrase=paraphrase))
        comps = [sft_completion(r) for r in rows]
        for r, c in zip(rows, comps, strict=False):
            assert c is not None, r["id"]  # synth rows carry what a target needs (REORD solution, LENOP target)
            s = score(r, c)
            assert (s.coarse, s.valid) == (1.0, True), (r["id"], c, s)


# --- extraction ----------------------------------------------------------------------------------
@pytest.mark.parametrize("text,want", [
    ("a <answer> 5 </answer> b <answer>6</answer>", "5"),        # first pair, stripped
    ("**7** and <answer>8</answer>", "8"),                      # tags beat an earlier bold answer
    ("**7** text **8**", "7"),                                  # first bold
    ("<answer>unclosed **9**", "9"),                            # unclosed tag: bold fallback
    ("<answer><answer>1</answer></answer>", "<answer>1"),       # nested: first open to first close
    ("<answer>a\nb</answer>", "a\nb"),                          # across lines
    ("</answer><answer>x</answer>", "x"),
    ("<ANSWER>x</ANSWER>", ""),                                 # case-sensitive
    ("***x**", "*x"),
    ("****", ""),
    ("**", ""),
    ("nothing", ""),
    ("", ""),
    (None, ""),
])
def test_extraction_rules(text, want):
    assert rewards.extract_answer(text) == want


# --- hand-checked official quirks, type by type ---------------------------------------------------
@pytest.mark.parametrize("comp,label,coarse", [
    ("<answer>It appears 12 times, not 3</answer>", "3", 1.0),  # the LAST integer of the answer
    ("<answer>3 or maybe 12</answer>", "3", 0.0),
    ("<answer>05</answer>", "5", 0.0),                          # compared as digit strings
    ("<answer>5</answer>", "5 times (or 6)", 1.0),               # the FIRST integer of the label
    ("<answer>five</answer>", "5", 0.0),
    ("<answer>3.5</answer>", "5", 1.0),                          # "3.5" has integers 3 and 5
    ("<answer>-4</answer>", "4", 1.0),                           # no sign
    ("<answer>٣</answer>", "3", 0.0),                            # Unicode digits are digits, but not "3"
    ("the count is 4", "4", 0.0),                               # nothing extracted: no integer
    ("<answer>4</answer>", "four", 0.0),                         # no label integer
    ("<answer>4</answer>", "", 0.0),
])
def test_number_quirks(comp, label, coarse):
    s = score({"type": "NUMBER", "prompt": "q", "answer": label}, comp)
    assert s.coarse == coarse and s.valid


def test_number_fine_is_the_verdict():
    # no credit for a near count: it paid a constant near the middle of the range on every row
    ex = {"type": "NUMBER", "prompt": "q", "answer": "7"}
    assert [score(ex, tag(a)).fine for a in ("7", "8", "6", "07", "no idea", "1 2 3 4 5 6 7")] == [1, 0, 0, 0, 0, 1]
    assert score(ex, tag("1 2 3 4 5 6 7")).strict == 1.0        # only the last integer counts: one guess


def test_number_huge_digit_strings():
    g = "9" * 10000
    ex = {"type": "NUMBER", "prompt": "q", "answer": g}
    assert score(ex, tag(g)) == Score(1.0, 1.0, g)
    near = "9" * 9999 + "8"
    assert score(ex, tag(near)) == Score(0.0, 0.0, near)
    assert score(ex, tag("1" + "0" * 10000)).fine == 0.0
    assert score({"type": "NUMBER", "prompt": "q", "answer": "3"}, tag("7" * 10000)).fine == 0.0


def test_match_answer_quirks():
    ex = {"type": "MATCH_ANSWER", "task": "sort_lengths", "prompt": "q", "answer": "CAB"}
    assert score(ex, tag("c, a, b")).coarse == 1.0         # ,。，:：；;、 and spaces stripped, lower-cased
    assert score(ex, tag("C，A；B、")).coarse == 1.0
    assert score(ex, tag("C-A-B")).coarse == 0.0           # other punctuation stays
    assert score(ex, tag("ABCABX")).coarse == 1.0          # substring test: "CAB" is inside
    assert score(ex, "CAB").coarse == 1.0                  # nothing extracted: raw equality...
    assert score(ex, "CAB ").coarse == 0.0                 # ...of the raw completion
    assert score(ex, "the answer is CAB").coarse == 0.0
    assert score(ex, "").coarse == 0.0
    assert score(dict(ex, answer=" CAB \n"), "CAB").coarse == 1.0   # the label is stripped first (CSV reader)
    assert score(dict(ex, answer=""), tag("anything")).coarse == 1.0  # empty label passes any answer
    assert score(dict(ex, answer=""), "anything").coarse == 0.0       # ...but not an untagged one
    comma = dict(ex, task="dot_matrix", answer=",")        # label inside the punctuation set: no cleaning
    assert score(comma, tag("a , b")).coarse == 1.0
    assert score(comma, tag("a b")).coarse == 0.0


def test_match_answer_fine():
    ex = {"type": "MATCH_ANSWER", "task": "sort_lengths", "prompt": "q", "answer": "CAB"}
    assert score(ex, tag("CBA")).fine == pytest.approx(0.6)   # 2 of 3 label pairs in order
    assert score(ex, tag("ACB")).fine == pytest.approx(0.6)
    assert score(ex, tag("BCA")).fine == pytest.approx(0.3)
    assert score(ex, tag("BAC")).fine == 0.0                   # reversed
    assert score(ex, tag("CA")).fine == 0.0                    # truncated orders earn nothing...
    assert score(ex, tag("CAA")).fine == 0.0                   # ...nor repeated letters
    assert score(ex, tag("xyz")).fine == 0.0
    # a random full order earns more on average than any truncation (the two-letter hack pays nothing)
    orders = ["CAB", "CBA", "ACB", "BCA", "BAC", "ABC"]
    assert sum(score(ex, tag(a)).fine for a in orders) / 6 > max(score(ex, tag(a)).fine for a in ("CA", "AB", "CB"))
    assert score(ex, "CBA").fine == 0.0                    # untagged misses get no credit
    var = {"type": "MATCH_ANSWER", "task": "variant_normalize", "prompt": "q", "answer": "学生在校园里努力学习。"}
    assert 0.7 < score(var, tag("学生在校圎里努力学习。")).fine < 0.9   # one variant left in
    combine = {"type": "MATCH_ANSWER", "task": "component_split", "subtask": "combine", "prompt": "q",
               "answer": "irritation"}
    assert score(combine, tag("irritatoin")).fine == 0.0       # combine stays binary (orders of pieces)
    for task in ("dot_matrix", "structure_riddle", ""):    # class names and riddles stay binary
        assert score(dict(ex, task=task), tag("CBA")).fine == 0.0
    long = score(ex, tag("CB" + "x" * 1_000_000))          # bounded work on a huge answer
    assert 0.0 <= long.fine < 0.9


def test_length_rules():
    ex = {"type": "LENGTH", "prompt": "Please randomly generate 5 English words with the topic of cat.", "answer": ""}
    assert score(ex, tag("one two three four five")).coarse == 1.0
    assert score(ex, tag("one two three four five 6 7 ... !")).coarse == 1.0  # digits, punctuation: no words
    assert score(ex, tag("well-known don't stop the rock")).coarse == 1.0     # hyphen and apostrophe words
    assert score(ex, tag("one two three four five_six")).coarse == 0.0         # "five_six" is no valid word
    assert score(ex, tag("一 two three four five six")).coarse == 0.0          # any CJK: count CJK only (1)
    assert score(ex, "one two three four five").coarse == 0.0                 # untagged: nothing extracted
    zh = {"type": "LENGTH", "prompt": "请给我随机生成5个中文汉字，主题为喜剧片", "answer": ""}
    assert score(zh, tag("今天，天气 good 很！")).coarse == 1.0               # CJK characters only
    ko = {"type": "LENGTH", "prompt": "정신 건강 주제로 5개의 한글 글자를 무작위로 생성해 주세요.", "answer": ""}
    assert score(ko, tag("안녕 하세요 abc ㅋㅋ")).coarse == 1.0                   # syllables, not jamo
    two = {"type": "LENGTH", "prompt": "Write 3 words, then at most 10 more.", "answer": ""}
    assert score(two, tag("a b c")).coarse == 1.0                               # the FIRST integer
    assert score({"type": "LENGTH", "prompt": "no number", "answer": ""}, tag("x")) == Score(0, 0, "x", valid=False)
    assert not score({"type": "LENGTH", "prompt": "write " + "9" * 5000 + " words"}, tag("x")).valid
    n50 = {"type": "LENGTH", "prompt": "Write 50 words.", "answer": ""}
    # fine = the verdict: credit for a near length paid a text of one fixed length on every row
    assert [score(n50, tag(" ".join(["w"] * k))).fine for k in (50, 49, 45, 25, 100, 0)] == [1, 0, 0, 0, 0, 0]


def test_shuffle_rules():
    sh = {"type": "SHUFFLE", "prompt": "Shuffle.\nInput: a b c d e", "answer": ""}
    assert score(sh, tag("b d a c e")).coarse == 1.0
    assert score(sh, tag("B, D, A, C, E!")).coarse == 1.0     # lower-cased, words only
    assert score(sh, tag("a b c d e")).fine == 0.0
    assert score(sh, tag("a c e d b")).fine == pytest.approx(0.75)
    assert score(sh, tag("b d a c")).fine == 0.0              # multiset differs
    assert score(sh, tag("b d a c e e")).fine == 0.0
    # the official greedy mapping: "x x z y" could be mapped x->2, x->0, z->3, y->1 without neighbours,
    # but the rule maps each token to its FIRST unused position (0, 2, 3, 1): "x z" are neighbours
    dup = {"type": "SHUFFLE", "prompt": "Input: x y x z", "answer": ""}
    assert score(dup, tag("x x z y")).coarse == 0.0
    assert score(dup, tag("x x z y")).fine == pytest.approx(2 / 3)
    # full-width colon
    assert score({"type": "SHUFFLE", "prompt": "输入：分差控制在"}, tag("差制分在控")).coarse == 1.0
    assert score({"type": "SHUFFLE", "prompt": "no colon here"}, tag("a")).coarse == 0.0
    assert score({"type": "SHUFFLE", "prompt": "Input:"}, tag("")).coarse == 1.0      # empty vs empty: passes
    assert score({"type": "SHUFFLE", "prompt": "Input: a\nb c d"}, tag("a")).coarse == 1.0  # to the line end


def test_split_rules():
    ex = {"type": "SPLIT", "prompt": "q", "answer": "人,列;亻,列"}
    assert score(ex, tag("亻 , 列")).coarse == 1.0
    assert score(ex, tag("列人")).coarse == 1.0                # order and separators do not matter
    assert score(ex, tag("The parts are 亻 and 列.")).coarse == 1.0
    assert score(ex, tag("亻,歹")).fine == 0.0
    assert score(ex, tag("歹")).fine == 0.0
    en = {"type": "SPLIT", "prompt": "q", "answer": "irritat, ion"}
    assert score(en, tag("irrit at, ion")).coarse == 1.0      # spaces removed from the answer
    assert score(en, tag("irrita, tio")).fine == 0.0
    assert score(en, tag("irritat, io")).fine == 0.0


def test_split_strict():
    ex = {"type": "SPLIT", "prompt": "请将“例”拆分为可重新组合的基本部件.", "answer": "人,列;亻,列"}
    for ok in ("人,列", "亻 , 列", "亻+列", "亻、列。", "人,列;亻,列", "亻，列"):   # one or more right decompositions
        assert (score(ex, tag(ok)).strict, score(ex, tag(ok)).fine) == (1.0, 1.0), ok
    for hedge in ("列人", "列, 人", "The parts are 亻 and 列.", "人,列;口,列", "人, 列, 亻"):
        s = score(ex, tag(hedge))
        assert (s.coarse, s.strict, s.fine, s.loophole) == (1.0, 0.0, 0.0, True), hedge
    en = {"type": "SPLIT", "prompt": "Split irritation into from i to t, from i to n.", "answer": "irritat, ion"}
    s = score(en, tag("irritation"))                          # the unsplit word: the official loophole
    assert (s.coarse, s.strict, s.fine) == (1.0, 0.0, 0.0)
    assert score(en, tag("irritat ion")).strict == 1.0
    assert score(en, tag("ion, irritat")).strict == 0.0       # parts that do not rebuild the word in order


def test_diff_rules():
    d = {"type": "DIFF", "prompt": "q", "answer": "Eurasia", "variation": "modify"}
    assert score(d, tag("'Eurasia' was changed to 'Asia'")).coarse == 1.0
    assert score(d, tag("Eurasia Asia")).coarse == 1.0                  # exactly two distinct tokens
    assert score(d, tag("Eurasia or Asia")).coarse == 0.0               # three tokens
    assert score(d, tag("'Eurasia', 'Asia', 'Africa'")).coarse == 0.0   # three quoted strings
    assert score(dict(d, variation="修改"), tag("'Eurasia' to 'Asia'")).coarse == 1.0
    assert score(dict(d, variation="MODIFY"), tag("'Eurasia' to 'Asia'")).coarse == 1.0
    for v in ("delete", "add", "unchanged", "删除", "수정", ""):       # no special case for the others
        assert score(dict(d, variation=v), tag("'Eurasia' to 'Asia'")).coarse == 0.0
    assert score(dict(d, variation=None), tag("Asia")) == Score(0.0, 0.0, "Asia", valid=False)  # official raises
    assert score(dict(d, variation=None), tag("eurasia")).coarse == 1.0  # ...but only after a miss
    yes = {"type": "DIFF", "prompt": "q", "answer": "yes", "variation": "unchanged"}
    assert score(yes, tag("Yes.")).coarse == 1.0
    assert score(yes, tag("no, yes")).coarse == 1.0                     # the word "no" is deleted
    assert score(yes, tag("not yes")).coarse == 0.0
    assert score({"type": "DIFF", "prompt": "q", "answer": "是", "variation": "不变"}, tag("“是”")).coarse == 1.0
    assert score({"type": "DIFF", "prompt": "q", "answer": "是", "variation": "不变"}, tag("不是")).coarse == 0.0
    assert score(d, tag("Asia")).fine == 0.0


def test_diff_strict_modify():
    """The official modify rules pass two guesses that include the label; strict wants the real pair."""
    d = {"type": "DIFF", "answer": "Eurasia", "variation": "modify",
         "prompt": "Are the words ... which word is different?\nseq1: the Eurasia group won\nseq2: group won Asia the"}
    for ok in ("Eurasia", "'Eurasia' was changed to 'Asia'", "Eurasia Asia", "The word 'Eurasia'"):
        assert (score(d, tag(ok)).strict, score(d, tag(ok)).fine) == (1.0, 1.0), ok
    for hedge in ("'Eurasia' 'group'", "Eurasia group", "'the' or 'Eurasia'"):
        s = score(d, tag(hedge))
        assert (s.coarse, s.strict, s.fine) == (1.0, 0.0, 0.0), hedge
    zh = {"type": "DIFF", "answer": "抖", "variation": "修改", "prompt": "...\nseq1: 址动抖话\nseq2: 话动址抢"}
    assert score(zh, tag("抖 抢")).strict == 1.0 and score(zh, tag("抖 动")).loophole


def test_exact_rules():
    ex = {"type": "EXACT", "task": "execute", "prompt": "q", "answer": "c h e v r o n"}
    assert score(ex, tag("C  h e v r o n")).coarse == 1.0
    assert score(ex, tag("c h e v r o n x")).coarse == 0.0
    # echo-relative credit: d0 = 7 (the prompt "q" holds nothing of "chevron"), d = 1 -> 0.9 * 6/7
    assert score(ex, tag("c h e v r o m")).fine == pytest.approx(0.9 * 6 / 7)
    assert score(ex, tag("c h e x x x x")).fine == 0.0         # not a near miss (4 of 7 wrong)
    spell = dict(ex, prompt="Spell chevron letter by letter.")
    assert score(spell, tag("c h e v r o m")).fine == 0.0      # the prompt already holds "chevron": d0 = 0
    rev = {"type": "EXACT", "task": "execute", "prompt": "Reverse chevron", "answer": "norvehc"}
    assert score(rev, tag("chevron")).fine == 0.0              # the echo earns nothing
    assert score(rev, tag("norvehx")).fine == pytest.approx(0.9 * 3 / 4)   # d0 = 4, d = 1


def test_record_and_completion_shapes():
    assert score({"prompt": "q", "answer": "1"}, tag("1")) == Score(0.0, 0.0, "", valid=False)
    assert score({"type": "BOGUS"}, tag("1")) == Score(0.0, 0.0, "", valid=False)
    assert score({"type": ["NUMBER"]}, tag("1")).valid is False
    assert score(None, tag("1")).valid is False                          # type: ignore[arg-type]
    ex = {"type": "NUMBER", "answer": "3"}                                # no prompt: fine for NUMBER
    assert score(ex, tag("3")).coarse == 1.0
    assert score(ex, [{"role": "user", "content": "q"}, {"role": "assistant", "content": tag("3")}]).coarse == 1.0
    assert score(ex, [{"role": "assistant", "content": [{"type": "text", "text": tag("3")}]}]).coarse == 1.0
    assert score(ex, {"role": "assistant", "content": tag("3")}).coarse == 1.0
    assert score(ex, None).coarse == 0.0
    assert score(dict(ex, answer=None), tag("3")).coarse == 0.0
    with pytest.raises(dataclasses.FrozenInstanceError):
        score(ex, "x").coarse = 1.0                                       # type: ignore[misc]
    assert set(rewards.SCORERS) >= {"NUMBER", "LENGTH", "SHUFFLE", "SPLIT", "DIFF", "MATCH_ANSWER"}
    assert all(callable(f) and f.__module__.startswith("rewards.") for f in rewards.SCORERS.values())


# --- shaping and TRL wiring ------------------------------------------------------------------------
@pytest.mark.parametrize("comp,want", [
    (tag("7"), 1.0), ("think... " + tag("7") + " done", 1.0), (tag(" "), 0.5), ("<answer>7", 0.5),
    (tag("7") + tag("8"), 0.5), ("</answer>7<answer>", 0.5), ("it is **7**", 0.25), ("7", 0.0), ("", 0.0),
])
def test_format_reward(comp, want):
    assert rewards.format_score(comp) == want


def test_length_penalty():
    assert rewards.length_penalty("x" * 1500) == 0.0
    assert rewards.length_penalty("x" * 1750) == pytest.approx(-0.5)
    assert rewards.length_penalty("x" * 5000) == -1.0
    assert rewards.length_penalty("x" * 30, soft=10, hard=10) == -1.0
    short = rewards.make_length_penalty(10, 20)
    assert short.__name__ == "length_penalty"
    assert short(["p"] * 3, ["x" * 10, "x" * 15, [{"role": "assistant", "content": "x" * 25}]]) == [0.0, -0.5, -1.0]
    with pytest.raises(ValueError, match="soft <= hard"):
        rewards.make_length_penalty(20, 10)


def test_reward_funcs_trl_signature():
    names = ["accuracy_coarse", "accuracy_fine", "format", "length_penalty"]
    funcs = rewards.get_reward_funcs(names)
    assert [f.__name__ for f in funcs] == names
    assert rewards.get_reward_funcs("accuracy_fine, format") == funcs[1:3]
    chat = [{"role": "system", "content": "Put the final result inside <answer></answer>. Use 9 words."},
            {"role": "user", "content": "Please generate 3 English words."}]
    prompts = [chat, chat]
    comps = [[{"role": "assistant", "content": tag("a b c")}], [{"role": "assistant", "content": "a b"}]]
    cols = dict(type=["LENGTH", "LENGTH"], answer=["", ""], variation=["", ""], task=["sentence_length"] * 2,
                completion_ids=[[1], [2]], trainer_state=None)
    assert funcs[0](prompts, comps, **cols) == [1.0, 0.0]               # target from the USER message
    assert funcs[2](prompts, comps, **cols) == [1.0, 0.0]
    assert funcs[3](prompts, comps, **cols) == [0.0, 0.0]
    q = dict(cols, question=["Please generate 2 English words."] * 2)   # the raw row text wins
    assert funcs[0](prompts, [tag("a b"), tag("a b c d")], **q) == [1.0, 0.0]
    assert funcs[1](prompts, [tag("a b"), tag("a b c d")], **q) == [1.0, 0.0]
    p = dict(cols, prompt=["Please generate 4 English words."] * 2)     # a raw `prompt` column (non-TRL callers)
    assert funcs[0](prompts, [tag("a b c d"), tag("a")], **p) == [1.0, 0.0]
    mixed = dict(type=["NUMBER", "SHUFFLE", "EXACT"], answer=["3", "", "x"],
                 question=["How many?", "Input: a b c d", "?"])
    assert funcs[0](["p"] * 3, [tag("3"), tag("b d a c"), tag("x")], **mixed) == [1.0, 1.0, 1.0]
    assert funcs[1](["p"] * 3, [tag("4"), tag("a c b d"), tag("y")], **mixed)[2] == 0.0


def test_reward_funcs_refuse_silent_zeros():
    """No `type`, a short one or an unknown one would make every accuracy reward 0: an error instead."""
    from rewards.trl import RewardInputError

    acc = rewards.get_reward_funcs(["accuracy_coarse", "accuracy_fine"])
    comps = [tag("3"), tag("4")]
    for cols, msg in ((dict(answer=["3", "4"]), "no `type` column"),
                      (dict(type=["NUMBER"], answer=["3", "4"]), "1 values for 2"),
                      (dict(type="NUMBER", answer=["3", "4"]), "a str for 2"),
                      (dict(type=["NUMBER", "BOGUS"], answer=["3", "4"]), "row 1 .*unknown type 'BOGUS'")):
        for f in acc:
            with pytest.raises(RewardInputError, match=msg):
                f(["p", "p"], comps, **cols)
    assert rewards.get_reward_funcs(["format"])[0](["p", "p"], comps) == [1.0, 1.0]  # needs no type
    with pytest.raises(ValueError, match="no reward functions"):
        rewards.get_reward_funcs([])
    with pytest.raises(ValueError, match="no reward functions"):
        rewards.get_reward_funcs(" , ")
    with pytest.raises(ValueError, match="unknown reward function"):
        rewards.get_reward_funcs(["nope"])


def test_reward_funcs_pickle_under_their_logged_names():
    """Async GRPO ships the reward functions to its rollout child by pickle (by qualified name): a renamed
    __qualname__ (format_reward logged as "format") once broke that in the merged tree."""
    import pickle

    from rewards.trl import REWARD_FUNCS

    for name, f in REWARD_FUNCS.items():
        g = pickle.loads(pickle.dumps(f))
        assert g is f and g.__name__ == name


def test_one_reward_loader():
    """rewards.get_reward_funcs is the one loader (issue 61): it builds soft_overlong for the run's lengths, hands a
    name that is not ours to `other` (recipes/grpo_core/reward_funcs.load_reward_funcs passes its import-path loader),
    and the recipes' loader is a thin call of it: the same functions for the same names."""
    from recipes.grpo_core.reward_funcs import load_reward_funcs

    names = ["accuracy_fine", "soft_overlong", "format"]
    ours = rewards.get_reward_funcs(names, max_completion_length=100, overlong_cache=20)
    assert [f.__name__ for f in ours] == names and ours[0] is rewards.REWARD_FUNCS["accuracy_fine"]
    assert ours[1](completion_ids=[[1] * 90]) == [-0.5]  # L_max 100, L_cache 20: half-way down
    via = load_reward_funcs(names, 100, 20)
    assert [f.__name__ for f in via] == names and via[0] is ours[0] and via[2] is ours[2]
    seen: list[str] = []
    got = rewards.get_reward_funcs(["format", "pkg.mine"], other=lambda n: seen.append(n) or ours[0])
    assert seen == ["pkg.mine"] and got == [ours[2], ours[0]]
    with pytest.raises(ValueError, match="unknown reward function.*choose from: .*soft_overlong"):
        rewards.get_reward_funcs(["pkg.mine"])
