"""The synth streams a run's data options select (task x language x subtask), in one place below the options classes
(recipes/shared/config.py) and the features (recipes/features/), so that the data, the curriculum, guidance and the
held-out rows read them without importing the options."""
from __future__ import annotations

from collections.abc import Iterable


def data_streams(tasks: list[str], langs: list[str], subtasks: list[str] | None) -> list[tuple[str, str, str | None]]:
    """The synth streams the recipes interleave (recipes/shared/data.py iter_records), as (task, lang, subtask) for
    `synth.generate(task, lang, subtask=subtask)`: one per task x lang (subtask None: all of the cell's), or with
    `subtasks` one per task x lang x listed subtask that cell has. Kept in one place so that the recipes and
    proof.py's written-out training sets cannot disagree. A bad request is one ValueError line."""
    from synth.core import SynthError, available, combos

    streams: list[tuple[str, str, str | None]] = []
    for t in tasks:
        for lang in langs:
            try:
                combos(t, lang)
            except SynthError as e:
                raise ValueError(f"tasks/langs: {e}") from None
            if subtasks is None:
                streams.append((t, lang, None))
                continue
            if t != "all" and not set(subtasks) & set(available()[t].subtasks):
                names = ", ".join(s for s in available()[t].subtasks if s)
                has = f"its subtasks: {names}" if names else "it has no subtasks"
                raise ValueError(f"subtasks: task {t!r} has none of {', '.join(subtasks)} ({has})")
            found = generable((t, lang, s) for s in dict.fromkeys(subtasks))
            if not found:
                raise ValueError(f"subtasks: nothing to generate for task {t} lang {lang} subtasks "
                                 f"{', '.join(subtasks)}")
            streams += found
    return streams


def level_counts(streams: list[tuple[str, str, str | None]]) -> dict[str, int]:
    """Task -> number of difficulty levels (0: none) of every task the synth streams cover (`all` expanded), from the
    registry (each task module declares its `levels`): what a curriculum moves
    (recipes/features/curriculum/levels.py)."""
    from synth.core import combos, level_count

    return {t: level_count(t) for task, lang, sub in streams for t, _, _ in combos(task, lang, sub)}


def generable(cells: Iterable[tuple[str, str, str | None]]) -> list[tuple[str, str, str | None]]:
    """The (task, lang, subtask) cells synth can generate, in order; the others are left out (each caller says in
    its own words what none at all means)."""
    from synth.core import SynthError, combos

    out = []
    for t, lang, sub in cells:
        try:
            combos(t, lang, sub)
        except SynthError:
            continue
        out.append((t, lang, sub))
    return out
