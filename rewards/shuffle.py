"""SHUFFLE (REORD): reorder the input so that no token stays next to an original neighbour.

coarse: the original = the prompt text after its first `:`/`：` (and spaces) up to the line end; it and
        the extracted answer are lower-cased, stripped and tokenised (CJK characters if any, else Hangul
        syllables if any, else `\\b[\\w'-]+\\b` words). The token multisets must be equal; then each
        answer token is mapped to the first unused original position holding that token, and no two
        consecutive answer tokens may map to adjacent original positions. A prompt without a colon
        scores 0; an empty original with an empty answer scores 1 (both official quirks).
fine:   0 unless the multisets match; then 1 - kept / (n - 1), kept = consecutive answer pairs that map
        to adjacent original positions, n = number of tokens.
        Worked example, original "a b c d e": "b d a c e" -> kept 0 -> 1; "a c e d b" -> kept 1
        ("e d") -> 1 - 1/4 = 0.75; the input unchanged -> kept 4 -> 0; "b d a c" -> multiset differs -> 0.

How: the greedy mapping pairs the k-th occurrence of a token in the answer with its k-th original
position, so two stable sorts by token (answer positions, original positions) line the pairs up
without a Python loop per token. Inputs of 24 tokens or more go through numpy on integer keys (code
points of CJK/Hangul characters, vocabulary ranks of words; 16-bit where they fit, so that the stable
sort is a radix sort), which keeps a 200-token answer near the cost of a 5-token one; the prompt's
half of the work is memoised per prompt.
"""
from __future__ import annotations

import operator
import random
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from itertools import repeat
from typing import Any

import numpy as np

from .base import Score, field, tag
from .extract import extract_answer
from .reorder import non_adjacent_order
from .text import CJK_CHAR, HANGUL_CHAR, NOT_CJK, NOT_HANGUL, words
from .types import ScoringType, register_type

_ORIG = re.compile(r"[:：]\s*([^\n\r]*)")
_DROP = {"cjk": NOT_CJK, "hangul": NOT_HANGUL}
_SMALL = 24  # below this many tokens plain Python beats numpy's per-call overhead
_CACHE_MAX_CHARS = 1 << 14  # bounds what the memo can hold: 1,024 prompts of at most 16 k characters


def kind(s: str) -> str:
    """Which official tokeniser applies: "cjk", "hangul" or "word"."""
    if s.isascii():  # O(1) in CPython: saves two scans of long English answers
        return "word"
    return "cjk" if CJK_CHAR.search(s) else "hangul" if HANGUL_CHAR.search(s) else "word"


def tokens(s: str) -> list[str]:
    """Official REORD tokens of an already lower-cased, stripped string."""
    k = kind(s)
    if k == "cjk":
        return CJK_CHAR.findall(s)
    if k == "hangul":
        return HANGUL_CHAR.findall(s)
    return words(s)


def _by_token(toks: list[str] | tuple[str, ...]) -> list[int]:
    """Positions stably sorted by token: equal tokens keep their order of appearance."""
    return sorted(range(len(toks)), key=toks.__getitem__)


def _frozen(a: np.ndarray) -> np.ndarray:
    a.flags.writeable = False
    return a


@dataclass(frozen=True)
class Original:
    """A prompt's input line, prepared once: tokens, their sorted order, and integer sort keys."""

    kind: str
    toks: tuple[str, ...]
    sorted_toks: tuple[str, ...]
    o_idx: tuple[int, ...]
    vocab: Mapping[str, int]  # word -> rank among the distinct words (sorted), for "word" lines
    key_dtype: type  # uint16 (BMP code points, or ranks of fewer than 65,535 words) or int64
    missing: int  # key of a word that is not in the vocabulary (sorts apart from every real key)
    sorted_keys: bytes  # the keys of the tokens in sorted order, as raw key_dtype values
    o_idx_arr: np.ndarray

    @classmethod
    def of(cls, line: str) -> Original:
        k = kind(line)
        toks = tuple(tokens(line))
        idx = _by_token(toks)
        sorted_toks = tuple(map(toks.__getitem__, idx))
        vocab: dict[str, int] = {}
        if k == "word":
            for t in sorted_toks:
                vocab.setdefault(t, len(vocab))
            small = len(vocab) < 0xFFFF  # 16-bit keys let numpy's stable argsort use a radix sort
            dtype, missing = (np.uint16, 0xFFFF) if small else (np.int64, -1)
            keys = np.fromiter(map(vocab.__getitem__, sorted_toks), dtype=dtype, count=len(toks)).tobytes()
        else:  # CJK and Hangul code points all lie in the BMP: UTF-16 code units are the code points
            dtype, missing = np.uint16, 0  # (missing is only used for words)
            keys = "".join(sorted_toks).encode("utf-16-le")
        return cls(k, toks, sorted_toks, tuple(idx), vocab, dtype, missing, keys,
                   _frozen(np.array(idx, dtype=np.int64)))


def input_line(prompt: str) -> str | None:
    """The official original: after the first colon, to the line end, lower-cased and stripped."""
    m = _ORIG.search(prompt)
    return None if m is None else m.group(1).lower().strip()


@lru_cache(maxsize=1024)
def _original_cached(prompt: str) -> Original | None:
    line = input_line(prompt)
    return None if line is None else Original.of(line)


def original(prompt: str) -> Original | None:
    """The prepared original of a prompt; memoised (GRPO scores each prompt once per generation of its
    group), except for huge prompts, which would make the memo hold too much."""
    if len(prompt) <= _CACHE_MAX_CHARS:
        return _original_cached(prompt)
    line = input_line(prompt)
    return None if line is None else Original.of(line)


def kept_python(orig: Original, shuf: list[str]) -> int | None:
    """Consecutive answer pairs that map to adjacent original positions under the official greedy
    mapping; None when the token multisets differ."""
    n = len(shuf)
    if n != len(orig.toks):
        return None
    s_idx = _by_token(shuf)
    if not all(map(operator.eq, map(shuf.__getitem__, s_idx), orig.sorted_toks)):
        return None
    pos = [0] * n
    for a, b in zip(s_idx, orig.o_idx, strict=False):  # j-th occurrence in the answer -> j-th original position
        pos[a] = b
    diffs = list(map(operator.sub, pos[1:], pos))
    return diffs.count(1) + diffs.count(-1)


def kept_numpy(orig: Original, answer: str) -> int | None:
    """`kept_python` on integer keys with numpy; `answer` is the lower-cased, stripped answer text."""
    n = len(orig.toks)
    if kind(answer) != orig.kind:  # a CJK/Hangul token on one side only: the multisets differ
        return None
    if orig.kind == "word":
        found = words(answer)
        if len(found) != n:
            return None
        keys = np.fromiter(map(orig.vocab.get, found, repeat(orig.missing)), dtype=orig.key_dtype, count=n)
    else:
        chars = _DROP[orig.kind].sub("", answer)
        if len(chars) != n:
            return None
        keys = np.frombuffer(chars.encode("utf-16-le"), dtype=np.uint16)
    s_idx = np.argsort(keys, kind="stable")
    if keys[s_idx].tobytes() != orig.sorted_keys:
        return None
    pos = np.empty(n, dtype=np.int64)
    pos[s_idx] = orig.o_idx_arr
    d = pos[1:] - pos[:-1]
    return int(np.count_nonzero(np.abs(d, out=d) == 1))


def kept_neighbours(orig: Original, answer: str) -> int | None:
    """Kept neighbour pairs for a lower-cased, stripped answer; None when the multisets differ."""
    if len(orig.toks) >= _SMALL:
        return kept_numpy(orig, answer)
    return kept_python(orig, tokens(answer))


def score_shuffle(prompt: str, completion: str) -> Score:
    """Score for one SHUFFLE row (official `shuffle_tokens`, both flags required)."""
    extracted = extract_answer(completion)
    answer = extracted.lower().strip()
    if len(prompt) > _CACHE_MAX_CHARS:  # huge prompt: not memoised, so reject on token counts first
        line = input_line(prompt)
        if line is None or len(tokens(line)) != len(tokens(answer)):
            return Score(0.0, 0.0, extracted)
    orig = original(prompt)
    if orig is None:
        return Score(0.0, 0.0, extracted)
    kept = kept_neighbours(orig, answer)
    if kept is None:
        return Score(0.0, 0.0, extracted)
    if kept == 0:
        return Score(1.0, 1.0, extracted)
    return Score(0.0, 1.0 - kept / max(len(orig.toks) - 1, 1), extracted)


def score(example: Mapping[str, Any], completion: str) -> Score:
    return score_shuffle(field(example, "prompt"), completion)


def shuffle_answer(prompt: str) -> str | None:
    """A reordering of a REORD prompt's input line (its official tokens) that keeps no original
    neighbours under the official greedy rule, or None when the solver finds none (a line of 2 or 3
    tokens, or one like "a a a a a"; it is exact up to 16 tokens)."""
    line = input_line(prompt)
    if line is None:
        return None
    toks = tokens(line)
    order = non_adjacent_order(toks)
    if order is None:
        return None
    return (" " if kind(line) == "word" else "").join([toks[i] for i in order])


def gold_answers(example: Mapping[str, Any]) -> list[str]:
    """The gold answer of a REORD row (which holds no label): a constructed reordering, or none."""
    ans = shuffle_answer(field(example, "prompt"))
    return [] if ans is None else [ans]


def sft_answer(record: Mapping[str, Any], unit: str | None, texts: Callable[[str], Any]) -> str | None:
    """The SFT target of a generated row: the generator's own solution (`meta.solution`), or None."""
    sol = (record.get("meta") or {}).get("solution")
    return tag(sol) if sol else None


def valid_answers(rec: Mapping[str, Any], pool: Sequence[str]) -> list[str]:
    """16 random reorderings of the input line (a deterministic draw per prompt)."""
    prompt = field(rec, "prompt")
    line = input_line(prompt) or ""
    toks = tokens(line)
    sep = " " if line.isascii() else ""
    rng = random.Random(prompt)
    return [sep.join(rng.sample(toks, len(toks))) for _ in range(16)]


TYPE = register_type(ScoringType("SHUFFLE", score, gold=gold_answers, sft=sft_answer, valid_answers=valid_answers))
