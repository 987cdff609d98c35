"""The language catalogue: one module per language (common/languages/<code>.py) declares everything the
packages above need to know about it, and `LANGUAGES` (a `common.registry.Registry`, which refuses a code
twice) lists them; its order is the order of every language table, listing and error message.

Why here, on the floor: rewards/ (the LENGTH rule, a gold LENGTH answer) and common/ (the record's
vocabulary, the readers) need per-language facts, and nothing may import upward. So a language module holds
only data and standard-library functions; what each layer does with them stays in that layer:
- common.record, common.readers: the codes (`codes()`), the official file stems (`of_stem`), DIFF's `yes`;
- rewards.length: the counting rule (`chars`: a character language counts its characters; the word
  language counts valid English words) and `filler`, one unit of a gold LENGTH answer;
- synth.resources, synth.denylist: the word list (`wordfreq` or `words`), the running text (`sentences`),
  the unigram corpus and FREQ vocabulary shape (`spaced`, `punct`, `freq_vocab`, `freq_stream`), the denylist,
  LENOP generate's `topics`;
- synth.gold (`unit`), synth.stats (`stems[0]`, `bigrams`), synth.core (`prompts`: a language may bring its
  own prompt templates to a task, which then offers it);
- eval.aggregate, eval.lm_eval_export (the language table), eval.perturb (`perturbations`: the kinds that
  apply to its units), eval.tokstats (`segmenter`, `topics`).

Adding a language: its module here and its entry in `_MODULES` below (docs/architecture.md, "Adding a
language"). `declare_language`/`undeclare_language` add and remove one at run time (a test's toy language).
"""
from __future__ import annotations

from . import en, ko, zh
from .base import (
    LANGUAGES,
    Language,
    LanguageError,
    Sentences,
    Words,
    char_languages,
    codes,
    declare_language,
    language,
    of_stem,
    stems,
    undeclare_language,
)

_MODULES = (en, zh, ko)  # the list: catalogue order
for _m in _MODULES:
    declare_language(_m.LANGUAGE)

__all__ = ["LANGUAGES", "Language", "LanguageError", "Sentences", "Words", "char_languages", "codes",
           "declare_language", "language", "of_stem", "stems", "undeclare_language"]
