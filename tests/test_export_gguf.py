"""`recipes/export.py --gguf TYPE` (issue 81): the GGUF it writes is read back by an independent reader,
transformers' own GGUF loader (`from_pretrained(folder, gguf_file=...)`, its own parser and dequantizer), and gives
the logits of the exported safetensors folder within a stated tolerance, with the same token ids and chat template;
a model it does not cover is refused in one line before anything is written.

Tolerances (docs/training.md, "Export"), as the largest |logit difference| over a prompt, on the session's tiny random
Llama (SmolLM2's tokenizer, logits up to about 1.4): f16 1e-3 (the bf16 export's weights fit f16 exactly but for the
rare tiny ones; measured 2e-7), bf16 and f32 exact (1e-5), q8_0 5e-2 (8-bit blocks of 32; measured 1e-2).
"""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT, call_main

TOLERANCE = {"f16": 1e-3, "q8_0": 5e-2, "bf16": 1e-5, "f32": 1e-5}
TEXTS = ["Hello world", "How many letters are in 'strawberry'? 1234", "草莓这个词有几个字？",
         "딸기라는 단어에는 글자가 몇 개 있나요?", "<|im_start|>user\n  two  spaces<|im_end|>"]


def export(ckpt: Path, out: Path, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "recipes/export.py", str(ckpt), "--out", str(out), *extra], cwd=ROOT,
                          capture_output=True, text=True, timeout=900)


def logits(model, ids):
    import torch

    with torch.no_grad():
        return model(ids).logits.float()


@pytest.mark.parametrize("qtype", ["f16", "q8_0"])
def test_gguf_round_trips_through_transformers(request, tmp_path, qtype):
    """f16 on the tiny Llama with SmolLM2's whole tokenizer (the GGUF's tokenizer is compared with the folder's);
    q8_0 on a tiny Llama of the same shape whose tokenizer is cut to 2,048 ids (conftest's small_vocab_model): the
    tokenizer is written the same way for every type, and transformers' GGUF reader parses 49,152 token strings in
    ~7 s per read."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from transformers.integrations.gguf.reader import read_gguf_metadata

    ckpt = request.getfixturevalue("tiny_model" if qtype == "f16" else "small_vocab_model")
    out = tmp_path / "exp"
    res = export(ckpt, out, "--gguf", qtype)
    assert res.returncode == 0, res.stderr[-3000:]
    gguf = out / "model.gguf"
    assert f"GGUF: {gguf} ({qtype}, " in res.stdout and "Modelfile" in res.stdout
    assert {"Modelfile", "model.gguf"} <= set(json.loads((out / ".tase-output.json").read_text())["files"])

    folder = AutoModelForCausalLM.from_pretrained(out, dtype=torch.float32)
    read = AutoModelForCausalLM.from_pretrained(out, gguf_file="model.gguf", dtype=torch.float32)
    tok = AutoTokenizer.from_pretrained(out)
    if qtype == "f16":  # the tokenizer is written the same for every type (transformers rebuilds it slowly: once)
        gtok = AutoTokenizer.from_pretrained(out, gguf_file="model.gguf")
        for text in TEXTS:  # the GGUF's vocabulary, merges and special tokens tokenize as the folder's tokenizer does
            assert gtok(text).input_ids == tok(text).input_ids, text
    chat = [{"role": "system", "content": "Put the answer in <answer></answer>."},
            {"role": "user", "content": "How many letters are in 'strawberry'?"}]
    ids = tok.apply_chat_template(chat, add_generation_prompt=True, return_tensors="pt", return_dict=True)["input_ids"]
    diff = (logits(read, ids) - logits(folder, ids)).abs().max().item()
    assert diff <= TOLERANCE[qtype], f"{qtype}: max |logit difference| {diff:.3g} > {TOLERANCE[qtype]}"

    meta, tensors = read_gguf_metadata(str(gguf))
    assert meta["general.architecture"] == "llama" and meta["tokenizer.ggml.model"] == "gpt2"
    assert meta["tokenizer.chat_template"] == tok.chat_template
    assert meta["general.file_type"] == {"f16": 1, "q8_0": 7}[qtype]
    assert "output.weight" not in tensors  # tied head: llama.cpp reuses token_embd, as for SmolLM2's own GGUF
    modelfile = (out / "Modelfile").read_text()
    assert modelfile.startswith("FROM ./model.gguf\n") and 'PARAMETER stop "<|im_end|>"' in modelfile
    assert "<|im_start|>{{ .Role }}" in modelfile and 'SYSTEM """' in modelfile
    card = (out / "README.md").read_text()
    assert f"`model.gguf` ({qtype})" in card


def test_gguf_bf16_and_f32_are_exact(small_vocab_model, tmp_path):
    """bf16 holds the export's weights as they are, f32 widens them: transformers reads back the folder's logits (the
    small-vocabulary tiny Llama: what is checked is the weights)."""
    import torch
    from transformers import AutoModelForCausalLM

    from recipes.shared.gguf_export import write_gguf

    model = AutoModelForCausalLM.from_pretrained(small_vocab_model, dtype=torch.bfloat16)
    folder = tmp_path / "f"
    model.save_pretrained(folder)
    for name in ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja"):
        if (small_vocab_model / name).is_file():
            shutil.copy(small_vocab_model / name, folder / name)
    ids = torch.tensor([[1, 1093, 198, 1556, 905, 30, 2]])
    want = logits(model.float(), ids)
    for qtype in ("bf16", "f32"):
        write_gguf(folder, model.state_dict(), folder / f"{qtype}.gguf", qtype, "tiny")
        read = AutoModelForCausalLM.from_pretrained(folder, gguf_file=f"{qtype}.gguf", dtype=torch.float32)
        assert (logits(read, ids) - want).abs().max().item() <= TOLERANCE[qtype], qtype


def test_gguf_refuses_other_architectures_in_one_line(tiny_model, tmp_path):
    """A config --gguf does not cover (not Llama, rope scaling) is one line and exit 2 before loading; nothing
    is written at --out. --card-only with --gguf is refused too."""
    for name, change in (("qwen", {"model_type": "qwen2", "architectures": ["Qwen2ForCausalLM"]}),
                         ("yarn", {"rope_scaling": {"rope_type": "yarn", "factor": 4.0}})):
        ck = tmp_path / name
        ck.mkdir()
        for f in tiny_model.iterdir():
            if f.is_file() and f.name != "config.json":
                (ck / f.name).symlink_to(f)
        cfg = json.loads((tiny_model / "config.json").read_text())
        (ck / "config.json").write_text(json.dumps({**cfg, **change}))
        code, err = call_main(["recipes/export.py", str(ck), "--out", str(tmp_path / f"out-{name}"), "--gguf", "q8_0"])
        assert code == 2 and len(err.strip().splitlines()) == 1, err
        assert "--gguf writes Llama models" in err and "Traceback" not in err
        assert not (tmp_path / f"out-{name}").exists()
    code, err = call_main(["recipes/export.py", str(tiny_model), "--out", str(tmp_path / "o"), "--card-only", "--gguf"])
    assert code == 2 and "--card-only rewrites only the model card" in err
