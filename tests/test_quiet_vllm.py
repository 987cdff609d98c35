"""`eval run --backend vllm` on CPU prints no library line a user cannot act on (issue 81): vLLM's engine and worker
processes, torch's C++ notes and multiprocessing's resource tracker printed about 20 (Triton, LD_PRELOAD,
VLLM_CPU_NUM_OF_RESERVED_CPU, reduce_op, force killing VLLM::Worker, leaked shared_memory, ...); the line filter of
common/process.py drops the listed ones, and --verbose shows them all."""
from __future__ import annotations

import subprocess
import sys

import pytest

from tests.conftest import ROOT

pytestmark = pytest.mark.fresh_python  # real engine processes, as a user's run starts them (tests/test_vllm_orphans.py)

OURS = ("overall ", "strict ", "files: ", "wrote ")  # the summary `eval run` prints (eval/_cli/run.py)


def _run(vllm_env, tiny64, fixture_root, out, *extra: str) -> tuple[subprocess.CompletedProcess, list[str]]:
    res = subprocess.run([sys.executable, "-m", "eval", "run", "--model", str(tiny64), "--data",
                          f"official:{fixture_root}", "--tasks", "COMPC", "--files", "english", "--limit", "2",
                          "--backend", "vllm", "--max-new-tokens", "4", "--no-progress", "--out", str(out), *extra],
                         cwd=ROOT, env=vllm_env, capture_output=True, text=True, timeout=900)
    assert res.returncode == 0, (res.stdout + res.stderr)[-3000:]
    lines = [line for line in (res.stdout + res.stderr).splitlines() if line.strip()]
    return res, [line for line in lines if not line.startswith(OURS)]


@pytest.mark.slow  # two vLLM engine starts of a tiny Llama: ~1-2 min each on 2 busy cores
def test_vllm_eval_run_on_cpu_prints_no_library_line_and_verbose_shows_them(vllm_env, tiny64, fixture_root, tmp_path):
    res, library = _run(vllm_env, tiny64, fixture_root, tmp_path / "quiet")
    assert library == [], library
    assert res.stdout.splitlines()[0].startswith("overall ") and "n=2" in res.stdout
    res, library = _run(vllm_env, tiny64, fixture_root, tmp_path / "verbose", "--verbose")
    text = "\n".join(library)
    assert len(library) >= 10, text  # vLLM's INFO lines and the warnings above
    for listed in ("is not found in LD_PRELOAD", "Triton is not installed", "VLLM_CPU_NUM_OF_RESERVED_CPU"):
        assert listed in text, (listed, text[-3000:])
