"""Patches that let TRL 1.16's AsyncGRPOTrainer run without CUDA (recipes/async_grpo/cpu_engine.py uses them): a
response schema for plain ChatML templates, the tree-packed attention in SDPA instead of FlashAttention-3, and a
peak-FLOPs lookup that does not ask CUDA for a device name. Each is applied by a call, never at import."""
from __future__ import annotations

from typing import Any

import torch


def plain_chatml_response(tok: Any) -> bool:
    """TRL's rollout worker parses each completion with `tokenizer.parse_response` and refuses a chat template it
    does not know (SmolLM2's: `ValueError: Unrecognized chat template, failed to add response schema`). For a
    ChatML template without a response template, set one that reads the whole reply as `content` (no tool calls,
    no reasoning block: the TASE tasks have neither). Returns whether it set one."""
    from trl.chat_template_utils import add_response_schema, qwen3_template

    if getattr(tok, "response_template", None) or getattr(tok, "response_schema", None):
        return False
    try:
        add_response_schema(tok)
        return False  # a template TRL knows
    except ValueError:
        pass
    if "<|im_start|>" not in (tok.chat_template or ""):
        return False  # TRL's own error will name the problem
    tok.response_template = {**qwen3_template, "fields": {"content": qwen3_template["fields"]["content"]}}
    return True


# --------------------------------------------------------------------------------------------- tree attention on CPU


def cpu_tree_attention(module, query, key, value, attention_mask, *, tree_kv_index, tree_cu_seqlens_q,
                       tree_cu_seqlens_k, tree_max_seqlen_q=None, tree_max_seqlen_k=None, scaling=None,
                       sliding_window=None, softcap=None, **kwargs):
    """Same contract as `trl.experimental.async_grpo.packing.tree_attention`: segment s of the packed row attends,
    causally aligned to the end (flash-attn's convention for seqlen_q <= seqlen_k), to the K/V rows
    `tree_kv_index[cu_k[s]:cu_k[s+1]]`, its root-to-segment path. Query (1, H, N, D), key/value (1, Hkv, N, D);
    returns (1, N, H, D)."""
    if softcap:
        raise NotImplementedError("cpu_tree_attention: attention softcapping is not implemented")
    q = query[0]  # (H, N, D)
    k, v = key[0], value[0]
    if k.shape[0] != q.shape[0]:  # grouped-query attention
        rep = q.shape[0] // k.shape[0]
        k, v = k.repeat_interleave(rep, dim=0), v.repeat_interleave(rep, dim=0)
    out = torch.empty(q.shape[1], q.shape[0], q.shape[2], dtype=q.dtype, device=q.device)
    cu_q, cu_k = tree_cu_seqlens_q.tolist(), tree_cu_seqlens_k.tolist()
    for s in range(len(cu_q) - 1):
        qs, qe, ks, ke = cu_q[s], cu_q[s + 1], cu_k[s], cu_k[s + 1]
        if qe <= qs:
            continue
        idx = tree_kv_index[ks:ke]
        ks_, vs_ = k.index_select(1, idx), v.index_select(1, idx)
        lq, lk = qe - qs, ke - ks
        i = torch.arange(lq, device=q.device)[:, None]
        j = torch.arange(lk, device=q.device)[None, :]
        allowed = j <= i + (lk - lq)
        if sliding_window:
            allowed &= j > i + (lk - lq) - sliding_window
        o = torch.nn.functional.scaled_dot_product_attention(q[:, qs:qe], ks_, vs_, attn_mask=allowed, scale=scaling)
        out[qs:qe] = o.transpose(0, 1)
    return out.unsqueeze(0), None


def cpu_safe_peak_flops() -> bool:
    """TRL 1.16's AsyncGRPOTrainer.__init__ calls `get_peak_flops_per_device`, which calls
    `torch.cuda.get_device_name` unconditionally (`AssertionError: Torch not compiled with CUDA enabled` on CPU).
    Without CUDA, the name the trainer module imported is replaced by one that returns None (MFU metrics off,
    which is what TRL does for an unknown device). Upstream fix: return None when the device is not CUDA."""
    if torch.cuda.is_available():
        return False
    from trl.experimental.async_grpo import async_grpo_trainer

    async_grpo_trainer.get_peak_flops_per_device = lambda accelerator, dtype: None
    return True


def use_cpu_tree_attention() -> bool:
    """Route TRL's tree attention to `cpu_tree_attention` when CUDA is absent; returns whether it did."""
    if torch.cuda.is_available():
        return False
    from transformers import AttentionInterface
    from trl.experimental.async_grpo.packing import TREE_ATTENTION

    AttentionInterface.register(TREE_ATTENTION, cpu_tree_attention)
    return True


# --------------------------------------------------------------------------------------------- weights over gloo
