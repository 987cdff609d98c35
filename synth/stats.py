"""`python -m synth stats --official DIR`: generated vs official text statistics per awareness cell.

For each of the 15 awareness cells (FREQ, LENOP count, DIFF, SORT, REORD x en/zh/ko) it reads the
official CSV, generates `-n` examples in the official wording, measures the length of the text each
row carries (tokens as the official scorers count them: valid English words, CJK characters, Hangul
syllables; SORT contributes its three sentences, DIFF its seq1), and prints both histograms, the means
and the two-sample Kolmogorov-Smirnov statistic (the largest gap between the two empirical CDFs: 0 =
same distribution, 1 = disjoint). For English it also prints the rate of "of the / in the / to the /
on the / and the" per 100 words of those texts, a cheap sign of running prose.
The official files are read directly (no dependency on `eval`).
"""
from __future__ import annotations

import argparse
import csv
import json
import re
import sys
from pathlib import Path

import numpy as np

from common.errors import TaseError, one_line
from common.languages import language
from common.paths import blocker_line, file_refusal, followed, hold_output
from common.record import TASKS

from .core import TEXT_SOURCES, Generator, SynthError, available, generate, spec
from .resources import EN_VALID, EN_WORDS


def cells() -> tuple[tuple[str, str | None, str], ...]:
    """(task, subtask, paper code) of every task whose module defines `stats_texts`, catalogue order."""
    gens = available()
    return tuple((t, gens[t].stats_subtask, TASKS[t].code) for t in TASKS
                 if t in gens and gens[t].stats_texts.__func__ is not Generator.stats_texts.__func__)


BINS = list(range(0, 501, 50))


def count_tokens(text: str, lang: str) -> int:
    """Tokens as the official scorers count them: the language's token characters, or valid English words."""
    entry = language(lang)
    if entry is not None and entry.is_char:
        return len(entry.char_re.findall(text))
    return sum(1 for w in EN_WORDS.findall(text) if EN_VALID.fullmatch(w))


def texts_of(prompt: str, task: str, lang: str) -> list[str]:
    """The text(s) a row carries, cut from its prompt in the official wording (the task module knows how)."""
    return spec(task).stats_texts(prompt, lang) or []


def read_official(root: Path, task: str, lang: str) -> list[str]:
    """Prompts of one official awareness file (first column: `input` or `text`)."""
    path = root / "tasks" / "token_awareness" / task / f"{language(lang).stems[0]}.csv"
    if not path.is_file():
        raise SynthError(f"official file not found: {path} (expected the TASE release layout tasks/<group>/<task>/)")
    csv.field_size_limit(1 << 30)
    with path.open(encoding="utf-8", newline="") as f:
        rows = list(csv.reader(f))
    return [r[0] for r in rows[1:] if r]


def ks_statistic(a: np.ndarray, b: np.ndarray) -> float:
    """Two-sample Kolmogorov-Smirnov statistic: sup |F_a - F_b| over the pooled sample."""
    a, b = np.sort(a), np.sort(b)
    x = np.concatenate([a, b])
    return float(np.max(np.abs(np.searchsorted(a, x, "right") / len(a) - np.searchsorted(b, x, "right") / len(b))))


def bigram_rate(texts: list[str], lang: str = "en") -> float:
    """Occurrences of the language's `bigrams` (English: "of the / in the / to the / on the / and the") per 100
    valid English words."""
    words = [w.lower() for t in texts for w in EN_WORDS.findall(t) if EN_VALID.fullmatch(w)]
    return 100.0 * len(re.findall(language(lang).bigrams, " ".join(words))) / max(1, len(words))


def histogram(lengths: np.ndarray) -> list[float]:
    """Percent of lengths per 50-token bin, 0-49 ... 450-500."""
    h, _ = np.histogram(np.clip(lengths, 0, 499), bins=BINS)
    return [100.0 * x / max(1, len(lengths)) for x in h]


def cell_stats(root: Path, task: str, subtask: str | None, lang: str, n: int, seed: int, source: str) -> dict:
    """Length and bigram statistics of one cell, official vs generated."""
    off = [t for p in read_official(root, task, lang) for t in texts_of(p, task, lang)]
    gen = [t for r in generate(task, lang, n, seed, subtask, text_source=source)
           for t in texts_of(r["prompt"], task, lang)]
    lo = np.array([count_tokens(t, lang) for t in off])
    lg = np.array([count_tokens(t, lang) for t in gen])
    out = {
        "task": task, "lang": lang, "n_official": len(lo), "n_generated": len(lg),
        "mean_official": float(lo.mean()), "mean_generated": float(lg.mean()),
        "ks": ks_statistic(lo, lg), "hist_official": histogram(lo), "hist_generated": histogram(lg),
    }
    if language(lang).bigrams:
        out["bigram_official"], out["bigram_generated"] = bigram_rate(off, lang), bigram_rate(gen, lang)
    return out


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m synth stats",
        description="Generated vs official length distributions (histogram, mean, two-sample KS) per "
        "awareness cell, and the English 'of the/in the/to the/on the/and the' rate per 100 words.",
    )
    p.add_argument("--official", required=True, metavar="DIR", help="root of the TASE release (tasks/<group>/<task>/)")
    p.add_argument("-n", "--n", type=int, default=1000, help="generated examples per cell (default 1000)")
    p.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    p.add_argument("--text-source", default="real", metavar="real|unigram", help="what the generators slice")
    p.add_argument("--json", default=None, metavar="FILE", help="also write the numbers as JSON")
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        if args.n < 1:
            raise SynthError(f"-n must be >= 1, got {args.n}")
        if args.text_source not in TEXT_SOURCES:
            raise SynthError(f"unknown text source {args.text_source!r}; choose from: {', '.join(TEXT_SOURCES)}")
        root = Path(args.official)
        if not root.is_dir():
            raise SynthError(f"--official {root}: not a directory")
        if args.json:
            check_json_out(followed(args.json))
        rows = []
        for task, sub, code in cells():
            for lang in spec(task).langs:  # the official cells: the languages the task names itself
                rows.append({**cell_stats(root, task, sub, lang, args.n, args.seed, args.text_source), "code": code})
    except SynthError as e:
        return one_line(e)
    print(f"# generated ({args.text_source} text, seed {args.seed}, {args.n} per cell) vs official; "
          "length = tokens per text (SORT: each of its 3 sentences)")
    print(f"{'cell':<9} {'lang':<4} {'n off':>6} {'n gen':>6} {'mean off':>9} {'mean gen':>9} {'KS':>6}  "
          f"{'bigram/100w off':>15} {'gen':>6}")
    for r in rows:
        big = f"{r['bigram_official']:>15.2f} {r['bigram_generated']:>6.2f}" if "bigram_official" in r else ""
        print(f"{r['code']:<9} {r['lang']:<4} {r['n_official']:>6} {r['n_generated']:>6} {r['mean_official']:>9.1f} "
              f"{r['mean_generated']:>9.1f} {r['ks']:>6.3f}  {big}")
    below = sum(r["ks"] < 0.2 for r in rows)
    print(f"# KS < 0.2 in {below} of {len(rows)} cells")
    print("# length histograms, % of texts per 50-token bin (0-49, 50-99, ..., 450-499), official / generated")
    for r in rows:
        fmt = lambda h: " ".join(f"{x:4.0f}" for x in h)  # noqa: E731
        print(f"{r['code']:<6}{r['lang']:<3} off {fmt(r['hist_official'])}")
        print(f"{'':<9} gen {fmt(r['hist_generated'])}")
    if args.json:
        out = followed(args.json)  # a symlinked --json: its target is replaced, the link stays (every writer)
        try:
            with hold_output(out):
                check_json_out(out)  # again under the lock: the checks before the minutes of statistics may be stale
                tmp = out.with_name(f".{out.name}.tmp")
                tmp.write_text(json.dumps(rows, indent=1), encoding="utf-8")
                tmp.replace(out)
        except TaseError as e:  # SynthError, OutputBusy: one line
            return one_line(e)
        except OSError as e:
            print(f"error: cannot write {args.json}: {e.strerror}", file=sys.stderr)
            return 2
    return 0


def is_stats_json(path: Path) -> bool:
    """Whether `path` holds what --json writes (a JSON list of cells with code, lang and ks)."""
    try:
        rows = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        return False
    return isinstance(rows, list) and all(isinstance(r, dict) and {"code", "lang", "ks"} <= r.keys() for r in rows)


def check_json_out(out: Path) -> None:
    """The one output rule for --json (common/paths.py): a writable place, not a folder, never a file inside another
    command's output, and never a file of the user's own (only an earlier --json of these statistics)."""
    why = blocker_line(out, "--json")
    if why:
        raise SynthError(why)
    if out.is_dir():
        raise SynthError(f"--json {out} is a folder")
    why = file_refusal(out, "stats", own=is_stats_json)
    if why:
        raise SynthError(f"--json {why}; write elsewhere")
