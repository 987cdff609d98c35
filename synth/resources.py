"""Language resources for the generators, built from maintained packages (no hand-typed word lists).

What each language uses is declared in its catalogue module (`common.languages`): its word list (`wordfreq`
code or its own `words`), its running text (`sentences`), its token characters, its denylist and the shape
of its unigram corpus and FREQ vocabulary; this module builds them, the same way for every language of a
kind (the word language, English; the character languages):

* English: `wordfreq.top_n_list('en', 60000)`, kept to words the official scorer calls valid
  (`[a-zA-Z]+(?:[-'][a-zA-Z]+)*`), weighted by their `wordfreq` frequency.
* Chinese: `wordfreq` zh words (jieba-segmented, Simplified) made only of CJK ideographs.
* Korean: `wordfreq` ko tokens made only of Hangul syllables (wordfreq splits Korean into morphemes,
  so an eojeol here is one or two of them glued together).

`Corpus` is a fixed, frequency-weighted sample of those words (seeded with `CORPUS_SEED`, independent of
the user's seed) that generators slice "consecutive tokens" from. It is a unigram sample, not running
news text as in the official release: the token statistics are real, the syntax is not.
"""
from __future__ import annotations

import random
import re
from array import array
from dataclasses import dataclass
from functools import cache
from typing import Any

import numpy as np

from common.languages import Language, language

CORPUS_SEED = 20251122
CORPUS_TOKENS = 200_000
TOP_N = 60_000

EN_VALID = re.compile(r"[a-zA-Z]+(?:[-'][a-zA-Z]+)*")


def _lang(code: str) -> Language:
    """The catalogue entry of a language the generators build resources for."""
    entry = language(code)
    if entry is None:
        raise KeyError(code)
    return entry


@cache
def _run(code: str) -> re.Pattern[str]:
    """A word of `code`: a valid English word (the word language), or a run of its token characters."""
    entry = _lang(code)
    return re.compile(entry.char_re.pattern + "+") if entry.is_char else EN_VALID


def _frequencies(entry: Language) -> tuple[list[str], dict[str, float]]:
    """The language's words, most frequent first (up to TOP_N), and their frequencies: wordfreq's, or the
    language module's own list."""
    if entry.words is not None:
        pairs = entry.words()
        return [w for w, _ in pairs][:TOP_N], dict(pairs)
    import wordfreq

    return wordfreq.top_n_list(entry.wordfreq, TOP_N), wordfreq.get_frequency_dict(entry.wordfreq)


@dataclass(frozen=True)
class WordList:
    """Words of one language with cumulative frequency weights for `random.choices`."""

    lang: str
    words: tuple[str, ...]
    cum_weights: tuple[float, ...]

    def sample(self, rng: random.Random, k: int) -> list[str]:
        return rng.choices(self.words, cum_weights=self.cum_weights, k=k)


@cache
def word_list(lang: str) -> WordList:
    """Frequency-weighted word list for `lang` from wordfreq or its module's own list (cached per process)."""
    entry = _lang(lang)
    pattern = _run(lang)
    top, freqs = _frequencies(entry)
    words = [w for w in top if pattern.fullmatch(w)]
    if not entry.is_char:
        # one-letter tokens other than a/i are mostly initials and noise in web text
        words = [w for w in words if len(w) > 1 or w in ("a", "i")]
    total = 0.0
    cum = []
    for w in words:
        total += freqs.get(w, 1e-9)
        cum.append(total)
    return WordList(lang, tuple(words), tuple(cum))


@dataclass(frozen=True)
class Corpus:
    """A fixed token stream for one language.

    `text` is the running text; `pos[i]` is the character offset of token i in `text` and `end[i]` its
    end, so `text[pos[i]:end[j-1]]` is tokens i..j-1 with the original spacing/punctuation between them.
    Tokens: English words, Chinese characters, Hangul syllables.
    """

    lang: str
    text: str
    pos: array
    end: array
    joined: str = ""  # zh/ko: the tokens concatenated (one character each), for C-speed slicing
    ids: Any = None  # numpy uint32 token ids aligned with the tokens (codepoints for zh/ko)

    def __len__(self) -> int:
        return len(self.pos)

    def span(self, start: int, n: int) -> str:
        """Text covering exactly `n` tokens starting at token `start`."""
        return self.text[self.pos[start] : self.end[start + n - 1]]

    def tokens(self, start: int, n: int) -> list[str]:
        if not _lang(self.lang).is_char:
            return self.span_text(start, n).split(" ")
        return list(self.joined[start : start + n])

    def span_text(self, start: int, n: int) -> str:
        """Tokens start..start+n-1 as one string (joined by spaces in English, nothing otherwise)."""
        if not _lang(self.lang).is_char:
            return self.text[self.pos[start] : self.end[start + n - 1]]
        return self.joined[start : start + n]


@cache
def corpus(lang: str) -> Corpus:
    """Build (once per process) the deterministic unigram token stream for `lang` (the
    `--text-source unigram` ablation), from the denylist-clean word list; units next to which a listed
    term would form across the join are left out."""
    from .denylist import denylist

    dl = denylist(lang)
    rng = random.Random(CORPUS_SEED)
    wl = clean_word_list(lang)
    if not _lang(lang).is_char:
        return _english_corpus(wl, rng, dl)
    units, seps = _cjk_units(lang, wl, rng)
    keep = _drop_joined_matches([([u + s for u, s in zip(units, seps, strict=False)], ""), (units, "")], dl)
    pos, end = array("i"), array("i")
    parts: list[str] = []
    off = 0
    for k in keep:
        for ch in units[k]:
            pos.append(off)
            end.append(off + 1)
            parts.append(ch)
            off += 1
        parts.append(seps[k])
        off += len(seps[k])
    text = "".join(parts)
    joined = "".join(units[k] for k in keep)
    ids = np.frombuffer(joined.encode("utf-32-le"), dtype=np.uint32).copy()
    return Corpus(lang, text, pos, end, joined, ids)


def _english_corpus(wl: Any, rng: random.Random, dl: Any) -> Corpus:
    """The English unigram stream: sampled words joined by spaces, one token per word."""
    pos, end = array("i"), array("i")
    words = wl.sample(rng, CORPUS_TOKENS)
    words = [words[k] for k in _drop_joined_matches([(words, " ")], dl)]
    off = 0
    for w in words:
        pos.append(off)
        end.append(off + len(w))
        off += len(w) + 1
    index = {w: i for i, w in enumerate(wl.words)}
    ids = np.fromiter((index[w] for w in words), dtype=np.uint32, count=len(words))
    return Corpus(wl.lang, " ".join(words), pos, end, "", ids)


def _cjk_units(lang: str, wl: Any, rng: random.Random) -> tuple[list[str], list[str]]:
    """Chinese words / Korean eojeols (a `spaced` language: one or two morphemes) of the unigram stream and the
    separator after each (the language's `punct` every 6-24 characters; a space after each eojeol), until
    CORPUS_TOKENS characters."""
    entry = _lang(lang)
    units: list[str] = []  # token characters, then the separator after them
    seps: list[str] = []
    n_tok = 0
    words = wl.sample(rng, CORPUS_TOKENS)
    wi = 0
    next_punct = rng.randint(6, 24)
    while n_tok < CORPUS_TOKENS:
        if not entry.spaced:
            unit = words[wi]
            wi += 1
        else:  # an eojeol of one or two morphemes, then a space
            k = 1 if rng.random() < 0.5 else 2
            unit = "".join(words[wi : wi + k])
            wi += k
        if wi >= len(words) - 2:
            words = wl.sample(rng, CORPUS_TOKENS)
            wi = 0
        n_tok += len(unit)
        sep = ""
        next_punct -= len(unit)
        if next_punct <= 0:
            sep = rng.choice(entry.punct)
            next_punct = rng.randint(6, 24)
        if entry.spaced:
            sep += " "
        units.append(unit)
        seps.append(sep)
    return units, seps


# --- denylist-clean word lists ----------------------------------------------------------------------


def _clean_word_list(lang: str) -> WordList:
    """`word_list(lang)` without denylisted words (Chinese/Korean: no word containing a listed term).
    The structural generators keep `word_list` itself, so their bytes do not change."""
    from .denylist import denylist

    dl = denylist(lang)
    wl = word_list(lang)
    keep = [i for i, w in enumerate(wl.words) if not dl.bad(w)]
    words = tuple(wl.words[i] for i in keep)
    prev = [0.0, *wl.cum_weights]
    cum, total = [], 0.0
    for i in keep:
        total += wl.cum_weights[i] - prev[i]
        cum.append(total)
    return WordList(lang, words, tuple(cum))


@cache
def clean_word_list(lang: str) -> WordList:
    """Cached `_clean_word_list`."""
    return _clean_word_list(lang)


@cache
def freq_vocab(lang: str) -> tuple[tuple[str, ...], np.ndarray | None]:
    """FREQ's token inventory, built like the official files (and denylist-clean), as the language's
    `freq_vocab` says: "words" (English), the 60,000-word list drawn uniformly; "weighted_chars" (Chinese),
    characters with cumulative frequency weights (summed over the word list's words); "chars" (Korean), every
    token character (Hangul syllable), drawn uniformly. Returns (tokens, cumulative weights or None for uniform)."""
    from .denylist import denylist

    dl = denylist(lang)
    entry = _lang(lang)
    if entry.freq_vocab == "words":
        return clean_word_list(lang).words, None
    if entry.freq_vocab == "chars":
        return tuple(c for c in entry.token_chars() if c not in dl.singles), None
    run = _run(lang)
    freqs: dict[str, float] = {}
    for w, f in _frequencies(entry)[1].items():
        if run.fullmatch(w):
            for ch in w:
                freqs[ch] = freqs.get(ch, 0.0) + f
    chars = sorted((c for c in freqs if c not in dl.singles), key=lambda c: (-freqs[c], c))
    return tuple(chars), np.cumsum([freqs[c] for c in chars])


@cache
def freq_stream(lang: str) -> Corpus:
    """A fixed stream of FREQ tokens drawn as `freq_vocab` says (seeded with `CORPUS_SEED`, not the
    user's seed), with listed terms that formed across neighbours cut out. FREQ texts are random
    windows of it: every token is still drawn from the official distribution, at C speed."""
    from .denylist import denylist

    toks, cum = freq_vocab(lang)
    gen = np.random.default_rng(CORPUS_SEED)
    n = _lang(lang).freq_stream
    idx = gen.integers(0, len(toks), n) if cum is None else cum.searchsorted(gen.random(n) * cum[-1], side="right")
    dl = denylist(lang)
    if not _lang(lang).is_char:
        words = np.array(toks, dtype=object)[idx].tolist()
        words = [words[k] for k in _drop_joined_matches([(words, " ")], dl)]
        pos, end, off = array("i"), array("i"), 0
        for w in words:
            pos.append(off)
            end.append(off + len(w))
            off += len(w) + 1
        return Corpus(lang, " ".join(words), pos, end, "", None)
    text = np.array([ord(c) for c in toks], dtype="<u4")[idx].tobytes().decode("utf-32-le")
    while True:  # cut out every listed term (each is two or more tokens: single ones are not drawn)
        hits = dl.spans(text)
        if not hits:
            break
        cut = np.zeros(len(text), dtype=bool)
        for a, b in hits:
            cut[a:b] = True
        text = np.frombuffer(text.encode("utf-32-le"), dtype="<u4")[~cut].tobytes().decode("utf-32-le")
    n = len(text)
    return Corpus(lang, text, array("i", range(n)), array("i", range(1, n + 1)), text, None)


# --- real running text (SORT, LENOP count, REORD, DIFF) ------------------------------------------------
#
# Sources (each language module's `sentences`; all installed by `make install`; licences and sizes in
# docs/resources.md):
#   en: the English translations of hsk-sentences-audio's 4,354 sentences, then the prose paragraphs of
#       CPython's `pydoc_data.topics` (the language reference as shipped with the interpreter);
#   zh: hsk-sentences-audio's 4,354 Chinese sentences (HSK 1-6);
#   ko: konlpy's bundled corpus files (the Constitution of the Republic of Korea and 10 bills), read as
#       plain text (konlpy's taggers and Java are not used).
# Sentences containing a denylisted term are dropped, and so is any sentence next to which a term forms
# across the join, so every span of the stream is clean.

SEPS = " ,，。；;：:"  # the separators the official zh/ko generators keep between characters
_SEP3 = re.compile("[ ,，。；;：:]{3,}")
EN_WORDS = re.compile(r"\b[\w'-]+\b")


def source_sentences(lang: str) -> list[tuple[str, list[str]]]:
    """The raw sentences of each source for `lang`, in reading order: [(source name, sentences)]."""
    entry = _lang(lang)
    if entry.sentences is None:
        raise KeyError(f"language {lang!r} declares no running text (common.languages: `sentences`)")
    return entry.sentences()


@cache
def _not_kept(lang: str) -> re.Pattern[str]:
    """Every character that is neither one of the language's token characters nor a separator."""
    body = _lang(lang).char_re.pattern[1:-1] + "".join(re.escape(c) for c in SEPS)
    return re.compile(f"[^{body}]+")


def _zh_ko_clean(s: str, lang: str) -> str:
    """The official zh/ko cleaning: keep the language's token characters and the separators only."""
    return _not_kept(lang).sub("", s)


def _drop_joined_matches(views: list[tuple[list[str], str]], dl) -> list[int]:
    """Indices of the units to keep so that no listed term occurs in any view `joiner.join(units)`
    (terms can form across joins). `views` are parallel lists of the same units, each with its joiner."""
    keep = list(range(len(views[0][0])))
    while True:
        bad: set[int] = set()
        for units, joiner in views:
            parts = [units[k] for k in keep]
            hits = dl.spans(joiner.join(parts))
            if not hits:
                continue
            starts = np.cumsum([0] + [len(u) + len(joiner) for u in parts[:-1]])
            for s, e in hits:
                i = int(np.searchsorted(starts, s, side="right")) - 1
                j = int(np.searchsorted(starts, e - 1, side="right")) - 1
                bad.update(keep[i : j + 1])
        if not bad:
            return keep
        keep = [k for k in keep if k not in bad]


@dataclass(frozen=True)
class RealText:
    """One language's running text, cleaned as the official generators clean theirs.

    en: `words`, the valid English words of the text in order (the official `re.findall(r"\\b[\\w'-]+\\b")`
    then the validity filter); `corpus` is them as a `Corpus` (tokens = words).
    zh/ko: `text`, the sentences cleaned to token characters and separators and joined (the official
    files remove the newlines after slicing, which glues the lines the same way); `tokpos[i]` is the
    offset in `text` of token i; `corpus` is the token characters alone (REORD/DIFF tokens).
    `sentences` counts the distinct source sentences kept.
    """

    lang: str
    corpus: Corpus
    text: str
    tokpos: Any
    sentences: int
    sources: tuple[tuple[str, int], ...]  # (name, sentences kept)

    def span(self, rng: random.Random, n: int, tries: int = 200) -> str | None:
        """A span of exactly n tokens, as the official SORT/LENOP generators cut one: en, n consecutive
        words joined by spaces; zh/ko, from a random character to the n-th token after it, rejected
        when it starts with a separator or holds a run of 3 separators (None after `tries`). Starts
        are drawn among the non-separator characters directly (the same distribution as drawing any
        character and rejecting separators), and the run test is two lookups in `run3`."""
        if self.tokpos is None:  # the word language
            c = self.corpus
            return c.span(rng.randrange(len(c) - n + 1), n)
        starts, before, run3, tokpos, text = self._index
        last = len(tokpos) - n
        for _ in range(tries):
            s = starts[rng.randrange(len(starts))]
            k = before[s]  # s is a token, so it is token k
            if k > last:
                continue
            e = tokpos[k + n - 1] + 1
            if run3[e] - run3[min(s + 2, e)] == 0:
                return text[s:e]
        return None

    @property
    def _index(self):
        """zh/ko lookup tables (built on first use): token start positions, tokens before each
        position, and the prefix count of positions ending a run of 3 separators."""
        idx = self.__dict__.get("_idx")
        if idx is None:
            text = self.text
            is_sep = np.array([c in SEPS for c in text], dtype=bool)
            before = np.concatenate(([0], np.cumsum(~is_sep))).tolist()
            run = is_sep[2:] & is_sep[1:-1] & is_sep[:-2]  # run[j - 2]: text[j-2..j] all separators
            ends = np.zeros(len(text), dtype=np.int64)
            ends[2:] = run
            run3 = np.concatenate(([0], np.cumsum(ends))).tolist()
            idx = (np.flatnonzero(~is_sep).tolist(), before, run3, self.tokpos.tolist(), text)
            object.__setattr__(self, "_idx", idx)
        return idx


@cache
def real_text(lang: str) -> RealText:
    """Build (once per process) the denylist-clean running text for `lang`."""
    from .denylist import denylist

    dl = denylist(lang)
    entry = _lang(lang)
    kept_sources = []
    units: list[str] = []
    for name, sents in source_sentences(lang):
        seen: set[str] = set()
        ok = []
        for s in sents:
            s = " ".join(s.split())
            if not entry.is_char:
                w = [x for x in EN_WORDS.findall(s) if EN_VALID.fullmatch(x)]
                unit = " ".join(w)
            else:
                unit = _zh_ko_clean(s, lang).strip(SEPS)
                w = [c for c in unit if c not in SEPS]
            if not w or dl.bad(s) or dl.bad(unit) or (entry.spaced and dl.bad("".join(w))):
                continue
            ok.append(unit)
            seen.add(s)
        kept_sources.append((name, len(seen)))
        units.extend(ok)
    if not entry.is_char:
        units = [units[k] for k in _drop_joined_matches([(units, " ")], dl)]
        text = " ".join(units)
        words = text.split(" ")
        pos, end, off = array("i"), array("i"), 0
        for w in words:
            pos.append(off)
            end.append(off + len(w))
            off += len(w) + 1
        # ids of the lower-cased words: the REORD scorer lower-cases, so "He" and "he" are one token
        _, ids = np.unique(np.array([w.lower() for w in words], dtype=object), return_inverse=True)
        corp = Corpus(lang, text, pos, end, "", ids.astype(np.uint32))
        return RealText(lang, corp, text, None, len(set(units)), tuple(kept_sources))
    drop_seps = {ord(c): None for c in SEPS}
    tok_units = [u.translate(drop_seps) for u in units]  # the token-only stream (REORD, DIFF) too
    keep = _drop_joined_matches([(units, ""), (tok_units, "")], dl)
    units = [units[k] for k in keep]
    text = "".join(units)
    joined = text.translate(drop_seps)
    tokpos = np.fromiter((i for i, c in enumerate(text) if c not in SEPS), dtype=np.int64)
    ids = np.frombuffer(joined.encode("utf-32-le"), dtype=np.uint32).copy()
    n = len(joined)
    corp = Corpus(lang, joined, array("i", range(n)), array("i", range(1, n + 1)), joined, ids)
    return RealText(lang, corp, text, tokpos, len(set(units)), tuple(kept_sources))
