"""Real running text, the denylist, the 13-gram guard and `synth stats` (issue 15).

The denylist checks read the lists straight from their files (better-profanity's word list, our
synth/data/denylist_{zh,ko}.txt) and match with code written here, not with synth.denylist.
"""
import importlib.util
import json
import random
import re
from pathlib import Path

import numpy as np
import pytest
from conftest import ROOT, run_module

import synth

AWARENESS = [("freq_count", None), ("sentence_length", "count"), ("sentence_length", "generate"),
             ("diff_tokens", None), ("sort_lengths", None), ("shuffle_tokens", None)]


def _listed_terms(lang):
    """The denylist as its files have it (comments and blanks skipped; English lower-cased)."""
    if lang == "en":
        spec = importlib.util.find_spec("better_profanity")
        path = Path(next(iter(spec.submodule_search_locations))) / "profanity_wordlist.txt"
    else:
        path = ROOT / "synth" / "data" / f"denylist_{lang}.txt"
    lines = [l.strip() for l in path.read_text(encoding="utf-8").splitlines()]
    return [l.lower() for l in lines if l and not l.startswith("#")]


class _Oracle:
    """Independent matcher: English terms as whole letter/digit runs (phrases as consecutive runs),
    Chinese/Korean terms as substrings."""

    def __init__(self, lang):
        terms = _listed_terms(lang)
        self.lang = lang
        if lang == "en":
            self.words = {t for t in terms if re.fullmatch(r"[a-z0-9]+", t)}
            self.phrases = [re.findall(r"[a-z0-9]+", t) for t in terms if t not in self.words]
            self.phrases = [p for p in self.phrases if p]
            self.by_first: dict[str, list[str]] = {}  # a phrase can only be in a text that has its first word
            for p in self.phrases:
                self.by_first.setdefault(p[0], []).append(" ".join(p))
        else:
            self.terms = terms

    def hits(self, text):
        if self.lang != "en":
            return [t for t in self.terms if t in text]
        runs = re.findall(r"[a-z0-9]+", text.lower())
        found = [r for r in set(runs) & self.words]
        joined = " " + " ".join(runs) + " "
        found += [p for first in set(runs) & self.by_first.keys() for p in self.by_first[first] if f" {p} " in joined]
        return found


def test_denylist_files_are_real_lists():
    assert len(_listed_terms("en")) > 800 and "blow job" in _listed_terms("en")
    assert len(_listed_terms("zh")) >= 20 and len(_listed_terms("ko")) >= 20
    o = _Oracle("en")
    assert o.hits("a blow  job here") and not o.hits("class assignment")  # words, not substrings


@pytest.mark.parametrize("lang", ["en", "zh", "ko"])
def test_denylist_oracle_agrees_with_filter_on_planted_terms(lang):
    """The filter rejects what the oracle finds (a check that the two read the same list)."""
    from synth.denylist import denylist

    dl, o = denylist(lang), _Oracle(lang)
    for t in _listed_terms(lang)[:200]:
        text = f"before {t} after" if lang == "en" else f"前{t}后"
        assert o.hits(text) and dl.bad(text), t
    assert not dl.bad("the cat sat on the mat" if lang == "en" else "我们今天很高兴" if lang == "zh"
                      else "우리는 오늘 기쁘다")


@pytest.mark.slow
@pytest.mark.parametrize("lang", ["en", "zh", "ko"])
def test_100k_awareness_examples_contain_no_denylisted_term(lang):
    oracle = _Oracle(lang)
    per_cell = -(-100_000 // len(AWARENESS))
    n = 0
    for task, sub in AWARENESS:
        for r in synth.generate(task, lang, per_cell, 11, sub):
            assert not oracle.hits(r["prompt"]), (r["id"], oracle.hits(r["prompt"]))
            sol = (r.get("meta") or {}).get("solution")
            assert not (sol and oracle.hits(sol)), r["id"]
            n += 1
    assert n >= 100_000


@pytest.mark.parametrize("lang", ["en", "zh", "ko"])
def test_real_text_spans_are_substrings_of_the_normalised_source(lang):
    """SORT/LENOP spans come from the normalised stream (en: valid words joined by spaces; zh/ko:
    token characters and separators), REORD lines from its token-only form; and the stream's words
    come from the source sentences in order."""
    from synth.resources import EN_VALID, EN_WORDS, SEPS, real_text, source_sentences

    rt = real_text(lang)
    stream, tok_only = rt.text, rt.corpus.joined if lang != "en" else rt.text
    srcs = [s for _, sents in source_sentences(lang) for s in sents]
    if lang == "en":
        src_words = set(w for s in srcs for w in EN_WORDS.findall(s) if EN_VALID.fullmatch(w))
        assert set(stream.split(" ")) <= src_words
    else:
        src_chars = set("".join(srcs))
        assert set(stream) <= src_chars | set(SEPS)
    assert rt.sentences >= (5000 if lang == "en" else 1000)
    recs = [r for t, sub in AWARENESS if t in ("sentence_length", "sort_lengths", "shuffle_tokens")
            and sub != "generate" for r in synth.generate(t, lang, 40, 5, sub)]
    for r in recs:
        p = r["prompt"]
        if r["task"] == "sort_lengths":
            texts = re.findall(r"^[ABC]: (.*)$", p, re.M)
        elif r["task"] == "sentence_length":
            texts = [p.split("'" if lang == "en" else "‘", 1)[1].rsplit("'" if lang == "en" else "’", 1)[0]]
        else:
            texts = [re.search(r"[:：]\s*([^\n]*)$", p).group(1)]
        for t in texts:
            assert t in (tok_only if r["task"] == "shuffle_tokens" else stream), (r["id"], t[:60])
            if lang != "en" and r["task"] != "shuffle_tokens":
                assert t[0] not in SEPS and not re.search("[ ,，。；;：:]{3,}", t)  # the official cut rules


def test_text_source_unigram_is_the_ablation_and_both_are_deterministic():
    real = [r["prompt"] for r in synth.generate("sort_lengths", "en", 30, 2)]
    uni = [r["prompt"] for r in synth.generate("sort_lengths", "en", 30, 2, text_source="unigram")]
    assert real == [r["prompt"] for r in synth.generate("sort_lengths", "en", 30, 2)]
    assert uni == [r["prompt"] for r in synth.generate("sort_lengths", "en", 30, 2, text_source="unigram")]
    bigram = re.compile(r"\b(?:of|in|to|on|and) the\b")
    rate = lambda ps: sum(len(bigram.findall(p.lower())) for p in ps) / sum(len(p.split()) for p in ps)  # noqa: E731
    assert rate(real) > 1.5 * rate(uni)  # running prose vs a unigram sample
    with pytest.raises(synth.SynthError):
        next(synth.generate("sort_lengths", "en", 1, 0, text_source="bogus"))


def test_freq_targets_are_drawn_like_the_official_files():
    """en: list words (uniform), zh: characters by frequency (frequent ones dominate), ko: syllables
    uniformly (mostly ones rarely used in words)."""
    zh = "".join(r["prompt"].split("文本：", 1)[1] for r in synth.generate("freq_count", "zh", 200, 1))
    assert zh.count("的") / len(zh) > 0.02  # the most frequent character, about 4% of running Chinese
    ko = [r["meta"]["target"] for r in synth.generate("freq_count", "ko", 400, 1)]
    assert len(set(ko)) > 380
    en = [r["meta"]["target"] for r in synth.generate("freq_count", "en", 400, 1)]
    assert sum(t in ("the", "and", "of", "to", "a") for t in en) < 5  # uniform over the list, not by frequency


def _guard_records(tmp_path):
    from conftest import FIXTURES

    from synth.readers import load_data

    return list(load_data(f"official:{FIXTURES}"))


def test_ngram_guard_drops_a_planted_overlap_and_keeps_a_clean_example(tmp_path):
    from common.guard import Guard

    bench = _guard_records(tmp_path)
    g = Guard.from_records(bench)
    long_row = max((r for r in bench if r["task"] == "shuffle_tokens" and r["lang"] == "en"),
                   key=lambda r: len(r["prompt"]))
    content = long_row["prompt"].split("Input: ", 1)[1].split()
    assert len(content) >= 30
    clean = next(synth.generate("sentence_length", "en", 1, 3, "count"))
    assert g.reason(clean["prompt"]) is None
    planted = clean["prompt"].replace("is: '", "is: '" + " ".join(content[5:18]) + " ", 1)
    assert g.reason(planted) == "ngram"
    assert g.reason(clean["prompt"].replace("is: '", "is: '" + " ".join(content[5:17]) + " ", 1)) is None  # 12 words
    zh_row = max((r for r in bench if r["task"] == "shuffle_tokens" and r["lang"] == "zh"),
                 key=lambda r: len(r["prompt"]))
    zh_content = zh_row["prompt"].split("输入：", 1)[1]
    freq = next(synth.generate("freq_count", "zh", 1, 3))
    assert g.reason(freq["prompt"]) is None
    assert g.reason(freq["prompt"] + zh_content[3:16]) == "ngram"
    # official wording alone shares 13-grams with every row, but it is template, not content
    assert g.reason(long_row["prompt"].split("Input: ")[0] + "Input: a b c") is None
    assert g.reason(long_row["prompt"]) == "exact"


def test_cli_exclude_reports_drops_by_reason(tmp_path):
    from conftest import FIXTURES

    out = tmp_path / "o.jsonl"
    res = run_module(["synth", "--task", "sort_lengths", "--lang", "en", "-n", "20", "--seed", "1",
                      "--exclude", f"official:{FIXTURES}", "--out", str(out), "--no-progress"])
    assert res.returncode == 0, res.stderr
    assert re.search(r"dropped \d+ of \d+ .*exact prompt: \d+, shared 13-gram: \d+", res.stderr), res.stderr
    assert len(out.read_text().splitlines()) == 20


def test_ks_statistic_matches_a_brute_force_oracle():
    from synth.stats import ks_statistic

    rng = random.Random(0)
    for _ in range(50):
        a = np.array([rng.randint(0, 30) for _ in range(rng.randint(1, 40))])
        b = np.array([rng.randint(0, 30) for _ in range(rng.randint(1, 40))])
        want = max(abs((a <= x).mean() - (b <= x).mean()) for x in range(-1, 32))
        assert abs(ks_statistic(a, b) - want) < 1e-12
    assert ks_statistic(np.array([1, 2]), np.array([5, 6])) == 1.0


def test_stats_cli_prints_every_awareness_cell(tmp_path):
    from conftest import FIXTURES

    js = tmp_path / "s.json"
    res = run_module(["synth", "stats", "--official", str(FIXTURES), "-n", "30", "--json", str(js)])
    assert res.returncode == 0, res.stderr
    rows = json.loads(js.read_text())
    assert {(r["code"], r["lang"]) for r in rows} == {(c, l) for c in ("FREQ", "LENOP", "DIFF", "SORT", "REORD")
                                                      for l in ("en", "zh", "ko")}
    assert all(0.0 <= r["ks"] <= 1.0 and r["n_official"] >= 6 for r in rows)
    assert all("bigram_official" in r for r in rows if r["lang"] == "en")
    assert re.search(r"# KS < 0.2 in \d+ of 15 cells", res.stdout)
    for args in (["stats", "--official", str(tmp_path / "nope")],
                 ["stats", "--official", str(FIXTURES), "--text-source", "x"],
                 ["--task", "sort_lengths", "-n", "2", "--text-source", "x", "--out", str(tmp_path / "keep.jsonl")]):
        (tmp_path / "keep.jsonl").write_text("kept\n")
        bad = run_module(["synth", *args])
        assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and bad.stderr.startswith("error:"), bad.stderr
        assert (tmp_path / "keep.jsonl").read_text() == "kept\n"  # nothing already written is lost


def test_structural_tasks_ignore_the_text_source():
    for t in ("component_count", "variant_normalize"):
        a = [r["prompt"] for r in synth.generate(t, "en", 20, 4)]
        assert a == [r["prompt"] for r in synth.generate(t, "en", 20, 4, text_source="unigram")]


def test_exclude_exact_drops_identical_prompts_only(tmp_path):
    """A held-out split in the official wording, guarded against paraphrased training sets: the 13-gram rule
    drops rows for sharing the (paraphrase-diluted) instruction wording; the exact guard keeps them."""
    from synth.guard import guard_from_specs

    train = tmp_path / "train.jsonl"
    rows = list(synth.generate("sort_lengths", "en", 40, 777, paraphrase=True, max_len=12))
    train.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    held = list(synth.generate("sort_lengths", "en", 40, 4242, max_len=12))
    exact = guard_from_specs([], [str(train)])
    assert len(exact.hashes) == 0 and len(exact.prompts) == len({r["prompt"] for r in rows})
    assert exact.reason(rows[0]["prompt"]) == "exact" and exact.reason(" " + rows[0]["prompt"].upper()) == "exact"
    assert [exact.reason(r["prompt"]) for r in held] == [None] * len(held)
    ngram = guard_from_specs([str(train)])
    assert sum(ngram.reason(r["prompt"]) == "ngram" for r in held) > 0  # what --exclude-exact is for
    res = run_module(["synth", "--task", "sort_lengths", "--lang", "en", "-n", "5", "--seed", "1", "--max-len", "12",
                      "--exclude-exact", str(train), "--out", str(tmp_path / "h.jsonl"), "--no-progress"])
    assert res.returncode == 0 and "shared 13-gram: 0" in res.stderr, res.stderr


def test_guard_drops_examples_whose_answer_is_a_benchmark_answer(tmp_path):
    """A new prompt around an official answer is still that answer: dropped (reason `answer`) when task,
    language and subtask match and the answer type names content; numbers and class labels are not guarded."""
    from common.guard import Guard

    bench = _guard_records(tmp_path)
    g = Guard.from_records(bench)
    var = next(r for r in bench if r["task"] == "variant_normalize" and r["lang"] == "en")
    combine = next(r for r in bench if r["meta"]["file"].endswith("en_combine.csv"))
    fresh = next(synth.generate("variant_normalize", "en", 1, 5))
    assert g.reason(fresh["prompt"]) is None and g.answer_reason(fresh) is None
    planted = {**fresh, "answer": var["answer"].upper()}  # same answer, other case, new prompt
    assert g.reason(planted["prompt"]) is None and g.answer_reason(planted) == "answer"
    assert g.answer_reason({**planted, "task": "component_split", "subtask": "combine"}) is None  # other task
    assert g.answer_reason({**next(synth.generate("component_split", "en", 1, 5, "combine")),
                            "answer": combine["answer"]}) == "answer"
    num = next(r for r in bench if r["type"] == "NUMBER")
    assert g.answer_reason({**num, "prompt": "x"}) is None, "numbers are never guarded answers"
    kept = list(g.filter([fresh, planted]))
    assert kept == [fresh] and g.dropped_answer == 1 and g.dropped == 1
    assert "benchmark answer: 1" in g.report()
    # a label shared by many rows of a file is a class, not a row: not guarded
    labels = [{"task": "dot_matrix", "lang": "mul", "subtask": "bitmap_type_classification", "type": "MATCH_ANSWER",
               "prompt": f"p{i}", "answer": "Chinese" if i % 2 else f"row{i}"} for i in range(40)]
    lg = Guard.from_records(labels, ngram=False)
    assert lg.answer_reason({**labels[1], "prompt": "new"}) is None
    assert lg.answer_reason({**labels[2], "prompt": "new"}) == "answer"
