"""eval tokstats on the real SmolLM2 tokenizer: byte-level BPE fragments Hangul far more than English."""
import json

from conftest import run_module


def test_tokstats_smollm2(fixture_root, tmp_path, default_model):
    res = run_module(["eval", "tokstats", "--model", "default", "--data", f"official:{fixture_root}",
                      "--out", str(tmp_path), "--name", "SmolLM2"])
    assert res.returncode == 0, res.stderr[-2000:]
    rep = json.loads((tmp_path / "tokstats.json").read_text())
    cells = {(c["task"], c["lang"]): c for c in rep["cells"]}
    assert len(cells) == 28
    en, ko = cells[("sentence_length", "en")], cells[("sentence_length", "ko")]
    assert ko["tokens_per_char"] > 5 * en["tokens_per_char"]  # ~1 token per byte of Hangul
    assert ko["pcw"] > 0.9 and en["pcw"] < 0.5
    assert rep["parity"]["ko"] > rep["parity"]["zh"] > 1.0
    assert "| sentence_length | ko |" in (tmp_path / "tokstats.md").read_text()
