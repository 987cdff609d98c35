"""Contamination guard: drop generated examples that match or overlap a benchmark prompt.

Two reasons, counted separately:
* `exact`: the NFKC-normalised, case-folded, whitespace-collapsed prompt equals a benchmark prompt;
* `ngram`: the prompt shares a 13-token n-gram with a benchmark prompt. Tokens are English words
  (letters, with inner hyphens/apostrophes), Chinese characters and Hangul syllables, case-folded, in
  text order (so words for en, characters for zh, syllables for ko). Only content n-grams count:
  within each benchmark file (task, language, subtask), a token covered by a 4-gram that occurs in at
  least half of the file's prompts is instruction wording, and benchmark n-grams touching such a token
  are not indexed (otherwise every example written in the official wording would be dropped, and so
  would any that merely shares a FREQ target word wrapped in the template). A file of fewer than
  MIN_TEMPLATE_ROWS prompts cannot tell wording from content (one prompt is all wording and all content):
  its n-grams are not indexed, so its rows are guarded by exact prompt and answer only (`thin`, reported in
  one line); indexing them dropped every generated example and the generator looped forever.
* `answer`: the example's answer equals (normalised as prompts are) a benchmark answer of the same task,
  language and subtask, for the answer types that name content (`names_content` in the type's catalogue
  row, `common.types`: MATCH_ANSWER words and strings, SPLIT pieces). A new prompt around an official
  answer is still that answer: 47% of the release's en_combine answers and 40.5% of its variant english
  answers are in the generators' word lists, so a prompt-only
  guard let a model train on them. Labels are left out: an answer given by at least 2 rows and 1% of its
  file (dot_matrix's classes) names a class, not a row; numbers (NUMBER, LENGTH) never count.
N-grams are kept as 64-bit polynomial hashes in a sorted numpy array (a few MB for the whole release).
`filter` ends: MAX_DROPS_IN_A_ROW n-gram or answer drops without a kept example raise GuardError (one line)
rather than drawing from an endless generator for ever.

Part of the floor (`common/`); building the guard from `--exclude` specs, which reads the official layout,
is `synth.guard.guard_from_specs`.
"""
from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from common.errors import TaseError
from common.types import type_info

_WS = re.compile(r"\s+")
TOKEN = re.compile(r"[a-z]+(?:[-'][a-z]+)*|[\u4e00-\u9fff]|[\uac00-\ud7a3]")
NGRAM = 13
TEMPLATE_K = 4  # template wording: 4-grams present in at least TEMPLATE_SHARE of a file's prompts
TEMPLATE_SHARE = 0.5
LABEL_SHARE = 0.01  # an answer of >= 2 rows and this share of its file is a class label, not guarded
_MULT = np.uint64(0x100000001B3)
MIN_TEMPLATE_ROWS = 2  # prompts a file needs before its shared 4-grams can be told from content
MAX_DROPS_IN_A_ROW = 10_000  # dropped generated examples without one kept: the exclude data covers the generator


def _names_content(typ: Any) -> bool:
    """Whether answers of this scoring type name content, which the guard matches (see `answer` above)."""
    info = type_info(typ)
    return info is not None and info.names_content


class GuardError(TaseError, ValueError):
    """The guard drops everything the generator makes (one line, exit 2, instead of a loop without end)."""


def normalize_prompt(text: str) -> str:
    """NFKC, case-folded, whitespace-collapsed form used to compare prompts."""
    return _WS.sub(" ", unicodedata.normalize("NFKC", text)).strip().casefold()


def tokens(text: str) -> list[str]:
    """Guard tokens of a prompt: English words, Chinese characters, Hangul syllables (case-folded)."""
    return TOKEN.findall(normalize_prompt(text))


class _Vocab:
    """Token -> id (ids from 1; unknown tokens of generated prompts get 0, which no benchmark n-gram has)."""

    def __init__(self) -> None:
        self.ids: dict[str, int] = {}

    def add(self, toks: list[str]) -> np.ndarray:
        ids = self.ids
        return np.fromiter((ids.setdefault(t, len(ids) + 1) for t in toks), dtype=np.uint64, count=len(toks))

    def get(self, toks: list[str]) -> np.ndarray:
        ids = self.ids
        return np.fromiter((ids.get(t, 0) for t in toks), dtype=np.uint64, count=len(toks))


def ngram_hashes(ids: np.ndarray, n: int = NGRAM) -> np.ndarray:
    """64-bit hashes of every n-gram of an id array (empty when shorter than n)."""
    m = len(ids) - n + 1
    if m <= 0:
        return np.empty(0, dtype=np.uint64)
    h = np.zeros(m, dtype=np.uint64)
    with np.errstate(over="ignore"):
        for k in range(n):
            h = h * _MULT + ids[k : k + m] * np.uint64(2654435761) + np.uint64(k + 1)
    return h


@dataclass
class Guard:
    """Holds the normalised benchmark prompts and their content n-grams; counts drops by reason."""

    prompts: frozenset[str]
    hashes: np.ndarray = field(default_factory=lambda: np.empty(0, dtype=np.uint64))
    vocab: _Vocab = field(default_factory=_Vocab)
    dropped_exact: int = 0
    dropped_ngram: int = 0
    seen: int = 0
    template_ngrams: int = 0
    answers: frozenset[tuple[Any, Any, Any, str]] = frozenset()  # (task, lang, subtask, normalised answer)
    dropped_answer: int = 0
    thin: tuple[tuple[Any, Any, Any], ...] = ()  # (task, lang, subtask) groups too small for the n-gram rule
    max_drops_in_a_row: int = MAX_DROPS_IN_A_ROW

    @property
    def dropped(self) -> int:
        return self.dropped_exact + self.dropped_ngram + self.dropped_answer

    @classmethod
    def from_records(cls, records: Iterable[dict[str, Any]], ngram: bool = True) -> Guard:
        prompts = set()
        vocab = _Vocab()
        groups: dict[tuple, list[np.ndarray]] = {}
        answer_rows: dict[tuple, list[str]] = {}
        for r in records:
            prompts.add(normalize_prompt(r["prompt"]))
            if _names_content(r.get("type")) and str(r.get("answer") or "").strip():
                answer_rows.setdefault(answer_key(r), []).append(normalize_prompt(str(r["answer"])))
            if ngram:
                key = (r.get("task"), r.get("lang"), r.get("subtask"))
                groups.setdefault(key, []).append(vocab.add(tokens(r["prompt"])))
        answers = set()
        for key, values in answer_rows.items():
            counts: dict[str, int] = {}
            for a in values:
                counts[a] = counts.get(a, 0) + 1
            answers |= {(*key, a) for a, k in counts.items() if k < 2 or k < LABEL_SHARE * len(values)}
        g = cls(frozenset(prompts), vocab=vocab, answers=frozenset(answers))
        kept = []
        g.thin = tuple(key for key, rows in groups.items() if len(rows) < MIN_TEMPLATE_ROWS)
        for rows in groups.values():
            if len(rows) < MIN_TEMPLATE_ROWS:  # exact prompt and answer only (module docstring)
                continue
            k4 = [np.unique(ngram_hashes(ids, TEMPLATE_K)) for ids in rows]
            uniq, counts = np.unique(np.concatenate(k4), return_counts=True)
            template = uniq[counts >= max(2, TEMPLATE_SHARE * len(rows))]
            g.template_ngrams += len(template)
            for ids in rows:
                h = ngram_hashes(ids)
                if not len(h):
                    continue
                starts = np.isin(ngram_hashes(ids, TEMPLATE_K), template)  # 4-gram at i is template
                covered = np.zeros(len(ids) + 1, dtype=np.int64)  # +1 at each covered token position
                for k in range(TEMPLATE_K):
                    covered[k : k + len(starts)] |= starts
                csum = np.concatenate(([0], np.cumsum(covered[: len(ids)])))
                clean = csum[NGRAM:] - csum[: len(h)] == 0  # 13-gram at i touches no template token
                kept.append(h[clean])
        if kept:
            g.hashes = np.unique(np.concatenate(kept))
        return g

    def reason(self, prompt: str) -> str | None:
        """Why `prompt` must be dropped ("exact" or "ngram"), or None to keep it."""
        if normalize_prompt(prompt) in self.prompts:
            return "exact"
        if len(self.hashes):
            h = ngram_hashes(self.vocab.get(tokens(prompt)))
            if len(h):
                i = np.searchsorted(self.hashes, h).clip(max=len(self.hashes) - 1)
                if (self.hashes[i] == h).any():
                    return "ngram"
        return None

    def answer_reason(self, record: dict[str, Any]) -> str | None:
        """"answer" when the record's answer is a guarded benchmark answer of its task/language/subtask."""
        if not self.answers or not str(record.get("answer") or "").strip():
            return None
        return "answer" if (*answer_key(record), normalize_prompt(str(record["answer"]))) in self.answers else None

    def filter(self, records: Iterable[dict[str, Any]]) -> Iterator[dict[str, Any]]:
        """The records that pass; GuardError after `max_drops_in_a_row` n-gram or answer drops without a kept one
        (the generators are endless: a guard that drops everything would otherwise never return). Exact drops do
        not count: a stream's prompts are distinct, so they end with the excluded set (a held-out file drawn after
        a training file of the same seed skips all of it)."""
        run = 0
        for r in records:
            self.seen += 1
            why = self.reason(r["prompt"]) or self.answer_reason(r)
            if why == "exact":
                self.dropped_exact += 1
            elif why == "ngram":
                self.dropped_ngram += 1
            elif why == "answer":
                self.dropped_answer += 1
            else:
                run = 0
                yield r
                continue
            run += why != "exact"  # exact drops are bounded: the stream's prompts are distinct, the set is finite
            if run >= self.max_drops_in_a_row:
                raise GuardError(f"contamination guard: dropped {run} generated examples in a row ({r.get('task')}/"
                                 f"{r.get('lang')}, last by {why}): the excluded data covers what this generator "
                                 "makes; exclude less, or generate other tasks or languages")

    def thin_report(self) -> str | None:
        """One line for stderr when some excluded groups were too small for the n-gram rule, else None."""
        if not self.thin:
            return None
        names = ", ".join("/".join(str(p) for p in k if p) for k in self.thin[:3])
        names += ", ..." if len(self.thin) > 3 else ""
        return (f"contamination guard: {len(self.thin)} excluded group(s) (task/language/subtask: {names}) have fewer "
                f"than {MIN_TEMPLATE_ROWS} prompts, too few to tell instruction wording from content: their rows are "
                f"matched by exact prompt and answer only, not by shared {NGRAM}-grams")

    def report(self) -> str:
        """One line for stderr: what was dropped, by reason."""
        return (
            f"contamination guard: dropped {self.dropped} of {self.seen} generated examples "
            f"(exact prompt: {self.dropped_exact}, shared {NGRAM}-gram: {self.dropped_ngram}, "
            f"benchmark answer: {self.dropped_answer}) against {len(self.prompts)} benchmark prompts, "
            f"{len(self.hashes)} content {NGRAM}-grams and {len(self.answers)} answers"
        )


def answer_key(record: dict[str, Any]) -> tuple[Any, Any, Any]:
    """The group an answer is guarded in: task, language, subtask (as the n-gram groups)."""
    return (record.get("task"), record.get("lang"), record.get("subtask") or "")
