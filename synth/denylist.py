"""Profanity and slur denylist applied to every awareness word list and text source.

English: the word list of the `better-profanity` package (PyPI, MIT, 0.7.0: 916 entries, some of them
phrases such as "blow job"), matched as whole words: a text is rejected when one of its runs of
letters/digits (lower-cased; hyphenated and apostrophe compounds are split, so "ass-kicking" matches
"ass") equals a listed word, or a run of consecutive ones equals a listed phrase. The list is broad (it
also holds "god", "fat", "len"); sentences and words that contain them are dropped, which costs a little
text and never lets a slur through.
Chinese and Korean: our own short lists, `synth/data/denylist_{zh,ko}.txt` (no maintained registry
package ships one), matched as substrings. Which list a language uses is its catalogue entry's `denylist`
(`common.languages`): "better-profanity", a file name under synth/data/, or "" (no list: nothing is denied).
"""
from __future__ import annotations

import re
from functools import cache
from importlib import resources as ir
from pathlib import Path

import numpy as np

from common.languages import language

WORDS = "better-profanity"  # the denylist matched as whole words (English)
EN_RUN = re.compile(r"[a-z0-9]+")


def _read_terms(text: str) -> list[str]:
    return [t.strip() for t in text.splitlines() if t.strip() and not t.lstrip().startswith("#")]


def en_list_path() -> Path:
    """The better-profanity word list file (read directly: its filter code is not used)."""
    import importlib.util

    spec = importlib.util.find_spec("better_profanity")
    if spec is None or not spec.submodule_search_locations:  # pragma: no cover - a declared dependency
        raise ModuleNotFoundError("better-profanity is not installed (pip install better-profanity)")
    return Path(next(iter(spec.submodule_search_locations))) / "profanity_wordlist.txt"


def _source(lang: str) -> str:
    """The language's denylist (its catalogue entry's `denylist`); an unknown code has none."""
    return getattr(language(lang), "denylist", "")


@cache
def terms(lang: str) -> tuple[str, ...]:
    """The listed terms for `lang` (English lower-cased), in file order without duplicates."""
    source = _source(lang)
    if source == WORDS:
        raw = en_list_path().read_text(encoding="utf-8")
        out = [" ".join(EN_RUN.findall(t.lower())) for t in _read_terms(raw)]
    elif source:
        out = _read_terms(ir.files("synth").joinpath(f"data/{source}").read_text(encoding="utf-8"))
    else:
        out = []
    return tuple(dict.fromkeys(t for t in out if t))


class Denylist:
    """Fast membership tests for one language's terms.

    `bad(text)` is the general test. English generators that already hold their tokens use
    `singles` (a set of one-word terms) and `phrase_heads` (first words of multi-word terms) to test a
    token list at C speed and fall back to `bad` only when a phrase head occurs.
    """

    def __init__(self, lang: str) -> None:
        self.lang = lang
        ts = terms(lang)
        if _source(lang) == WORDS:
            self.singles = frozenset(t for t in ts if " " not in t)
            self.phrases = frozenset(tuple(t.split(" ")) for t in ts if " " in t)
            self.phrase_heads = frozenset(p[0] for p in self.phrases)
            self.max_phrase = max((len(p) for p in self.phrases), default=1)
            self._re = None
        else:
            self.singles = frozenset(t for t in ts if len(t) == 1)
            # no terms: a pattern that never matches (an empty alternation would match everywhere)
            self._re = re.compile("|".join(re.escape(t) for t in sorted(ts, key=len, reverse=True)) or r"(?!)")

    def bad(self, text: str) -> bool:
        """True when `text` contains a listed term."""
        if self._re is not None:
            return self._re.search(text) is not None
        return self.bad_runs(EN_RUN.findall(text.lower()))

    def bad_runs(self, runs: list[str]) -> bool:
        """English: True when a lower-cased letter/digit run, or a sequence of them, is listed."""
        if not self.singles.isdisjoint(runs):
            return True
        if self.phrase_heads.isdisjoint(runs):
            return False
        for i, r in enumerate(runs):
            if r in self.phrase_heads:
                for k in range(2, self.max_phrase + 1):
                    if tuple(runs[i : i + k]) in self.phrases:
                        return True
        return False

    def bad_words(self, words: list[str], heads: frozenset[str] | None = None) -> bool:
        """English: `bad` for a list of words that are already clean one by one (only phrases can
        still form when they are put side by side); C-speed in the common case. `heads`: the words of
        the caller's vocabulary containing a phrase head in any case (default: `phrase_heads`, for
        lower-case vocabularies). Only the words from a head on are re-read."""
        heads = self.phrase_heads if heads is None else heads
        if heads.isdisjoint(words):
            return False
        return self.bad_at(words, [i for i, w in enumerate(words) if w in heads])

    def bad_at(self, words, starts) -> bool:
        """English: True when a listed phrase starts in one of `words[i]` for i in `starts` (a phrase of
        k runs lies within k words from the word holding its first run)."""
        m = self.max_phrase
        return any(self.bad(" ".join(words[i : i + m])) for i in starts)

    def pair_classes(self, vocab) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """English, for a vocabulary of words that are clean one by one: arrays A, B over the vocabulary
        and a table T such that a listed phrase can only form across words u v when
        T[A[u], B[v]] (A: u's last run as the left run of a pair of consecutive phrase runs, B: v's
        first run as the right one; 0 = none). A vectorised necessary condition; callers re-check the
        rare hits with `bad`."""
        pairs = {(p[j], p[j + 1]) for p in self.phrases for j in range(len(p) - 1)}
        lefts = {a: i + 1 for i, a in enumerate(sorted({a for a, _ in pairs}))}
        rights = {b: i + 1 for i, b in enumerate(sorted({b for _, b in pairs}))}
        table = np.zeros((len(lefts) + 1, len(rights) + 1), dtype=bool)
        for a, b in pairs:
            table[lefts[a], rights[b]] = True
        a_of, b_of = [], []
        for w in vocab:
            runs = EN_RUN.findall(w.lower()) or [""]
            a_of.append(lefts.get(runs[-1], 0))
            b_of.append(rights.get(runs[0], 0))
        return np.array(a_of, dtype=np.intp), np.array(b_of, dtype=np.intp), table

    def spans(self, text: str) -> list[tuple[int, int]]:
        """(start, end) character offsets of every listed term in `text`."""
        if self._re is not None:
            return [m.span() for m in self._re.finditer(text)]
        low = text.lower()
        runs = [(m.group(), m.start(), m.end()) for m in EN_RUN.finditer(low)]
        out = []
        words = [r[0] for r in runs]
        for i, (w, s, e) in enumerate(runs):
            if w in self.singles:
                out.append((s, e))
            if w in self.phrase_heads:
                for k in range(2, self.max_phrase + 1):
                    if i + k <= len(runs) and tuple(words[i : i + k]) in self.phrases:
                        out.append((s, runs[i + k - 1][2]))
        return out


@cache
def denylist(lang: str) -> Denylist:
    """The cached denylist for `lang`."""
    return Denylist(lang)
