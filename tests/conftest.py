import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT.parent / "shared" / "fixtures" / "tase_official_sample"
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


@pytest.fixture(scope="session")
def fixture_root() -> Path:
    assert FIXTURES.is_dir(), f"official sample fixtures not found at {FIXTURES}"
    return FIXTURES


def run_module(args: list[str], **kw):
    """Run `python -m ...` in a subprocess from the repo root (real CLI, real exit code)."""
    import subprocess

    return subprocess.run([sys.executable, "-m", *args], cwd=ROOT, capture_output=True, text=True, **kw)


from vllm_fixtures import vllm_env, vllm_llm  # noqa: E402,F401  (h14: one shared vLLM engine per session)
