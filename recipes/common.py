"""Shared pieces of the recipe scripts (imported as `common`: scripts run with recipes/ on sys.path).

Holds the TASE options dataclasses parsed by TrlParser beside TRL's own configs, the training-set builder
(`synth` rows, with the contamination guard and a prompt-length cap, into a `datasets.Dataset` or an
endless `datasets.IterableDataset`), and the chat formatting used for GRPO prompts and SFT targets.
"""
from __future__ import annotations

import json
import zlib
import os
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

# Before torch loads OpenMP: spinning worker threads waste most of the CPU when cores are shared
# (measured on 2 busy cores: SmolLM2 forward+backward 24 s -> 15 s). Override by setting it yourself.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # scripts run as `python recipes/x.py`: make synth/rewards/eval importable
    sys.path.insert(0, str(ROOT))

from eval.prompts import SYSTEM_PROMPT  # noqa: E402

@dataclass
class DataArgs:
    """Training-data options shared by GRPO and the SFT warm-up (YAML and command line alike)."""

    train_data: str = field(default="synth", metadata={"help": "'synth' (generated on the fly) or a .jsonl of records"})
    tasks: list[str] = field(default_factory=lambda: ["all"], metadata={"help": "tasks to generate, or 'all'"})
    langs: list[str] = field(default_factory=lambda: ["all"], metadata={"help": "languages (en zh ko) or 'all'"})
    mixture: str | None = field(default=None, metadata={"help": "YAML of per-task weights (overrides uniform)"})
    num_train_examples: int = field(default=2000, metadata={"help": "examples drawn from synth"})
    synth_seed: int = field(default=1234, metadata={"help": "synth seed (kept apart from the benchmark's)"})
    max_len: int | None = field(default=None, metadata={"help": "cap synth sequence lengths (tokens)"})
    paraphrase: bool = field(default=True, metadata={"help": "paraphrased prompt templates in training data"})
    exclude: list[str] = field(default_factory=list, metadata={"help": "benchmarks to guard against (official:DIR)"})
    system_prompt: str = field(default=SYSTEM_PROMPT, metadata={"help": "system message of every prompt"})
    streaming: bool = field(default=False, metadata={"help": "feed an endless datasets.IterableDataset drawn from "
                            "synth on the fly (needs max_steps) instead of num_train_examples materialized rows"})
    max_prompt_tokens: int | None = field(default=None, metadata={"help": "drop examples whose chat-formatted "
                                          "prompt is longer than this many tokens (the paper's max input 16384)"})


@dataclass
class TaseArgs(DataArgs):
    """GRPO options on top of the data options."""

    reward_granularity: str = field(default="fine", metadata={"help": "coarse (official 0/1) or fine (partial)"})
    reward_funcs: list[str] | None = field(default=None, metadata={"help": "explicit reward names; default "
                                           "accuracy_<granularity> (+ format)"})
    format_reward: bool = field(default=True, metadata={"help": "add the answer-tag format reward (cold start)"})
    format_weight: float = field(default=0.2, metadata={"help": "weight of the format reward"})
    dry_run: bool = field(default=False, metadata={"help": "print the resolved configuration and exit"})
    min_gpus: int = field(default=0, metadata={"help": "refuse to start with fewer CUDA devices than this"})
    vllm_reload_sync: str = field(default="auto", metadata={
        "help": "colocated vLLM weight sync through vLLM's reload API (recipes/vllm_sync.py): auto (CPU engines, "
                "where TRL's load_weights sync fails), always, never", "choices": ["auto", "always", "never"]})

    def __post_init__(self) -> None:
        if self.reward_granularity not in ("coarse", "fine"):
            raise ValueError(f"reward_granularity must be coarse or fine, got {self.reward_granularity!r}")


def fail(msg: str, code: int = 2) -> None:
    """One clear line on stderr, no traceback."""
    print(f"error: {msg}", file=sys.stderr)
    raise SystemExit(code)


def reward_names(args: TaseArgs) -> list[str]:
    if args.reward_funcs:
        return list(args.reward_funcs)
    names = [f"accuracy_{args.reward_granularity}"]
    if args.format_reward:
        names.append("format")
    return names


def reward_weights(args: TaseArgs, names: list[str], given: list[float] | None) -> list[float] | None:
    if given:
        return given
    return [args.format_weight if n == "format" else 1.0 for n in names]


def messages(record: dict[str, Any], system_prompt: str) -> list[dict[str, str]]:
    msgs = [{"role": "system", "content": system_prompt}] if system_prompt else []
    return msgs + [{"role": "user", "content": record["prompt"]}]


def iter_records(args: DataArgs, limit: int | None = -1):
    """Training records from synth (with the contamination guard) or a JSONL file; `limit` defaults to
    num_train_examples, None streams without end (synth) or to the end of the file."""
    import itertools

    import synth
    from eval.data import load_data
    from synth.guard import Guard

    limit = args.num_train_examples if limit == -1 else limit
    if args.train_data != "synth":
        yield from itertools.islice(load_data(args.train_data), limit)
        return
    weights = None
    if args.mixture:
        import yaml

        data = yaml.safe_load(Path(args.mixture).read_text(encoding="utf-8"))
        weights = data.get("weights", data)
    tasks = args.tasks
    langs = args.langs
    streams = []
    for t in tasks:
        for lang in langs:
            streams.append(synth.generate(t, lang, sys.maxsize, args.synth_seed, paraphrase=args.paraphrase,
                                          weights=weights if t == "all" else None, max_len=args.max_len))
    stream = (r for group in zip(*streams) for r in group)  # interleave the requested cells
    if args.exclude:
        guard = Guard.from_records(r for spec in args.exclude for r in load_data(spec))
        stream = guard.filter(stream)
    yield from itertools.islice(stream, limit)


def to_row(record: dict[str, Any], system_prompt: str) -> dict[str, Any]:
    meta = record.get("meta") or {}
    return {
        "prompt": messages(record, system_prompt),
        "id": record["id"], "task": record["task"], "subtask": record.get("subtask", ""), "lang": record["lang"],
        "type": record["type"], "question": record["prompt"], "answer": record.get("answer", ""),
        "variation": record.get("variation", ""), "solution": str(meta.get("solution", "")),
    }


class PromptLength:
    """Token count of a record's prompt as the trainer will see it (chat template + generation prompt)."""

    def __init__(self, tokenizer: Any, system_prompt: str) -> None:
        self.tok, self.system_prompt = tokenizer, system_prompt

    def __call__(self, record: dict[str, Any]) -> int:
        text = self.tok.apply_chat_template(messages(record, self.system_prompt), tokenize=False,
                                            add_generation_prompt=True)
        return len(self.tok(text, add_special_tokens=False)["input_ids"])


def rows(args: DataArgs, tokenizer: Any = None, limit: int | None = -1, stats: dict[str, int] | None = None):
    """Trainer rows (conversational prompt + the columns reward functions read), prompts over
    max_prompt_tokens dropped; `stats["dropped"]` counts them."""
    measure = PromptLength(tokenizer, args.system_prompt) if args.max_prompt_tokens and tokenizer else None
    stats = {} if stats is None else stats
    stats.setdefault("dropped", 0)
    for r in iter_records(args, limit):
        if measure and measure(r) > args.max_prompt_tokens:
            stats["dropped"] += 1
            continue
        yield to_row(r, args.system_prompt)


def _stream_rows(args: DataArgs, tokenizer: Any = None):
    yield from rows(args, tokenizer, limit=None)


def build_dataset(args: DataArgs, tokenizer: Any = None):
    """A `datasets.Dataset` of num_train_examples rows, or with `streaming` an endless
    `datasets.IterableDataset` generated by synth as the trainer reads it."""
    from datasets import Dataset, IterableDataset

    from eval.data import DataError

    if args.streaming:
        return IterableDataset.from_generator(_stream_rows, gen_kwargs={"args": args, "tokenizer": tokenizer})
    stats: dict[str, int] = {}
    try:
        data = list(rows(args, tokenizer, stats=stats))
    except DataError as e:
        fail(str(e))
    if stats["dropped"]:
        print(f"dropped {stats['dropped']} examples with prompts over {args.max_prompt_tokens} tokens", file=sys.stderr)
    if not data:
        fail("the training data is empty (check --tasks/--langs/--train_data/--max_prompt_tokens)")
    return Dataset.from_list(data)


def resolve(model: str | None) -> str:
    """Model spec -> local plain HF folder (GGUF converted once); one-line error when unusable."""
    from eval.models import ModelError, resolve_model

    try:
        return str(resolve_model(model))
    except ModelError as e:
        fail(str(e))
    raise AssertionError  # unreachable


def save_tase_config(output_dir: str, **parts: Any) -> None:
    """Record the resolved configuration next to the checkpoints (read by export.py's model card)."""
    os.makedirs(output_dir, exist_ok=True)
    out = {}
    for k, v in parts.items():
        out[k] = v if isinstance(v, dict) else (v.to_dict() if hasattr(v, "to_dict") else asdict(v))
    with open(os.path.join(output_dir, "tase_config.json"), "w", encoding="utf-8") as f:
        json.dump(out, f, indent=2, default=str)


def gold_response(record: dict[str, Any]) -> str | None:
    """A short correct assistant turn for SFT warm-up: brief reasoning where the generator knows it,
    then the gold answer in tags. None when no gold answer can be written."""
    meta = record.get("meta") or {}
    task, typ, ans = record["task"], record["type"], record.get("answer", "")
    unit = {"en": "words", "zh": "characters", "ko": "syllables"}.get(record["lang"], "tokens")
    if typ == "SHUFFLE":
        sol = meta.get("solution")
        return f"<answer>{sol}</answer>" if sol else None
    if typ == "LENGTH":
        from synth.resources import corpus

        n = int(meta.get("target", 0))
        if not n or record["lang"] not in ("en", "zh", "ko"):
            return None
        corp = corpus(record["lang"])
        start = zlib.crc32(record["id"].encode()) % (len(corp) - n)  # deterministic per example
        return f"Here are exactly {n} {unit}.\n<answer>{corp.span(start, n)}</answer>"
    if not ans:
        return None
    if task == "sort_lengths" and "lengths" in meta:
        la, lb, lc = meta["lengths"]
        return f"A has {la} {unit}, B has {lb}, C has {lc}. Longest to shortest: {ans}.\n<answer>{ans}</answer>"
    if task == "freq_count" and "target" in meta:
        return f"Counting every \"{meta['target']}\" in the text gives {ans}.\n<answer>{ans}</answer>"
    if task == "sentence_length":
        return f"The sentence has {ans} {unit}.\n<answer>{ans}</answer>"
    if task == "diff_tokens":
        if record.get("variation") == "unchanged":
            return f"Both sequences hold the same tokens.\n<answer>{ans}</answer>"
        return f"The token that differs is {ans}.\n<answer>{ans}</answer>"
    return f"<answer>{ans}</answer>"
