"""kill -9 at a chosen point of a real run, the one loop the resume tests share: start the command, wait until a
condition on its output holds (a whole checkpoint, a logged step), then SIGKILL it (its process group with
`group=True`: a trainer and the rollout or engine processes it started)."""
from __future__ import annotations

import os
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def checkpoint_whole(ckpt: Path) -> Callable[[], bool]:
    """The condition "`ckpt` is complete": trainer_state.json is written last and not atomically, so its mere
    existence is not enough (a kill mid-write left it truncated, and a resume then started from step 0)."""
    from recipes.shared.run_dir import checkpoint_problem

    return lambda: checkpoint_problem(ckpt) is None


def kill_when(cmd: list[str], ready: Callable[[], bool], *, env: dict[str, str] | None = None,
              timeout: float = 600, group: bool = False, poll: float = 0.1) -> str:
    """Run `cmd` from the repository root and SIGKILL it once `ready()` holds; returns what it wrote to stderr. Fails
    the test, with the end of the run's stderr, when the run ends first or `timeout` seconds pass. Its stderr goes to
    a file, so a chatty run never blocks on a full pipe; stdout is dropped."""
    with tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=err,
                                start_new_session=group)
        try:
            deadline = time.monotonic() + timeout
            while not ready():
                if proc.poll() is not None or time.monotonic() > deadline:
                    why = f"ended (exit {proc.returncode})" if proc.poll() is not None else f"ran past {timeout:g} s"
                    err.seek(0)
                    pytest.fail(f"the run {why} before the point to kill it: "
                                f"{err.read().decode(errors='replace')[-2000:]}")
                time.sleep(poll)
        finally:
            if group:  # the whole group, also when its leader has ended: nothing it started is left behind
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            elif proc.poll() is None:
                proc.kill()
            proc.wait()
        err.seek(0)
        return err.read().decode(errors="replace")
