"""Tokenizer diagnostics ("tokenizer blindness", measured): how a tokenizer cuts each task's text.

Per task and language, over the benchmark prompts:
* tokens per character (tpc) of the whole prompt, and fertility: tokens per word with each word encoded
  alone (words are whitespace tokens for en/ko, jieba words for zh; up to 4,000 words per cell);
* PCW, the share of words split into 2+ tokens;
* parity: tokens of the zh/ko text over tokens of the aligned English text (the release's 200 aligned
  topics, `synth/data/topics.json`);
* encode/decode throughput (characters/s).
With a results directory (`eval run` output), per-example accuracy is grouped by how many tokens the
unit the task asks about spans (e.g. the FREQ target, the COMPM character) and plotted.
"""
from __future__ import annotations

import json
import re
import time
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from common.languages import codes, language

_QUOTED = re.compile(r"[\"“‘'](.+?)[\"”’']")


@dataclass
class CellStats:
    """Tokenization statistics of one (task, lang) cell."""

    task: str
    lang: str
    n: int
    chars: int
    words: int
    tokens: int
    split_words: int
    word_tokens: int = 0  # tokens of the sampled words, each encoded alone

    @property
    def tokens_per_char(self) -> float:
        return self.tokens / self.chars if self.chars else 0.0

    @property
    def fertility(self) -> float:
        return self.word_tokens / self.words if self.words else 0.0

    @property
    def pcw(self) -> float:
        return self.split_words / self.words if self.words else 0.0

    def row(self) -> dict[str, Any]:
        d = asdict(self)
        d.update(tokens_per_char=round(self.tokens_per_char, 4), fertility=round(self.fertility, 4),
                 pcw=round(self.pcw, 4))
        return d


def words_of(text: str, lang: str) -> list[str]:
    """Word segmentation used for fertility: the language's `segmenter` (jieba for Chinese), whitespace
    elsewhere."""
    entry = language(lang)
    if entry is not None and entry.segmenter == "jieba":
        import jieba

        jieba.setLogLevel(60)
        return [w for w in jieba.lcut(text) if w.strip()]
    return text.split()


def count_tokens(tok: Any, text: str) -> int:
    return len(tok.encode(text, add_special_tokens=False))


def cell_stats(tok: Any, records: Iterable[dict[str, Any]], max_words: int = 4000) -> list[CellStats]:
    """Statistics per (task, lang) over the prompts; word-level splits sampled up to `max_words`."""
    cells: dict[tuple[str, str], CellStats] = {}
    word_budget: dict[tuple[str, str], int] = defaultdict(lambda: max_words)
    for r in records:
        key = (r["task"], r["lang"])
        c = cells.setdefault(key, CellStats(r["task"], r["lang"], 0, 0, 0, 0, 0))
        text = r["prompt"]
        c.n += 1
        c.chars += len(text)
        c.tokens += count_tokens(tok, text)
        ws = words_of(text, r["lang"])
        if word_budget[key] > 0:
            ws = ws[: word_budget[key]]
            word_budget[key] -= len(ws)
            counts = [count_tokens(tok, w) for w in ws]
            c.words += len(ws)
            c.word_tokens += sum(counts)
            c.split_words += sum(1 for k in counts if k > 1)
    return sorted(cells.values(), key=lambda c: (c.task, c.lang))


def parity(tok: Any) -> dict[str, float]:
    """Token count of each language's aligned topic list over that of the English list (1.0 = parity), for the
    catalogue's languages that have one (their module's own topics, else the release's list)."""
    from importlib import resources as ir

    data = json.loads(ir.files("synth").joinpath("data/topics.json").read_text(encoding="utf-8"))
    en = sum(count_tokens(tok, t) for t in data["en"])
    lists = {lang: language(lang).topics or data.get(lang) for lang in codes() if lang != "en"}  # a module's own
    return {lang: round(sum(count_tokens(tok, t) for t in ts) / en, 4) for lang, ts in lists.items() if ts}


def throughput(tok: Any, texts: list[str], repeat: int = 3) -> dict[str, float]:
    """Encode and decode speed in characters per second (best of `repeat`)."""
    chars = sum(len(t) for t in texts)
    best_e = best_d = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        ids = [tok.encode(t, add_special_tokens=False) for t in texts]
        t1 = time.perf_counter()
        for i in ids:
            tok.decode(i)
        t2 = time.perf_counter()
        best_e, best_d = min(best_e, t1 - t0), min(best_d, t2 - t1)
    return {"encode_chars_per_s": round(chars / best_e), "decode_chars_per_s": round(chars / best_d)}


def unit_of(record: dict[str, Any]) -> str | None:
    """The token-level unit an example asks about (for accuracy vs fragmentation), when known."""
    meta = record.get("meta") or {}
    for k in ("target", "word", "char"):
        v = meta.get(k)
        if isinstance(v, str) and v:
            return v
    from synth.core import spec

    gen = spec(record.get("task"))
    if gen is not None and gen.unit_in_prompt:  # the task module says the unit is quoted in the prompt
        m = _QUOTED.search(record.get("prompt", ""))
        if m:
            return m.group(1)
        return record.get("answer") or None
    return None


def accuracy_by_fragmentation(tok: Any, samples: Iterable[dict[str, Any]],
                              records: dict[str, dict[str, Any]]) -> dict[str, dict[str, float]]:
    """coarse accuracy (%) grouped by the number of tokens the asked-about unit spans."""
    buckets: dict[str, list[float]] = defaultdict(list)
    for s in samples:
        rec = records.get(s["id"])
        unit = unit_of(rec) if rec else None
        if not unit:
            continue
        k = count_tokens(tok, unit)
        buckets[str(k) if k < 6 else "6+"].append(float(s.get("coarse", 0.0)))
    return {k: {"n": len(v), "accuracy": round(100 * sum(v) / len(v), 2)} for k, v in sorted(buckets.items())}


def plot_fragmentation(curves: dict[str, dict[str, dict[str, float]]], path: Path) -> Path:
    """Accuracy vs tokens-per-unit, one line per model/tokenizer."""
    from matplotlib.figure import Figure  # no pyplot: no backend to choose, no global figure state

    fig = Figure(figsize=(6, 4))
    ax = fig.subplots()
    order = ["1", "2", "3", "4", "5", "6+"]
    for name, b in curves.items():
        xs = [k for k in order if k in b]
        ax.plot(xs, [b[k]["accuracy"] for k in xs], marker="o", label=name)
        for k in xs:
            ax.annotate(f"n={b[k]['n']}", (k, b[k]["accuracy"]), fontsize=7, textcoords="offset points",
                        xytext=(0, 5))
    ax.set_xlabel("tokens spanned by the asked-about unit")
    ax.set_ylabel("coarse accuracy (%)")
    ax.set_title("Accuracy vs. fragmentation")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    return path


def markdown_table(stats: list[CellStats], par: dict[str, float], speed: dict[str, float], name: str) -> str:
    lines = [f"### {name}", "", "| task | lang | n | tokens/char | fertility | PCW |", "|---|---|---:|---:|---:|---:|"]
    for c in stats:
        lines.append(f"| {c.task} | {c.lang} | {c.n} | {c.tokens_per_char:.3f} | {c.fertility:.2f} | "
                     f"{100 * c.pcw:.1f}% |")
    lines += ["", f"Parity vs English (aligned topics): zh {par['zh']:.2f}, ko {par['ko']:.2f}. "
              f"Encode {speed['encode_chars_per_s']:,} chars/s, decode {speed['decode_chars_per_s']:,} chars/s.", ""]
    return "\n".join(lines)
