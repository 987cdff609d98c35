"""The shape of a language's declaration (`Language`) and the catalogue's registry (`LANGUAGES`); the language
modules (en.py, zh.py, ko.py) build their entry from it and `common.languages` lists them."""
from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from common.registry import Registry, RegistryError

Sentences = Callable[[], list[tuple[str, list[str]]]]  # [(source name, raw sentences in reading order)]
Words = Callable[[], list[tuple[str, float]]]  # [(word, frequency)], most frequent first


@dataclass(frozen=True)
class Language:
    """One language's declaration (common/languages/__init__.py says who reads each field)."""

    code: str  # the record's `lang`
    name: str
    stems: tuple[str, ...]  # official file stems naming it (`english`, `en`); the first is the awareness file's
    unit: str  # what a training answer says it counts ("words", "characters")
    yes: str  # DIFF's official "no difference" answer
    filler: str  # one unit of a gold LENGTH answer (joined by spaces in a word language)
    # its token characters as code point ranges (inclusive): a character language, whose tokens are these
    # characters; empty: the word language (tokens are valid English words, the official rule)
    char_ranges: tuple[tuple[int, int], ...] = ()
    spaced: bool = False  # a character language that writes spaces between words (Korean eojeols)
    punct: str = ",."  # punctuation the unigram corpus puts every 6-24 characters (character languages)
    wordfreq: str = ""  # the wordfreq code of its word list; or
    words: Words | None = None  # its own word list
    sentences: Sentences | None = None  # its running text (SORT, LENOP count, REORD, DIFF)
    denylist: str = ""  # "better-profanity" (whole words), a file name under synth/data/ (substrings), "" none
    freq_vocab: str = "chars"  # FREQ tokens: "words" (clean word list), "chars" (every character,
    # uniform), "weighted_chars" (characters of the word list weighted by word frequency)
    freq_stream: int = 1_500_000  # tokens in the fixed FREQ stream
    bigrams: str = ""  # `python -m synth stats`: a regex whose rate per 100 words is reported
    segmenter: str = ""  # eval tokstats: "jieba" or "" (whitespace)
    # LENOP generate's topics, aligned with the release's list; empty: synth/data/topics.json's list for its code
    topics: tuple[str, ...] = ()
    perturbations: frozenset[str] = frozenset()  # eval robustness kinds that apply to its units
    # task -> subtask -> prompt templates (official wording first): tasks this language brings itself to
    prompts: Mapping[str, Mapping[str, tuple[str, ...]]] = field(default_factory=lambda: MappingProxyType({}))
    char_re: re.Pattern[str] | None = field(init=False, default=None, repr=False, compare=False)
    not_char_re: re.Pattern[str] | None = field(init=False, default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.char_ranges:
            body = "".join(f"{chr(a)}-{chr(b)}" for a, b in self.char_ranges)
            object.__setattr__(self, "char_re", re.compile(f"[{body}]"))
            object.__setattr__(self, "not_char_re", re.compile(f"[^{body}]+"))

    @property
    def is_char(self) -> bool:
        """Tokens are single characters (no spaces between tokens in the official count)."""
        return bool(self.char_ranges)

    def token_chars(self) -> tuple[str, ...]:
        """Every token character, in code point order."""
        return tuple(chr(c) for a, b in self.char_ranges for c in range(a, b + 1))

    def length_text(self, n: int) -> str:
        """`n` units of `filler`: a gold LENGTH answer."""
        return self.filler * n if self.is_char else " ".join([self.filler] * n)


class LanguageError(RegistryError):
    """A language declared twice, or an entry that is not a `Language`."""


class _Catalogue(Registry[Language]):
    """The registry of languages, which also keeps its character languages at hand (the LENGTH rule reads them
    on every completion), refreshed on each `add` and `remove`."""

    _chars: tuple[Language, ...] | None = None

    def add(self, name: str, entry: Language, verb: str = "registered") -> Language:
        self._chars = None
        return super().add(name, entry, verb)

    def remove(self, name: str) -> None:
        self._chars = None
        super().remove(name)

    def char_languages(self) -> tuple[Language, ...]:
        if self._chars is None:
            self._chars = tuple(lang for lang in self.values() if lang.char_ranges)
        return self._chars


LANGUAGES = _Catalogue("language", LanguageError)


def declare_language(lang: Language) -> Language:
    """Add a language (refusing a code already taken) and return it."""
    if not isinstance(lang, Language):
        raise LanguageError(f"declare_language wants a Language, got {type(lang).__name__}")
    return LANGUAGES.add(lang.code, lang, "declared")


def undeclare_language(code: str) -> None:
    """Remove a language (a test's toy one)."""
    LANGUAGES.remove(code)


def codes() -> tuple[str, ...]:
    """The language codes, in catalogue order (read at call time, so a language declared later is seen)."""
    return LANGUAGES.names()


def language(code: str) -> Language | None:
    """The language called `code`, or None (`mul`, an unknown code)."""
    return LANGUAGES.get(code)


def char_languages() -> tuple[Language, ...]:
    """The character languages, in catalogue order (the LENGTH rule tries them in this order)."""
    return LANGUAGES.char_languages()


def of_stem(stem: str) -> str | None:
    """The language an official file stem names (`chinese`, `kor`), or None."""
    return next((lang.code for lang in LANGUAGES.values() if stem in lang.stems), None)


def stems() -> dict[str, str]:
    """Every official file stem -> its language code."""
    return {s: lang.code for lang in LANGUAGES.values() for s in lang.stems}
