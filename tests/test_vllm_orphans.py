"""`kill -9` of `python -m eval run --backend vllm` takes vLLM's engine processes with it (issue 36): before,
`VLLM::EngineCore` was re-parented to PID 1 and kept its Worker (3.5 GB) running for minutes (common/process.py
`spawned_children_die_with_me`). On CPU `eval run` keeps the engine in its own process unless the user asks for
vLLM's engine processes (VLLM_ENABLE_V1_MULTIPROCESSING=1, as on a GPU, where they are the default): the run here
asks, so it starts them."""
from __future__ import annotations

import signal
import subprocess
import sys
import time

import pytest

from tests.conftest import ROOT

# its runs start vLLM engines, which TRL binds after an import the warm interpreter made without vLLM
# (tests/warm_python.py)
pytestmark = pytest.mark.fresh_python


def _gone(p) -> bool:
    import psutil

    try:
        return p.status() == psutil.STATUS_ZOMBIE  # dead, waiting for a reaper that may not reap
    except psutil.NoSuchProcess:
        return True


@pytest.mark.slow  # a real vLLM engine start: ~40-70 s on 2 busy cores
def test_kill_9_of_eval_run_leaves_no_engine_process(vllm_env, tiny64, fixture_root, tmp_path):
    """The engine of a tiny random Llama (tests/conftest.py): what is checked is its processes, not its answers."""
    import psutil

    cmd = [sys.executable, "-m", "eval", "run", "--model", str(tiny64), "--data", f"official:{fixture_root}",
           "--limit", "2", "--backend", "vllm", "--max-new-tokens", "256", "--out", str(tmp_path / "run")]
    proc = subprocess.Popen(cmd, cwd=ROOT, env={**vllm_env, "VLLM_ENABLE_V1_MULTIPROCESSING": "1"},
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    kids: list = []
    try:
        parent = psutil.Process(proc.pid)
        deadline = time.monotonic() + 420
        engine = []
        while time.monotonic() < deadline and proc.poll() is None:
            kids = parent.children(recursive=True)
            engine = [k for k in kids if any("spawn_main" in a for a in _cmdline(k)) or "VLLM" in _name(k)]
            if len(engine) >= 2:  # the EngineCore and the Worker it spawned
                break
            time.sleep(0.2)
        assert len(engine) >= 2, (proc.poll(), proc.stderr.read().decode()[-3000:] if proc.poll() is not None else "")
        kids = parent.children(recursive=True)  # the engine processes and multiprocessing's resource tracker
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and not all(_gone(k) for k in kids):
            time.sleep(0.2)
        left = [(k.pid, _name(k), _cmdline(k)[:3]) for k in kids if not _gone(k)]
        assert not left, left
    finally:
        if proc.poll() is None:
            proc.kill()
        for k in kids:  # never leave one behind, whatever failed
            try:
                k.kill()
            except psutil.Error:
                pass


def _cmdline(p) -> list[str]:
    import psutil

    try:
        return p.cmdline()
    except psutil.Error:
        return []


def _name(p) -> str:
    import psutil

    try:
        return p.name()
    except psutil.Error:
        return ""
