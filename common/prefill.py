"""Prefill a batch of prompts with less compute: the prefix every row shares once, and each row's own tokens in
buckets of similar length instead of one batch padded to the longest.

Why: on a CPU the prefill is compute-bound and most of a short generation. An evaluation batch of the official
prompts (system prompt + chat template + row) shares its first ~25 tokens, and one padded batch of English, Chinese
and Korean prompts is about 40% padding (SmolLM2's tokenizer spends bytes on CJK). `generate` recomputes both.

`packed_prefill` returns what `model.generate` needs to continue from such a prefill: the batch laid out as
`[shared prefix][padding][the row's own tokens]` (the padding in the middle, masked; `generate` takes the position
ids from the mask's running count, so each token keeps the position it has in its own prompt) and a cache of every
column but the last. `generate(input_ids=..., attention_mask=..., past_key_values=cache)` then runs each row's last
prompt token and decodes as it would have: the same logits up to float rounding, the same random draws.
"""
from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

PASS_COST = 32  # a forward pass's fixed cost, in prompt tokens of work: a bucket must save more padding than this


def common_prefix(rows: list[list[int]]) -> int:
    """Length of the token prefix all rows share."""
    if not rows:
        return 0
    first, n = rows[0], min(len(r) for r in rows)
    for i in range(n):
        t = first[i]
        if any(r[i] != t for r in rows):
            return i
    return n


def buckets(lengths: list[int], pass_cost: int = PASS_COST) -> list[tuple[int, int]]:
    """Split rows sorted by length (ascending) into consecutive buckets [start, end) minimising the padded tokens
    computed plus `pass_cost` per pass: each bucket is padded to its longest row."""
    n = len(lengths)
    best = [0] + [None] * n  # best[j]: the cost of the first j rows
    cut = [0] * (n + 1)
    for j in range(1, n + 1):
        for i in range(j):
            c = best[i] + (j - i) * lengths[j - 1] + pass_cost
            if best[j] is None or c < best[j]:
                best[j], cut[j] = c, i
    out, j = [], n
    while j > 0:
        out.append((cut[j], j))
        j = cut[j]
    return out[::-1]


def _dynamic_kv(cache: Any) -> list[tuple[Any, Any]] | None:
    """Each layer's keys and values of a plain DynamicCache ([batch, heads, positions, dim]); None for any other
    cache (sliding windows, quantized, static), which this module does not rebuild."""
    from transformers.cache_utils import DynamicCache, DynamicLayer

    if type(cache) is not DynamicCache or not all(type(layer) is DynamicLayer for layer in cache.layers):
        return None
    return [(layer.keys, layer.values) for layer in cache.layers]


def _cache(model: Any, kv: list[tuple[Any, Any]]) -> Any:
    from transformers.cache_utils import DynamicCache

    cache = DynamicCache(config=model.config)
    for i, (k, v) in enumerate(kv):
        cache.update(k, v, i)
    return cache


def packed_prefill(model: Any, rows: list[list[int]], pad_id: int, pass_cost: int = PASS_COST,
                   grad: bool = False, width: int | None = None) -> tuple[Any, Any, Any] | None:
    """(input_ids, attention_mask, cache) for `model.generate` on these prompts (token lists, no padding), with the
    shared prefix computed once and the rest in length buckets; None when there is nothing to gain (a single short
    row) or the model's cache is not a plain DynamicCache. Without gradients unless `grad` (a training forward that
    continues from the cache: the gradients of every row that shares the prefix add up in its one pass). `width`: at
    least this many columns (more padding in the middle), for a caller whose batch is padded wider than its longest
    prompt."""
    from contextlib import nullcontext

    import torch

    n = len(rows)
    if n == 0 or min(len(r) for r in rows) < 2:
        return None
    p = min(common_prefix(rows), min(len(r) for r in rows) - 1)  # every row keeps its last token for generate
    dev = model.device
    rest = [r[p:-1] for r in rows]  # what each row caches after the prefix (its last token is left to generate)
    m = max(max(len(x) for x in rest), (width or 0) - p - 1)  # the cached columns after the prefix
    width = p + m + 1
    ids = torch.full((n, width), pad_id, dtype=torch.long, device=dev)
    mask = torch.zeros((n, width), dtype=torch.long, device=dev)
    for i, r in enumerate(rows):
        ids[i, :p], mask[i, :p] = torch.tensor(r[:p]), 1
        own = r[p:]
        ids[i, width - len(own):], mask[i, width - len(own):] = torch.tensor(own), 1
    with nullcontext() if grad else torch.no_grad():
        head = None
        if p:
            out = model(input_ids=ids[:1, :p], attention_mask=mask[:1, :p], use_cache=True, logits_to_keep=1)
            head = _dynamic_kv(out.past_key_values)
            if head is None:
                return None
        order = sorted(range(n), key=lambda i: len(rest[i]))
        parts: list[list[tuple[Any, Any]]] = []
        for start, end in buckets([len(rest[i]) for i in order], pass_cost):
            sel = order[start:end]
            mb = len(rest[sel[-1]])
            if mb == 0:  # nothing of their own to cache: the prefix alone
                if head is None:
                    return None  # no prefix and nothing to cache: generate's own prefill is as cheap
                kv = [(k.expand(len(sel), -1, -1, -1), v.expand(len(sel), -1, -1, -1)) for k, v in head]
            else:
                cache = _cache(model, [(k.expand(len(sel), -1, -1, -1), v.expand(len(sel), -1, -1, -1))
                                       for k, v in head]) if head else None
                cols = slice(width - 1 - mb, width - 1)
                bmask = torch.cat([mask[sel, :p], mask[sel, cols]], 1)
                pos = (bmask.cumsum(-1) - 1).masked_fill(bmask == 0, 0)[:, p:]
                out = model(input_ids=ids[sel, cols], attention_mask=bmask, position_ids=pos,
                            past_key_values=cache, use_cache=True, logits_to_keep=1)
                kv = _dynamic_kv(out.past_key_values)
                if kv is None:
                    return None
            if mb < m:  # the longer buckets' extra padding, as masked zero columns after the prefix
                kv = [tuple(torch.cat([x[:, :, :p], x.new_zeros(x.shape[0], x.shape[1], m - mb, x.shape[3]),
                                       x[:, :, p:]], 2) for x in pair) for pair in kv]
            parts.append(kv)
        inverse = torch.empty(n, dtype=torch.long, device=dev)  # the parts hold the rows in `order`
        inverse[torch.tensor(order, device=dev)] = torch.arange(n, device=dev)
        merged = [tuple(torch.cat([part[layer][j] for part in parts], 0)[inverse] for j in (0, 1))
                  for layer in range(len(parts[0]))]
    return ids, mask, _cache(model, merged)


ONE_THREAD_ROWS = 48  # decoding at most this many rows runs on one thread where torch has two (measured, below)


@contextmanager
def decode_threads(rows: int) -> Iterator[None]:
    """Decode a small batch on one thread where torch runs two (the 2-core machines): a decoded token is ~300 small
    matmuls, and with OpenMP's passive waits (common/process.py) waking the second thread for each costs more than it
    computes. Measured on the AVX2 2-core EPYC, SmolLM2-135M float32, quiet: a decode step of 16 rows 259 ms on one
    thread vs 428 ms on two, 32 rows 393 vs 436, 48 rows 530 vs 554, 96 rows 1009 vs 854 (docs/benchmarks.md). Other
    thread counts are left as they are (not measured)."""
    import torch

    n = torch.get_num_threads()
    if n != 2 or rows > ONE_THREAD_ROWS:
        yield
        return
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(n)
