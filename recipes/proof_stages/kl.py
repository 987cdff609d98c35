"""The retention explainer of the proof (RL's Razor, arXiv 2509.04259: forgetting follows the KL divergence from the
start model): the mean per-token KL(model || reference) on the model's own completions of an evaluation.

    python -m recipes.proof_stages.kl --model DIR --reference DIR --samples EVAL/samples.jsonl --out FILE.json
        [--batch-size 8]

For every row of `samples.jsonl` (an `eval run` of the model: its prompt and its own greedy completion), the prompt is
built as `eval run` builds it (common/prompts.py: the system prompt, the row as the user turn, the chat template),
the completion re-tokenized after it, and both models score it in float32; at each completion token the exact KL
of the model's next-token distribution from the reference's (over the whole vocabulary) is taken. The output holds
the mean per token over all rows and, per row, the KL sum and token count (the proof's pooled table bootstraps them
over seeds and rows). Greedy completions are the model's own outputs, not draws from it: the number measures how far
the model moved along what it says, as RL's Razor's on-policy samples do, without sampling noise. A completion
re-tokenized can differ from the generated ids at a merge boundary; both models score the same ids, so the
comparison stays paired. `read_kl` and `pooled_kl` read such files back for the proof's summary."""
from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
from typing import Any

from common.errors import TaseError, one_line_exit


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    from recipes.shared.parser import one_line_errors

    p = argparse.ArgumentParser(prog="python -m recipes.proof_stages.kl", description=__doc__.splitlines()[0])
    p.add_argument("--model", required=True, help="the tuned model's folder (whose completions are scored)")
    p.add_argument("--reference", required=True, help="the model it trained from (the start)")
    p.add_argument("--samples", required=True, help="the tuned model's eval run samples.jsonl (prompt, completion)")
    p.add_argument("--out", required=True, help="the JSON file written")
    p.add_argument("--batch-size", type=int, default=8, help="rows per forward pass (default 8)")
    one_line_errors(p)
    args = p.parse_args(argv)
    if args.batch_size < 1:
        raise TaseError(f"--batch-size must be at least 1, got {args.batch_size}")
    return args


def read_rows(samples: Path) -> list[dict[str, Any]]:
    """(id, prompt, completion) of every row of an eval run's samples.jsonl; unreadable: one line."""
    rows = []
    try:
        with samples.open(encoding="utf-8") as fh:
            for n, line in enumerate(fh, 1):
                s = json.loads(line)
                if not isinstance(s, dict) or not isinstance(s.get("prompt"), str) \
                        or not isinstance(s.get("completion"), str):
                    raise TaseError(f"--samples {samples}: line {n} has no prompt and completion text")
                rows.append({"id": s.get("id"), "prompt": s["prompt"], "completion": s["completion"]})
    except OSError as e:
        raise TaseError(f"--samples {samples}: {e.strerror or e}") from None
    except ValueError as e:
        raise TaseError(f"--samples {samples}: not JSON lines ({str(e)[:80]})") from None
    return rows


def kl_rows(model: Any, reference: Any, tokenizer: Any, rows: list[dict[str, Any]], batch_size: int) -> list[dict]:
    """Per row: the KL(model || reference) summed over its completion tokens, and their count."""
    import torch

    from common.prompts import build_messages, chat_text

    out = []
    for i in range(0, len(rows), batch_size):
        batch = rows[i:i + batch_size]
        seqs, spans = [], []
        for r in batch:
            p = tokenizer(chat_text(tokenizer, build_messages(r)), add_special_tokens=False)["input_ids"]
            c = tokenizer(r["completion"], add_special_tokens=False)["input_ids"]
            seqs.append(p + c)
            spans.append((len(p), len(c)))
        width = max(len(s) for s in seqs)
        pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
        ids = torch.tensor([s + [pad] * (width - len(s)) for s in seqs])
        mask = torch.tensor([[1] * len(s) + [0] * (width - len(s)) for s in seqs])
        with torch.no_grad():
            lm = torch.log_softmax(model(input_ids=ids, attention_mask=mask).logits.float(), dim=-1)
            lr = torch.log_softmax(reference(input_ids=ids, attention_mask=mask).logits.float(), dim=-1)
        for j, (start, n) in enumerate(spans):
            if n == 0:
                out.append({"kl": 0.0, "tokens": 0})
                continue
            at = slice(start - 1, start - 1 + n)  # the positions that predict the completion's tokens
            kl = (lm[j, at].exp() * (lm[j, at] - lr[j, at])).sum(-1)
            out.append({"kl": float(kl.sum()), "tokens": n})
    return out


def read_kl(path: Path) -> dict[str, Any]:
    """A model's KL file (kl.py), read through the checked reader of state files; of another shape: one line."""
    from common.state import read_state

    def shape(v: Any) -> str | None:
        ok = isinstance(v, dict) and isinstance(v.get("kl_per_token"), (int, float)) and isinstance(
            v.get("per_row"), list) and all(isinstance(r, dict) and isinstance(r.get("kl"), (int, float))
                                            and isinstance(r.get("tokens"), int) for r in v["per_row"])
        return None if ok else "not a KL file of recipes/proof_stages/kl.py (kl_per_token, per_row)"

    got = read_state(path, shape, "; remove it to measure again")
    if got is None:
        raise TaseError(f"{path}: no such file")
    return got


def pooled_kl(files: list[Path], n_boot: int, seed: int = 0) -> tuple[float, float, float]:
    """The mean over seeds of each seed's KL per token (kl files, one per seed), with a 95% bootstrap over seeds and
    rows (seeds drawn with replacement, then each drawn seed's rows; a replicate's KL per token is its rows' KL sum
    over their token count)."""
    import numpy as np

    rng = np.random.default_rng(seed)
    per = [read_kl(f)["per_row"] for f in files]
    kls = [np.asarray([r["kl"] for r in rows], dtype=float) for rows in per]
    toks = [np.asarray([r["tokens"] for r in rows], dtype=float) for rows in per]
    point = float(np.mean([k.sum() / max(t.sum(), 1.0) for k, t in zip(kls, toks, strict=True)]))
    boot = np.zeros(n_boot)
    for b in range(n_boot):
        vals = []
        for j in rng.integers(0, len(files), len(files)):
            if not len(kls[j]):
                vals.append(0.0)
                continue
            idx = rng.integers(0, len(kls[j]), len(kls[j]))
            vals.append(kls[j][idx].sum() / max(toks[j][idx].sum(), 1.0))
        boot[b] = np.mean(vals)
    lo, hi = np.percentile(boot, [2.5, 97.5])
    return point, float(lo), float(hi)


@one_line_exit
def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    samples, out = Path(args.samples), Path(args.out)
    rows = read_rows(samples)
    for what, d in (("--model", args.model), ("--reference", args.reference)):
        if not Path(d).is_dir():
            raise TaseError(f"{what} {d}: no such model folder")
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(args.model)
    model = AutoModelForCausalLM.from_pretrained(args.model, dtype=torch.float32).eval()
    reference = AutoModelForCausalLM.from_pretrained(args.reference, dtype=torch.float32).eval()
    per = kl_rows(model, reference, tokenizer, rows, args.batch_size)
    tokens = sum(r["tokens"] for r in per)
    body = {"model": args.model, "reference": args.reference, "samples": str(samples), "rows": len(per),
            "tokens": tokens, "kl_per_token": sum(r["kl"] for r in per) / tokens if tokens else 0.0,
            "per_row": [{"id": r["id"], **k} for r, k in zip(rows, per, strict=True)]}
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    tmp.write_text(json.dumps(body) + "\n", encoding="utf-8")
    os.replace(tmp, out)
    print(f"KL({Path(args.model).name} || {Path(args.reference).name}) on {len(per)} rows, {tokens} tokens: "
          f"{body['kl_per_token']:.4f} nats per token -> {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
