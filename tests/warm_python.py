"""A warm interpreter for the suite's CLI runs: `python SCRIPT ...` and `python -m MODULE ...` forked from one process
that has already imported torch, transformers, datasets, accelerate, peft and TRL's trainers.

Why: most of the suite's tests start a real CLI (a GRPO or SFT run, an evaluation, a proof stage) and most of each
such process's CPU time was importing that stack again (a 2-step tiny GRPO run: ~17 CPU-s, ~11 of them imports, on
2 cores). Forked from here, the CLI is still a real process running the real entry point from its first line: its
own pid, argv, working folder, environment, file descriptors, signals, exit status, atexit handlers and children;
only the imports above are inherited instead of repeated (copy-on-write).

What a warm process cannot show, and where the suite keeps fresh interpreters (tests/conftest.py `fresh_python`):
anything a library does once at import (a warning printed at import, an environment variable read at import), and
what a process imports (vLLM hidden from TRL). So a command is forked only when its environment differs from this
server's in no variable outside SAFE_ENV (what the runs read at run time, not at import); otherwise it is exec'd as
before. Every decision is appended to $TASE_WARM_LOG when set.

Protocol (a Unix socket, one connection per process): the client sends a length-prefixed JSON request with its
stdin/stdout/stderr (and pass_fds) attached (SCM_RIGHTS); the server forks a monitor, the monitor forks the
process, replies "pid\\n", waits for it and replies "wait status\\n". The client is `WarmPopen`, a
`subprocess.Popen` whose `_execute_child`/`_try_wait`/`_internal_poll` use that connection: `run`, `wait`, `poll`,
`communicate`, timeouts, `kill` and `send_signal` behave as for an exec'd child."""
from __future__ import annotations

import importlib.util
import json
import os
import re
import select
import signal
import socket
import struct
import subprocess
import sys
from collections.abc import Callable

SOCKET_ENV = "TASE_TEST_WARM_SOCKET"
LOG_ENV = "TASE_WARM_LOG"
# variables the forked runs may set differently from the server: read at run time (the test's name; the ranks and
# rendezvous of a distributed launch; the project's own TASE_* and the thread count, which torch reads when its pool
# starts, not at import; TRL_EXPERIMENTAL_SILENCE, which TRL's trainer reads per run, and whose notice at the import of
# trl.experimental the server's preload printed once, whatever a run sets; OPENAI_API_KEY, read by the openai client,
# which the server does not import)
SAFE_ENV = re.compile(r"(PYTEST_.*|TASE_.*|RANK|LOCAL_RANK|WORLD_SIZE|LOCAL_WORLD_SIZE|GROUP_RANK|GROUP_WORLD_SIZE|"
                      r"ROLE_RANK|ROLE_NAME|ROLE_WORLD_SIZE|MASTER_ADDR|MASTER_PORT|TORCHELASTIC_.*|"
                      r"TORCH_NCCL_ASYNC_ERROR_HANDLING|NCCL_ASYNC_ERROR_HANDLING|CUDA_VISIBLE_DEVICES|OMP_NUM_THREADS|"
                      r"ACCELERATE_.*|FSDP_.*|DS_.*|LOCAL_SIZE|CROSS_RANK|CROSS_SIZE|COLUMNS|LINES|"
                      # the last two the forked process applies itself (_child)
                      r"TRL_EXPERIMENTAL_SILENCE|OPENAI_API_KEY|VLLM_.*|TORCH_EXTENSIONS_DIR|PYTHONPATH|TMPDIR)")


def preload() -> None:
    """What the CLIs import first: torch, transformers (the causal-LM auto classes, Llama), datasets, accelerate,
    peft, and TRL's GRPO and SFT trainers, the GRPO one with vLLM hidden as a run without `use_vllm` imports it
    (recipes/trl_grpo.py; a run with vLLM binds it again, as in any interpreter that imported TRL first); then the
    constant tables most runs build first, and the heap frozen."""
    import accelerate  # noqa: F401
    import datasets  # noqa: F401
    import numpy  # noqa: F401
    import peft  # noqa: F401
    import safetensors.torch  # noqa: F401
    import torch  # noqa: F401
    import transformers.models.llama.modeling_llama  # noqa: F401
    from transformers import AutoModelForCausalLM, AutoTokenizer  # noqa: F401

    from recipes.trl_grpo import grpo_trainer

    grpo_trainer(use_vllm=False)
    import trl.trainer.sft_trainer  # noqa: F401

    # Built once here, not in every run: what a run computes the same way every time before its first step, measured
    # per tiny GRPO run on the default CPU config (recipes/configs/grpo_smollm2_cpu.yaml, English): the freq_count
    # stream and the running text its data is drawn from (deterministic: installed word lists and corpora, the
    # project's denylist, CORPUS_SEED; ~2 CPU-s), and transformers' checkpoint conversion table, ~800 regexes
    # compiled at the first from_pretrained (~1.3 CPU-s). A run 5.5 -> 2.3 CPU-s.
    from transformers.conversion_mapping import get_checkpoint_conversion_mapping

    from synth.resources import freq_stream, real_text

    freq_stream("en")
    real_text("en")
    get_checkpoint_conversion_mapping("llama")
    # Everything above is permanent (gc.freeze, as Python's docs advise before forking): a run's collections (TRL and
    # accelerate call gc.collect) scan only its own objects, and the inherited pages stay shared (2.3 -> 1.6 CPU-s).
    import gc

    gc.collect()
    gc.freeze()


def _log(entry: dict) -> None:
    path = os.environ.get(LOG_ENV)
    if path:
        with open(path, "a", encoding="utf-8") as f:
            f.write(json.dumps(entry) + "\n")


# --- server -------------------------------------------------------------------------------------------------------

def _recv_request(conn: socket.socket) -> tuple[dict, list[int]]:
    head, fds, _, _ = socket.recv_fds(conn, 4, 16)
    (size,) = struct.unpack("!I", head)
    body = b""
    while len(body) < size:
        chunk = conn.recv(size - len(body))
        if not chunk:
            raise EOFError("request cut short")
        body += chunk
    return json.loads(body), list(fds)


def _child(req: dict, fds: list[int]) -> None:
    """In the forked process: become `python ARGV` as exec would have made it, then run it; never returns (the
    script's end, sys.exit or an uncaught exception end the interpreter as they would in a fresh one)."""
    if req["die_with_parent"]:  # common.process.die_with_parent: the monitor (parent here) relays the requester's death
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
    if req["start_new_session"]:
        os.setsid()
    elif req["process_group"] is not None:
        os.setpgid(0, req["process_group"])
    for sig in (signal.SIGTERM, signal.SIGCHLD, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2):
        signal.signal(sig, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    for target, fd in enumerate(fds[:3]):
        os.dup2(fd, target, inheritable=True)
    passed = dict(zip(req["pass_fds"], fds[3:], strict=True))
    for target, fd in passed.items():
        os.dup2(fd, target, inheritable=True)
    wanted = {0, 1, 2, *passed}
    for name in os.listdir("/proc/self/fd"):  # close_fds: the server's own descriptors are not the process's
        if int(name) not in wanted:
            try:
                os.close(int(name))
            except OSError:
                pass
    if req["cwd"] is not None:
        os.chdir(req["cwd"])
    old_path = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    os.environ.clear()
    os.environ.update(req["env"])
    # sys.path as a fresh interpreter would start: [script's folder, $PYTHONPATH..., the rest]
    rest = [p for p in sys.path[1:] if p not in old_path]
    sys.path[1:] = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p] + rest
    import tempfile

    tempfile.tempdir = None  # recomputed from $TMPDIR on first use, as in a fresh interpreter
    if "numpy" in sys.modules:  # a fresh interpreter's global numpy generator is seeded from the OS, not inherited
        sys.modules["numpy"].random.seed()
    if "-B" in req["flags"]:
        sys.dont_write_bytecode = True
    if "-u" in req["flags"]:  # as `python -u` makes them: text layers writing through to unbuffered files
        import io

        for name, fd in (("stdout", 1), ("stderr", 2)):
            old = getattr(sys, name)
            new = io.TextIOWrapper(io.FileIO(fd, "w", closefd=False), encoding=old.encoding, errors=old.errors,
                                   write_through=True)
            setattr(sys, name, new)
            setattr(sys, f"__{name}__", new)
    install_client()  # this process's own `python ...` children are forked from the server too
    code: object = 0
    interrupted = False
    try:
        run_as_main(req["argv"])
    except SystemExit as e:
        code = e.code
    except BaseException as e:  # noqa: BLE001 - what the interpreter does with an uncaught exception
        sys.excepthook(type(e), e, e.__traceback__)
        code, interrupted = 1, isinstance(e, KeyboardInterrupt)
    _exit(code, interrupted)


def run_as_main(argv: list[str]) -> None:
    """Run `python ARGV` (ARGV after the interpreter: `-m MODULE ...` or `SCRIPT ...`) in this interpreter as python
    would: sys.argv, sys.path[0] (the working folder for -m, the script's folder otherwise), `__main__`. What the
    program raises (SystemExit too) propagates. Also tests/docs_worker.py's way of running a command."""
    import runpy

    if argv[0] == "-m":
        sys.argv = [argv[1], *argv[2:]]
        sys.path[0] = os.getcwd()
        runpy.run_module(argv[1], run_name="__main__", alter_sys=True)
    else:
        sys.argv = list(argv)
        sys.path[0] = os.path.dirname(os.path.abspath(argv[0]))
        runpy.run_path(argv[0], run_name="__main__")


def _exit(code: object, interrupted: bool) -> None:
    """End as the interpreter ends a script (non-daemon threads joined, atexit handlers run, standard streams
    flushed, `sys.exit`'s value as the status, an uncaught Ctrl-C as death by SIGINT), without tearing down the
    modules it inherited: that teardown alone took ~1.9 s for the stack preload() imports."""
    import atexit
    import threading

    if code is None:
        code = 0
    elif not isinstance(code, int):
        print(code, file=sys.stderr)
        code = 1
    try:
        threading._shutdown()  # type: ignore[attr-defined]
    except Exception:  # noqa: BLE001
        pass
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:  # noqa: BLE001
            pass
    if interrupted:
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)
    os._exit(code & 0xFF)


def serve(path: str) -> None:
    """Accept requests until the parent (the pytest worker) is gone; each forks a monitor, which forks the process."""
    global SERVER_ENV
    SERVER_ENV = dict(os.environ)  # what its forks inherited at import: the runs they fork must match it (SAFE_ENV)
    preload()
    parent = os.getppid()
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(64)
    print("ready", flush=True)
    monitors: set[int] = set()
    while True:
        for pid in list(monitors):  # reap the monitors that are done
            if os.waitpid(pid, os.WNOHANG)[0]:
                monitors.discard(pid)
        if os.getppid() != parent:
            os._exit(0)
        if not select.select([listener], [], [], 1.0)[0]:
            continue
        conn, _ = listener.accept()
        try:
            req, fds = _recv_request(conn)
        except (EOFError, OSError, ValueError, struct.error):
            conn.close()
            continue
        monitor = os.fork()
        if monitor:
            monitors.add(monitor)
            for fd in fds:
                os.close(fd)
            conn.close()
            continue
        # the monitor: fork the process, report its pid, wait for it, report its wait status
        listener.close()
        pid = os.fork()
        if pid == 0:
            _child(req, fds)
        for fd in fds:
            os.close(fd)
        try:
            conn.sendall(f"{pid}\n".encode())
            if req["die_with_parent"]:  # the requester hanging up (it died) is the parent dying: SIGKILL, as the
                while True:             # preexec's PDEATHSIG would
                    done, sts = os.waitpid(pid, os.WNOHANG)
                    if done:
                        break
                    if select.select([conn], [], [], 0.2)[0] and not conn.recv(1):
                        os.kill(pid, signal.SIGKILL)
                        _, sts = os.waitpid(pid, 0)
                        break
            else:
                _, sts = os.waitpid(pid, 0)
            conn.sendall(f"{sts}\n".encode())
        except OSError:
            pass
        os._exit(0)


# --- client -------------------------------------------------------------------------------------------------------

_RealPopen = subprocess.Popen
PYTHON = sys.executable  # this interpreter, as started (a test may point sys.executable elsewhere)
SERVER_ENV: dict[str, str] | None = None  # the warm server's environment (set by whoever started it, and in it)
# The test process's hook that starts the server, or starts it again where the environment drifted (tests/conftest.py),
# called before a command is forked; None in a forked process, whose server is the one that forked it.
ENSURE_SERVER: Callable[[], None] | None = None


FLAGS = ("-u", "-B")  # interpreter options a forked process applies itself: unbuffered stdio (torch's elastic agent
# starts its ranks with -u), no bytecode written


def split_flags(args: list[str]) -> int:
    """Index of the first argument after the interpreter and its FLAGS."""
    i = 1
    while i < len(args) and args[i] in FLAGS:
        i += 1
    return i


def dies_with_parent(preexec_fn) -> bool:
    """Whether the preexec_fn is common.process.die_with_parent's (the pipelines' steps): the monitor relays it."""
    return getattr(preexec_fn, "__qualname__", "") == "die_with_parent.<locals>.preexec"


def warm_reason(args: list[str] | None, executable, shell, preexec_fn, env: dict[str, str], cwd: str,
                kwargs_ok: bool) -> str | None:
    """Why this command is exec'd rather than forked warm (None: it can be forked). `args` as strings (None: not a
    list), `env` and `cwd` as the process would get them."""
    if shell or executable is not None or not kwargs_ok or (preexec_fn is not None
                                                            and not dies_with_parent(preexec_fn)):
        return "options"
    if not args:
        return "not a list"
    if args[0] != PYTHON or sys.executable != PYTHON:
        return "not this python"
    rest = args[split_flags(args):]
    if not rest or (rest[0] == "-m" and len(rest) < 2):
        return "no script"
    if rest[0].startswith("-") and rest[0] != "-m":
        return "interpreter option " + rest[0]
    if rest[0] == "-m":
        if importlib.util.find_spec(rest[1].split(".")[0]) is None:
            return "no such module"
        if rest[1].split(".")[0] in ("vllm", "pytest"):
            return "module " + rest[1]
    elif not os.path.isfile(os.path.join(cwd, rest[0])):
        return "no such script"  # python's own message and exit status 2
    if ENSURE_SERVER is not None:
        ENSURE_SERVER()
    if not os.environ.get(SOCKET_ENV) or SERVER_ENV is None:
        return "no server"
    diff = drifted(env)
    if diff:
        return "environment: " + ",".join(diff[:5])
    return None


class WarmPopen(_RealPopen):
    """`subprocess.Popen` that forks `python SCRIPT/-m MODULE` commands from the warm server (see the module
    docstring) and execs every other command as Popen does."""

    def __init__(self, args, *a, **kw):
        self._warm_conn = None
        self._warm_sts = None
        super().__init__(args, *a, **kw)

    def _execute_child(self, args, executable, preexec_fn, close_fds, pass_fds, cwd, env, startupinfo,
                       creationflags, shell, p2cread, p2cwrite, c2pread, c2pwrite, errread, errwrite,
                       restore_signals, gid, gids, uid, umask, start_new_session, process_group):
        ok = gid is None and not gids and uid is None and umask < 0
        full = None if isinstance(args, (str, bytes)) else [os.fspath(x) for x in args]
        where = os.fspath(cwd) if cwd is not None else os.getcwd()
        env_now = dict(os.environ) if env is None else {os.fsdecode(k): os.fsdecode(v) for k, v in env.items()}
        reason = warm_reason(full, executable, shell, preexec_fn, env_now, where, ok)
        _log({"argv": full[:4] if full is not None else str(args)[:80], "warm": reason is None, "why": reason,
              "test": os.environ.get("PYTEST_CURRENT_TEST", "")[:120]})
        if reason is not None:
            return super()._execute_child(args, executable, preexec_fn, close_fds, pass_fds, cwd, env,
                                          startupinfo, creationflags, shell, p2cread, p2cwrite, c2pread, c2pwrite,
                                          errread, errwrite, restore_signals, gid, gids, uid, umask,
                                          start_new_session, process_group)
        cut = split_flags(full)
        fds = [p2cread if p2cread != -1 else 0, c2pwrite if c2pwrite != -1 else 1, errwrite if errwrite != -1 else 2]
        fds += list(pass_fds)
        # the process's own `python ...` children are forked by the server that forked it, whatever socket (or none)
        # the caller's environment named when it was built
        env_now[SOCKET_ENV] = os.environ[SOCKET_ENV]
        req = {"argv": full[cut:], "cwd": where, "env": env_now, "start_new_session": bool(start_new_session),
               "process_group": process_group if process_group is not None and process_group >= 0 else None,
               "pass_fds": list(pass_fds), "die_with_parent": preexec_fn is not None, "flags": full[1:cut]}
        body = json.dumps(req).encode()
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            conn.connect(os.environ[SOCKET_ENV])
            socket.send_fds(conn, [struct.pack("!I", len(body))], fds)
            conn.sendall(body)
            line = self._warm_line(conn)
            if line is None:
                raise OSError("the warm interpreter did not start the process")
            self.pid = int(line)
            self._child_created = True
            self._warm_conn = conn
        except BaseException:
            conn.close()
            raise
        finally:
            self._close_pipe_fds(p2cread, p2cwrite, c2pread, c2pwrite, errread, errwrite)

    @staticmethod
    def _warm_line(conn: socket.socket) -> str | None:
        """One line from the monitor (blocking); None when it closed the connection first."""
        data = b""
        while not data.endswith(b"\n"):
            chunk = conn.recv(64)
            if not chunk:
                return None
            data += chunk
        return data.decode().strip()

    def _warm_status(self, block: bool) -> int | None:
        """The process's wait status once the monitor reported it (exit 255 if the monitor died first)."""
        if self._warm_sts is None:
            if not block and not select.select([self._warm_conn], [], [], 0)[0]:
                return None
            line = self._warm_line(self._warm_conn)
            self._warm_sts = int(line) if line else 255 << 8
            self._warm_conn.close()
        return self._warm_sts

    def _try_wait(self, wait_flags):
        if self._warm_conn is None:
            return super()._try_wait(wait_flags)
        sts = self._warm_status(block=not wait_flags & os.WNOHANG)
        return (0, 0) if sts is None else (self.pid, sts)

    def _internal_poll(self, _deadstate=None, **kw):
        if self._warm_conn is None:
            return super()._internal_poll(_deadstate, **kw)
        if self.returncode is None:
            if not self._waitpid_lock.acquire(False):
                return None
            try:
                if self.returncode is None:
                    sts = self._warm_status(block=False)
                    if sts is not None:
                        self._handle_exitstatus(sts)
            finally:
                self._waitpid_lock.release()
        return self.returncode


def drifted(env: dict[str, str]) -> list[str]:
    """The variables outside SAFE_ENV in which `env` differs from the server's."""
    return sorted(k for k in set(env) | set(SERVER_ENV or {}) if env.get(k) != (SERVER_ENV or {}).get(k)
                  and not SAFE_ENV.fullmatch(k))


def install_client(always: bool = False) -> None:
    """`subprocess.Popen` (and so `subprocess.run`) is WarmPopen in this process, when a server is named (`always`:
    in the test process, whose ENSURE_SERVER starts one at the first command it forks)."""
    if always or os.environ.get(SOCKET_ENV):
        subprocess.Popen = WarmPopen


def uninstall_client() -> None:
    subprocess.Popen = _RealPopen


if __name__ == "__main__":
    serve(sys.argv[1])
