"""The GRPO front door (issue 48): the sync entry stays apart from async-only code, no recipe module grows past 400
lines, and the one YAML reader (common.yamlfile.read) with what the launchers ask it
(recipes.shared.parser.config_value)."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT

from common.yamlfile import YamlFileError, read
from recipes.shared.parser import config_value


def test_no_recipe_module_is_over_400_lines():
    long = {str(p.relative_to(ROOT)): n for p in sorted((ROOT / "recipes").rglob("*.py"))
            if (n := len(p.read_text(encoding="utf-8").splitlines())) > 400}
    assert not long, long


def test_the_sync_entry_imports_no_async_only_module():
    """recipes/grpo.py and what it imports at the top load nothing of recipes/async_grpo/ (its main is imported
    only when a run asks for trainer: async)."""
    code = "import sys, recipes.grpo; print(sorted(m for m in sys.modules if m.startswith('recipes.async_grpo.')))"
    res = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == "[]"


@pytest.mark.parametrize("text, kind", [("a: [\n", "yaml"), ("a: 1\na: 2\n", "yaml"), (b"\xff\xfe: 1\n", "encoding")])
def test_the_one_yaml_reader_sorts_each_failure_once(tmp_path, text, kind):
    f = tmp_path / "c.yaml"
    f.write_bytes(text if isinstance(text, bytes) else text.encode())
    with pytest.raises(YamlFileError) as e:
        read(f)
    assert e.value.kind == kind
    with pytest.raises(YamlFileError) as e:
        read(tmp_path / "missing.yaml")
    assert e.value.kind == "read" and isinstance(e.value.cause, FileNotFoundError)


def test_config_value_is_what_the_launchers_read(tmp_path):
    f = tmp_path / "c.yaml"
    f.write_text("model_name_or_path: Qwen/Qwen2.5-14B-Instruct  # a comment\nvllm_gpus: 2\nmax_len: null\n"
                 "use_vllm: true\n", encoding="utf-8")
    assert config_value(f, "model_name_or_path") == "Qwen/Qwen2.5-14B-Instruct"
    assert config_value(f, "vllm_gpus") == "2"
    assert config_value(f, "max_len") == "" and config_value(f, "token_budget") == ""
    assert config_value(f, "use_vllm") == "true"
    (tmp_path / "bad.yaml").write_text("a: 1\na: 2\n", encoding="utf-8")
    assert config_value(tmp_path / "bad.yaml", "a") == ""  # the recipe's own run says why, in its one line
    assert config_value(tmp_path / "missing.yaml", "a") == ""


def test_config_key_in_the_launchers_matches_the_shipped_configs():
    """launch/_options.sh config_key (bash) prints what the YAML says, for each key the launchers read."""
    cfg = "recipes/configs/grpo_qwen14b.yaml"
    script = f'PY={sys.executable}; . launch/_options.sh; for k in model_name_or_path dtype token_budget vllm_gpus; ' \
             f'do config_key {cfg} "$k"; done'
    res = subprocess.run(["bash", "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    assert res.stdout.split() == ["Qwen/Qwen2.5-14B-Instruct", "bfloat16", "18432", "2"]
    assert Path(ROOT / cfg).is_file()
