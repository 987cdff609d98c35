"""The test session's cache folder does not outlive the run: removed on a normal end, on SIGTERM (`timeout`,
a cancelled CI job), and, after SIGKILL, by the next session's sweep (122 leftovers once filled the disk)."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from conftest import CACHE_PREFIX, OWNER, ROOT, sweep_stale_caches, tree_env


def _dead_pid() -> int:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


def test_sweep_removes_only_caches_of_dead_runs(tmp_path):
    dead, live, ownerless, other = (tmp_path / f"{CACHE_PREFIX}{n}" for n in ("dead", "live", "none", "x"))
    for d in (dead, live, ownerless):
        (d / "hf").mkdir(parents=True)
    other = tmp_path / "unrelated"
    other.mkdir()
    (other / OWNER).write_text(str(_dead_pid()))
    (dead / OWNER).write_text(str(_dead_pid()))
    (live / OWNER).write_text(str(os.getpid()))
    assert sweep_stale_caches(tmp_path) == [dead]
    assert not dead.exists() and live.is_dir() and ownerless.is_dir() and other.is_dir()


def test_sigterm_still_removes_the_session_cache(tmp_path):
    """A real pytest session, stopped by SIGTERM mid-test, leaves no cache folder behind."""
    (tmp_path / "conftest.py").write_text((ROOT / "tests" / "conftest.py").read_text()
                                          .split("\n@pytest.fixture", 1)[0])  # the session set-up, not fixtures
    (tmp_path / "test_sleep.py").write_text(
        "import os, time\n"
        "def test_sleep():\n"
        "    open(os.environ['MARK'], 'w').write(os.environ['TASE_CACHE'])\n"
        "    time.sleep(60)\n")
    mark = tmp_path / "mark"
    env = tree_env(MARK=str(mark), TMPDIR=str(tmp_path))
    p = subprocess.Popen([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                          str(tmp_path / "test_sleep.py")],
                         cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.time() + 60
    while not (mark.exists() and mark.read_text()) and time.time() < deadline:  # created, then written: wait for both
        time.sleep(0.2)
    cache = Path(mark.read_text()).parent
    assert cache.name.startswith(CACHE_PREFIX) and cache.is_dir() and (cache / OWNER).read_text() == str(p.pid)
    p.send_signal(signal.SIGTERM)
    out, _ = p.communicate(timeout=60)
    assert p.returncode != 0, out
    assert not cache.exists(), out


def test_test_processes_wait_passively():
    """The workers train in-process: OpenMP's wait policy must be set before torch loads (libgomp reads it once),
    and the CLIs the tests start inherit it."""
    import conftest

    assert not conftest.TORCH_BEFORE_CONFTEST, "torch was imported before tests/conftest.py set OMP_WAIT_POLICY"
    assert os.environ.get("OMP_WAIT_POLICY"), "OMP_WAIT_POLICY is not set for the test processes"
    out = subprocess.run([sys.executable, "-c", "import os; print(os.environ['OMP_WAIT_POLICY'])"],
                         capture_output=True, text=True, check=True)
    assert out.stdout.strip() == os.environ["OMP_WAIT_POLICY"]
