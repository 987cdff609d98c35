"""The proof config's sections as the stages read them (recipes/proof_stages/config.py's load_config checks the
YAML once and returns a ProofConfig): one frozen dataclass per section, so that no stage reads the YAML by key.
An optional key not given, or given as null, is None; an optional section not given is None (`control:` alone: its
defaults)."""
from __future__ import annotations

import dataclasses
from typing import Any

START = "start"  # the start's model name and folder (OUT/start): what the arms and the control train from

@dataclasses.dataclass(frozen=True)
class Recipe:
    """sft: the warm-up's recipe config and its options (sft_warmup.py's)."""

    config: str
    options: dict[str, Any]


@dataclasses.dataclass(frozen=True)
class StartStage:
    """A start stage (START_SCHEMA): its name (start, or start1 .. start<k-1> before it in a list), the GRPO data's
    synth_seed (and slice) it trains on, and its sft_warmup.py options."""

    name: str
    synth_seed: int
    num_train_examples: int | None = None
    skip_examples: int | None = None
    options: dict[str, Any] = dataclasses.field(default_factory=dict)

    @property
    def data(self) -> dict[str, Any]:
        """Its own data keys that it gives (config.START_DATA: every field but name and options), in that order."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)
                if f.name not in ("name", "options") and getattr(self, f.name) is not None}


@dataclasses.dataclass(frozen=True)
class GrpoArm:
    """An entry of grpo: arms: a level (`fine`: named by it, no options, `named` false) or a named arm (ARM_SCHEMA)."""

    name: str
    reward_granularity: str
    options: dict[str, Any]
    named: bool
    seeds: list[int] | None = None  # the seeds it trains on (a named arm's `seeds:`), None: every seed of seeds:


@dataclasses.dataclass(frozen=True)
class Grpo:
    """grpo: the arms' recipe config, arms, extra reward functions, shared options and lr_matched arm."""

    config: str
    arms: list[GrpoArm]
    reward_funcs: list[str]
    options: dict[str, Any]
    lr_matched: str | None = None


@dataclasses.dataclass(frozen=True)
class Control:
    """control: the more-SFT control's options, how it is ended (follows, steps), its rate sweep and the RFT control."""

    options: dict[str, Any]
    follows: str | None = None
    steps: int | None = None
    learning_rates: list[float] | None = None
    rft: bool | None = None
    sweep_once: list[str] | None = None  # control and/or rft: the sweep on the first seed, its chosen rate after


@dataclasses.dataclass(frozen=True)
class Harder:
    """transfer: harder: n rows beyond the official range, drawn with seed."""

    n: int
    seed: int


@dataclasses.dataclass(frozen=True)
class Transfer:
    """transfer: harder rows and/or untrained official files (rows: a stratified slice of each)."""

    harder: Harder | None = None
    files: list[str] | None = None
    rows: int | None = None


@dataclasses.dataclass(frozen=True)
class Select:
    """select: the selection's own held-out set (n, seed; else heldout:'s) and its metric."""

    n: int | None = None
    seed: int | None = None
    metric: str | None = None


@dataclasses.dataclass(frozen=True)
class Heldout:
    """heldout: the generated held-out set (synth's task, lang, subtask; n rows with seed, max_len)."""

    task: str
    lang: str
    n: int
    seed: int
    max_len: int | None = None
    subtask: str | None = None


@dataclasses.dataclass(frozen=True)
class Eval:
    """eval: the evaluations' backend, new tokens, batch size and dtype."""

    backend: str
    max_new_tokens: int
    batch_size: int | None = None
    dtype: str | None = None


@dataclasses.dataclass(frozen=True)
class Compare:
    """compare: the paired bootstrap's resamples."""

    n_boot: int


@dataclasses.dataclass(frozen=True)
class ProofConfig:
    """A checked proof config (load_config): SCHEMA's sections, typed."""

    out: str
    files: list[str]
    sft: Recipe
    grpo: Grpo
    heldout: Heldout
    eval: Eval
    compare: Compare
    completions: str | None = None
    start: list[StartStage] = dataclasses.field(default_factory=list)  # in order; empty without start:
    control: Control | None = None
    seeds: list[int] | None = None
    transfer: Transfer | None = None
    select: Select | None = None
    delete_checkpoints: bool | None = None  # a seed's checkpoint folders deleted once it is selected and evaluated
    first_seed: int | None = None  # seeds:'s first (not a YAML key): kept when a seed's view narrows seeds


def typed(cfg: dict[str, Any]) -> ProofConfig:
    """The checked YAML as a ProofConfig: every key SCHEMA knows, options {} where absent."""
    tr, arms = cfg.get("transfer"), cfg["grpo"]["arms"]
    return ProofConfig(
        out=cfg["out"], files=cfg["files"], completions=cfg.get("completions"), sft=Recipe(**cfg["sft"]),
        start=[StartStage(name, **sec) for name, sec in start_sections(cfg)],
        grpo=Grpo(config=cfg["grpo"]["config"], reward_funcs=cfg["grpo"]["reward_funcs"],
                  options=cfg["grpo"]["options"], lr_matched=cfg["grpo"].get("lr_matched"),
                  arms=[GrpoArm(a, a, {}, False) if isinstance(a, str) else
                        GrpoArm(a["name"], a["reward_granularity"], a["options"], True, a.get("seeds"))
                        for a in arms]),
        control=Control(**cfg["control"]) if "control" in cfg else None, seeds=cfg.get("seeds"),
        transfer=None if tr is None else Transfer(Harder(**tr["harder"]) if "harder" in tr else None, tr.get("files"),
                                                  tr.get("rows")),
        select=Select(**cfg["select"]) if "select" in cfg else None, heldout=Heldout(**cfg["heldout"]),
        eval=Eval(**cfg["eval"]), compare=Compare(**cfg["compare"]), delete_checkpoints=cfg.get("delete_checkpoints"),
        first_seed=(cfg.get("seeds") or [None])[0])


def start_sections(cfg: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """The YAML's start stages in order, as (name, section): a `start:` mapping is one stage named start; a list of
    k mappings is k stages named start1 .. start<k-1>, then start (the last: what the arms and the control train
    from, and the comparisons' baseline), each from the one before, the first from the warm-up. None without one.
    The loader's reading of start: (the stages read ProofConfig.start)."""
    s = cfg.get("start")
    if s is None:
        return []
    if isinstance(s, dict):
        return [(START, s)]
    return [(f"{START}{i + 1}" if i < len(s) - 1 else START, sec) for i, sec in enumerate(s)]
