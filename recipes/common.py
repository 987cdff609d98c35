"""Shared pieces of the recipe scripts (imported as `common`: scripts run with recipes/ on sys.path).

Holds the TASE options dataclasses parsed by TrlParser beside TRL's own configs, the training-set builder
(`synth` rows, with the contamination guard and a prompt-length cap, into a `datasets.Dataset` or an
endless `datasets.IterableDataset`), and the chat formatting used for GRPO prompts and SFT targets.
"""
from __future__ import annotations

import json
import os
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # scripts run as `python recipes/x.py`: make synth/rewards/eval importable
    sys.path.insert(0, str(ROOT))

from eval.process import apply as process_settings  # noqa: E402,F401  (each script's main calls it first)
from eval.prompts import SYSTEM_PROMPT, build_messages  # noqa: E402

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
    allow_pickle_weights: bool = field(default=False, metadata={"help": "accept a model folder without safetensors "
                                       "weights (pickle files can run code; trusted folders only)"})

    def __post_init__(self) -> None:
        """Bad data options fail at parse time in one line (ValueError), not minutes later in a traceback."""
        for key in ("tasks", "langs", "exclude"):
            v = getattr(self, key)
            if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
                raise ValueError(f"{key} must be a list of strings, got {v!r}")
        for key, low in (("num_train_examples", 1), ("max_len", 1), ("max_prompt_tokens", 1), ("synth_seed", None)):
            v = getattr(self, key)
            if v is None and key in ("max_len", "max_prompt_tokens"):
                continue
            if not isinstance(v, int) or isinstance(v, bool) or (low is not None and v < low):
                raise ValueError(f"{key} must be an integer" + (f" >= {low}" if low else "") + f", got {v!r}")
        for key in ("train_data", "system_prompt"):
            if not isinstance(getattr(self, key), str):
                raise ValueError(f"{key} must be a string, got {getattr(self, key)!r}")
        if self.train_data == "synth":
            from synth.core import SynthError, combos

            try:
                for t in self.tasks:
                    for lang in self.langs:
                        combos(t, lang)
            except SynthError as e:
                raise ValueError(f"tasks/langs: {e}") from None
            if self.mixture is not None:
                from synth.mixture import load_mixture

                try:
                    load_mixture(self.mixture)
                except SynthError as e:
                    raise ValueError(str(e)) from None


@dataclass
class TaseArgs(DataArgs):
    """GRPO options on top of the data options."""

    reward_granularity: str = field(default="fine", metadata={
        "help": "fine (partial credit on the strict verdict: hedges and echoes earn 0), strict (the strict 0/1 "
                "verdict) or coarse (the official 0/1 verdict, loopholes included: for ablations only)"})
    reward_funcs: list[str] | None = field(default=None, metadata={"help": "explicit reward names; default "
                                           "accuracy_<granularity> (+ format)"})
    format_reward: bool = field(default=True, metadata={"help": "add the answer-tag format reward (cold start)"})
    format_weight: float = field(default=0.2, metadata={"help": "weight of the format reward"})
    dry_run: bool = field(default=False, metadata={"help": "print the resolved configuration and exit"})
    min_gpus: int = field(default=0, metadata={"help": "refuse to start with fewer CUDA devices than this"})
    vllm_reload_sync: str = field(default="auto", metadata={
        "help": "colocated vLLM weight sync through vLLM's reload API (recipes/vllm_sync.py): auto (CPU engines, "
                "where TRL's load_weights sync fails), always, never", "choices": ["auto", "always", "never"]})

    trainer: str = field(default="sync", metadata={
        "help": "sync: TRL's GRPOTrainer (generation and optimizer steps take turns); async: TRL's AsyncGRPOTrainer "
                "(a rollout worker generates while the trainer trains; FSDP2 only, see docs/training.md)",
        "choices": ["sync", "async"]})
    async_generation: str = field(default="auto", metadata={
        "help": "async only: server (TRL's worker on `vllm serve` with NCCL weight transfer, CUDA), cpu_engine "
                "(recipes/async_cpu.py: an in-process vLLM engine in the rollout process, weights over gloo), auto "
                "(server with CUDA, else cpu_engine)", "choices": ["auto", "server", "cpu_engine"]})
    vllm_gpus: int = field(default=0, metadata={
        "help": "async on one node: GPUs given to the vLLM server (the rest train); shown by --dry-run and used "
                "by launch/local.sh --async"})
    async_max_model_len: int = field(default=2048, metadata={
        "help": "async cpu_engine: max_model_len of the in-process vLLM engine (prompt + completion)"})
    async_trace: str | None = field(default=None, metadata={
        "help": "async cpu_engine: append one JSON line per generation batch and weight sync to this file "
                "(times, policy versions; the async test and bench read it)"})

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.reward_granularity not in ("coarse", "strict", "fine"):
            raise ValueError(f"reward_granularity must be coarse, strict or fine, got {self.reward_granularity!r}")


def read_yaml(path: str | Path, what: str = "--config ") -> Any:
    """A YAML file's content (yaml.safe_load); an unreadable file or invalid YAML is one line naming it."""
    import yaml

    try:
        return yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as e:
        fail(f"{what}{path}: cannot read ({getattr(e, 'strerror', None) or e})")
    except yaml.YAMLError as e:
        fail(f"{what}{path}: not valid YAML ({str(e).splitlines()[0]})")


def check_config_types(parser: Any, argv: list[str]) -> None:
    """Check the --config YAML against the parser's options before TrlParser sees it: a value of the
    wrong type gives one line naming the key, the expected type and the value (argparse would print its
    whole usage text, or let a list through to crash later)."""
    import argparse

    if "--config" not in argv or argv.index("--config") + 1 >= len(argv):
        return
    path = argv[argv.index("--config") + 1]
    config = read_yaml(path)
    if not isinstance(config, dict):
        fail(f"--config {path}: must be a YAML mapping of option: value")
    actions: dict[str, Any] = {}
    for a in parser._actions:  # the option taking a value (bools also have a --no_X flag taking none)
        if not isinstance(a, argparse._HelpAction) and a.nargs != 0:
            actions.setdefault(a.dest, a)
    for key, value in config.items():
        a = actions.get(key)
        if a is None or value is None:
            continue  # unknown keys: TrlParser's own one-line error
        many = a.nargs in ("+", "*") or (isinstance(a.nargs, int) and a.nargs > 1)
        if many and not isinstance(value, list):
            fail(f"--config {path}: {key} expects a list, got {value!r}")
        for v in value if many else [value]:
            if not _fits(a, v):
                want = "one of " + ", ".join(map(str, a.choices)) if a.choices else _type_name(a)
                fail(f"--config {path}: {key} expects {want}, got {v!r}")


def _type_name(action: Any) -> str:
    t = action.type
    if t is None:
        return "a string"
    name = getattr(t, "__name__", str(t))
    return {"string_to_bool": "true or false", "int": "an integer", "float": "a number", "str": "a string"}.get(name, name)


def _fits(action: Any, v: Any) -> bool:
    """Would argparse accept this YAML value for the option (YAML already typed it)?"""
    if isinstance(v, (list, dict)):
        return False
    t = action.type
    name = getattr(t, "__name__", "")
    if name == "string_to_bool":
        return isinstance(v, bool) or (isinstance(v, str) and v.lower() in ("yes", "true", "t", "y", "1", "no",
                                                                            "false", "f", "n", "0"))
    if t is int:
        return (isinstance(v, int) and not isinstance(v, bool)) or (isinstance(v, str) and _parses(int, v))
    if t is float:
        return (isinstance(v, (int, float)) and not isinstance(v, bool)) or (isinstance(v, str) and _parses(float, v))
    if action.choices:
        return any(v == c or str(v) == str(c) or getattr(c, "value", None) == v for c in action.choices)
    if t is not None and isinstance(v, str):
        return _parses(t, v)
    return True


def _parses(t: Any, v: str) -> bool:
    try:
        t(v)
    except (ValueError, TypeError):
        return False
    return True


def parse_config(dataclass_types: tuple, argv: list[str]) -> tuple:
    """TrlParser over `dataclass_types` (a recipe's options, a TRL config, ModelConfig): --config YAML and
    command line, type-checked first (check_config_types), every error one line. Shared by GRPO and SFT."""
    from trl import TrlParser

    parser = TrlParser(dataclass_types)
    one_line_errors(parser)
    check_config_types(parser, argv)
    try:
        return parser.parse_args_and_config(args=argv)
    except (ValueError, TypeError, FileNotFoundError) as e:
        fail(str(e).strip().splitlines()[0])
    raise AssertionError  # unreachable: fail exits


def one_line_errors(parser: Any) -> None:
    """argparse errors (a bad value on the command line) as one line, not the usage text."""
    parser.error = lambda message: fail(message)


def check_output_dir(output_dir: str) -> Path:
    """output_dir must be a folder or creatable as one."""
    out = Path(output_dir)
    if out.exists() and not out.is_dir():
        fail(f"output_dir {out} is a file, not a folder")
    from synth.paths import write_blocker

    blocked = write_blocker(out)
    if blocked:
        d, why = blocked
        fail(f"output_dir {out}: {d} is " + ("a file, not a folder" if why == "file" else "not writable"))
    return out


def holds_run(out: Path) -> list[str]:
    """What marks `out` as holding a training run (checkpoints, trainer_state.json, metrics.jsonl)."""
    marks = sorted(p.name for p in out.glob("checkpoint-*"))[:3]
    return marks + [m for m in ("trainer_state.json", "metrics.jsonl") if (out / m).exists()]


def checkpoint_problem(ckpt: Path) -> str | None:
    """Why a Trainer checkpoint cannot be resumed from (None when complete): weights, optimizer and
    scheduler state and trainer_state.json must all be present and whole. The Trainer writes them in that
    order into the folder itself, so a kill during a save leaves a folder that fails one of these checks."""
    st = ckpt / "trainer_state.json"
    try:
        state = json.loads(st.read_text(encoding="utf-8"))
        if not isinstance(state.get("global_step"), int):
            return "trainer_state.json without global_step"
    except FileNotFoundError:
        return "no trainer_state.json"
    except (OSError, ValueError, AttributeError):
        return "unreadable trainer_state.json"
    index = ckpt / "model.safetensors.index.json"
    if index.is_file():
        try:
            shards = sorted(set(json.loads(index.read_text(encoding="utf-8"))["weight_map"].values()))
        except (OSError, ValueError, KeyError, TypeError):
            return "unreadable model.safetensors.index.json"
    else:
        shards = [n for n in ("model.safetensors", "adapter_model.safetensors") if (ckpt / n).is_file()][:1]
        if not shards:
            return "no safetensors weights"
    for name in shards:
        if not _whole_safetensors(ckpt / name):
            return f"{name} incomplete"
    if any(ckpt.glob("global_step*")):  # DeepSpeed keeps optimizer state in its own folder
        if not (ckpt / "latest").is_file():
            return "DeepSpeed state without 'latest'"
    else:
        for name in ("optimizer.pt", "scheduler.pt"):
            if not _whole_zip(ckpt / name):
                return f"{name} missing or incomplete"
    for rng in ckpt.glob("rng_state*.pth"):
        if not _whole_zip(rng):
            return f"{rng.name} incomplete"
    return None


def _whole_safetensors(path: Path) -> bool:
    """Header readable and the file exactly as long as the header says (a torn write is shorter)."""
    import struct

    try:
        size = path.stat().st_size
        with path.open("rb") as f:
            (n,) = struct.unpack("<Q", f.read(8))
            if n > size:
                return False
            header = json.loads(f.read(n))
        end = max((v["data_offsets"][1] for k, v in header.items() if k != "__metadata__"), default=0)
        return size == 8 + n + end
    except (OSError, ValueError, KeyError, TypeError, struct.error):
        return False


def _whole_zip(path: Path) -> bool:
    """torch.save files are zip archives: a truncated one has no readable central directory."""
    import zipfile

    try:
        with zipfile.ZipFile(path) as z:
            return bool(z.namelist())
    except (OSError, zipfile.BadZipFile, ValueError):
        return False


def resolve_resume(output_dir: str, resume: Any) -> str | None:
    """The checkpoint to resume from. `true`/`latest`: the newest *complete* checkpoint-N of output_dir
    (newer incomplete ones, left by a kill during a save, are moved aside to checkpoint-N.incomplete and
    named), or a fresh start when there is none; an explicit path must be complete. Prints one line."""
    if resume is None or resume is False or (isinstance(resume, str) and resume.lower() in ("", "false", "none")):
        return None
    out = Path(output_dir)
    if not (resume is True or (isinstance(resume, str) and resume.lower() in ("true", "latest"))):
        why = checkpoint_problem(Path(resume)) if Path(resume).is_dir() else "no such folder"
        if why:
            fail(f"resume_from_checkpoint {resume}: cannot resume from it ({why})")
        return str(resume)
    main = int(os.environ.get("RANK", "0")) == 0  # under accelerate every process chooses; one moves and prints
    cands = sorted((p for p in out.glob("checkpoint-*") if p.is_dir() and p.name.split("-", 1)[1].isdigit()),
                   key=lambda p: int(p.name.split("-", 1)[1]), reverse=True)
    skipped = []
    for c in cands:
        why = checkpoint_problem(c)
        if why is None:
            note = f"; skipped newer {', '.join(skipped)}" if skipped else ""
            if main:
                print(f"resuming from {c} (newest complete checkpoint{note})", file=sys.stderr)
            return str(c)
        aside = c.with_name(c.name + ".incomplete")
        k = 1
        while aside.exists():
            aside, k = c.with_name(f"{c.name}.incomplete{k}"), k + 1
        if main:
            os.replace(c, aside)
        skipped.append(f"{c.name} ({why}; moved to {aside.name})")
    if main:
        print(f"no complete checkpoint in {out}" + (f" (skipped {', '.join(skipped)})" if skipped else "")
              + "; starting from step 0", file=sys.stderr)
    return None


def trim_metrics(output_dir: str, step: int) -> None:
    """Drop metrics.jsonl lines logged after `step` (the resumed run logs those steps again)."""
    path = Path(output_dir) / "metrics.jsonl"
    if not path.is_file():
        return
    keep = []
    for line in path.read_text(encoding="utf-8").splitlines(keepends=True):
        try:
            if int(json.loads(line).get("step", 0)) <= step:
                keep.append(line)
        except (ValueError, TypeError, AttributeError):
            continue  # a torn last line from the kill
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text("".join(keep), encoding="utf-8")
    os.replace(tmp, path)


def hold_output_dir(output_dir: str) -> None:
    """Take output_dir's write lock for the rest of the process (the first process of a distributed run
    only: the others write where it says). A second run into the same folder stops with one line naming
    the first; the kernel drops the lock when this process ends, however it ends."""
    if int(os.environ.get("RANK", "0")) != 0:
        return
    import atexit

    from synth.paths import OutputBusy, hold_output

    lock = hold_output(output_dir)
    try:
        lock.__enter__()
    except OutputBusy as e:
        fail(str(e))
    atexit.register(lock.__exit__, None, None, None)


def prepare_output_dir(output_dir: str, resume: Any) -> str | None:
    """Take output_dir's write lock (hold_output_dir), then refuse an unusable output_dir, or one that
    holds a run unless resuming it; returns the checkpoint
    to resume from (see resolve_resume) and trims metrics.jsonl to it."""
    out = check_output_dir(output_dir)
    hold_output_dir(output_dir)
    want = not (resume is None or resume is False or (isinstance(resume, str) and resume.lower() in ("", "false")))
    marks = holds_run(out) if out.is_dir() else []
    if marks and not want:
        fail(f"output_dir {out} already holds a training run ({', '.join(marks)}); pass --resume_from_checkpoint "
             "true to continue it, or choose another --output_dir")
    ckpt = resolve_resume(output_dir, resume) if want else None
    if want and int(os.environ.get("RANK", "0")) == 0:
        step = 0
        if ckpt:
            step = json.loads((Path(ckpt) / "trainer_state.json").read_text(encoding="utf-8"))["global_step"]
        trim_metrics(output_dir, step)
    return ckpt


def already_finished(output_dir: str, ckpt: str | None, max_steps: int) -> bool:
    """A rerun of a finished command: the resumed checkpoint is at max_steps and the final model was
    saved. Resuming the Trainer there would run one step past max_steps (seen with TRL 1.16 GRPO), so the
    recipes stop instead, and say so."""
    if not ckpt or max_steps <= 0:
        return False
    step = json.loads((Path(ckpt) / "trainer_state.json").read_text(encoding="utf-8"))["global_step"]
    out = Path(output_dir)
    saved = (out / "model.safetensors").is_file() or (out / "adapter_model.safetensors").is_file() or any(
        out.glob("model-*.safetensors"))
    if step >= max_steps and saved:
        print(f"{output_dir}: already trained to max_steps {max_steps} ({Path(ckpt).name}) and saved; nothing to do")
        return True
    return False


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
    """The chat prompt of a record, built as `eval run` builds it (`eval.prompts.build_messages`)."""
    return build_messages(record, system_prompt=system_prompt)


def iter_records(args: DataArgs, limit: int | None = -1):
    """Training records from synth (with the contamination guard) or a JSONL file; `limit` defaults to
    num_train_examples, None streams without end (synth) or to the end of the file."""
    import itertools

    import synth
    from synth.guard import guard_from_specs
    from synth.mixture import load_mixture
    from synth.readers import load_data

    limit = args.num_train_examples if limit == -1 else limit
    if args.train_data != "synth":
        yield from itertools.islice(load_data(args.train_data), limit)
        return
    weights = load_mixture(args.mixture) if args.mixture else None
    tasks = args.tasks
    langs = args.langs
    streams = []
    for t in tasks:
        for lang in langs:
            streams.append(synth.generate(t, lang, sys.maxsize, args.synth_seed, paraphrase=args.paraphrase,
                                          weights=weights if t == "all" else None, max_len=args.max_len))
    stream = (r for group in zip(*streams) for r in group)  # interleave the requested cells
    guard = guard_from_specs(args.exclude)
    if guard:
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

    from synth.readers import DataError

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


def resolve(model: str | None, allow_pickle_weights: bool = False) -> str:
    """Model spec -> local plain HF folder (GGUF converted once); one-line error when unusable (a
    folder without safetensors weights included, unless `allow_pickle_weights`)."""
    from eval.models import ModelError, resolve_model

    try:
        return str(resolve_model(model, allow_pickle_weights=allow_pickle_weights))
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

