"""Generator registry and the streaming `generate` entry point.

Each task is a small generator class (reasoning-gym style): a config dataclass, the languages and
subtasks it covers, and `make(rng, lang, subtask)` returning one record without `id` (or None to
reject and retry). Every example gets its own `random.Random` seeded from (seed, task, lang, subtask,
index), so example j is the same whatever else is generated, and the stream never holds a list.
"""
from __future__ import annotations

import hashlib
import random
import sys
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, fields, is_dataclass, replace
from typing import Any, ClassVar

from common import registry
from common.errors import TaseError, names
from common.languages import codes, language, of_stem
from common.record import TASE_TASKS, TASKS

MAX_TRIES = 64
# a cell whose generator returns only prompts it already gave, this many times in a row, is used up: its
# stream stops there (one line on stderr) instead of looping forever (e.g. char_classification, ~4,000
# characters, far fewer once the guard drops the official ones)
MAX_REPEATS = 1000
TEXT_SOURCES = ("real", "unigram")


class Generator:
    """Base class: subclasses set `task`, `langs` (the languages it offers, named explicitly: a new language is
    never claimed by default), `subtasks` and implement `make`. A language module may also bring its own
    prompt templates to a task (`common.languages.Language.prompts`): the task then offers that language too,
    for those subtasks.

    A task module owns everything about its task, declared here and read through the registry
    (`spec(task)`) by the readers, eval/ and recipes/ instead of lists keyed by task name:
    `answer_types` (subtask -> scoring TYPE), `official_file` (which official file names it has),
    `perturb_layouts`/`perturb_kinds` (how `eval robustness` cuts and perturbs its prompts, matching its
    templates), `unit_in_prompt` (tokstats: the asked-about unit is quoted in the prompt) and
    `sft_response` (a gold assistant turn with a short reasoning line), `stats_texts`/`stats_subtask`
    (the text a prompt carries, for `python -m synth stats`)."""

    task: ClassVar[str]
    langs: ClassVar[tuple[str, ...]] = ()
    subtasks: ClassVar[tuple[str, ...]] = ("",)
    answer_types: ClassVar[dict[str, str]] = {}
    # regexes (full match) cutting a prompt into spans; named groups p* payload, t counted target (kept),
    # k* kept verbatim, i* the only instruction spans (see eval/perturb.py)
    perturb_layouts: ClassVar[tuple[str, ...]] = ()
    # perturbation kinds that keep the gold answer when applied to the payload: a set of kind names,
    # UNIT_SAFE (every kind that keeps a word/character/syllable one unit), or empty (payload untouched)
    perturb_kinds: ClassVar[frozenset[str] | str] = frozenset()
    unit_in_prompt: ClassVar[bool] = False
    # `python -m synth stats` compares official and generated text lengths of the cells that define
    # `stats_texts`, generating this subtask
    stats_subtask: ClassVar[str | None] = None
    # difficulty levels for a curriculum (recipes/features/curriculum/levels.py), easiest first, the last one the
    # official files' own range: each level is the Config fields it sets (`at_level`). Empty: the task has no levels and
    # a curriculum leaves it static. `level_knob` says in words what the levels move (docs/training.md's table).
    levels: ClassVar[tuple[dict[str, Any], ...]] = ()
    level_knob: ClassVar[str] = ""
    # graded hints for guided GRPO (recipes/features/guidance/hints.py, issue 63): how many levels `hint(record, level)`
    # offers, level 0 the strongest; each hint is built only from that record's own gold answer. 0: never hinted.
    hint_levels: ClassVar[int] = 0
    # rows harder than the official files' range (`generate(harder=True)`, `python -m synth --harder`): the Config
    # fields that move past it (longer words, more pieces, more digits), for measuring transfer beyond what a model
    # trained on; never a curriculum level. Empty: the task has none. `harder_knob` says what moves, in words.
    harder: ClassVar[dict[str, Any]] = {}
    harder_knob: ClassVar[str] = ""

    @classmethod
    def has_harder(cls, lang: str, subtask: str) -> bool:
        """Whether the cell (lang, subtask) has harder rows: its `harder` fields move something there."""
        return bool(cls.harder)

    @dataclass
    class Config:
        paraphrase: bool = False  # draw the prompt template from paraphrases instead of the official one
        max_len: int | None = None  # cap on the sampled sequence length n (short prompts for small models)
        # awareness tasks: "real" running text built like the official files, or "unigram" (ablation)
        text_source: str = "real"

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """A task in the catalogue takes its subtasks from there, and its languages too when the catalogue
        marks it `no_lang` (rows in `mul` only), unless its module names them itself."""
        super().__init_subclass__(**kwargs)
        info = TASKS.get(getattr(cls, "task", ""))
        if info is None:
            return
        if "subtasks" not in cls.__dict__:
            cls.subtasks = info.subtasks
        if "langs" not in cls.__dict__ and info.no_lang:
            cls.langs = ("mul",)

    def __init__(self, config: Any | None = None) -> None:
        self.config = config if config is not None else self.Config()

    def supports(self, lang: str, subtask: str) -> bool:
        """Whether the task offers the cell: its own languages, or a language that brings prompts for it."""
        if subtask not in self.subtasks:
            return False
        return lang in self.langs or subtask in self.brought(lang)

    @classmethod
    def brought(cls, lang: str) -> dict[str, Any]:
        """subtask -> prompt templates that language `lang`'s module brings to this task (empty: none)."""
        entry = language(lang)
        return dict(entry.prompts.get(cls.task, {})) if entry is not None else {}

    @classmethod
    def answer_type(cls, subtask: str = "") -> str:
        """The scoring TYPE of the task's rows of `subtask`."""
        return cls.answer_types[subtask]

    @classmethod
    def official_file(cls, stem: str) -> tuple[str, str] | None:
        """(subtask, lang) of the official file `<stem>.csv` of this task, or None for a name the release
        does not use. Default: one file per language, named `chinese`/`english`/`korean`."""
        lang = of_stem(stem)
        return ("", lang) if lang else None

    @classmethod
    def stats_texts(cls, prompt: str, lang: str) -> list[str] | None:
        """The running text(s) a prompt in the official wording carries (`python -m synth stats`), or None
        for a task without length statistics."""
        return None

    @classmethod
    def sft_response(cls, record: dict[str, Any], unit: str) -> str | None:
        """A short correct assistant turn (reasoning line, then the tagged answer) for a labelled row of
        this task, or None for the plain tagged answer. `unit` names the language's unit (words, ...)."""
        return None

    @classmethod
    def hint(cls, record: dict[str, Any], level: int) -> str | None:
        """The hint text (without HINT_PREFIX) of difficulty `level` (0: the strongest of `hint_levels`) for a
        labelled row, built from its `answer` alone, or None where the row has no such hint. Only training
        prompts of guided GRPO ever carry it (recipes/features/guidance/hints.py)."""
        return None

    def make(self, rng: random.Random, lang: str, subtask: str) -> dict[str, Any] | None:
        raise NotImplementedError

    @classmethod
    def at_level(cls, config: Any, level: int) -> Any:
        """`config` with the fields of difficulty level `level` set (a level's `max_len` never lifts a smaller cap
        the caller already set: `generate(max_len=...)` keeps bounding prompt length). A task without levels, or
        a level out of range, is a SynthError line."""
        if not 0 <= level < len(cls.levels):
            raise SynthError(f"task {cls.task!r} has {len(cls.levels)} difficulty levels; no level {level}")
        knobs = dict(cls.levels[level])
        if "max_len" in knobs and config.max_len is not None:
            knobs["max_len"] = config.max_len if knobs["max_len"] is None else min(config.max_len, knobs["max_len"])
        return replace(config, **knobs)

    def n_range(self, lo: int, hi: int) -> tuple[int, int]:
        """The task's length range [lo, hi], capped by `config.max_len` (never below lo)."""
        cap = self.config.max_len
        return lo, hi if cap is None else max(lo, min(hi, cap))

    def template(self, rng: random.Random, templates: dict[str, Any], lang: str, subtask: str = "") -> str:
        """Official wording (index 0) unless paraphrasing is on; a language the task does not name itself takes
        the templates its module brings (`brought`)."""
        options = templates[lang] if lang in templates else self.brought(lang)[subtask]
        if isinstance(options, str):
            return options
        return rng.choice(options) if self.config.paraphrase else options[0]


MUL_TASKS = ", ".join(t for t, info in TASKS.items() if info.no_lang)  # the tasks whose rows are `mul`
UNIT_SAFE = "unit_safe"  # perturb_kinds: every kind that keeps a unit one unit (eval/perturb.py resolves it)

class RegistryError(registry.RegistryError):
    """A task module that cannot be registered: a second task of the same name, or a config that is not a
    dataclass (the registry builds configs from keyword arguments; reasoning-gym's factory refuses both)."""


def _origin(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


# the generators by task: a common.registry.Registry (add, remove, get, names), the shape of every registry (the task
# catalogue common.record.TASKS beside it); the same class registered again (its module imported twice) is a no-op
GENERATORS: registry.Registry[type[Generator]] = registry.Registry("task", RegistryError, origin=_origin, again=True)


def register(cls: type[Generator]) -> type[Generator]:
    """Class decorator: add a task's generator to the registry. Refuses, in one line, a task name that is
    already registered (a silent overwrite would swap the generator behind a name), a `Config` that is
    not a dataclass, difficulty `levels` naming a field its Config lacks, and a generator that names no languages."""
    task = getattr(cls, "task", None)
    if not isinstance(task, str) or not task:
        raise RegistryError(f"{cls.__qualname__}: a generator must name its task (class attribute `task`)")
    if GENERATORS.get(task, cls) is not cls:
        GENERATORS.add(task, cls)  # refused in one line: the task is another class's
    if not is_dataclass(getattr(cls, "Config", None)):
        raise RegistryError(f"{cls.__module__}.{cls.__qualname__}: Config must be a dataclass")
    names = {f.name for f in fields(cls.Config)}
    for i, knobs in enumerate(cls.levels):
        if not isinstance(knobs, dict) or set(knobs) - names:
            raise RegistryError(f"{cls.__module__}.{cls.__qualname__}: levels[{i}] must be a dict of Config fields, "
                                f"got {knobs!r}")
    if not cls.langs:
        raise RegistryError(f"{cls.__module__}.{cls.__qualname__}: a generator must name its languages "
                            f"(class attribute `langs`)")
    return GENERATORS.add(task, cls)


def available() -> dict[str, type[Generator]]:
    """Every registered generator. The registry is full once `synth` is imported: the package imports
    `synth.tasks`, which imports each task module (reasoning-gym's layout); this module imports none of
    them, so no import runs back from the registry to the tasks that register into it."""
    return GENERATORS


def spec(task: str) -> type[Generator] | None:
    """The registry entry (generator class, with the task's declarations) of `task`, or None."""
    return GENERATORS.get(task)


HINT_PREFIX = "Hint (for practice): "  # how a guided training prompt's hint starts (recipes/features/guidance/hints.py)


def hint_count(task: str) -> int:
    """How many hint levels `task` declares (0: its groups are never hinted)."""
    g = spec(task)
    return g.hint_levels if g is not None else 0


def task_hint(record: dict[str, Any], level: int) -> str | None:
    """`record`'s hint at `level` (capped at its task's weakest), HINT_PREFIX included; None without one."""
    g = spec(record.get("task", ""))
    if g is None or not g.hint_levels or not record.get("answer"):
        return None
    text = g.hint(record, min(max(level, 0), g.hint_levels - 1))
    return f"{HINT_PREFIX}{text}" if text else None


def level_count(task: str) -> int:
    """How many difficulty levels `task` declares (0: none, a curriculum leaves it static)."""
    g = spec(task)
    return len(g.levels) if g is not None else 0


class SynthError(TaseError, ValueError):
    """Bad arguments to `generate` (reported as one line by the CLI)."""


def combos(task: str, lang: str, subtask: str | None = None) -> list[tuple[str, str, str]]:
    """The (task, lang, subtask) cells covered by a request; `all` expands to the ten TASE tasks
    (opt-in families such as `execute` must be named)."""
    gens = available()
    tasks = [t for t in gens if t in TASE_TASKS] if task == "all" else [task]
    for t in tasks:
        if t not in TASKS:
            raise SynthError(f"unknown task {t!r}; choose from: all, {', '.join(TASKS)}")
        if t not in gens:
            raise SynthError(f"task {t!r} has no generator yet")
    known = (*codes(), "mul")
    langs = list(known) if lang == "all" else [lang]
    for l in langs:
        if l not in known:
            raise SynthError(f"unknown language {l!r}; choose from: all, {', '.join(codes())}, mul ({MUL_TASKS})")
    cells = []
    for t in tasks:
        g = gens[t]
        probe = g()
        subs = [subtask] if subtask is not None else list(g.subtasks)
        if subtask is not None and subtask not in g.subtasks and task != "all":
            names = ", ".join(repr(x) for x in g.subtasks)
            raise SynthError(f"task {t!r} has no subtask {subtask!r}; choose from: {names}")
        for l in langs:
            for s in subs:
                if probe.supports(l, s):
                    cells.append((t, l, s))
    if not cells:
        raise SynthError(f"nothing to generate for task={task} lang={lang} subtask={subtask}")
    return cells


def _salt(task: str, lang: str, subtask: str) -> int:
    return zlib.crc32(f"{task}/{lang}/{subtask}".encode())


def check_harder(cells: list[tuple[str, str, str]]) -> None:
    """Every (task, lang, subtask) cell has harder rows (Generator.has_harder), else one SynthError line naming the
    first that has none."""
    for t, lang, sub in cells:
        if not GENERATORS[t].has_harder(lang, sub):
            cell = "/".join(x for x in (t, lang, sub) if x)
            raise SynthError(f"--harder: {cell} has no harder rows (rows beyond the official files' range; "
                             f"{GENERATORS[t].harder_knob or 'the task has none'})")


def generate(
    task: str,
    lang: str,
    n: int,
    seed: int,
    subtask: str | None = None,
    *,
    paraphrase: bool = False,
    weights: dict[str, float] | None = None,
    max_len: int | None = None,
    text_source: str = "real",
    stats: dict[str, int] | None = None,
    level: Callable[[str], int | None] | None = None,
    harder: bool = False,
) -> Iterator[dict[str, Any]]:
    """Stream `n` records for `task`/`lang` (either may be "all"), deterministic for `seed`.

    With several cells (task x lang x subtask), records are interleaved round-robin, or drawn with
    per-task `weights` (a mixture for GRPO) when given. `max_len` caps sequence lengths (tokens) for
    tasks that have one (shorter prompts for small models and CPU runs). `text_source` picks what the
    awareness tasks slice: "real" (default; running text and token lists built per task the way the
    official files are) or "unigram" (the earlier frequency-weighted unigram sample, an ablation).
    Structural tasks ignore it. Each record's `id` is
    `synth/<task>/<lang>[/<subtask>]/<seed>/<index within its cell>`.

    Prompts never repeat within a cell (one seed stream): an example whose prompt the cell already gave
    is skipped (its index is not reused, so ids can have gaps) and the next index is drawn instead; training
    and held-out sets built from one stream hold distinct prompts by construction. A cell that draws
    MAX_REPEATS repeats in a row has no new prompts left: it stops (one line on stderr says how many
    distinct prompts it gave), the other cells go on, and the stream ends early, with fewer than `n`
    records, once every cell has stopped. `stats` (optional) receives "repeats" (prompts skipped) and
    "exhausted" (cells stopped).

    `level` (a curriculum, recipes/features/curriculum/levels.py) maps a task to its difficulty level, or None for the
    task's plain config; it is read at every draw, so a level changed while the stream is being read reaches the next
    record drawn. A task without `levels` ignores it. Each record drawn at a level carries it in `meta["level"]`.
    A cell whose level has no new prompts left starts that level's prompts again instead of stopping (a curriculum
    stream must not end while a model is stuck at an easy level).

    `harder`: every task drawn with its `harder` Config fields (rows beyond the official files' range: a transfer
    test set); a task without them is a SynthError line."""
    if n < 0:
        raise SynthError(f"n must be >= 0, got {n}")
    if text_source not in TEXT_SOURCES:
        raise SynthError(f"unknown text source {text_source!r}; choose from: {', '.join(TEXT_SOURCES)}")
    cells = combos(task, lang, subtask)
    gens = {
        t: GENERATORS[t](GENERATORS[t].Config(paraphrase=paraphrase, max_len=max_len, text_source=text_source))
        for t in {c[0] for c in cells}
    }
    if harder:
        check_harder(cells)
        gens = {t: GENERATORS[t](replace(g.config, **g.harder)) for t, g in gens.items()}
    at_level: dict[tuple[str, int], Generator] = {}  # one generator per (task, level) drawn at
    salts = [_salt(*c) for c in cells]
    counters = [0] * len(cells)
    pick = _picker(cells, weights, seed)
    base = (seed & 0xFFFFFFFFFFFF) << 64
    seen: list[set[bytes]] = [set() for _ in cells]  # 16-byte digests of the prompts each cell gave
    # a cell the weights never pick counts as stopped: the stream ends once every pickable cell has stopped
    stopped = [bool(weights) and not float(weights.get(c[0], 0.0)) > 0 for c in cells]
    stats = {} if stats is None else stats
    stats.setdefault("repeats", 0)
    stats.setdefault("exhausted", 0)
    i = produced = 0
    while produced < n:
        ci = pick(i)
        i += 1
        if stopped[ci]:
            if all(stopped):
                return
            continue
        t, l, s = cells[ci]
        gen = gens[t]
        lv = level(t) if level is not None and gen.levels else None
        if lv is not None:
            if (t, lv) not in at_level:
                at_level[t, lv] = GENERATORS[t](gen.at_level(gen.config, lv))
            gen = at_level[t, lv]
        for _ in range(MAX_REPEATS):
            j = counters[ci]
            counters[ci] += 1
            rng = random.Random(base | (salts[ci] << 32) | j)
            for _ in range(MAX_TRIES):
                rec = gen.make(rng, l, s)
                if rec is not None:
                    break
            else:  # pragma: no cover - generators are written to succeed within a few tries
                raise RuntimeError(f"generator {t}/{l}/{s} failed {MAX_TRIES} times at index {j}")
            key = hashlib.blake2b(rec["prompt"].encode("utf-8"), digest_size=16).digest()
            if key not in seen[ci]:
                seen[ci].add(key)
                break
            stats["repeats"] += 1
        else:
            stats["exhausted"] += 1
            name = "/".join(x for x in (t, l, s) if x)
            if lv is not None:  # a curriculum level used up: its prompts come again rather than end the stream
                print(f"synth: {name} (seed {seed}) level {lv}: {len(seen[ci])} distinct prompts, then {MAX_REPEATS} "
                      "repeats in a row: the level's prompts start again", file=sys.stderr)
                seen[ci].clear()
                continue
            stopped[ci] = True
            print(f"synth: {name} (seed {seed}): {len(seen[ci])} distinct prompts, then {MAX_REPEATS} repeats "
                  "in a row: no new prompts left, this cell stops here", file=sys.stderr)
            if all(stopped):
                return
            continue
        rec["id"] = f"synth/{t}/{l}/{s}/{seed}/{j}" if s else f"synth/{t}/{l}/{seed}/{j}"
        if lv is not None:
            rec["meta"] = {**(rec.get("meta") or {}), "level": lv}
        produced += 1
        yield rec


def _picker(cells: list[tuple[str, str, str]], weights: dict[str, float] | None, seed: int):
    if not weights:
        k = len(cells)
        return lambda i: i % k
    unknown = set(weights) - set(TASKS)
    if unknown:
        raise SynthError(f"unknown task(s) in weights: {names(sorted(map(str, unknown)))}")
    per_task: dict[str, int] = {}
    for t, _, _ in cells:
        per_task[t] = per_task.get(t, 0) + 1
    w = [max(0.0, float(weights.get(t, 0.0))) / per_task[t] for t, _, _ in cells]
    if sum(w) <= 0:
        raise SynthError("mixing weights select no task")
    cum, acc = [], 0.0
    for x in w:
        acc += x
        cum.append(acc)
    idx = list(range(len(cells)))
    rng = random.Random(seed ^ 0x5EED)
    return lambda i: rng.choices(idx, cum_weights=cum)[0]
