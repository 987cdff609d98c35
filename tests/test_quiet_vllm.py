"""`eval run --backend vllm` on CPU prints no library line a user cannot act on (issue 81): vLLM's engine and worker
processes, torch's C++ notes and multiprocessing's resource tracker printed about 20 (Triton, LD_PRELOAD,
VLLM_CPU_NUM_OF_RESERVED_CPU, reduce_op, force killing VLLM::Worker, leaked shared_memory, ...); the line filter of
common/process.py drops the listed ones ($TASE_QUIET_LOG collects them), and --verbose shows them all. On CPU the
engine now runs in the `eval run` process (eval/backends.py cpu_engine_in_process), where vLLM's loggers print two
notes more (the global seed, the thread binding), dropped by this process's logger filters. The engine processes'
lines (VLLM_ENABLE_V1_MULTIPROCESSING=1, a GPU's default) are the listed patterns, each checked as printed by
tests/test_quiet_output.py; tests/test_vllm_orphans.py starts those processes."""
from __future__ import annotations

import subprocess
import sys

import pytest

from tests.conftest import ROOT

pytestmark = pytest.mark.fresh_python  # a fresh interpreter, as a user's: what vLLM prints at its import counts too

OURS = ("overall ", "strict ", "files: ", "wrote ")  # the summary `eval run` prints (eval/_cli/run.py)


@pytest.mark.slow  # one vLLM engine start of a tiny Llama: ~30 s on 2 busy cores (in-process)
def test_vllm_eval_run_on_cpu_prints_no_library_line_and_the_quiet_log_holds_them(vllm_env, tiny64, fixture_root,
                                                                                  tmp_path):
    """One run: the terminal gets `eval run`'s summary only, and the lines the filter dropped (torch's C++ NUMA note,
    vLLM's loading bar) are in $TASE_QUIET_LOG, so the filter had work to do. That --verbose installs no
    filter: tests/test_quiet_output.py::test_verbose_keeps_the_library_messages."""
    quiet_log = tmp_path / "dropped.log"
    res = subprocess.run([sys.executable, "-m", "eval", "run", "--model", str(tiny64), "--data",
                          f"official:{fixture_root}", "--tasks", "COMPC", "--files", "english", "--limit", "2",
                          "--backend", "vllm", "--max-new-tokens", "4", "--no-progress", "--out", str(tmp_path / "o")],
                         cwd=ROOT, env={**vllm_env, "TASE_QUIET_LOG": str(quiet_log)}, capture_output=True,
                         text=True, timeout=900)
    assert res.returncode == 0, (res.stdout + res.stderr)[-3000:]
    lines = [line for line in (res.stdout + res.stderr).splitlines() if line.strip()]
    assert [line for line in lines if not line.startswith(OURS)] == [], lines
    assert res.stdout.splitlines()[0].startswith("overall ") and "n=2" in res.stdout
    dropped = quiet_log.read_text(errors="replace")
    print(dropped)
    assert len([x for x in dropped.splitlines() if x.strip()]) >= 3, dropped  # torch's NUMA note, the loading bar
    assert "EngineCore" not in dropped + res.stderr, dropped  # the CPU default: no engine process printed a line
