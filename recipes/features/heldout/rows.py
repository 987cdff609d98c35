"""The held-out rows of evaluation during training (recipes/features/heldout/evaluation.py) and the training stream's
guard against them, apart from the evaluation so that recipes/shared/data.py can guard its stream without importing the
trainer side.

The rows are drawn from the training streams (streams.data_streams: the same tasks, languages, subtasks, mixture,
lengths and paraphrasing, interleaved as recipes/shared/data.py interleaves them) with another synth seed, through the
training data's `exclude` guard (the release), with distinct prompts; the training stream then drops every row whose
prompt is a held-out prompt (exact prompt, as `synth --exclude-exact` guards a held-out split: the 13-gram rule
would drop every row written in a shared template).
"""
from __future__ import annotations

from typing import Any

from common.errors import TaseError

DRAW_LIMIT = 50  # draws per wanted row before giving up on finding distinct prompts (a tiny task space)


def heldout_seed(args: Any) -> int:
    """The held-out rows' synth seed: held_out_seed, else synth_seed + 1 (never the training seed)."""
    return args.held_out_seed if args.held_out_seed is not None else args.synth_seed + 1


_RECORDS: dict[tuple, list[dict[str, Any]]] = {}


def records(args: Any) -> list[dict[str, Any]]:
    """The held-out records (cached per data options, so the training guard and the evaluation see the same
    rows): held_out_rows distinct prompts from the training streams drawn with the held-out seed, through the
    `exclude` guard. Always synth, also when train_data is a file (its tasks/langs options pick the cells)."""
    import itertools
    import sys

    import synth
    from common.guard import normalize_prompt
    from recipes.shared.streams import data_streams
    from synth.guard import guard_from_specs
    from synth.mixture import load_mixture

    seed = heldout_seed(args)
    key = (tuple(args.tasks), tuple(args.langs), tuple(args.subtasks or ()), args.mixture, seed, args.held_out_rows,
           args.max_len, args.paraphrase, tuple(args.exclude), args.train_data)
    if key not in _RECORDS:
        weights = load_mixture(args.mixture) if args.mixture else None
        cells = (data_streams(args.tasks, args.langs, args.subtasks) if args.train_data == "synth"
                 else file_streams(args.train_data))
        streams = [synth.generate(t, lang, sys.maxsize, seed, sub, paraphrase=args.paraphrase,
                                  weights=weights if t == "all" else None, max_len=args.max_len)
                   for t, lang, sub in cells]
        # as recipes/shared/data.py interleaves the cells
        stream = (r for group in zip(*streams, strict=False) for r in group)
        guard = guard_from_specs(args.exclude)
        if guard:
            stream = guard.filter(stream)
        rows, seen = [], set()
        for r in itertools.islice(stream, args.held_out_rows * DRAW_LIMIT):
            p = normalize_prompt(r["prompt"])
            if p not in seen:
                seen.add(p)
                rows.append(r)
                if len(rows) == args.held_out_rows:
                    break
        if not rows:
            raise TaseError("held_out_rows: no held-out row left after the exclude guard (check --tasks/--langs)")
        _RECORDS[key] = rows
    return _RECORDS[key]


def file_streams(path: str) -> list[tuple[str, str, str | None]]:
    """The synth streams of a train_data file's cells: every (task, lang, subtask) its records hold, in the order
    first seen, as `synth.generate` takes them; cells synth cannot generate are left out, and a file with none it
    can is one line (the held-out rows are generated)."""
    from common.readers import DataError
    from recipes.shared.streams import generable
    from synth.readers import load_data

    cells: dict[tuple[str, str, str | None], None] = {}
    try:
        for r in load_data(path):
            cells.setdefault((str(r.get("task")), str(r.get("lang")), r.get("subtask") or None), None)
    except DataError as e:
        raise TaseError(f"train_data: {e}") from None
    out = generable(cells)
    if not out:
        raise TaseError(f"held_out_rows: train_data {path} holds no task, language and subtask synth can generate "
                        "held-out rows of")
    return out


def guard_training(args: Any, guard: Any) -> Any:
    """The training stream's guard with the held-out prompts added (exact prompt), or `guard` unchanged when
    held-out evaluation is off; a new exact-only Guard when there was none."""
    if not getattr(args, "held_out_rows", 0):
        return guard
    from common.guard import Guard, normalize_prompt

    prompts = frozenset(normalize_prompt(r["prompt"]) for r in records(args))
    if guard is None:
        return Guard(prompts)
    guard.prompts = guard.prompts | prompts
    return guard
