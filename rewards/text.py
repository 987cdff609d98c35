"""Character classes and the word tokeniser shared by the LENGTH and SHUFFLE rules.

The official rules find words with `re.findall(r"\\b[\\w'-]+\\b", s)`. On plain ASCII text the same list
comes from `str.split()` at a fraction of the cost: ASCII punctuation other than ' - _, and tab, line
feed and carriage return, are neither \\w nor in [\\w'-], so they separate words exactly as a space does
(they are mapped to spaces); inside a space-free chunk of [\\w'-] characters the regex matches from the
first to the last word character (a `\\b` cannot sit between a ' or - and a space). Anything else
(non-ASCII text, other whitespace) takes the regex.
"""
from __future__ import annotations

import re
import string

CJK_CHAR = re.compile(r"[\u4e00-\u9fff]")
HANGUL_CHAR = re.compile(r"[\uac00-\ud7a3]")
NOT_CJK = re.compile(r"[^\u4e00-\u9fff]+")
NOT_HANGUL = re.compile(r"[^\uac00-\ud7a3]+")
WORD = re.compile(r"\b[\w'-]+\b")
PUNCT_TO_SPACE = str.maketrans({c: " " for c in string.punctuation + "\t\n\r" if c not in "'-_"})
_PLAIN = re.compile(r"[a-zA-Z0-9_'\- ]*")
_EDGES = (" '", "' ", " -", "- ")


def words(s: str) -> list[str]:
    """Exactly `re.findall(r"\\b[\\w'-]+\\b", s)`, with a split() fast path for plain ASCII text."""
    plain = s.translate(PUNCT_TO_SPACE)
    if _PLAIN.fullmatch(plain):
        if ("'" not in plain and "-" not in plain) or not (
            plain.startswith(("'", "-")) or plain.endswith(("'", "-")) or any(e in plain for e in _EDGES)
        ):
            return plain.split()  # no chunk starts or ends with ' or -
        return [w for w in (c.strip("'-") for c in plain.split()) if w]
    return WORD.findall(s)
