"""Checks on TRL's experimental async trainer (issue 50; named apart from the contamination guard, synth/guard.py):
what keeps `trainer: async` from failing silently. TRL's AsyncGRPOTrainer is experimental and changes
between releases (recipes/async_grpo/cpu_engine.py subclasses its rollout loop; the configs set options it added late, such as
`weight_sync_timeout`, PR #6913), so the installed TRL is checked against the range this project ran it with; and a
weight sync that stalls ends the run in one line within `weight_sync_timeout` (recipes/async_grpo/gloo_transfer.py on CPU, TRL's
WeightTransferClient on GPUs) instead of hanging. docs/training.md, "Asynchronous GRPO", states the known multi-rank
hang (huggingface/trl#6797, #7103) and the sync fallback."""
from __future__ import annotations

import sys

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
                          "lack weight_sync_timeout and the rollout-worker hooks recipes/async_grpo/cpu_engine.py uses; pip install "
                          f"'trl>={low},<{high}' (requirements.lock pins the tested one) or use trainer: sync")
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


def stalled_sync_line(what: str, timeout_s: float, error: BaseException) -> str:
    """The one line a weight sync that did not complete within weight_sync_timeout ends the run with."""
    first = (str(error).strip().splitlines() or [type(error).__name__])[0]
    return (f"weight sync stalled: {what} did not complete within weight_sync_timeout {timeout_s:g} s; the rollout "
            f"side stopped answering (see docs/training.md, 'Asynchronous GRPO', for known hangs and the trainer: sync "
            f"fallback) ({type(error).__name__}: {first[:200]})")
