"""16x16 glyphs: GNU Unifont's `unifont.hex` (Debian package `unifont`). Found at `$TASE_UNIFONT` when set
(and then only there), else at the first of `UNIFONT_PATHS` that exists: the source checkout's .cache/
(where `make install` copies or unpacks it) and the project's cache (`$TASE_CACHE/unifont.hex`, default
~/.cache/tase-grpo, for an installed package). Nothing else on the machine is read (tests run on any
machine the same way): copy the system's font there, or point TASE_UNIFONT at it."""
from __future__ import annotations

import os
import unicodedata
from functools import cache
from pathlib import Path

from ..core import MUL_TASKS
from .chinese import common_hanzi
from .common import ResourceError
from .hangul import hangul_syllables

ROOT = Path(__file__).resolve().parents[2]  # the source checkout (or editable install) holding .cache/
UNIFONT_PATHS = (
    str(ROOT / ".cache" / "unifont" / "usr" / "share" / "unifont" / "unifont.hex"),  # make install
    str(Path(os.environ.get("TASE_CACHE") or Path.home() / ".cache" / "tase-grpo") / "unifont.hex"),  # as common.models
)


@cache
def unifont_path() -> str:
    """$TASE_UNIFONT when set (and then only it), else the first of UNIFONT_PATHS that exists."""
    cands = [os.environ["TASE_UNIFONT"]] if os.environ.get("TASE_UNIFONT") else list(UNIFONT_PATHS)
    for p in cands:
        if Path(p).is_file():
            return p
    raise ResourceError(
        f"GNU Unifont not found ({MUL_TASKS} needs unifont.hex): run `make install` (copies the system's "
        "or unpacks Debian's `unifont` package into .cache/unifont), or set TASE_UNIFONT=/path/unifont.hex"
    )


@cache
def unifont() -> dict[int, str]:
    """codepoint -> hex glyph string from unifont.hex ("XXXX:" + 32 or 64 hex digits a line). A file that is not
    that (binary, another font format, a truncated glyph) is one ResourceError naming it and the variable that
    chose it, not a UnicodeDecodeError or ValueError from deep inside a generator."""
    path = unifont_path()
    source = "TASE_UNIFONT" if os.environ.get("TASE_UNIFONT") else "the project's copy (make install)"
    out = {}
    ln = 0
    try:
        with open(path, encoding="ascii") as f:
            for ln, line in enumerate(f, 1):  # noqa: B007 - ln names the line in an error below
                cp, _, hx = line.strip().partition(":")
                if not line.strip():
                    continue
                if len(hx) not in (32, 64) or not 1 <= len(cp) <= 6:
                    raise ValueError
                int(hx, 16)
                out[int(cp, 16)] = hx
    except UnicodeDecodeError:
        raise ResourceError(f"{path} (from {source}): not a unifont.hex file (a byte that is not ASCII, after line "
                            f"{ln}); point TASE_UNIFONT at GNU Unifont's unifont.hex") from None
    except ValueError:
        raise ResourceError(f"{path} (from {source}): line {ln} is not a unifont.hex glyph line (XXXX: and 32 or "
                            "64 hex digits); point TASE_UNIFONT at GNU Unifont's unifont.hex") from None
    except OSError as e:
        raise ResourceError(f"{path} (from {source}): cannot read it ({e.strerror})") from None
    if not out:
        raise ResourceError(f"{path} (from {source}): holds no glyphs; point TASE_UNIFONT at GNU Unifont's "
                            "unifont.hex")
    return out


def glyph_bits(ch: str) -> tuple[tuple[int, ...], ...] | None:
    """16x16 bitmap of `ch` (8-wide glyphs centred with 4 blank columns each side, as the official
    ASC16 rendering), or None when the font lacks it or it is blank."""
    hx = unifont().get(ord(ch))
    if hx is None:
        return None
    width = len(hx) * 4 // 16
    rows = []
    for r in range(16):
        v = int(hx[r * width // 4 : (r + 1) * width // 4], 16)
        bits = [(v >> (width - 1 - i)) & 1 for i in range(width)]
        if width == 8:
            bits = [0, 0, 0, 0] + bits + [0, 0, 0, 0]
        rows.append(tuple(bits))
    if not any(any(r) for r in rows):
        return None
    return tuple(rows)


def classify_char(ch: str) -> str:
    """The official dot_matrix categories (same ranges as the release's generator)."""
    if ch in "0123456789":
        return "digit"
    if "a" <= ch <= "z" or "A" <= ch <= "Z":
        return "latin"
    if "\u4e00" <= ch <= "\u9fff":
        return "hanzi"
    if "\uac00" <= ch <= "\ud7a3":
        return "hangul"
    if "\u3040" <= ch <= "\u30ff":
        return "kana"
    if "\u0370" <= ch <= "\u03ff":
        return "greek"
    if unicodedata.category(ch).startswith(("P", "S")):
        return "symbol"
    return "unknown"


@cache
def dot_charset() -> dict[str, tuple[str, ...]]:
    """Characters per category with a non-blank Unifont glyph that no other candidate shares, so a bitmap
    names one character and one category (Greek Α is dropped for Latin A, Katakana ヘ for Hiragana へ,
    whenever Unifont draws them identically; the first category listed keeps the glyph)."""
    cats: dict[str, list[str]] = {
        "digit": list("0123456789"),
        "latin": [chr(c) for c in range(65, 91)] + [chr(c) for c in range(97, 123)],
        "greek": [chr(c) for c in range(0x391, 0x3CA) if unicodedata.category(chr(c)).startswith("L")],
        "kana": [chr(c) for c in range(0x3041, 0x30FF) if unicodedata.category(chr(c)) == "Lo"],
        "hanzi": list(common_hanzi(2000)),
        "hangul": list(hangul_syllables()[:1500]),
        "symbol": [chr(c) for c in range(0x21, 0x7F)]  # ASCII punctuation and symbols
        + list("·×÷‘’“”…—–、。《》「」『』【】〈〉〔〕！（），：；？￥～·")
        + [chr(c) for c in range(0x2190, 0x2200)],  # arrows
    }
    taken: set[tuple[tuple[int, ...], ...]] = set()
    out: dict[str, tuple[str, ...]] = {}
    for k, v in cats.items():  # priority order: a later category never reuses an earlier bitmap
        keep = []
        for c in dict.fromkeys(v):
            b = glyph_bits(c)
            if b is not None and classify_char(c) == k and b not in taken:
                taken.add(b)
                keep.append(c)
        out[k] = tuple(keep)
    return out
