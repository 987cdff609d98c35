"""Evaluation backends are registered by name in one place (eval/backend_registry.py, issue 78): a toy backend in one
module (tests/toy_backend.py) runs `eval run` end to end; a name taken twice, or a class missing what the runner calls,
is refused; the CLIs and configs that choose a backend read the registry instead of spelling the names."""
from __future__ import annotations

import ast
import json
import subprocess
import sys

import pytest
from conftest import ROOT, tree_env

from common.registry import RegistryError
from eval.backends import BACKENDS, HFBackend, backend_names, register_backend

KEY = "token_structure/component_count/english.csv"
# `python -m eval ...` in a fresh process that imported the toy backend's module first: the one import a user adds
WITH_TOY = "import sys, toy_backend; from eval.__main__ import main; sys.exit(main(sys.argv[1:]))"


def _eval(code: str, *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code, *argv], cwd=ROOT, capture_output=True, text=True, timeout=300,
                          env=tree_env(PYTHONPATH=f"{ROOT}:{ROOT / 'tests'}"))


@pytest.mark.slow  # two fresh `eval run` processes (six rows, no model loaded): ~40-110 s on 2 busy cores
def test_a_toy_backend_in_one_module_runs_eval_end_to_end(fixture_root, default_model, tmp_path):
    out = tmp_path / "toy"
    argv = ["run", "--backend", "toy", "--model", str(default_model), "--data", f"official:{fixture_root}",
            "--tasks", "component_count", "--files", "english", "--out", str(out), "--no-progress"]
    res = _eval(WITH_TOY, *argv)
    assert res.returncode == 0, res.stderr[-2000:]
    got = json.loads((out / "results.json").read_text())
    assert got["backend"] == "toy" and got["files_scored"] == [KEY] and got["n"] == 6
    assert got["generation"]["batch_size"] == 4  # the toy's own default, read from its class
    assert got["by_file"][KEY]["accuracy"] == 33.33  # scored, in percent: two of the six answers are 2
    samples = [json.loads(line) for line in (out / "samples.jsonl").read_text().splitlines()]
    assert len(samples) == 6 and {s["completion"] for s in samples} == {"<answer>2</answer>"}
    assert {s["answer"] for s in samples if s["coarse"] == 1.0} == {"2"}
    # without its module the name is unknown: --backend's choices are the registry's names
    res = _eval(WITH_TOY.replace(", toy_backend", ""), *argv[:-3], "--out", str(tmp_path / "none"))
    assert res.returncode == 2 and "invalid choice: 'toy'" in res.stderr and "'hf', 'vllm', 'openai'" in res.stderr


def test_a_name_taken_twice_or_a_class_missing_what_the_runner_calls_is_refused():
    class Again:
        help, batch_size = "again", 1

        @classmethod
        def build(cls, model_path, cfg, options):
            return cls()

        def generate(self, conversations):
            return []

    with pytest.raises(RegistryError, match=r"backend 'hf' is already registered by eval\.backends\.HFBackend; "
                                            r"refusing .*Again"):
        register_backend("hf")(Again)
    assert BACKENDS["hf"] is HFBackend and backend_names()[:3] == ("hf", "vllm", "openai")

    class NoGenerate:
        help, batch_size = "x", 0

    with pytest.raises(RegistryError, match=r"lacks build, generate, batch_size \(a positive int\)"):
        register_backend("incomplete")(NoGenerate)
    assert "incomplete" not in BACKENDS
    assert backend_names(local=True) == tuple(n for n in backend_names() if n != "openai")


# the files that chose a backend by spelling the names (issue 78); they read the registry now
CHOOSERS = ("eval/_cli/common.py", "eval/_cli/run.py", "eval/runner.py", "recipes/proof_stages/config.py",
            "recipes/select_checkpoint.py", "recipes/ablate.py", "recipes/demo.py")


def _literals(node: ast.AST) -> set[str]:
    return {n.value for n in ast.walk(node) if isinstance(n, ast.Constant) and isinstance(n.value, str)}


def test_the_cli_choices_and_the_runner_read_the_registry_not_spelled_names():
    names = set(backend_names())
    for rel in CHOOSERS:
        tree = ast.parse((ROOT / rel).read_text(encoding="utf-8"))
        for call in ast.walk(tree):
            if not isinstance(call, ast.Call) or "--rollout-engine" in _literals(call):  # TRL's engine, not eval's
                continue
            for kw in call.keywords:
                if kw.arg in ("choices", "default"):
                    assert not _literals(kw.value) & names, f"{rel}:{kw.value.lineno} spells a backend name"
        if rel.startswith("eval/") or rel.endswith("config.py"):  # the recipes' vLLM-only steps may name vllm
            for node in ast.walk(tree):
                if isinstance(node, ast.Compare):
                    assert not _literals(node) & names, f"{rel}:{node.lineno} compares with a backend name"
