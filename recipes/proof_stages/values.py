"""The proof config's value checks that need no other part of the proof's config code (the ranges of the later
stages' values, the seeds, the control sweep and the transfer keys): `load_config` runs them before any stage,
so a dry run refuses what the real run would refuse later."""
from __future__ import annotations

import re

from common.errors import TaseError, bounded
from recipes.proof_stages.sections import Compare, Eval, Heldout, ProofConfig, Select


def check_values(path: str, ho: Heldout, ev: Eval, compare: Compare) -> None:
    """The values of heldout:, eval: and compare: that the later stages take (synth's task, lang and subtask, n >= 1,
    max_new_tokens, batch_size, n_boot), checked here so that a dry run refuses them as the real run would, before
    any stage trains (they failed at the evaluation stage, after every model had trained); each one line."""
    from synth.core import SynthError, combos

    sections = {"heldout": ho, "eval": ev, "compare": compare}
    for sec, key, low in (("heldout", "n", 1), ("heldout", "max_len", 1), ("eval", "max_new_tokens", 1),
                          ("eval", "batch_size", 1), ("compare", "n_boot", 1)):
        v = getattr(sections[sec], key)
        if v is not None and v < low:
            raise TaseError(f"--config {path}: {sec}: {key} must be at least {low}, got {bounded(v)}")
    from eval._cli.common import MAX_BOOT

    if compare.n_boot > MAX_BOOT:
        raise TaseError(f"--config {path}: compare: n_boot must be at most {MAX_BOOT:,}, got {compare.n_boot}")
    try:
        combos(ho.task, ho.lang, ho.subtask)
    except SynthError as e:
        raise TaseError(f"--config {path}: heldout: {e}") from None


def check_seeds(path: str, cfg: ProofConfig) -> None:
    """`seeds:` a non-empty list of distinct integers >= 0, and no arm or control option `seed` beside it; a named
    arm's `seeds:` some of them (the control timed by an arm needs that arm on every seed); `control: sweep_once`
    some of control, rft, each swept (learning_rates; rft: true), with seeds:."""
    seeds = cfg.seeds
    if seeds is not None and (not seeds or not all(isinstance(x, int) and not isinstance(x, bool) and x >= 0
                                                   for x in seeds) or len(set(seeds)) != len(seeds)):
        raise TaseError(f"--config {path}: seeds must list distinct whole numbers >= 0, got {bounded(seeds)}")
    ctl = cfg.control
    once = ctl.sweep_once if ctl is not None else None
    if once is not None:
        if not once or not all(x in ("control", "rft") for x in once) or len(set(once)) != len(once):
            raise TaseError(f"--config {path}: control: sweep_once must list control and/or rft, each once, got "
                            f"{bounded(once)}")
        if cfg.seeds is None or not ctl.learning_rates:
            raise TaseError(f"--config {path}: control: sweep_once sweeps the first seed's rates and trains the later "
                            "seeds at the chosen one: it needs seeds: and control: learning_rates")
        if "rft" in once and not ctl.rft:
            raise TaseError(f"--config {path}: control: sweep_once names rft without control: rft: true")
    for arm in cfg.grpo.arms:
        if arm.seeds is None:
            continue
        if cfg.seeds is None:
            raise TaseError(f"--config {path}: grpo arm {arm.name!r}: seeds: picks among the config's seeds:, which "
                            "it has not")
        if not arm.seeds or not all(isinstance(x, int) and not isinstance(x, bool) and x in cfg.seeds
                                    for x in arm.seeds) or len(set(arm.seeds)) != len(arm.seeds):
            raise TaseError(f"--config {path}: grpo arm {arm.name!r}: seeds must list some of seeds: "
                            f"({', '.join(map(str, cfg.seeds))}), each once, got {bounded(arm.seeds)}")
        if ctl is not None and ctl.steps is None and (ctl.follows or "fine") == arm.name:
            raise TaseError(f"--config {path}: the control trains for the {arm.name} arm's train_runtime on every "
                            f"seed: that arm cannot leave out seeds (or give control: steps)")
    if cfg.seeds is None:
        return
    where = [("grpo options", cfg.grpo.options), *((f"grpo arm {a.name!r} options", a.options)
                                                   for a in cfg.grpo.arms if a.named),
             *((("control options", cfg.control.options),) if cfg.control is not None else ())]
    for name, opts in where:
        if "seed" in opts:
            raise TaseError(f"--config {path}: seeds: sets every arm's and control's seed; drop {name}: seed")


def check_sweep(path: str, cfg: ProofConfig) -> None:
    """`control: learning_rates` (distinct rates > 0, with select: to choose among them, no control option
    learning_rate) and `control: rft` (GRPO data of one stream, no skip_examples: its prompts are the GRPO arms'
    first ones)."""
    ctl = cfg.control
    if ctl is None:
        return
    if ctl.learning_rates is not None:
        rates = ctl.learning_rates
        if not rates or not all(isinstance(r, (int, float)) and not isinstance(r, bool) and 0 < r < 1 for r in rates) \
                or len(set(rates)) != len(rates):
            raise TaseError(f"--config {path}: control: learning_rates must list distinct learning rates in (0, 1), "
                            f"got {bounded(rates)}")
        if "learning_rate" in ctl.options:
            raise TaseError(f"--config {path}: control: learning_rates sweeps the control's rate; drop control: "
                            "options: learning_rate")
        if cfg.select is None:
            raise TaseError(f"--config {path}: control: learning_rates needs select: (the held-out selection "
                            "chooses among the rates and steps)")


def check_transfer(path: str, cfg: ProofConfig) -> None:
    """`transfer:` harder rows (n >= 1, a task heldout: has harder rows for), untrained official files (each a
    <group>/<task>/<file>.csv not among files:), rows >= 1; at least one of harder and files."""
    from synth.core import SynthError, check_harder, combos

    tr = cfg.transfer
    assert tr is not None
    if tr.harder is None and tr.files is None:
        raise TaseError(f"--config {path}: transfer: give harder: (n, seed) and/or files: (untrained official files)")
    if tr.harder is not None:
        if tr.harder.n < 1:
            raise TaseError(f"--config {path}: transfer: harder: n must be at least 1, got {bounded(tr.harder.n)}")
        ho = cfg.heldout
        try:
            check_harder(combos(ho.task, ho.lang, ho.subtask))
        except SynthError as e:
            raise TaseError(f"--config {path}: transfer: harder: {e}".replace("--harder: ", "")) from None
    files = tr.files
    if files is not None:
        if not files or not all(isinstance(f, str) and re.fullmatch(r"[^/]+/[^/]+/[^/]+\.csv", f) for f in files) \
                or len(set(files)) != len(files):
            raise TaseError(f"--config {path}: transfer: files must list official files as <group>/<task>/<file>.csv, "
                            f"each once, got {bounded(files)}")
        from common.paths import relative_refusal

        for f in files:  # as files: entries, each part a name: `../../x.csv` was linked into OUT from outside
            why = relative_refusal(f, f"--config {path}: transfer: files entry {f!r}")
            if why:
                raise TaseError(why)
        trained = [f for f in files if f in cfg.files]
        if trained:
            raise TaseError(f"--config {path}: transfer: files are the files the models did not train on; "
                            f"{trained[0]} is in files:")
    if tr.rows is not None and tr.rows < 1:
        raise TaseError(f"--config {path}: transfer: rows must be at least 1, got {bounded(tr.rows)}")


def check_select(path: str, sel: Select) -> None:
    """`select:`: n and seed together (its own held-out set) or neither (the proof's held-out set), n >= 1, and a
    metric select_checkpoint.py knows; each refusal one line."""
    from recipes.select_checkpoint import RULES

    if (sel.n is None) != (sel.seed is None):
        raise TaseError(f"--config {path}: select: give n and seed together (its own held-out set) or neither (the "
                        "held-out set of heldout:)")
    if sel.n is not None and sel.n < 1:
        raise TaseError(f"--config {path}: select: n must be at least 1, got {bounded(sel.n)}")
    if (sel.metric or "official_acc") not in RULES:
        raise TaseError(f"--config {path}: select: metric must be one of {', '.join(sorted(RULES))}, got "
                        f"{bounded(sel.metric)}")
