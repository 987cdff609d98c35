"""Gold answers, the one builder used by eval and training alike: `gold_completion` for `eval gold` and
the tests (a tagged answer `rewards.score` marks correct, for any record), `sft_completion` for the SFT
warm-up (a short reasoning line where the task module declares one, then the tagged answer).

Which answer a row's gold completion gives is its scoring type's rule (`rewards.types.ScoringType.gold`,
declared in rewards/<type>.py): the label, or for the types whose rows hold none (`UNLABELLED_TYPES`) a
constructed one: REORD (SHUFFLE) a reordering with no original neighbours kept, built by the same solver
as the synthetic REORD solutions (`rewards.reorder.non_adjacent_order`); LENOP generate (LENGTH) text
with the requested number of units. A training answer is the type's own where it declares one
(`ScoringType.sft`: the generator's REORD solution, real LENOP text from the corpus), else the label after
the reasoning line of the task registry (`synth.core.Generator.sft_response`).
"""
from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from common.errors import TaseError
from common.languages import language
from rewards import score
from rewards.base import tag
from rewards.types import get_type, label_answers

from .core import spec
from .resources import corpus


def _unit(lang: str) -> str | None:
    """What a training answer says it counts in `lang` (its catalogue `unit`), None for `mul`."""
    entry = language(lang)
    return entry.unit if entry is not None else None


class GoldError(TaseError, ValueError):
    """No correct completion could be built for a record (one line naming its id)."""


def gold_completion(rec: dict[str, Any], seed: int = 0) -> str:
    """A completion that `rewards.score` marks correct (coarse 1.0); raises GoldError when none exists
    (e.g. a REORD line of 2 or 3 tokens). Rows the official evaluator drops (valid=False) get the tagged
    label, since no completion can make them count. `seed` is unused (the REORD answer is constructed,
    not sampled); it stays for callers that pass one."""
    typ = rec.get("type")
    t = get_type(typ)  # the scoring type's module says what its gold answer is (rewards.types)
    cands: Iterable[str] = (t.gold if t is not None else label_answers)(rec)
    for text in cands:
        comp = tag(text)
        s = score(rec, comp)
        if s.coarse == 1.0 or not s.valid:
            return comp
    raise GoldError(f"{rec.get('id', '?')}: no correct {typ} completion could be built")


def sft_completion(record: dict[str, Any]) -> str | None:
    """A short correct assistant turn for the SFT warm-up: brief reasoning where the task module declares
    it, then the gold answer in tags. None when no gold answer can be written: a REORD row without the
    generator's solution, a LENOP generate row without its target, a row without a label."""
    ans = record.get("answer", "")
    t = get_type(record["type"])
    if t is not None and t.sft is not None:  # the type's own target (rewards.types.ScoringType.sft)
        return t.sft(record, _unit(record["lang"]), corpus)
    unit = _unit(record["lang"]) or "tokens"
    if not ans:
        return None
    gen = spec(record["task"])  # the task module may add a reasoning line (synth.core.Generator.sft_response)
    return (gen.sft_response(record, unit) if gen is not None else None) or tag(ans)
