"""Recipe options: the TASE dataclasses parsed by TrlParser beside TRL's own configs (recipes/shared/parser.py reads
the command line) and the trainer ranges checked after parsing. The rewards the options select are resolved once
by recipes/grpo_core/reward_funcs.resolve_rewards."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from common.errors import TaseError
from common.prompts import SYSTEM_PROMPT
from recipes import features
from recipes.shared.streams import data_streams, level_counts  # noqa: F401  (also importable from here)
from rewards.levels import DEFAULT, check_level


def _specs(template: type) -> list[tuple[str, Any, Any]]:
    """A dataclass's fields as make_dataclass specs (the features' options are inserted among them)."""
    return [(x.name, x.type, field(default=x.default, default_factory=x.default_factory, metadata=x.metadata))
            for x in dataclasses.fields(template)]


def _compose(name: str, template: type, methods: type, data: bool, bases: tuple = ()) -> type:
    """The options class `name`: `template`'s fields with the listed features' options folded in (recipes/features),
    and `methods`' methods; module-level here, so pickles and TrlParser's type hints resolve."""
    namespace = {k: v for k, v in vars(methods).items() if k not in ("__dict__", "__weakref__")}
    namespace["renamed_options"] = features.renamed()  # former option names, still accepted (recipes/shared/parser.py)
    cls = dataclasses.make_dataclass(name, features.option_fields(_specs(template), data), bases=bases,
                                     namespace=namespace)
    cls.__module__ = __name__
    return cls


@dataclass
class _DataFields:
    """The data options that are not a feature's (DataArgs adds those of the features with data options)."""

    train_data: str = field(default="synth", metadata={"help": "'synth' (generated on the fly) or a .jsonl of records"})
    tasks: list[str] = field(default_factory=lambda: ["all"], metadata={"help": "tasks to generate, or 'all'"})
    langs: list[str] = field(default_factory=lambda: ["all"], metadata={"help": "languages (en zh ko) or 'all'"})
    subtasks: list[str] | None = field(default=None, metadata={"help": "only these subtasks (e.g. combine): each "
                                       "task keeps those it has (default: every subtask of each task)"})
    mixture: str | None = field(default=None, metadata={"help": "YAML of per-task weights (overrides uniform)"})
    num_train_examples: int = field(default=2000, metadata={"help": "examples drawn from synth"})
    skip_examples: int = field(default=0, metadata={"help": "rows skipped before the first one kept (of synth's "
                               "guarded stream, or of the file): stages drawing consecutive, disjoint slices of "
                               "one seed's rows, e.g. a two-stage warm-up, then GRPO on the rows after"})
    synth_seed: int = field(default=1234, metadata={"help": "synth seed (kept apart from the benchmark's)"})
    max_len: int | None = field(default=None, metadata={"help": "cap synth sequence lengths (tokens)"})
    paraphrase: bool = field(default=True, metadata={"help": "paraphrased prompt templates in training data"})
    exclude: list[str] = field(default_factory=list, metadata={"help": "benchmarks to guard against (official:DIR)"})
    system_prompt: str = field(default=SYSTEM_PROMPT, metadata={"help": "system message of every prompt"})
    streaming: bool = field(default=False, metadata={"help": "feed an endless datasets.IterableDataset drawn from "
                            "synth on the fly (needs max_steps) instead of num_train_examples materialized rows"})
    max_prompt_tokens: int | None = field(default=None, metadata={"help": "drop examples whose chat-formatted "
                                          "prompt is longer than this many tokens (the paper's max input 16384)"})
    repeat_answers: list[str] | None = field(default=None, metadata={"help": "weight classes of a pool: ANSWER=K "
                                             "repeats every drawn row whose gold answer is ANSWER K times (e.g. "
                                             "kana=6 greek=6 symbol=2); num_train_examples counts rows before"})
    allow_pickle_weights: bool = field(default=False, metadata={"help": "accept a model folder without safetensors "
                                       "weights (pickle files can run code; trusted folders only)"})


class _DataMethods:
    """Training-data options shared by GRPO and the SFT warm-up (YAML and command line alike)."""

    def __post_init__(self) -> None:
        """Bad data options fail at parse time in one line (ValueError), not minutes later in a traceback."""
        for key in ("tasks", "langs", "exclude"):
            v = getattr(self, key)
            if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
                raise ValueError(f"{key} must be a list of strings, got {v!r}")
        for key, low in (("num_train_examples", 1), ("skip_examples", 0), ("max_len", 1), ("max_prompt_tokens", 1),
                         ("synth_seed", None)):
            v = getattr(self, key)
            if v is None and key in ("max_len", "max_prompt_tokens"):
                continue
            if not isinstance(v, int) or isinstance(v, bool) or (low is not None and v < low):
                raise ValueError(f"{key} must be an integer" + (f" >= {low}" if low is not None else "")
                                 + f", got {v!r}")
        for key in ("train_data", "system_prompt"):
            if not isinstance(getattr(self, key), str):
                raise ValueError(f"{key} must be a string, got {getattr(self, key)!r}")
        if self.subtasks is not None and (not isinstance(self.subtasks, list) or not self.subtasks
                                          or not all(isinstance(x, str) for x in self.subtasks)):
            raise ValueError(f"subtasks must be a non-empty list of strings (or unset), got {self.subtasks!r}")
        self.answer_repeats()
        features.check_options(self, data=True)  # the data options of features (held_out_*)
        if self.train_data == "synth":
            data_streams(self.tasks, self.langs, self.subtasks)
            if self.mixture is not None:
                from synth.core import SynthError
                from synth.mixture import load_mixture

                try:
                    load_mixture(self.mixture)
                except SynthError as e:
                    raise ValueError(str(e)) from None

    def answer_repeats(self) -> dict[str, int]:
        """repeat_answers as {answer: K}; a malformed entry (not ANSWER=K with an integer K >= 1, or an answer
        named twice) is one ValueError line."""
        v = self.repeat_answers
        if v is None:
            return {}
        if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
            raise ValueError(f"repeat_answers must be a list of ANSWER=K strings, got {v!r}")
        out: dict[str, int] = {}
        for item in v:
            answer, sep, k = item.rpartition("=")
            if not sep or not answer or not k.strip().isdigit() or int(k) < 1 or answer in out:
                raise ValueError(f"repeat_answers: {item!r} is not ANSWER=K with an integer K >= 1"
                                 + (" (that answer is already given)" if answer in out else ""))
            out[answer] = int(k)
        return out


DataArgs = _compose("DataArgs", _DataFields, _DataMethods, data=True)


@dataclass
class _TaseFields:
    """The GRPO options that are not a feature's (TaseArgs adds the features' options: recipes/features/)."""

    reward_granularity: str = field(default=DEFAULT, metadata={
        "help": "fine (partial credit on the strict verdict: hedges and echoes earn 0), strict (the strict 0/1 "
                "verdict) or coarse (the official 0/1 verdict, loopholes included: for ablations only)"})
    reward_funcs: list[str] | None = field(default=None, metadata={"help": "explicit reward names; default "
                                           "accuracy_<granularity> (+ format)"})
    format_reward: bool = field(default=True, metadata={"help": "add the answer-tag format reward (cold start)"})
    format_weight: float = field(default=0.2, metadata={"help": "weight of the format reward"})
    dry_run: bool = field(default=False, metadata={"help": "print the resolved configuration and exit"})
    local_files_only: bool = field(default=False, metadata={"help": "a hub id (owner/name) is read from the local "
                                   "Hugging Face cache only; by default a real start downloads one the cache lacks, as "
                                   "TRL does (HF_HUB_OFFLINE=1 refuses in one line)"})
    min_gpus: int = field(default=0, metadata={"help": "refuse to start with fewer CUDA devices than this"})
    keep_optimizer_state: bool = field(default=False, metadata={
        "help": "keep the checkpoints' optimizer and scheduler state when the run finishes (twice the model's size "
                "per checkpoint; needed only to train a finished run on to a larger --max_steps). A run that has not "
                "finished always keeps it, so resume stays exact"})
    trainer: str = field(default="sync", metadata={
        "help": "sync: TRL's GRPOTrainer (generation and optimizer steps take turns); async: TRL's AsyncGRPOTrainer "
                "(a rollout worker generates while the trainer trains; FSDP2 only, see docs/training.md)",
        "choices": ["sync", "async"]})
    async_generation: str = field(default="auto", metadata={
        "help": "async only: server (TRL's worker on `vllm serve` with NCCL weight transfer, CUDA), cpu_engine "
                "(recipes/async_grpo/cpu_engine.py: an in-process vLLM engine in the rollout process, weights over "
                "gloo), auto (server with CUDA, else cpu_engine)", "choices": ["auto", "server", "cpu_engine"]})
    vllm_gpus: int = field(default=0, metadata={
        "help": "async on one node: GPUs given to the vLLM server (the rest train); shown by --dry-run and used "
                "by launch/local.sh --async"})
    async_max_model_len: int = field(default=2048, metadata={
        "help": "async cpu_engine: max_model_len of the in-process vLLM engine (prompt + completion)"})
    async_trace: str | None = field(default=None, metadata={
        "help": "async cpu_engine: append one JSON line per generation batch and weight sync to this file "
                "(times, policy versions; the async test and bench read it)"})


class _TaseMethods:
    """GRPO options on top of the data options; each feature's options come from its module (recipes/features/)."""

    def __post_init__(self) -> None:
        DataArgs.__post_init__(self)
        check_level(self.reward_granularity)
        import math

        if isinstance(self.format_weight, bool) or not isinstance(self.format_weight, (int, float)) \
                or not math.isfinite(self.format_weight):  # nan would train with weights [1.0, nan]
            raise ValueError(f"format_weight must be a finite number, got {self.format_weight!r}")
        features.check_options(self, data=False)  # each feature's options, then the trainers it works with


TaseArgs = _compose("TaseArgs", _TaseFields, _TaseMethods, data=False, bases=(DataArgs,))


def _inf() -> float:
    return float("inf")


# Trainer options whose bad values TRL/transformers take without a word (max_steps -5 reads as "use epochs",
# learning_rate nan trains on NaN) or reject with a traceback once the trainer starts (temperature -1):
# option -> (accepts, what it must be). Checked where the option exists (GRPO's sampling ones only there).
TRAINER_RANGES: dict[str, tuple[Any, str]] = {
    "max_steps": (lambda v: v == -1 or v >= 1, "-1 (epochs) or >= 1"),
    "vllm_gpus": (lambda v: v >= 0, ">= 0"), "min_gpus": (lambda v: v >= 0, ">= 0"),
    "num_train_epochs": (lambda v: 0 < v < _inf(), "> 0"),
    "learning_rate": (lambda v: 0 <= v < _inf(), ">= 0"),
    "per_device_train_batch_size": (lambda v: v >= 1, ">= 1"),
    "gradient_accumulation_steps": (lambda v: v >= 1, ">= 1"),
    "save_steps": (lambda v: v > 0, "> 0"),
    "logging_steps": (lambda v: v > 0, "> 0"),
    "temperature": (lambda v: 0 < v < _inf(), "> 0"),
    "top_p": (lambda v: 0 < v <= 1, "in (0, 1]"),
    "top_k": (lambda v: v >= 0, ">= 0 (0: off)"),
    "min_p": (lambda v: v is None or 0 <= v <= 1, "in [0, 1]"),
    "repetition_penalty": (lambda v: 0 < v < _inf(), "> 0"),
    "beta": (lambda v: 0 <= v < _inf(), ">= 0"),
}


def check_trainer_ranges(*parsed: Any, where: str = "") -> None:
    """TRAINER_RANGES and the features' ranges on the parsed option objects (the recipe's dataclasses): the first bad
    value is one line."""
    for key, (ok, want) in {**TRAINER_RANGES, **features.ranges()}.items():
        for obj in parsed:
            if hasattr(obj, key) and not ok(getattr(obj, key)):
                raise TaseError(f"{where}{key} must be {want}, got {getattr(obj, key)}")


REWARD_OPTIONS = ("reward_granularity", "reward_funcs", "format_reward", "format_weight")


def option_section(name: str) -> str | None:
    """The --help section of a TASE option (recipes/parser.py): `feature NAME` for a feature's, `data`, `rewards`, or
    `run` for the rest of TaseArgs'; None for an option of TRL's or transformers' classes."""
    for f in features.FEATURES:
        for o in (f.options, f.sft_options):
            if o is not None and name in {x.name for x in dataclasses.fields(o)}:
                return f"feature {f.name}"
    if name in {x.name for x in dataclasses.fields(_DataFields)}:
        return "data"
    if name in REWARD_OPTIONS:
        return "rewards"
    return "run" if name in {x.name for x in dataclasses.fields(_TaseFields)} else None
