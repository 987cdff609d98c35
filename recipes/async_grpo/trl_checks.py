"""Checks on TRL's experimental async trainer (named apart from the contamination guard, synth/guard.py):
what keeps `trainer: async` from failing silently. TRL's AsyncGRPOTrainer is experimental and changes
between releases (recipes/async_grpo/cpu_engine.py subclasses its rollout loop; the configs set options it added late,
such as `weight_sync_timeout`, PR #6913), so the installed TRL is checked against the range this project ran it with;
and a weight sync that stalls ends the run in one line within `weight_sync_timeout` (recipes/async_grpo/gloo_transfer.py
on CPU, TRL's WeightTransferClient on GPUs) instead of hanging. docs/training.md, "Asynchronous GRPO", states the known
multi-rank hang (huggingface/trl#6797, #7103) and the sync fallback."""
from __future__ import annotations

import sys
from typing import Any

from common.errors import TaseError

TESTED_TRL = ("1.16.0", "1.17.0")  # [low, high): the releases trainer: async has run with here


def trl_version_problem(version: str | None = None) -> tuple[str, str] | None:
    """('refuse' | 'warn', line) where TRL `version` (default: the installed one) is outside TESTED_TRL: older lacks
    options the async configs set (refused), newer is untested (one warning line)."""
    from packaging.version import Version

    if version is None:
        import trl

        version = trl.__version__
    low, high = TESTED_TRL
    v = Version(version)
    if v < Version(low):
        return "refuse", (f"trainer: async needs TRL >= {low} (installed {version}): older AsyncGRPOTrainer releases "
                          "lack weight_sync_timeout and the rollout-worker hooks recipes/async_grpo/cpu_engine.py "
                          f"uses; pip install 'trl>={low},<{high}' (requirements.lock pins the tested one) or use "
                          "trainer: sync")
    if v >= Version(high):
        return "warn", (f"warning: trainer: async was tested with TRL >= {low}, < {high}; installed {version}: "
                        "AsyncGRPOTrainer is experimental and changes between releases, so this run is untested "
                        "(trainer: sync is the fallback)")
    return None


def check_trl_version(version: str | None = None) -> None:
    """Refuse (TaseError) or warn (one line on stderr) per trl_version_problem."""
    problem = trl_version_problem(version)
    if problem is None:
        return
    kind, line = problem
    if kind == "refuse":
        raise TaseError(line)
    print(line, file=sys.stderr)


def dead_worker_line(when: str, exit_code: Any = None, error: str | None = None) -> str:
    """The one line a rollout worker (or vLLM server) that died ends the run with, instead of the trainer waiting
    for samples forever."""
    how = f" (exit code {exit_code})" if exit_code is not None else ""
    why = f": {error}" if error else "; its error is above on stderr"
    return f"the rollout worker died {when}{how}{why}"


def guard_worker(worker: Any, server_url: str | None = None) -> bool:
    """Make TRL's rollout-worker health check (called by the trainer every few seconds while it waits for samples)
    end the run in one line when the worker's process has died, whatever killed it (TRL itself notices only an
    exception the child reported, or a heartbeat stale for heartbeat_stale_after_s), when it reported an exception
    (TRL's RuntimeError chains the child's traceback), and, on the server path, when the vLLM server at
    `server_url` no longer accepts connections (the child would retry its requests for minutes first). Returns
    whether there was a worker to guard (rank 0 only has one)."""
    if worker is None or not hasattr(worker, "check_health"):
        return False
    check = worker.check_health

    def guarded(stale_after_s: float) -> None:
        proc = getattr(worker, "_process", None)
        if proc is not None and not proc.is_alive() and not worker._failed_event.is_set():
            raise TaseError(dead_worker_line("while the trainer waited for samples", proc.exitcode))
        if server_url and not _answers(server_url):
            raise TaseError(f"the vLLM server at {server_url} no longer accepts connections: the run cannot get "
                            "samples (is the server process still running? its log says why it stopped)")
        try:
            check(stale_after_s)
        except RuntimeError as e:
            if e.__cause__ is None and "stale" in str(e):  # alive but silent for stale_after_s
                raise TaseError(f"the rollout worker stopped answering: {str(e).strip()} (heartbeat_stale_after_s)"
                                ) from None
            cause = str(e.__cause__ or e).strip().splitlines()
            raise TaseError(dead_worker_line("while the trainer waited for samples", None,
                                             (cause or ["unknown"])[0][:300])) from None

    start = worker.start

    def guarded_start() -> None:  # TRL's start raises RuntimeError when the child exits before its ready signal
        try:
            start()
        except RuntimeError as e:
            raise TaseError(dead_worker_line("while starting", None, str(e).strip().splitlines()[0][:300])) from None

    def guarded_stop() -> None:
        # TRL 1.16's stop (AsyncRolloutWorker.stop), with its first act bounded: it sets the child's multiprocessing
        # Event, and Event.set waits, with no timeout, for every process that waits on it to wake. A child that dies
        # inside that wait (its error reported, then exiting) never wakes, and the run hung there after its one line
        # (tests/test_async_grpo.py's dead-worker test, 900 s). The set runs in a daemon thread for at most 15 s, and
        # no longer once the child has exited (nothing is left to wake); then, as TRL does, join, terminate, kill.
        import threading
        import time

        proc = getattr(worker, "_process", None)
        if proc is None:
            return
        setter = threading.Thread(target=worker._stop_event_mp.set, daemon=True, name="stop-rollout-worker")
        setter.start()
        deadline = time.monotonic() + 15
        while setter.is_alive() and proc.is_alive() and time.monotonic() < deadline:
            setter.join(timeout=0.2)
        if proc._popen is not None:  # started (a failed spawn leaves nothing to join)
            proc.join(timeout=15)
            if proc.is_alive():
                proc.terminate()
                proc.join(timeout=5)
                if proc.is_alive():
                    proc.kill()
        worker._process = None

    worker.check_health, worker.start, worker.stop = guarded, guarded_start, guarded_stop
    return True


def _answers(url: str) -> bool:
    """Whether something accepts a TCP connection at the host and port of `url` (2 s)."""
    import socket
    from urllib.parse import urlparse

    u = urlparse(url)
    try:
        with socket.create_connection((u.hostname or "localhost", u.port or 80), timeout=2):
            return True
    except OSError:
        return False


def stalled_sync_line(what: str, timeout_s: float, error: BaseException) -> str:
    """The one line a weight sync that did not complete within weight_sync_timeout ends the run with."""
    first = (str(error).strip().splitlines() or [type(error).__name__])[0]
    return (f"weight sync stalled: {what} did not complete within weight_sync_timeout {timeout_s:g} s; the rollout "
            f"side stopped answering (see docs/training.md, 'Asynchronous GRPO', for known hangs and the trainer: sync "
            f"fallback) ({type(error).__name__}: {first[:200]})")
