"""Audit of the official verdict's loopholes and of the training rewards, on rows of the official release.

    python bench/loophole_audit.py [--data official:DIR] [--markdown FILE]

(default data: the fixture sample of the official release, tests/fixtures/tase_official_sample)

For every file and every answer-independent strategy of `rewards.loopholes` (echoes, every option at
once, the unsplit word, every permutation of the pieces, ...; plus the best constant answer of the file)
it prints how often the official verdict passes it and what the training rewards pay it
(`accuracy_strict`, `accuracy_fine`), beside a uniform random guess among the row's valid answers:

- "random": mean over rows of the mean `fine` of the row's valid answers, with the row's real label;
- "bound": the same comparison with the label drawn uniformly from the valid answers (NUMBER,
  MATCH_ANSWER, SPLIT, DIFF; LENGTH with the prompt's target drawn from 1..the file's largest), which
  takes the file's label frequencies out: a constant that is the most common label of a file beats a
  random guess through the data, not through the reward, and no reward can prevent that.

It checks that gold answers get 1.0 and exits 1 when a strategy is paid more than the random guess
(under "bound"; under "random" for SHUFFLE, whose answer is built from the input, not chosen).
"""
from __future__ import annotations

import argparse
import re
import statistics
import sys
from collections import defaultdict
from pathlib import Path

from rewards import score
from rewards.loopholes import relabel, strategies, valid_answers
from synth.gold import gold_completion

FIXTURES = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "tase_official_sample"
SWAPPABLE = {"NUMBER", "MATCH_ANSWER", "SPLIT", "DIFF", "LENGTH"}  # the label is one of the valid answers
EPS = 1e-9


def tag(text: str) -> str:
    return f"<answer>{text}</answer>"


def mean(xs: list[float]) -> float:
    return statistics.fmean(xs) if xs else 0.0


def audit(records: list[dict]) -> tuple[list[dict], list[str]]:
    """One result line per (file, strategy) and the list of violations."""
    by_file: dict[str, list[dict]] = defaultdict(list)
    for r in records:
        by_file[r["meta"]["file"]].append(r)
    lines, bad = [], []
    for f, rows in sorted(by_file.items()):
        typ = rows[0]["type"]
        pool = sorted({r.get("answer", "") for r in rows if r.get("answer")})
        if typ == "LENGTH":  # the target is in the prompt: the pool is the file's targets
            pool = sorted({m.group() for r in rows if (m := re.search(r"\d+", r["prompt"]))})
        gold = [score(r, gold_completion(r)) for r in rows]
        if any(g.fine != 1.0 or g.strict != 1.0 for g in gold if g.valid):
            bad.append(f"{f}: a gold answer gets less than 1.0")
        opts = [valid_answers(r, pool) for r in rows]
        random_fine = mean([mean([score(r, tag(v)).fine for v in o]) for r, o in zip(rows, opts, strict=False)])
        swap = typ in SWAPPABLE

        def bound(r: dict, o: list[str], ans: str) -> float:
            return mean([score(relabel(r, g), tag(ans)).fine for g in o])

        random_bound = mean([mean([bound(r, o, v) for v in o])
                             for r, o in zip(rows, opts, strict=False)]) if swap else None
        strat = [strategies(r, pool) for r in rows]
        names = list(dict.fromkeys(n for s in strat for n in s))
        consts = sorted({v for o in opts for v in o})[:200] if typ != "SHUFFLE" else []
        cands = {n: [s.get(n, "") for s in strat] for n in names}
        if consts:
            best = max(consts, key=lambda c: mean([score(r, tag(c)).fine for r in rows]))
            cands[f"best constant ({best[:20]})"] = [best] * len(rows)
        for n, answers in cands.items():
            sc = [score(r, tag(a)) for r, a in zip(rows, answers, strict=False)]
            fine = mean([s.fine for s in sc])
            b = mean([bound(r, o, a) for r, o, a in zip(rows, opts, answers, strict=False)]) if swap else None
            line = {"file": f, "type": typ, "n": len(rows), "strategy": n,
                    "official": 100 * mean([s.coarse for s in sc]), "strict": 100 * mean([s.strict for s in sc]),
                    "fine": fine, "random": random_fine, "bound": b, "random_bound": random_bound}
            lines.append(line)
            over = (b > random_bound + EPS) if swap else (fine > random_fine + EPS)
            if over:
                bad.append(f"{f}: '{n}' is paid {b if swap else fine:.3f} > random guess "
                           f"{random_bound if swap else random_fine:.3f}")
    return lines, bad


def markdown(lines: list[dict]) -> str:
    out = ["| file | n | strategy | official pass % | strict % | fine | random guess fine | fine, uniform label | "
           "random guess, uniform label |", "|---|---:|---|---:|---:|---:|---:|---:|---:|"]
    for x in lines:
        b = "–" if x["bound"] is None else f"{x['bound']:.3f}"
        rb = "–" if x["random_bound"] is None else f"{x['random_bound']:.3f}"
        out.append(f"| {x['file'].split('/', 1)[-1]} | {x['n']} | {x['strategy']} | {x['official']:.0f} | "
                   f"{x['strict']:.0f} | {x['fine']:.3f} | {x['random']:.3f} | {b} | {rb} |")
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data", default=f"official:{FIXTURES}",
                   help="official:DIR (the release layout) or FILE.jsonl (default: the fixture sample)")
    p.add_argument("--markdown", help="also write the table to this file")
    a = p.parse_args(argv)
    from common.readers import DataError
    from synth.readers import load_data

    try:
        records = list(load_data(a.data))
    except (DataError, OSError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    for r in records:
        r.setdefault("meta", {}).setdefault("file", f"{r['task']}/{r.get('subtask') or ''}/{r['lang']}")
    lines, bad = audit(records)
    md = markdown(lines)
    print(md)
    if a.markdown:
        Path(a.markdown).write_text(md, encoding="utf-8")
    for b in bad:
        print("over the bound:", b, file=sys.stderr)
    print(f"{len(records)} rows, {len(lines)} (file, strategy) cells, {len(bad)} over the bound", file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
