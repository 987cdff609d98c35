"""Process-wide settings, made by the entry points (`python -m eval`, the recipe scripts), never at import.

OpenMP threads that spin while waiting collapse when CPU cores are shared (measured 5-20x slower generation
on a busy 2-core machine; SmolLM2 forward+backward 24 s -> 15 s); passive waiting costs little when they are
not. It must be set before torch is imported, so each entry point calls `apply()` first thing; an explicit
setting in the environment wins. (The csv field limit for long official rows is set by the reader that
needs it, `common.readers.read_csv`.)

vLLM on CPU keeps one core per engine out of its worker's OpenMP threads, for the scheduler process
(`VLLM_CPU_NUM_OF_RESERVED_CPU`, default: one per worker on x86). On a 2-core machine that halves the
model's threads: an evaluation of 48 short prompts took 81-86 s with the reserve and 62-64 s without it
(alternated, two runs each, eval/vllm; docs/benchmarks.md). So the entry points give the worker every
core unless the environment says otherwise; vLLM warns that this is below its minimum, and the scheduler
then shares the cores, which costs less than the idle core did.

Logs are quiet by default (`apply`): vLLM at WARNING unless --verbose / TASE_VERBOSE=1, and the library messages in
QUIET (known, harmless with the pinned set, nothing a user can act on) filtered once here, at the entry points.
"""
from __future__ import annotations

import logging
import os
import re
import warnings
from collections.abc import Callable

# Library messages that apply() filters unless verbose (`--verbose`, TASE_VERBOSE=1): (where it comes from: a logger's
# name, or "warnings" for a Python warning; the start of the message; why it is harmless with requirements.lock).
QUIET: tuple[tuple[str, str, str], ...] = (
    ("warnings", "TRL currently supports vLLM versions from",
     "TRL 1.16 names vLLM 0.22-0.31 and the lock pins vllm-cpu 0.32.0, whose generation and weight sync the suite "
     "runs (tests/test_vllm.py); TRL printed it five times a run"),
    ("warnings", "You are importing from 'trl.experimental'",
     "the asynchronous trainer (trainer: async) is TRL 1.16's AsyncGRPOTrainer, which lives in trl.experimental; "
     "the lock pins that TRL, and tests/test_async_grpo.py trains with it"),
    ("vllm.triton_utils.importing", "Triton is installed, but doesn't include CPU backend",
     "the CPU build of vLLM runs without Triton kernels (its own CPU attention); torch's Triton wheel has no CPU "
     "backend"),
    ("DeepSpeed", "Setting accelerator to CPU",
     "DeepSpeed's device detection on a machine without CUDA: the CPU is what the run uses, and its plan says so"),
    ("vllm.model_executor.models.utils", "Attempted to load weight ",
     "vLLM casting a float32 weight into the dtype it serves (bf16): what the run's dtype asks for; 122 of 169 lines "
     "of a one-step colocated GRPO run, once per tensor at every weight sync"),
    ("vllm.v1.utils", "[shutdown] ",
     "vLLM's engine shutdown stops the EngineCore processes that outlive the LLM object, after the results were "
     "written: 'force killing remaining process EngineCore' ended every successful vLLM evaluation"),
)


class _Drop(logging.Filter):
    """Drops a logger's records whose message starts with one of `starts`."""

    def __init__(self, starts: tuple[str, ...]) -> None:
        super().__init__()
        self.starts = starts

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            msg = record.getMessage()
        except Exception:  # noqa: BLE001 - a record that cannot format is not ours to judge
            return True
        return not msg.startswith(self.starts)


def drop_messages(source: str, start: str) -> None:
    """Filter one more message (a logger's name, the start of the message) in this process, as QUIET's are; for a
    message that is harmless only in a case its caller checks (recipes: a tied LM head on resume)."""
    log = logging.getLogger(source)
    if not any(isinstance(f, _Drop) and start in f.starts for f in log.filters):
        log.addFilter(_Drop((start,)))


def quiet_libraries() -> None:
    """Filter QUIET's messages in this process (once: a second call adds nothing)."""
    for source, start, _why in QUIET:
        if source == "warnings":
            warnings.filterwarnings("ignore", message=re.escape(start))
            continue
        drop_messages(source, start)


def pop_verbose(argv: list[str] | None) -> tuple[list[str], bool]:
    """The recipes' `--verbose` (their options are TrlParser's dataclasses): the arguments without it, and whether it
    was given."""
    import sys

    args = list(sys.argv[1:] if argv is None else argv)
    verbose = "--verbose" in args
    return [a for a in args if a != "--verbose"], verbose


def apply(verbose: bool | None = None) -> None:
    """Set the process-wide defaults above; also quiet by default: vLLM's own log at WARNING or above (its
    INFO lines were 291 of the 482 lines `make demo` printed), progress bars say the rest. `verbose` (the
    `--verbose` flags, or TASE_VERBOSE=1 in the environment) keeps vLLM at INFO."""
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    os.environ.setdefault("VLLM_CPU_NUM_OF_RESERVED_CPU", "0")
    if verbose is None:
        verbose = os.environ.get("TASE_VERBOSE", "") not in ("", "0")
    if verbose:
        os.environ["TASE_VERBOSE"] = "1"  # child processes (the demo's steps, vLLM workers) inherit it
        os.environ["VLLM_LOGGING_LEVEL"] = "INFO"
    else:
        os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")
        quiet_libraries()



# The engine processes die with the process that started them. vLLM on CPU starts its EngineCore with
# multiprocessing's spawn method (platforms/cpu.py sets VLLM_WORKER_MULTIPROC_METHOD=spawn; v1/engine/utils.py
# CoreEngineProcManager), and the EngineCore starts its Worker the same way (v1/executor/multiproc_executor.py).
# The Worker watches a pipe from its EngineCore, but only once it is initialised; the EngineCore watches nothing:
# after `kill -9` of `eval run` it was re-parented to PID 1 and kept its Worker (3.5 GB) running (issue 36).
# Spawn execs `multiprocessing.spawn.get_executable()`, which a program may replace (vLLM itself does so for its
# NUMA binding, utils/numa_utils.py): here by a tiny wrapper that asks the kernel for SIGKILL when the parent
# dies (PR_SET_PDEATHSIG, via ctypes prctl), checks that the parent is still the one that started it (no window
# where it died first), and execs the real interpreter with the same arguments, its spawn code prefixed so that
# the child uses the wrapper for its own spawned children (the EngineCore's Worker). Left out: multiprocessing's
# resource tracker, which must outlive its parent to unlink what a killed parent leaked. The kernel ties the
# signal to the *thread* that started the child, so only an entry point whose engine is started from its main
# thread (`python -m eval`) sets this.
_WRAPPER_CODE = """\
import ctypes, os, signal, sys
exe, args = {exe!r}, sys.argv[1:]
if "--multiprocessing-fork" in args and "-c" in args and "spawn_main" in args[args.index("-c") + 1]:
    if ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL, 0, 0, 0) != 0:  # 1: PR_SET_PDEATHSIG
        sys.exit(f"prctl(PR_SET_PDEATHSIG) failed: {{os.strerror(ctypes.get_errno())}}")
    if str(os.getppid()) != os.environ.get("TASE_SPAWN_PARENT"):
        sys.exit(0)  # the parent is already gone: nothing to serve
    i = args.index("-c") + 1
    args[i] = {prefix!r} + args[i]
os.execv(exe, [exe, *args])
"""
_CHILD_PREFIX = ("import multiprocessing.spawn as _s, os as _o; _s.set_executable({wrapper!r}); "
                 "_o.environ['TASE_SPAWN_PARENT'] = str(_o.getpid()); ")


def _can_exec_in(folder: str) -> bool:
    """A folder that exists or can be made, on a file system that lets programs run from it (not noexec)."""
    try:
        os.makedirs(folder, exist_ok=True)
        return not os.statvfs(folder).f_flag & os.ST_NOEXEC
    except OSError:
        return False


def spawned_children_die_with_me() -> None:
    """Make every process this one starts with multiprocessing's spawn method (vLLM's EngineCore, and its
    Worker in turn) die when its parent dies, however it dies (kill -9 included): see the note above. Linux
    only; elsewhere nothing changes. A process this one forks gets the plain interpreter back."""
    import multiprocessing.spawn
    import shlex
    import sys
    import tempfile

    if not sys.platform.startswith("linux") or getattr(sys, "frozen", False):
        return
    exe = os.fsdecode(multiprocessing.spawn.get_executable())
    if os.path.basename(os.path.dirname(exe)).startswith("tase-spawn-"):
        os.environ["TASE_SPAWN_PARENT"] = str(os.getpid())
        return  # already set in this process
    places = [tempfile.gettempdir(), os.environ.get("TASE_CACHE") or os.path.expanduser("~/.cache/tase-grpo")]
    place = next((d for d in places if _can_exec_in(d)), None)
    if place is None:
        return  # nowhere to put an executable wrapper (noexec mounts): vLLM's own behaviour, unchanged
    folder = tempfile.mkdtemp(prefix="tase-spawn-", dir=place)
    wrapper = os.path.join(folder, "python")
    code = _WRAPPER_CODE.format(exe=exe, prefix=_CHILD_PREFIX.format(wrapper=wrapper))
    with open(wrapper, "w") as f:
        f.write(f"#!/bin/sh\nexec {shlex.quote(exe)} -I -S -c {shlex.quote(code)} \"$@\"\n")
    os.chmod(wrapper, 0o700)
    os.environ["TASE_SPAWN_PARENT"] = str(os.getpid())
    multiprocessing.spawn.set_executable(wrapper)
    os.register_at_fork(after_in_child=lambda: multiprocessing.spawn.set_executable(exe))

    import atexit
    import shutil

    atexit.register(shutil.rmtree, folder, True)


def die_with_parent() -> Callable[[], None] | None:
    """A `preexec_fn` for subprocess: the child gets SIGKILL when the calling thread's process dies (kill -9
    included), so a pipeline step (recipes/steps/pipeline.py) does not run on alone, holding its output's lock
    against the rerun. The prctl function is looked up here, in the parent: the child only calls it, then
    exits if the parent is already gone. None off Linux (no such signal there)."""
    import ctypes
    import signal
    import sys

    if not sys.platform.startswith("linux"):
        return None
    prctl = ctypes.CDLL(None, use_errno=True).prctl
    parent = os.getpid()

    def preexec() -> None:
        prctl(1, signal.SIGKILL, 0, 0, 0)  # 1: PR_SET_PDEATHSIG
        if os.getppid() != parent:
            os._exit(1)

    return preexec
