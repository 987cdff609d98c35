"""A GGUF file of an exported Llama folder, for llama.cpp and Ollama (`recipes/export.py --gguf TYPE`).

Written with the `gguf` package (llama.cpp's own writer library): its GGUFWriter, its tensor-name map for the
Llama architecture, its SpecialVocab (merges, special token ids, chat template) and its Q8_0/BF16 quantizers. The
steps follow llama.cpp's convert_hf_to_gguf.py for Llama: q/k projections permuted to the rotary layout llama.cpp
uses, norms kept in float32, the tied output head left out (llama.cpp reuses token_embd). Only what this covers is
accepted: a Llama without rope scaling or biases, with a byte-level BPE tokenizer whose pre-tokenizer llama.cpp names
(SmolLM2's, the default model's); anything else is refused in one line before a byte is written.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from common.errors import TaseError

# --gguf TYPE -> (llama.cpp file type name, what a 2-D weight is stored as); 1-D tensors (norms) stay float32
TYPES = ("f16", "q8_0", "bf16", "f32")
GGUF_NAME = "model.gguf"
MODELFILE = "Modelfile"
CHATML_OLLAMA = ('{{- range .Messages }}<|im_start|>{{ .Role }}\n{{ .Content }}<|im_end|>\n'
                 '{{ end }}<|im_start|>assistant\n')  # Ollama's own chatml template (template/chatml.gotmpl)


def _pre_tokenizer_name(tokenizer_json: dict) -> str | None:
    """llama.cpp's `tokenizer.ggml.pre` for this tokenizer.json, or None when it is not one this writer knows:
    plain byte-level with GPT-2's split regex is "gpt-2"; single digits split first, then byte-level (SmolLM2
    as published, StarCoder) is "smollm" (llama.cpp's LLAMA_VOCAB_PRE_TYPE_SMOLLM, the same regexes)."""
    pre = tokenizer_json.get("pre_tokenizer") or {}

    def byte_level(p: dict) -> bool:
        return p.get("type") == "ByteLevel" and p.get("use_regex", True) and not p.get("add_prefix_space", False)

    if byte_level(pre):
        return "gpt-2"
    parts = pre.get("pretokenizers") if pre.get("type") == "Sequence" else None
    if (parts and len(parts) == 2 and parts[0].get("type") == "Digits" and parts[0].get("individual_digits")
            and byte_level(parts[1])):
        return "smollm"
    return None


def config_refusal(cfg: dict, where: Path) -> str | None:
    """Why the model of `cfg` (its config.json, read from `where`) cannot be written as GGUF here, or None. Read
    before the model is loaded, so export refuses before minutes of loading."""
    kind = cfg.get("model_type")
    if kind != "llama":
        return (f"--gguf writes Llama models only (SmolLM2, the default model, is one); {where} is "
                f"{kind or 'of no model_type'}: export without --gguf and convert it with llama.cpp's "
                "convert_hf_to_gguf.py")
    rope = cfg.get("rope_scaling") or {}
    rope_type = rope.get("rope_type") or rope.get("type") or (cfg.get("rope_parameters") or {}).get("rope_type")
    if rope_type not in (None, "default"):
        return f"--gguf writes Llama models without rope scaling; {where} uses {rope_type!r} rope scaling"
    if cfg.get("attention_bias") or cfg.get("mlp_bias"):
        return f"--gguf writes Llama models without biases; {where} has attention or MLP biases"
    heads, hidden = cfg.get("num_attention_heads") or 1, cfg.get("hidden_size") or 0
    if cfg.get("head_dim") not in (None, hidden // heads):
        return f"--gguf writes Llama models whose head_dim is hidden_size / heads; {where} has {cfg['head_dim']}"
    return None


def tokenizer_refusal(folder: Path) -> str | None:
    """Why the tokenizer saved in `folder` cannot be written as GGUF here (not byte-level BPE with a pre-tokenizer
    llama.cpp names), or None."""
    try:
        tok = json.loads((folder / "tokenizer.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return f"{folder}: no readable tokenizer.json (--gguf needs the fast tokenizer's file)"
    if (tok.get("model") or {}).get("type") != "BPE" or _pre_tokenizer_name(tok) is None:
        return ("--gguf writes byte-level BPE tokenizers (GPT-2 style, SmolLM2's); this model's tokenizer is "
                "another kind: export without --gguf and convert it with llama.cpp's convert_hf_to_gguf.py")
    return None


def gguf_refusal(folder: Path) -> str | None:
    """Why the HF folder `folder` (config.json, tokenizer.json) cannot be written as GGUF here, or None."""
    try:
        cfg = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return f"{folder}: no readable config.json"
    return config_refusal(cfg, folder) or tokenizer_refusal(folder)


def _permute(w: Any, n_head: int) -> Any:
    """HF's rotate-half q/k rows -> llama.cpp's interleaved rotary pairs (convert_hf_to_gguf.py, LlamaModel.permute);
    transformers' GGUF loader undoes exactly this."""
    return w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def _vocab(folder: Path, n_vocab: int) -> tuple[list[str], list[int], bool, bool]:
    """Tokens in id order and their llama.cpp token types, as convert_hf_to_gguf.py's get_vocab_base builds them
    (special added tokens CONTROL, other added tokens USER_DEFINED, ids past the tokenizer's size `[PADn]` UNUSED),
    and whether the tokenizer adds BOS / EOS to a text (SmolLM2's adds neither; llama.cpp must do as it does)."""
    import gguf
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(folder)
    by_id = {i: t for t, i in tok.get_vocab().items()}
    added = {i: a for i, a in tok.added_tokens_decoder.items()}
    tokens, types = [], []
    for i in range(n_vocab):
        if i not in by_id:
            tokens.append(f"[PAD{i}]")
            types.append(gguf.TokenType.UNUSED)
        elif i in added:
            tokens.append(by_id[i])
            types.append(gguf.TokenType.CONTROL if added[i].special else gguf.TokenType.USER_DEFINED)
        else:
            tokens.append(by_id[i])
            types.append(gguf.TokenType.NORMAL)
    ids = tok("a").input_ids
    bos = tok.bos_token_id is not None and ids[:1] == [tok.bos_token_id]
    eos = tok.eos_token_id is not None and ids[-1:] == [tok.eos_token_id]
    return tokens, types, bos, eos


def write_gguf(folder: Path, state: dict[str, Any], dest: Path, qtype: str, name: str) -> tuple[int, int]:
    """Write `dest` from the HF folder `folder` (config, tokenizer) and the model's `state` (name -> tensor) in
    `qtype`; (tensors written, bytes)."""
    import gguf
    import numpy as np
    import torch

    cfg = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    tok_json = json.loads((folder / "tokenizer.json").read_text(encoding="utf-8"))
    n_layer, n_head = cfg["num_hidden_layers"], cfg["num_attention_heads"]
    n_kv = cfg.get("num_key_value_heads") or n_head
    hidden, n_vocab = cfg["hidden_size"], cfg["vocab_size"]
    rope_theta = cfg.get("rope_theta") or (cfg.get("rope_parameters") or {}).get("rope_theta") or 10000.0
    file_type = {"f16": gguf.LlamaFileType.MOSTLY_F16, "q8_0": gguf.LlamaFileType.MOSTLY_Q8_0,
                 "bf16": gguf.LlamaFileType.MOSTLY_BF16, "f32": gguf.LlamaFileType.ALL_F32}[qtype]

    w = gguf.GGUFWriter(dest, gguf.MODEL_ARCH_NAMES[gguf.MODEL_ARCH.LLAMA])
    w.add_name(name)
    w.add_block_count(n_layer)
    w.add_context_length(cfg.get("max_position_embeddings", 2048))
    w.add_embedding_length(hidden)
    w.add_feed_forward_length(cfg["intermediate_size"])
    w.add_head_count(n_head)
    w.add_head_count_kv(n_kv)
    w.add_rope_freq_base(float(rope_theta))
    w.add_layer_norm_rms_eps(float(cfg.get("rms_norm_eps", 1e-6)))
    w.add_vocab_size(n_vocab)
    w.add_rope_dimension_count(hidden // n_head)
    w.add_file_type(file_type)
    if qtype == "q8_0":
        w.add_quantization_version(gguf.GGML_QUANT_VERSION)
    tokens, types, add_bos, add_eos = _vocab(folder, n_vocab)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre(_pre_tokenizer_name(tok_json))
    w.add_token_list(tokens)
    w.add_token_types(types)
    special = gguf.SpecialVocab(folder, load_merges=True, n_vocab=len(tokens))
    special.add_special_token.setdefault("bos", add_bos)  # what tokenizer.json's post-processor says, else this
    special.add_special_token.setdefault("eos", add_eos)
    special.add_to_gguf(w, quiet=True)

    names = gguf.get_tensor_name_map(gguf.MODEL_ARCH.LLAMA, n_layer)
    tied = cfg.get("tie_word_embeddings", False)
    count = 0
    for hf_name, t in state.items():
        if hf_name.endswith("rotary_emb.inv_freq") or (tied and hf_name == "lm_head.weight"):
            continue
        new = names.get_name(hf_name, try_suffixes=(".weight", ".bias"))
        if new is None:
            raise TaseError(f"--gguf: no GGUF name for tensor {hf_name} (not a plain Llama); export without --gguf")
        data = t.detach().to(torch.float32).cpu().numpy()
        if hf_name.endswith("q_proj.weight"):
            data = _permute(data, n_head)
        elif hf_name.endswith("k_proj.weight"):
            data = _permute(data, n_kv)
        data = np.ascontiguousarray(data)
        if data.ndim == 1 or qtype == "f32":
            w.add_tensor(new, data)
        elif qtype == "f16":
            w.add_tensor(new, data.astype(np.float16))
        else:
            kind = gguf.GGMLQuantizationType.Q8_0 if qtype == "q8_0" else gguf.GGMLQuantizationType.BF16
            if kind == gguf.GGMLQuantizationType.Q8_0 and data.shape[-1] % gguf.GGML_QUANT_SIZES[kind][0]:
                kind, packed = gguf.GGMLQuantizationType.F16, data.astype(np.float16)  # llama.cpp's fallback
            else:
                packed = gguf.quants.quantize(data, kind)
            w.add_tensor(new, packed, raw_dtype=kind)
        count += 1
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return count, dest.stat().st_size


def chat_template_of(folder: Path) -> str | None:
    """The Jinja chat template saved with the tokenizer (chat_template.jinja, else tokenizer_config.json)."""
    jinja = folder / "chat_template.jinja"
    if jinja.is_file():
        return jinja.read_text(encoding="utf-8")
    try:
        return json.loads((folder / "tokenizer_config.json").read_text(encoding="utf-8")).get("chat_template")
    except (OSError, ValueError):
        return None


def modelfile(folder: Path, system_prompt: str | None) -> str:
    """An Ollama Modelfile beside model.gguf: FROM it, the chat template in Ollama's Go form (ChatML, what SmolLM2
    and this project's models use; another template is left to Ollama, which reads the GGUF's own), its stop
    tokens, and the system prompt the model was trained and evaluated with."""
    lines = [f"FROM ./{GGUF_NAME}"]
    template = chat_template_of(folder) or ""
    if "<|im_start|>" in template:
        lines += [f'TEMPLATE """{CHATML_OLLAMA}"""', 'PARAMETER stop "<|im_end|>"', 'PARAMETER stop "<|im_start|>"']
    else:
        lines.append("# the chat template is not ChatML: Ollama takes it from the GGUF's tokenizer.chat_template")
    if system_prompt:
        lines.append(f'SYSTEM """{system_prompt}"""')
    return "\n".join(lines) + "\n"
