"""A command's `main(argv)` in a fork of this interpreter, with the bytes a fresh interpreter running the same
command gives (recipes/steps/pipeline.py's in-process steps: `make demo`, `proof.py --in-process`, `ablate.py`): the
modules this process imported are shared, and everything the step changes in its process (environment, working
folder, torch's thread count, seeds, the modules it imports and their module-level state, logging filters,
monkeypatches, its memory and its output lock) dies with the fork. Process settings only where an entry point calls
`run`; nothing at import."""
from __future__ import annotations

import os
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from common.process import die_with_parent


def fork_refusal() -> str | None:
    """Why this process cannot run a step in a fork of itself (None: it can): no fork (not a POSIX system), or the
    CUDA driver loaded here (torch initialised CUDA, or only asked it for devices: the driver does not survive a
    fork, and a forked step could not use the GPU). Such a step runs as a subprocess, with the same bytes."""
    if not hasattr(os, "fork"):
        return "this system has no fork"
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_initialized():
        return "CUDA is initialised in this process"
    try:
        with open("/proc/self/maps", encoding="utf-8") as f:
            if any("/libcuda.so" in line for line in f):
                return "the CUDA driver is loaded in this process"
    except OSError:
        pass
    return None


_GOMP: list[Any] = []  # the OpenMP runtime loaded in this process, once looked up (ctypes library, or None)


def release_openmp() -> None:
    """End the OpenMP runtime's worker threads (omp_pause_resource_all, OpenMP 5.0), as GNU libgomp needs before a
    fork: a child forked after the parent ran a parallel region waits forever for workers it does not have (torch's
    first matmul in the child hung, measured). The parent's next parallel region starts them again."""
    import ctypes

    if not _GOMP:
        try:
            with open("/proc/self/maps", encoding="utf-8") as f:
                libs = {line.split()[-1] for line in f if re.search(r"/lib(gomp|iomp5)[^/]*\.so", line)}
        except OSError:
            libs = set()
        handle = None
        for lib in sorted(libs):
            try:
                handle = ctypes.CDLL(lib).omp_pause_resource_all
                break
            except (OSError, AttributeError):
                continue
        _GOMP.append(handle)
    if _GOMP[0] is not None:
        _GOMP[0](2)  # omp_pause_hard: the threads and their state released


_DEFAULT_TORCH_SEED = 67280421310721  # the seed of torch's default generator in a fresh interpreter


def _as_fresh(prog: str, stdout: int | None, threads: int | None) -> None:
    """In the forked child, before the step: what a fresh interpreter running `prog` would have and the fork did
    not inherit as such: default signal handlers, stdout/stderr as text files over file descriptors 1 and 2 (the
    parent's may be a capture or a redirect; `stdout`, when given, becomes fd 1), the parent's exit handlers gone
    (its output lock or temporary folders are not the step's to release), unseeded `random` and numpy, torch's
    default seed and `threads` (its thread count there)."""
    import atexit
    import io
    import signal

    for sig in (signal.SIGTERM, signal.SIGCHLD, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2):
        signal.signal(sig, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    if stdout is not None:
        os.dup2(stdout, 1)
    for name, fd in (("stdout", 1), ("stderr", 2)):
        old = getattr(sys, f"__{name}__") or getattr(sys, name)
        new = io.TextIOWrapper(io.FileIO(fd, "w", closefd=False), encoding=getattr(old, "encoding", None) or "utf-8",
                               errors=getattr(old, "errors", None) or "strict",
                               line_buffering=fd == 2 or os.isatty(fd))  # as Python 3.9+ makes them
        setattr(sys, name, new)
        setattr(sys, f"__{name}__", new)
    atexit._clear()  # type: ignore[attr-defined]
    if "logging" in sys.modules:  # what logging registers at its import: the step's handlers flushed at its end
        atexit.register(sys.modules["logging"].shutdown)
    import random

    random.seed()
    if "numpy" in sys.modules:  # a fresh interpreter's global numpy generator is seeded from the OS
        sys.modules["numpy"].random.seed()
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.manual_seed(_DEFAULT_TORCH_SEED)
        if threads is not None:
            torch.set_num_threads(threads)
    sys.path[0] = os.path.dirname(os.path.abspath(prog)) if prog.endswith(".py") else os.getcwd()


def _end_child(code: Any) -> None:
    """End the forked child as the interpreter ends a script: non-daemon threads joined, the step's exit handlers
    run, the standard streams flushed, SystemExit's value as the status; without tearing down the modules it
    inherited (seconds for torch and TRL). Never returns."""
    import atexit
    import threading

    if isinstance(code, str):  # sys.exit("message"): printed to stderr, exit 1
        print(code, file=sys.stderr)
        code = 1
    try:
        code = int(code or 0)
    except (TypeError, ValueError):
        code = 1
    try:
        threading._shutdown()  # type: ignore[attr-defined]
    except Exception:  # noqa: BLE001 - a thread that fails to join must not keep the status from the parent
        pass
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:  # noqa: BLE001
            pass
    os._exit(code & 0xFF)


def run(main: Callable[[list[str]], Any], argv: list[str], prog: str, cwd: Path, stdout: int | None = None,
        threads: int | None = None) -> int:
    """`main(argv)` from `cwd` with sys.argv as the interpreter would have it, in a fork of this interpreter (the
    modules it imported are shared, what the step changes dies with it), and its exit status as
    the interpreter would give it (SystemExit's code; an uncaught exception: its traceback and 1; killed by a
    signal: minus its number, as subprocess gives it). `stdout`: a file descriptor for the step's standard output;
    `threads`: torch's thread count as a fresh interpreter has it. The step dies with this process
    (common.process.die_with_parent)."""
    import signal

    preexec = die_with_parent()
    release_openmp()
    for stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
        try:
            stream.flush()
        except (AttributeError, ValueError, OSError):
            pass
    pid = os.fork()
    if pid == 0:  # the step
        code: Any = 1
        try:
            if preexec is not None:
                preexec()
            os.chdir(cwd)
            sys.argv = [prog, *argv]
            _as_fresh(prog, stdout, threads)
            code = main(list(argv))
        except SystemExit as e:
            code = e.code
        except BaseException as e:  # noqa: BLE001 - what the interpreter prints for an uncaught exception
            sys.excepthook(type(e), e, e.__traceback__)
            code = 1
        finally:
            _end_child(code)
    try:
        _, status = os.waitpid(pid, 0)
    except BaseException:  # Ctrl-C (the step got it too) or an error here: the step does not run on alone
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        raise
    return os.waitstatus_to_exitcode(status)
