"""The example record shared by generators, rewards and the evaluator (see ../shared/CONTRACT.md).

Records are plain dicts (JSON lines) for speed and interop with `datasets`; this module owns the
vocabulary of tasks and categories (the task catalogue) so every package agrees on it, and hands out the
scoring types' names from their catalogue (`common.types`) and the languages' from theirs
(`common.languages`), both in the floor too. It is part
of the floor (`common/`, docs/architecture.md): the standard library and the floor only, so every package
may read it. What a task does beyond these static facts lives in its module under synth/tasks/.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from common.languages import LANGUAGES, codes, stems
from common.registry import Registry
from common.types import type_names, unlabelled_types


def __getattr__(name: str) -> Any:
    """`TYPES` (the scoring types, in catalogue order) and `UNLABELLED_TYPES` (those whose official rows
    hold no label), read from the catalogue of scoring types (`common.types`) whenever asked, so a type
    is declared once and a type declared later (a test-only one) is seen; likewise, from the language
    catalogue (`common.languages`), `LANGS` (the codes), `LANG_OF_STEM` (official file stem -> code) and
    `YES` (DIFF's "no difference" answer per language)."""
    if name in ("TYPES", "UNLABELLED_TYPES"):
        return type_names() if name == "TYPES" else unlabelled_types()
    if name == "LANGS":
        return codes()
    if name == "LANG_OF_STEM":
        return stems()
    if name == "YES":
        return {code: lang.yes for code, lang in LANGUAGES.items()}
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


@dataclass(frozen=True)
class OfficialRatio:
    """merge_result.py's score for a task in its overall: mean(accuracy of the `numerator` subtasks' files) /
    accuracy of the `denominator` subtask's file (undefined, and skipped, when that is 0). `label` names the
    numerator files in notes ("bitmap files")."""

    numerator: tuple[str, ...]
    denominator: str
    label: str


@dataclass(frozen=True)
class TaskInfo:
    """Static facts about one official task folder."""

    name: str
    code: str  # paper code (FREQ, LENOP, ...)
    category: str  # awareness | structural
    group: str  # official folder group: token_awareness | token_structure
    subtasks: tuple[str, ...] = ("",)
    no_lang: bool = False  # rows carry no language (`mul`); left out of the language table (and of
    # merge_result.py's file-name language rule), as officially
    # MATCH_ANSWER partial credit (rewards.match_answer): "order" (the label is an order of letters),
    # "sequence" (the label is a string to spell: character-level credit), "" (a class name: none)
    match_credit: str = ""
    # Official aggregation rules (evaluate/merge_result.py), read by eval/aggregate.py and eval/compare.py:
    # the subtasks whose files sit outside the language table (e.g. a file that fills a language slot with
    # a language-free input), and the task's ratio score in the official overall, if it has one.
    off_table_subtasks: tuple[str, ...] = ()
    official_ratio: OfficialRatio | None = None


# the task catalogue: a common.registry.Registry (add, remove, get, names), the shape of every registry
TASKS: Registry[TaskInfo] = Registry("task", entries={
    t.name: t
    for t in (
        TaskInfo("freq_count", "FREQ", "awareness", "token_awareness"),
        TaskInfo("sentence_length", "LENOP", "awareness", "token_awareness", ("count", "generate")),
        TaskInfo("diff_tokens", "DIFF", "awareness", "token_awareness"),
        TaskInfo("sort_lengths", "SORT", "awareness", "token_awareness", match_credit="order"),
        TaskInfo("shuffle_tokens", "REORD", "awareness", "token_awareness"),
        TaskInfo("component_count", "COMPC", "structural", "token_structure"),
        # combine rows stay binary: their valid answers (orders of the given pieces) are near misses of
        # one another, so near-miss credit would pay some fixed orders more than a random one
        TaskInfo("component_split", "COMPM", "structural", "token_structure", ("split", "combine")),
        TaskInfo(
            "dot_matrix",
            "DOT",
            "structural",
            "token_structure",
            ("char_classification", "bitmap_type_classification", "bitmap_classification"),
            no_lang=True,
            official_ratio=OfficialRatio(("bitmap_classification", "bitmap_type_classification"),
                                         "char_classification", "bitmap files"),
        ),
        TaskInfo("structure_riddle", "RIDL", "structural", "token_structure"),
        TaskInfo("variant_normalize", "VAR", "structural", "token_structure", ("", "digital"),
                 match_credit="sequence", off_table_subtasks=("digital",)),
        # Beyond TASE: CUTE/EXECUTE-style composition and manipulation tasks (opt-in, not in "all").
        TaskInfo(
            "execute",
            "EXEC",
            "execute",
            "execute",
            (
                "spell", "inverse_spell", "contains_char", "contains_word",
                "insert_char", "delete_char", "substitute_char", "swap_char",
                "insert_word", "delete_word", "substitute_word", "swap_word",
                "ko_syllable_to_jamo", "ko_jamo_to_syllable", "ko_contains_jamo",
                "zh_char_to_components", "zh_components_to_char", "zh_contains_component",
            ),
        ),
    )
})
TASE_TASKS = tuple(n for n, t in TASKS.items() if t.category in ("awareness", "structural"))

AWARENESS_TASKS = tuple(n for n, t in TASKS.items() if t.category == "awareness")
STRUCTURAL_TASKS = tuple(n for n, t in TASKS.items() if t.category == "structural")

# Official DIFF wording of the variation names (the "no difference" answer: `YES`, from the language catalogue).
VARIATIONS = ("unchanged", "add", "delete", "modify")
VARIATION_ZH = {"unchanged": "不变", "add": "增加", "delete": "删除", "modify": "修改"}


@dataclass
class Example:
    """Typed view of one record; `to_dict()` gives the JSON-lines form."""

    id: str
    task: str
    lang: str
    type: str
    prompt: str
    answer: str = ""
    subtask: str = ""
    category: str = ""
    variation: str = ""
    meta: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return make_record(
            id=self.id, task=self.task, lang=self.lang, type=self.type, prompt=self.prompt, answer=self.answer,
            subtask=self.subtask, category=self.category, variation=self.variation, meta=self.meta,
        )


def make_record(
    *,
    id: str,
    task: str,
    lang: str,
    type: str,
    prompt: str,
    answer: str = "",
    subtask: str = "",
    category: str = "",
    variation: str = "",
    meta: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Build a record dict with every contract key present, in the contract's key order: the one place a
    record is built (generators, `Example.to_dict` and the official reader all call it). `category`
    defaults to the catalogue's."""
    return {
        "id": id,
        "task": task,
        "subtask": subtask,
        "lang": lang,
        "category": category or TASKS[task].category,
        "type": type,
        "prompt": prompt,
        "answer": answer,
        "variation": variation,
        "meta": meta if meta is not None else {},
    }
