"""The shapes of the Qwen2.5 models the paper recipes name, so that `--dry-run` prints the whole plan (batch, async
split, memory) on a fresh machine whose Hugging Face cache does not hold the weights. A model that is in
the cache is read from its own config.json instead; this table is the fallback, and the dry run says so in one line.

The figures are the `config.json` fields of Qwen/Qwen2.5-{0.5B..72B}(-Instruct) that set the parameter count; the
count computed from them (`param_counts`) equals the released safetensors' totals (494,032,768 for 0.5B ...
72,706,203,648 for 72B; tests/test_docs_commands.py checks two of them against transformers' own model)."""
from __future__ import annotations

import re
from typing import Any

# size -> hidden_size, intermediate_size, num_attention_heads, num_key_value_heads, num_hidden_layers, vocab_size,
# tie_word_embeddings (the base and -Instruct models share their shapes)
_QWEN25 = {
    "0.5B": (896, 4864, 14, 2, 24, 151936, True),
    "1.5B": (1536, 8960, 12, 2, 28, 151936, True),
    "3B": (2048, 11008, 16, 2, 36, 151936, True),
    "7B": (3584, 18944, 28, 4, 28, 152064, False),
    "14B": (5120, 13824, 40, 8, 48, 152064, False),
    "32B": (5120, 27648, 40, 8, 64, 152064, False),
    "72B": (8192, 29568, 64, 8, 80, 152064, False),
}
_NAME = re.compile(r"^Qwen/Qwen2\.5-(\d+(?:\.\d+)?B)(?:-Instruct)?$")


def known_config(repo_id: str) -> dict[str, Any] | None:
    """A Qwen2.5 hub id's config.json fields that set its size (model_type qwen2), or None for any other name."""
    m = _NAME.match(repo_id)
    if not m or m.group(1) not in _QWEN25:
        return None
    h, inter, heads, kv, layers, vocab, tie = _QWEN25[m.group(1)]
    return {"model_type": "qwen2", "architectures": ["Qwen2ForCausalLM"], "hidden_size": h, "intermediate_size": inter,
            "num_attention_heads": heads, "num_key_value_heads": kv, "num_hidden_layers": layers, "vocab_size": vocab,
            "tie_word_embeddings": tie, "torch_dtype": "bfloat16"}


def param_counts(cfg: dict[str, Any]) -> tuple[int, int]:
    """(total parameters, largest tensor) of a Qwen2 model with these shapes: attention with q/k/v biases, a SwiGLU
    MLP, two RMSNorms a layer, the embedding (and an LM head unless tied)."""
    h, inter, layers, vocab = cfg["hidden_size"], cfg["intermediate_size"], cfg["num_hidden_layers"], cfg["vocab_size"]
    kv = cfg["num_key_value_heads"] * (h // cfg["num_attention_heads"])
    layer = (h * h + h) + 2 * (h * kv + kv) + h * h + 3 * h * inter + 2 * h
    total = vocab * h * (1 if cfg["tie_word_embeddings"] else 2) + layers * layer + h
    return total, max(vocab * h, h * inter)


def fallback_note(repo_id: str) -> str:
    """The one line a dry run prints when it plans from the table."""
    c = known_config(repo_id)
    assert c is not None
    return (f"note: {repo_id} is not in the local Hugging Face cache ($HF_HOME/hub); the plan uses its known shape "
            f"({c['num_hidden_layers']} layers, hidden {c['hidden_size']}, {param_counts(c)[0] / 1e9:.2f}B "
            "parameters, recipes/grpo_core/model_shapes.py)")
