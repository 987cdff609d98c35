"""Completions/second per scoring type on one core, short and 4 kB completions, with p50/p99 latency.

Rates and latencies are CPU time of the scoring thread, so that other processes on a shared machine
do not show up as scorer latency; the load average is printed beside them.

    python bench/reward_throughput.py [--n 20000] [--seed 0]

Records come from `synth` (en, zh and ko mixed; the training distribution). Each type is timed on a
realistic mix: the gold answer in tags, a wrong answer in tags, a `**bold**` answer and an answer-less
sentence. "short": the completion is just that. "4 kB": the same padded to 4,096 characters with
reasoning text before the answer, and for a quarter of them 4 kB of text inside the answer tags (the
worst case: the whole text goes through the type's rule). SHUFFLE memoises the parse of each prompt
(GRPO scores every prompt once per generation of its group); the "unseen prompts" line times it with a
fresh prompt on every call. Targets (issue 5): >= 50,000/s for short completions; p99 < 1 ms for 4 kB.
"""
from __future__ import annotations

import argparse
import os
import platform
import random
import time

import synth
from rewards import score

CELLS = {  # type -> (task, subtask) generated for en, zh and ko
    "NUMBER": ("freq_count", None),
    "LENGTH": ("sentence_length", "generate"),
    "SHUFFLE": ("shuffle_tokens", None),
    "SPLIT": ("component_split", "split"),
    "DIFF": ("diff_tokens", None),
    "MATCH_ANSWER": ("sort_lengths", None),
    "EXACT": ("execute", "spell"),
}
PAD = {"en": "Let me think step by step about the tokens in the question. ",
       "zh": "让我一步一步地思考这个问题中的每一个字。", "ko": "질문에 있는 글자를 하나씩 차근차근 생각해 보겠습니다. "}
TARGET_SHORT, TARGET_P99_MS = 50_000, 1.0


def records(typ: str, per_lang: int) -> list[dict]:
    task, sub = CELLS[typ]
    out = []
    for lang in ("en", "zh", "ko"):
        try:
            out += list(synth.generate(task, lang, per_lang, 1, sub))
        except Exception as e:  # noqa: BLE001 - a cell the generator cannot build is reported, not fatal
            print(f"# note: {typ}: synth {task}/{sub or '-'}/{lang} unavailable ({type(e).__name__}: {e})")
    return out


def gold(rec: dict) -> str:
    if rec["type"] == "SHUFFLE":
        return rec["meta"]["solution"]
    if rec["type"] == "LENGTH":
        return ("好" if rec["lang"] == "zh" else "가" if rec["lang"] == "ko" else "word ") * rec["meta"]["target"]
    return rec["answer"]


def completions(rec: dict, size: int, rng: random.Random) -> list[str]:
    g = gold(rec)
    outs = [f"<answer>{g}</answer>", f"<answer>{g[::-1]}</answer>", f"The answer is **{g}**.", "I am not sure."]
    if size:
        pad = PAD.get(rec["lang"], PAD["en"])
        filler = pad * (size // len(pad) + 1)
        outs = [filler[: max(0, size - len(o))] + o for o in outs]
        outs[rng.randrange(4)] = f"<answer>{filler[: size - 17]}</answer>"  # 4 kB inside the tags
    return outs


def timed(pairs: list[tuple[dict, str]], n: int, fresh_prompt: bool = False) -> tuple[float, float, float]:
    """(completions per CPU-second, p50 ms, p99 ms) over n calls cycling through pairs.

    CPU time of this thread (not wall time): on a shared machine a wall clock also counts the time
    slices other processes take, which shows up as ~4 ms "latencies" unrelated to the scorer."""
    if fresh_prompt:  # a unique prompt per call: the REORD input line stays, the memo never hits
        pairs = [(dict(r, prompt=f"{r['prompt']}\n#{i}"), c)
                 for i, (r, c) in enumerate(pairs * (2 * n // len(pairs) + 1))]
    for r, c in pairs[:200]:  # warm-up: regex caches, first-call costs
        score(r, c)
    clock = time.thread_time_ns
    m = len(pairs)
    t0 = clock()
    for i in range(n):
        r, c = pairs[i % m]
        score(r, c)
    rate = n / max(clock() - t0, 1) * 1e9
    lat = [0] * n
    for i in range(n):  # a second pass for per-call latencies (the clock itself costs ~0.5 us a read)
        r, c = pairs[(i + n) % m]
        t = clock()
        score(r, c)
        lat[i] = clock() - t
    lat.sort()
    return rate, lat[n // 2] / 1e6, lat[min(n - 1, int(n * 0.99))] / 1e6


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, default=20000, help="calls per cell (4 kB cells: n/4)")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()
    try:
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
    except (AttributeError, OSError):
        pass
    rng = random.Random(args.seed)
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"# reward scoring, one core, CPU time ({platform.machine()}, Python {platform.python_version()}, "
          f"load average {load:.1f} on {os.cpu_count()} cores)")
    print(f"{'type':<24} {'short /s':>10} {'p50 ms':>8} {'p99 ms':>8} {'4kB /s':>10} {'p50 ms':>8} {'p99 ms':>8}")
    worst_short, worst_p99 = float("inf"), 0.0
    mixed_short, mixed_long = [], []
    for typ in CELLS:
        recs = records(typ, 32)
        if not recs:
            continue
        short = [(r, c) for r in recs for c in completions(r, 0, rng)]
        long = [(r, c) for r in recs for c in completions(r, 4096, rng)]
        rng.shuffle(short)
        rng.shuffle(long)
        mixed_short += short
        mixed_long += long
        s, l = timed(short, args.n), timed(long, max(1000, args.n // 4))
        worst_short, worst_p99 = min(worst_short, s[0]), max(worst_p99, l[2])
        print(f"{typ:<24} {s[0]:>10,.0f} {s[1]:>8.4f} {s[2]:>8.4f} {l[0]:>10,.0f} {l[1]:>8.4f} {l[2]:>8.4f}")
        if typ == "SHUFFLE":
            s, l = timed(short, args.n // 4, True), timed(long, max(1000, args.n // 8), True)
            print(f"{'SHUFFLE (unseen prompts)':<24} {s[0]:>10,.0f} {s[1]:>8.4f} {s[2]:>8.4f} "
                  f"{l[0]:>10,.0f} {l[1]:>8.4f} {l[2]:>8.4f}")
    if not mixed_short:
        print("# no records could be generated: nothing timed")
        return 1
    rng.shuffle(mixed_short)
    rng.shuffle(mixed_long)
    s, l = timed(mixed_short, args.n), timed(mixed_long, max(1000, args.n // 4))
    print(f"{'all types mixed':<24} {s[0]:>10,.0f} {s[1]:>8.4f} {s[2]:>8.4f} {l[0]:>10,.0f} {l[1]:>8.4f} {l[2]:>8.4f}")
    print(f"# targets: short >= {TARGET_SHORT:,}/s per type: {'met' if worst_short >= TARGET_SHORT else 'MISSED'} "
          f"(slowest {worst_short:,.0f}/s); 4 kB p99 < {TARGET_P99_MS} ms: "
          f"{'met' if worst_p99 < TARGET_P99_MS else 'MISSED'} (worst {worst_p99:.3f} ms)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
