"""Corpora: Chinese sentences from `hsk-sentences-audio` (4,354 graded HSK sentences, CC-BY-SA-4.0 data)
and themed Korean words, Unicode CLDR names in Korean via `babel` (countries, cities, languages)."""
from __future__ import annotations

import unicodedata
from functools import cache

from .chinese import is_hanzi
from .common import ResourceError


@cache
def zh_sentences() -> tuple[str, ...]:
    """Real Chinese sentences (HSK 1-6 graded examples from `hsk-sentences-audio`), all-CJK text plus
    punctuation, at least 4 characters."""
    try:
        from hsk_sentences_audio import load_sentences
    except ImportError:  # pragma: no cover - a declared dependency
        raise ResourceError("hsk-sentences-audio is not installed: run `make install`") from None
    out = []
    for rec in load_sentences():
        s = rec["chinese"].strip()
        if sum(map(is_hanzi, s)) >= 4 and all(is_hanzi(c) or unicodedata.category(c).startswith("P") for c in s):
            out.append(s)
    return tuple(dict.fromkeys(out))


@cache
def ko_themes() -> dict[str, tuple[str, ...]]:
    """English theme -> Korean names (Hangul only, spaces removed, 2+ syllables) from Unicode CLDR via
    babel, kept when wordfreq ko knows the name (languages: <country>어, or very frequent ones)."""
    import re

    import wordfreq
    from babel import Locale

    fd = wordfreq.get_frequency_dict("ko")
    loc = Locale("ko")
    hangul = re.compile(r"[가-힣]{2,}")

    def clean(names) -> list[str]:
        return sorted({n.replace(" ", "") for n in names if n and hangul.fullmatch(n.replace(" ", ""))})

    countries = clean(v for k, v in loc.territories.items() if len(k) == 2 and k.isalpha())
    places = {n.replace(" ", "") for n in loc.territories.values()}
    cities = clean(v.get("city") for v in loc.time_zones.values())
    languages = clean(loc.languages.values())
    return {
        "Countries": tuple(w for w in countries if fd.get(w, 0) > 0),
        "Cities": tuple(w for w in cities if fd.get(w, 0) > 0),
        # "<country>어" (독일어, 스페인어) or a very frequent language name (영어, 한국어)
        "Languages": tuple(w for w in languages if w.endswith("어") and (w[:-1] in places or fd.get(w, 0) >= 4e-5)),
    }
