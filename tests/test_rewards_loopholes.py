"""The training rewards cannot be gamed: hedges, echoes and constants are paid no more than a uniform
random guess among the valid answers, while the official verdict (accuracy_coarse) keeps its loopholes.

The bound, for a row whose label is drawn uniformly from its valid answers V: for any answer a chosen
without the label, E_g[fine(a, g)] <= E_{g, v}[fine(v, g)] (a random guess). Hypothesis builds rows of
every scoring type, their V, and hedges (every option at once in any order and separator), echoes of the
prompt and constants; the fixture test runs bench/loophole_audit.py's audit over every official row."""
import importlib.util
import itertools
import statistics

import pytest
from conftest import ROOT
from hypothesis import assume, given, settings, strategies as st

import rewards
from rewards import score
from rewards.match_answer import levenshtein

EPS = 1e-9


def tag(s: str) -> str:
    return f"<answer>{s}</answer>"


def mean(xs) -> float:
    return statistics.fmean(list(xs))


def random_guess(row: dict, options: list[str]) -> float:
    return mean(score(dict(row, answer=g), tag(v)).fine for g in options for v in options)


def paid(row: dict, options: list[str], answer: str) -> float:
    return mean(score(dict(row, answer=g), tag(answer)).fine for g in options)


def check_bound(row: dict, options: list[str], answers: list[str]) -> None:
    rand = random_guess(row, options)
    for a in answers:
        assert paid(row, options, a) <= rand + EPS, (row.get("task"), a[:80], paid(row, options, a), rand)
    for g in options:  # and a gold answer is paid in full
        s = score(dict(row, answer=g), tag(g))
        assert (s.coarse, s.strict, s.fine) == (1.0, 1.0, 1.0), g


SEPS = st.sampled_from([" ", ", ", "\n", " or ", "/", "; ", "、", " | "])
word = st.text("abcdefghijklmnop", min_size=1, max_size=6)


def hedges(options: list[str], sep: str, order: list[int]) -> list[str]:
    """Every option at once (two orders), and the first two options as a pair."""
    shuffled = [options[i % len(options)] for i in order] or options
    return [sep.join(options), sep.join(reversed(options)), sep.join(dict.fromkeys(shuffled + options)),
            sep.join(options[:2])]


@settings(max_examples=60, deadline=None)
@given(sep=SEPS, order=st.permutations(range(6)), const=st.sampled_from(["ABC", "CAB", "A", "BAC CAB", "yes"]))
def test_sort_hedges(sep, order, const):
    options = ["".join(p) for p in itertools.permutations("ABC")]
    row = {"type": "MATCH_ANSWER", "task": "sort_lengths",
           "prompt": "Given three English sentences, sort them...\nA: one two\nB: one\nC: one two three"}
    check_bound(row, options, hedges(options, sep, list(order)) + [const, row["prompt"]])
    assert score(dict(row, answer="CAB"), tag("ABC ACB BAC BCA CAB CBA")).loophole  # official passes


@settings(max_examples=60, deadline=None)
@given(sep=SEPS, order=st.permutations(range(7)))
def test_dot_class_hedges(sep, order):
    options = ["digit", "latin", "hanzi", "hangul", "kana", "greek", "symbol"]
    row = {"type": "MATCH_ANSWER", "task": "dot_matrix", "subtask": "bitmap_type_classification",
           "prompt": "Please classify ...\n" + "\n".join(f"- {o} (...)" for o in options) + "\nbitmap: [0, 1]"}
    check_bound(row, options, hedges(options, sep, list(order)) + [row["prompt"], "symbol."])


@settings(max_examples=40, deadline=None)
@given(ps=st.lists(word, min_size=2, max_size=4, unique=True), sep=SEPS)
def test_combine_hedges(ps, sep):
    options = list(dict.fromkeys("".join(p) for p in itertools.permutations(ps)))
    assume(len(options) > 1)
    row = {"type": "MATCH_ANSWER", "task": "component_split", "subtask": "combine",
           "prompt": "Combine " + ", ".join(f"{{{p}}}" for p in ps) + " into one word."}
    check_bound(row, options, hedges(options, sep, list(range(len(options)))) + ["".join(ps), row["prompt"]])


@settings(max_examples=40, deadline=None)
@given(labels=st.lists(st.text("abcdefghij", min_size=6, max_size=10), min_size=2, max_size=6, unique=True),
       shown=st.text("abcdefghij𝖆𝖇𝖈", min_size=1, max_size=10), sep=SEPS, const=word)
def test_variant_normalize_hedges(labels, shown, sep, const):
    """Near-miss credit stays: but only originals that are no near misses of each other are valid answers."""
    assume(all(levenshtein(a, b) > max(1, min(len(a), len(b)) // 4) for a, b in itertools.combinations(labels, 2)))
    row = {"type": "MATCH_ANSWER", "task": "variant_normalize",
           "prompt": f"The following is an English word where some letters have been confused.\nWord: {shown}"}
    check_bound(row, labels, hedges(labels, sep, list(range(len(labels)))) + [shown, row["prompt"], const])


@settings(max_examples=40, deadline=None)
@given(labels=st.lists(st.text("abcdefghij", min_size=4, max_size=9), min_size=2, max_size=6, unique=True),
       shown=st.text("abcdefghij", min_size=1, max_size=9), sep=SEPS, const=word)
def test_exact_hedges(labels, shown, sep, const):
    """EXACT (beyond TASE): near-miss credit only when closer than an echo of the prompt."""
    assume(all(levenshtein(a, b) > max(1, min(len(a), len(b)) // 4) for a, b in itertools.combinations(labels, 2)))
    row = {"type": "EXACT", "task": "execute", "prompt": f"Reverse the word {shown}."}
    check_bound(row, labels, hedges(labels, sep, list(range(len(labels)))) + [shown, row["prompt"], const])


@settings(max_examples=40, deadline=None)
@given(w=st.text("abcdefgh", min_size=4, max_size=9), k=st.integers(2, 3), sep=SEPS)
def test_split_hedges(w, k, sep):
    assume(len(w) > k)
    options = list(dict.fromkeys(", ".join(w[i:j] for i, j in zip((0, *c), (*c, len(w)), strict=False))
                                 for c in itertools.combinations(range(1, len(w)), k - 1)))
    row = {"type": "SPLIT", "prompt": f"Split {w} into " + ", ".join(["from x to y"] * k) + "."}
    check_bound(row, options, hedges(options, sep, list(range(len(options)))) + [w, w + " " + options[0]])
    s = score(dict(row, answer=options[0]), tag(w))  # the unsplit word: the official loophole
    assert (s.coarse, s.strict, s.fine) == (1.0, 0.0, 0.0)


@settings(max_examples=40, deadline=None)
@given(n=st.integers(1, 30), sep=SEPS, const=st.integers(0, 40))
def test_number_hedges(n, sep, const):
    options = [str(i) for i in range(n + 1)]
    row = {"type": "NUMBER", "prompt": f"How many times does 'a' appear in 'banana'? ({n} at most)"}
    check_bound(row, options, hedges(options, sep, list(range(n + 1))) + [str(const), row["prompt"],
                                                                          f"{const - 1} or {const}"])


@settings(max_examples=40, deadline=None)
@given(toks=st.lists(st.text("abcdefgh", min_size=2, max_size=5), min_size=3, max_size=7, unique=True),
       variation=st.sampled_from(["modify", "delete", "修改"]), sep=SEPS, i=st.integers(0, 6))
def test_diff_hedges(toks, variation, sep, i):
    """Labels: one token of seq1; the row shows one token replaced (modify) or deleted."""
    seq2 = toks[1:] + (["zz"] if variation != "delete" else [])
    row = {"type": "DIFF", "variation": variation,
           "prompt": f"Which word is different?\nseq1: {' '.join(toks)}\nseq2: {' '.join(reversed(seq2))}"}
    options = ["yes"] + sorted(set(toks) | set(seq2))
    pairs = [f"'{toks[i % len(toks)]}' '{toks[(i + 1) % len(toks)]}'", f"{toks[0]} {toks[-1]}"]
    check_bound(row, options, hedges(options, sep, list(range(len(options)))) + pairs + [row["prompt"]])


@settings(max_examples=30, deadline=None)
@given(n=st.integers(1, 40), k=st.integers(0, 80), zh=st.booleans())
def test_length_constant_text(n, k, zh):
    """A text of one fixed length is paid on one target only: exactly a random length's chance."""
    text = ("好" if zh else "w ") * k
    total = sum(score({"type": "LENGTH", "prompt": f"Write {m} words."}, tag(text)).fine for m in range(1, n + 1))
    assert total <= 1.0


@settings(max_examples=30, deadline=None)
@given(toks=st.lists(st.text("abcdefgh", min_size=1, max_size=4), min_size=4, max_size=9, unique=True))
def test_shuffle_echoes(toks):
    """Echo, reversal and a list of several orders earn nothing; a random order earns on average more."""
    line = " ".join(toks)
    row = {"type": "SHUFFLE", "prompt": f"Please shuffle the following words completely.\nInput: {line}"}
    for a in (line, " ".join(reversed(toks)), line + " " + " ".join(reversed(toks)), row["prompt"]):
        assert score(row, tag(a)).fine == 0.0, a


def test_trl_rewards_pay_nothing_for_the_four_issue_hedges():
    """The four loopholes of the issue, through the TRL reward functions: the official verdict (the
    benchmark) passes each, the training rewards pay 0."""
    coarse, strict, fine = rewards.get_reward_funcs(["accuracy_coarse", "accuracy_strict", "accuracy_fine"])
    cols = {
        "type": ["SPLIT", "MATCH_ANSWER", "MATCH_ANSWER", "MATCH_ANSWER"],
        "task": ["component_split", "sort_lengths", "component_split", "dot_matrix"],
        "subtask": ["split", "", "combine", "bitmap_type_classification"],
        "answer": ["irritat, ion", "CAB", "irritation", "symbol"],
        "question": ["Split irritation into from i to t, from i to n.", "Sort A: x\nB: y\nC: z",
                     "Combine {irrit}, {on}, {ati} into one word.", "Please classify ... bitmap"],
    }
    perms = " ".join("".join(p) for p in itertools.permutations(["irrit", "on", "ati"]))
    comps = [tag("irritation"), tag("ABC ACB BAC BCA CAB CBA"), tag(perms),
             tag("digit latin hanzi hangul kana greek symbol")]
    prompts = [[{"role": "user", "content": q}] for q in cols["question"]]
    assert coarse(prompts, comps, **cols) == [1.0] * 4
    assert strict(prompts, comps, **cols) == [0.0] * 4
    assert fine(prompts, comps, **cols) == [0.0] * 4
    gold = [tag("irritat, ion"), tag("CAB"), tag("irritation"), tag("symbol")]
    assert strict(prompts, gold, **cols) == fine(prompts, gold, **cols) == [1.0] * 4
    assert strict.__name__ == "accuracy_strict" and fine.__name__ == "accuracy_fine"


def _audit_module():
    spec = importlib.util.spec_from_file_location("loophole_audit", ROOT / "bench" / "loophole_audit.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_official_rows_audit(fixture_root):
    """Every official fixture row: gold answers get 1.0, and no answer-independent strategy (echoes, every
    option, the unsplit word, every permutation, the best constant of each file) is paid more than a
    random guess; the four loopholes of the issue pass the official verdict on every row of their file."""
    from synth.readers import load_official

    audit = _audit_module()
    records = list(load_official(fixture_root))
    lines, bad = audit.audit(records)
    assert not bad, bad
    cell = {(x["file"].split("/", 1)[-1], x["strategy"]): x for x in lines}
    for key in [("component_split/en_split.csv", "unsplit word"), ("sort_lengths/english.csv", "every option"),
                ("component_split/en_combine.csv", "every permutation of the pieces"),
                ("dot_matrix/bitmap_type_classification.csv", "every option")]:
        assert cell[key]["official"] == 100.0 and cell[key]["strict"] == 0.0 and cell[key]["fine"] == 0.0, key
    assert len({x["file"] for x in lines}) == 36


@pytest.mark.parametrize("bad", ["", "official:/nonexistent"])
def test_audit_cli_bad_input(bad, capsys):
    audit = _audit_module()
    assert audit.main(["--data", bad or "missing.jsonl"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ")


def test_gold_and_sft_answers_of_synthetic_rows_pass_strictly():
    """Training data: every gold completion and every SFT warm-up answer of generated rows (each task,
    language and subtask) that the official verdict passes, the strict verdict passes too (fine 1.0)."""
    import synth
    from common.record import TASKS
    from synth.gold import GoldError, gold_completion, sft_completion

    checked, bad = 0, []
    for task, info in TASKS.items():
        for lang in ["mul"] if info.no_lang else ["en", "zh", "ko"]:
            for sub in info.subtasks:
                try:
                    rows = list(itertools.islice(synth.generate(task, lang, 12, 3, subtask=sub or None), 12))
                except Exception:  # noqa: BLE001 - a cell the generator does not offer (e.g. execute in zh)
                    continue
                for r in rows:
                    for build in (gold_completion, sft_completion):
                        try:
                            comp = build(r)
                        except GoldError:
                            continue
                        if comp is None:
                            continue
                        s = score(r, comp)
                        checked += 1
                        if s.valid and s.coarse == 1.0 and (s.strict, s.fine) != (1.0, 1.0):
                            bad.append((r["id"], comp[-60:]))
    assert checked > 1500 and not bad, bad[:5]
