"""eval aggregation, selection, prompts and the paired bootstrap on hand-built samples (no model)."""
import json

import pytest

from common.prompts import SYSTEM_PROMPT, build_messages
from common.readers import DataError
from eval.aggregate import aggregate, file_key, official_filename_lang
from eval.compare import bootstrap_delta
from eval.runner import select


def smp(file, task, lang, coarse, valid=True, subtask="", i=0):
    return {"id": f"{file}/{i}", "file": file, "task": task, "lang": lang, "subtask": subtask,
            "coarse": float(coarse), "fine": float(coarse), "valid": valid}


def test_invalid_rows_leave_the_denominator_and_an_all_invalid_file_scores_zero():
    s = [smp("a.csv", "freq_count", "en", 1, i=0), smp("a.csv", "freq_count", "en", 0, i=1),
         smp("a.csv", "freq_count", "en", 0, valid=False, i=2),
         smp("b.csv", "freq_count", "zh", 0, valid=False, i=0)]
    res = aggregate(s)
    assert res["n"] == 4 and res["n_invalid"] == 2
    assert res["by_file"]["a.csv"] == {"accuracy": 50.0, "n": 2, "n_invalid": 1, "fine": 50.0, "task": "FREQ",
                                       "lang": "en"}
    assert res["by_file"]["b.csv"]["accuracy"] == 0.0 and res["by_file"]["b.csv"]["n"] == 0
    assert res["by_task"] == {"FREQ": 25.0}  # batch_eval.py writes 0 for the empty file; merge averages it
    assert res["by_lang"] == {"en": 50.0, "zh": 0.0} and res["micro"]["overall"] == 50.0


def test_file_accuracy_rounded_to_four_decimals_before_averaging():
    s = [smp("a.csv", "sort_lengths", "en", c, i=k) for k, c in enumerate([1, 0, 0])]
    s += [smp("b.csv", "sort_lengths", "zh", c, i=k) for k, c in enumerate([1, 1, 0])]
    res = aggregate(s)
    assert res["by_file"]["a.csv"]["accuracy"] == 33.33 and res["by_file"]["b.csv"]["accuracy"] == 66.67
    assert res["by_task"]["SORT"] == 50.0  # (0.3333 + 0.6667) / 2 exactly


def test_generated_jsonl_cells_and_the_language_table():
    recs = [{"task": "dot_matrix", "subtask": "char_classification", "lang": "mul"},
            {"task": "variant_normalize", "subtask": "digital", "lang": "ko"},
            {"task": "variant_normalize", "subtask": "", "lang": "zh"},
            {"task": "component_split", "subtask": "split", "lang": "ko"}]
    keys = [file_key(r) for r in recs]
    assert keys == ["dot_matrix/char_classification/mul", "variant_normalize/digital/ko", "variant_normalize/zh",
                    "component_split/split/ko"]
    s = [dict(smp(k, r["task"], r["lang"], c, subtask=r["subtask"]), id=k)
         for k, r, c in zip(keys, recs, [1, 1, 0, 1], strict=False)]
    res = aggregate(s)
    assert res["by_lang"] == {"zh": 0.0, "ko": 100.0}  # DOT (mul) and the digital file are left out
    assert res["by_task"] == {"COMPM": 100.0, "DOT": 100.0, "VAR": 50.0}
    assert res["by_category"] == {"structural": 83.33} and res["overall"] == 83.33
    assert res["dot_official_adjusted"] is None  # no bitmap files
    assert res["official"]["by_lang_filename_rule"] == {}  # only official CSV names have that rule


@pytest.mark.parametrize("name,lang", [
    ("token_awareness/sentence_length/korean_generate.csv", "en"),  # the quirk: "gen" holds "en"
    ("token_awareness/sentence_length/chinese_generate.csv", "zh"),
    ("token_structure/component_split/kor_combine.csv", "ko"),
    ("token_structure/component_split/zh_split.csv", "zh"),
    ("token_structure/variant_normalize/digital.csv", None),
    ("token_structure/dot_matrix/bitmap_type_classification.csv", None),
])
def test_official_filename_language_rule(name, lang):
    assert official_filename_lang(name) == lang


def test_dot_adjustment_undefined_when_char_accuracy_is_zero():
    s = [smp("d/char_classification.csv", "dot_matrix", "mul", 0, subtask="char_classification"),
         smp("d/bitmap_classification_final.csv", "dot_matrix", "mul", 1, subtask="bitmap_classification"),
         smp("f/english.csv", "freq_count", "en", 1)]
    res = aggregate(s)
    assert res["by_task"]["DOT"] == 50.0 and res["dot_official_adjusted"] is None
    assert res["official"]["overall_dot_adjusted"] == 100.0  # merge_result.py drops DOT in that case


def test_select_uses_the_official_stride_and_rejects_duplicate_ids():
    recs = [{"id": f"t/f/{i}", "task": "freq_count", "lang": "en", "meta": {"file": "f.csv"}} for i in range(10)]
    recs += [{"id": "t/g/0", "task": "freq_count", "lang": "zh", "meta": {"file": "g.csv"}}]
    picked = [r["id"] for r in select(recs, 3)]
    assert picked == ["t/f/0", "t/f/3", "t/f/6", "t/g/0"]  # [int(i * 10 / 3) for i in range(3)]
    assert len(select(recs, None)) == 11
    with pytest.raises(DataError, match="duplicate id 't/f/0'"):
        select(recs + [recs[0]], None)
    with pytest.raises(DataError, match="no records"):
        select([], None)


def test_prompts_as_the_official_runner_builds_them():
    rec = {"prompt": "How many r in strawberry?"}
    assert build_messages(rec) == [{"role": "system", "content": SYSTEM_PROMPT},
                                   {"role": "user", "content": "How many r in strawberry?"}]
    assert SYSTEM_PROMPT == "You need to put the final result inside <answer></answer>."
    cot = build_messages(rec, cot=True)
    assert cot[1]["content"].startswith(rec["prompt"]) and "step by step" in cot[1]["content"]
    assert build_messages(rec, system_prompt="") == [{"role": "user", "content": rec["prompt"]}]


def _pair(n_files=4, n=20, p_a=0.3, p_b=0.6):
    a, b = {}, {}
    for f in range(n_files):
        for i in range(n):
            k = f"f{f}/{i}"
            base = {"file": f"f{f}", "task": ["freq_count", "sort_lengths"][f % 2], "lang": ["en", "zh"][f // 2],
                    "subtask": ""}
            a[k] = dict(base, coarse=float(i < p_a * n))
            b[k] = dict(base, coarse=float(i < p_b * n))
    return a, b


def test_bootstrap_is_paired_deterministic_and_brackets_the_delta():
    a, b = _pair()
    d1, d2 = bootstrap_delta(a, b, 500, seed=7), bootstrap_delta(a, b, 500, seed=7)
    assert json.dumps(d1) == json.dumps(d2)
    assert d1["overall"]["delta"] == 30.0 and d1["micro"]["delta"] == 30.0
    lo, hi = d1["overall"]["ci95"]
    assert 15 < lo < 30 < hi < 45
    assert set(d1["by_task"]) == {"FREQ", "SORT"} and set(d1["by_lang"]) == {"en", "zh"}
    assert bootstrap_delta(a, b, 500, seed=8)["overall"]["ci95"] != d1["overall"]["ci95"]
    # identical runs: zero-width interval; disjoint ids: nothing to pair
    assert bootstrap_delta(a, a, 100)["overall"] == {"delta": 0.0, "ci95": [0.0, 0.0]}
    assert bootstrap_delta(a, {"x": {}}, 100) == {"n_shared": 0}
    # key="strict" pairs the strict verdicts (bench/strict_gains.py): here B's gain is all loophole passes
    a_s = {k: dict(v, strict=v["coarse"]) for k, v in a.items()}
    b_s = {k: dict(v, strict=a[k]["coarse"]) for k, v in b.items()}
    assert bootstrap_delta(a_s, b_s, 100)["overall"]["delta"] == 30.0
    assert bootstrap_delta(a_s, b_s, 100, key="strict")["overall"] == {"delta": 0.0, "ci95": [0.0, 0.0]}


def test_bootstrap_point_delta_is_the_difference_of_the_aggregates():
    """compare's bootstrap and results.json share one macro statistic (aggregate.macro): on fully valid
    paired runs the bootstrap's point deltas are B's tables minus A's (up to aggregate's 4-place file
    rounding), overall, per task and per language, with the DOT and digital files left out alike."""
    import random

    rng = random.Random(7)
    cells = [("f1.csv", "freq_count", "en", ""), ("f2.csv", "freq_count", "zh", ""),
             ("s1.csv", "sentence_length", "ko", "count"), ("s2.csv", "sentence_length", "ko", "generate"),
             ("d1.csv", "dot_matrix", "mul", "char_classification"), ("v1.csv", "variant_normalize", "ko", "digital"),
             ("v2.csv", "variant_normalize", "en", "")]
    sizes = [rng.randint(3, 9) for _ in cells]
    runs = [[smp(f, t, lang, rng.random() < 0.5, subtask=sub, i=k)
             for (f, t, lang, sub), size in zip(cells, sizes, strict=False) for k in range(size)] for _ in range(2)]
    ra, rb = aggregate(runs[0]), aggregate(runs[1])
    d = bootstrap_delta({s["id"]: s for s in runs[0]}, {s["id"]: s for s in runs[1]}, n_boot=50, seed=1)
    assert abs(d["overall"]["delta"] - (rb["overall"] - ra["overall"])) < 0.03
    assert set(d["by_task"]) == set(ra["by_task"]) and set(d["by_lang"]) == set(ra["by_lang"])
    for code, v in d["by_task"].items():
        assert abs(v["delta"] - (rb["by_task"][code] - ra["by_task"][code])) < 0.03, code
    for lang, v in d["by_lang"].items():
        assert abs(v["delta"] - (rb["by_lang"][lang] - ra["by_lang"][lang])) < 0.03, lang


def test_a_second_language_free_task_is_aggregated_by_its_own_declarations():
    """The official rules are declarations on the task (common.record.TaskInfo): a test-only language-free
    task, put first in the catalogue, stays out of the language table and of the file-name language rule,
    keeps its plain mean in the official overall, and leaves DOT's ratio score to DOT."""
    from common.record import TASKS, TaskInfo
    from eval.aggregate import off_table_text

    saved = dict(TASKS)
    TASKS.clear()
    TASKS["glyph_toy"] = TaskInfo("glyph_toy", "GLY", "structural", "token_structure", ("a",), no_lang=True)
    TASKS.update(saved)
    try:
        s = [smp("token_awareness/freq_count/english.csv", "freq_count", "en", 1),
             smp("token_structure/glyph_toy/english_glyphs.csv", "glyph_toy", "mul", 0, subtask="a"),
             smp("token_structure/dot_matrix/char_classification.csv", "dot_matrix", "mul", 1,
                 subtask="char_classification"),
             smp("token_structure/dot_matrix/bitmap_classification_final.csv", "dot_matrix", "mul", 1,
                 subtask="bitmap_classification", i=0),
             smp("token_structure/dot_matrix/bitmap_classification_final.csv", "dot_matrix", "mul", 0,
                 subtask="bitmap_classification", i=1)]
        res = aggregate(s)
        assert res["by_task"] == {"GLY": 0.0, "FREQ": 100.0, "DOT": 75.0}
        assert res["by_lang"] == {"en": 100.0}  # neither language-free task counts
        assert res["official"]["by_lang_filename_rule"] == {"en": 100.0}  # "english_glyphs" is not English
        assert res["dot_official_adjusted"] == 50.0  # DOT's own ratio: bitmap 0.5 / char 1.0
        assert res["official"]["overall_dot_adjusted"] == 50.0  # FREQ 1, GLY 0 (plain), DOT 0.5
        assert off_table_text() == "glyph_toy, dot_matrix and variant_normalize's digital file"
    finally:
        TASKS.clear()
        TASKS.update(saved)
