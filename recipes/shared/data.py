"""Training data: records (synth with the contamination guard, or a JSONL file) to trainer rows (the chat
prompt plus the columns the reward functions read), prompt-length capping, and the `datasets` dataset."""
from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

from common.errors import TaseError
from common.prompts import build_messages
from recipes.features import heldout
from recipes.shared.streams import data_streams

DataOptions = Any  # recipes.shared.config.DataArgs (or TaseArgs), not imported: the options sit above the data
# with a curriculum (recipes/features/curriculum/levels.py), the difficulty level a row was drawn at (-1: its task has
# no levels)
LEVEL_COLUMN = "curriculum_level"
Level = Callable[[str], "int | None"]  # a curriculum's task -> level (None: the task's own config), read at every draw


def messages(record: dict[str, Any], system_prompt: str) -> list[dict[str, str]]:
    """The chat prompt of a record, built as `eval run` builds it (`common.prompts.build_messages`)."""
    return build_messages(record, system_prompt=system_prompt)


def iter_records(args: DataOptions, limit: int | None = -1, level: Level | None = None):
    """Training records from synth (with the contamination guard) or a JSONL file; `limit` defaults to
    num_train_examples, None streams without end (synth) or to the end of the file, after the first skip_examples
    rows (counted after the guard, as num_train_examples is). Synth rows come round-robin from one
    `synth.generate` stream per task x lang (x subtask with `subtasks`; streams.data_streams).
    With `repeat_answers` (ANSWER=K) each drawn row whose gold answer is ANSWER is yielded K times: `limit`
    counts drawn rows, so the data holds more rows than that (the trainers shuffle them). `level` (a curriculum's
    task -> level, read at every draw) is passed to `synth.generate`."""
    import itertools

    limit = args.num_train_examples if limit == -1 else limit
    repeats = args.answer_repeats()
    if repeats:  # class weighting: each drawn row whose gold answer is named comes K times in a row
        for r in _iter_drawn(args, limit, level):
            yield from itertools.repeat(r, repeats.get(str(r.get("answer")), 1))
        return
    yield from _iter_drawn(args, limit, level)


def _iter_drawn(args: DataOptions, limit: int | None, level: Level | None = None):
    """iter_records before repeat_answers: `limit` records (None: no end) from synth or the file."""
    import synth
    from synth.guard import guard_from_specs
    from synth.mixture import load_mixture
    from synth.readers import load_data

    if args.train_data != "synth":
        rows = load_data(args.train_data)
        held = heldout.guard_training(args, None)  # no held-out prompt in the training rows
        yield from _slice(held.filter(rows) if held else rows, args.skip_examples, limit)
        return
    weights = load_mixture(args.mixture) if args.mixture else None
    streams = []
    for t, lang, sub in data_streams(args.tasks, args.langs, args.subtasks):  # task x lang (x subtask)
        streams.append(synth.generate(t, lang, sys.maxsize, args.synth_seed, sub, paraphrase=args.paraphrase,
                                      weights=weights if t == "all" else None, max_len=args.max_len,
                                      level=level))
    stream = (r for group in zip(*streams, strict=False) for r in group)  # interleave the requested cells
    guard = heldout.guard_training(args, guard_from_specs(args.exclude))  # + the held-out prompts, exact
    if guard:
        stream = guard.filter(stream)
    yield from _slice(stream, args.skip_examples, limit)


def _slice(rows, skip: int, limit: int | None):
    """`limit` rows (None: to the end) after the first `skip` (skip_examples): consecutive stages of one seed."""
    import itertools

    return itertools.islice(rows, skip, None if limit is None else skip + limit)


def to_row(record: dict[str, Any], system_prompt: str) -> dict[str, Any]:
    """A trainer row: TRL's `prompt` (the chat messages), the record's identity, and the columns the reward
    functions read (`rewards.trl.reward_columns`: the record's `prompt` text is the `question` column). The same row
    `python -m synth --format conversational` writes (synth.rows.conversational_row)."""
    from synth.rows import conversational_row

    return conversational_row(record, system_prompt)


class PromptLength:
    """Token count of a record's prompt as the trainer will see it (chat template + generation prompt)."""

    def __init__(self, tokenizer: Any, system_prompt: str) -> None:
        self.tok, self.system_prompt = tokenizer, system_prompt

    def __call__(self, record: dict[str, Any]) -> int:
        text = self.tok.apply_chat_template(messages(record, self.system_prompt), tokenize=False,
                                            add_generation_prompt=True)
        return len(self.tok(text, add_special_tokens=False)["input_ids"])


def rows(args: DataOptions, tokenizer: Any = None, limit: int | None = -1, stats: dict[str, int] | None = None,
         level: Level | None = None):
    """Trainer rows (conversational prompt + the columns reward functions read), prompts over
    max_prompt_tokens dropped; `stats["dropped"]` counts them. With a curriculum's `level`, each row also carries
    LEVEL_COLUMN."""
    measure = PromptLength(tokenizer, args.system_prompt) if args.max_prompt_tokens and tokenizer else None
    stats = {} if stats is None else stats
    stats.setdefault("dropped", 0)
    for r in iter_records(args, limit, level):
        if measure and measure(r) > args.max_prompt_tokens:
            stats["dropped"] += 1
            continue
        row = to_row(r, args.system_prompt)
        if level is not None:
            row[LEVEL_COLUMN] = int((r.get("meta") or {}).get("level", -1))
        yield row


def _stream_rows(args: DataOptions, tokenizer: Any = None, level: Level | None = None):
    yield from rows(args, tokenizer, limit=None, level=level)


def build_dataset(args: DataOptions, tokenizer: Any = None, level: Level | None = None):
    """A `datasets.Dataset` of num_train_examples rows, or with `streaming` an endless
    `datasets.IterableDataset` generated by synth as the trainer reads it (with a curriculum's `level`, read at
    every draw: recipes/features/curriculum/levels.py)."""
    from datasets import Dataset, IterableDataset

    from common.readers import DataError

    if args.streaming:
        return IterableDataset.from_generator(_stream_rows, gen_kwargs={"args": args, "tokenizer": tokenizer,
                                                                        "level": level})
    stats: dict[str, int] = {}
    try:
        data = list(rows(args, tokenizer, stats=stats))
    except DataError as e:
        raise TaseError(str(e)) from e
    if stats["dropped"]:
        print(f"dropped {stats['dropped']} examples with prompts over {args.max_prompt_tokens} tokens", file=sys.stderr)
    if not data:
        raise TaseError("the training data is empty (check --tasks/--langs/--train_data/--max_prompt_tokens)")
    return Dataset.from_list(data)
