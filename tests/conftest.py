"""Test session set-up: every cache the project (and the libraries it drives) writes points into one
temporary folder for the session, so no test depends on what an earlier run left on the machine."""
import os
import shutil
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# in the repository (tests/fixtures/README.md), so the tests pass in a clone in any folder
FIXTURES = ROOT / "tests" / "fixtures" / "tase_official_sample"
VERDICTS = ROOT / "tests" / "fixtures" / "official_verdicts.jsonl"

# Set before any test module imports transformers, datasets or vLLM (they read these at import), and
# inherited by every CLI the tests start in a subprocess.
_SESSION_CACHE = Path(tempfile.mkdtemp(prefix="tase-test-cache-"))
for var, sub in {
    "TASE_CACHE": "tase",  # converted default model and other project caches
    "HF_HOME": "hf",  # hub, datasets and tokenizers caches
    "XDG_CACHE_HOME": "xdg",  # ~/.cache for everything else that honours it (vLLM, torch, matplotlib)
    "VLLM_CACHE_ROOT": "vllm",
    "TORCHINDUCTOR_CACHE_DIR": "inductor",
    "TRITON_CACHE_DIR": "triton",
    "MPLCONFIGDIR": "mpl",
}.items():
    os.environ[var] = str(_SESSION_CACHE / sub)
os.environ["HF_HUB_OFFLINE"] = "1"  # no model hub here: a test that reaches for it fails fast
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def pytest_unconfigure(config):
    shutil.rmtree(_SESSION_CACHE, ignore_errors=True)


@pytest.fixture(scope="session")
def fixture_root() -> Path:
    assert FIXTURES.is_dir(), f"official sample fixtures not found at {FIXTURES}"
    return FIXTURES


@pytest.fixture(scope="session")
def default_model() -> Path:
    """SmolLM2-135M-Instruct converted once per session into the session cache; subprocesses that say
    `--model default` find it there through $TASE_CACHE."""
    from eval.models import resolve_model

    return resolve_model("default")


def run_module(args: list[str], **kw):
    """Run `python -m ...` in a subprocess from the repo root (real CLI, real exit code)."""
    import subprocess

    return subprocess.run([sys.executable, "-m", *args], cwd=ROOT, capture_output=True, text=True, **kw)


from vllm_fixtures import vllm_env, vllm_llm  # noqa: E402,F401  (h14: one shared vLLM engine per session)
