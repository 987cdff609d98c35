"""Pieces shared by the multi-stage recipes (recipes/demo.py, recipes/proof.py, recipes/ablate.py): numbered steps
that print the real command before running it and time it (a subprocess each; after `run_in_process()`, a project
entry point's `main(argv)` in a fork of this interpreter; `run_command` for one unnumbered step, ablate's), and the
paired bootstrap gains between evaluation runs.
"""
from __future__ import annotations

import contextlib
import os
import shlex
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from common.errors import StepFailed
from common.process import FILTERED_ENV, die_with_parent, filtered_output as process_filtered_output, pump

ROOT = Path(__file__).resolve().parents[2]
_IN_PROCESS = False  # run_in_process(): a process setting, made by an entry point (recipes/proof.py --in-process)


def run_in_process(on: bool = True) -> None:
    """From now on, every Steps of this process runs a step that is this interpreter running one of the project's
    entry points (`PY -m eval ...`, `PY -m synth ...`, `PY recipes/x.py ...`) as that module's `main(argv)` in a
    fork of this interpreter (call_in_process), not in a fresh one: torch, transformers and TRL are imported once,
    here, not once a step (about 20 s of a step's 25-35 s for a tiny model on 2 busy cores). The fork gives the same
    bytes as the fresh interpreter: what a step changes in its process (torch's thread count, seeds, the modules it
    imports and their module-level state, logging filters, monkeypatches, locks) dies with it. Why it is not the
    default: a multi-process launch (accelerate, torchrun) and a step that starts vLLM need their own processes,
    and a process that has loaded the CUDA driver cannot fork a step (fork_refusal: its steps run as subprocesses). Any
    other command still runs as a subprocess."""
    global _IN_PROCESS, _THREADS
    _IN_PROCESS = on
    if on and _THREADS is None and "torch" in sys.modules:
        _THREADS = sys.modules["torch"].get_num_threads()


def in_process() -> bool:
    """Whether run_in_process() is on: a recipe says which way its steps ran."""
    return _IN_PROCESS


def entry_main(cmd: list[str], cwd: Path) -> tuple[Callable[[list[str]], Any], list[str], str] | None:
    """(main, argv, argv[0]) of a command that runs a project entry point with this interpreter: `PY -m PKG ARGS`
    (PKG.__main__, or the module itself) or `PY FILE.py ARGS` for a FILE inside the repository; None for anything
    else (another program or interpreter, a module outside the project, a module without `main`
    or one that does not import: the subprocess then reports it as it would), and None while this process cannot
    fork a step (fork_refusal)."""
    import importlib
    import importlib.util

    global _THREADS
    if len(cmd) < 2 or cmd[0] != sys.executable:
        return None
    why = fork_refusal()
    if why is not None:
        if _IN_PROCESS and not _NOTED:
            _NOTED.append(why)
            print(f"note: the steps run as subprocesses ({why}): a fork of this process could not run them",
                  file=sys.stderr, flush=True)
        return None
    try:
        if cmd[1] == "-m" and len(cmd) > 2:
            name, argv, prog = cmd[2], cmd[3:], cmd[2]
            top = name.split(".")[0]
            if not ((ROOT / top / "__init__.py").is_file() or (ROOT / f"{top}.py").is_file()):
                # not the project's, and not even looked up: a lookup can have effects (setuptools' distutils shim
                # turns itself off for good when pip is looked up, and TRL's import then fails in this interpreter)
                return None
            spec = importlib.util.find_spec(top)
            if spec is None or not spec.origin or ROOT not in Path(spec.origin).resolve().parents:
                return None  # a module of that name found first outside the repository
            if importlib.util.find_spec(name).submodule_search_locations is not None:
                name += ".__main__"
        elif cmd[1].endswith(".py"):
            path = (cwd / cmd[1]).resolve()
            if ROOT not in path.parents or not path.is_file():
                return None
            name, argv, prog = ".".join(path.relative_to(ROOT).with_suffix("").parts), cmd[2:], cmd[1]
        else:
            return None
        fresh_torch = "torch" not in sys.modules
        main = getattr(importlib.import_module(name), "main", None)
        if fresh_torch and _THREADS is None and "torch" in sys.modules:  # torch's own default, before any step
            _THREADS = sys.modules["torch"].get_num_threads()
    except Exception:  # noqa: BLE001 - a module that does not import: its subprocess says why, in its own words
        return None
    return (main, argv, prog) if callable(main) else None


def fork_refusal() -> str | None:
    """Why this process cannot run a step in a fork of itself (common/forked.py fork_refusal)."""
    from common.forked import fork_refusal as why

    return why()


_NOTED: list[str] = []  # why the steps run as subprocesses after all, once said
_THREADS: int | None = None  # torch's thread count as a fresh interpreter has it (read before any step ran)


def call_in_process(main: Callable[[list[str]], Any], argv: list[str], prog: str, cwd: Path,
                    stdout: int | None = None) -> int:
    """`main(argv)` from `cwd` with sys.argv as the interpreter would have it, in a fork of this interpreter
    (common/forked.py: the modules it imported are shared, what the step changes dies with it), and its exit
    status as the interpreter would give it (SystemExit's code; an uncaught exception: its traceback and 1; killed
    by a signal: minus its number). `stdout`: a file descriptor for the step's standard output."""
    from common import forked

    return forked.run(main, argv, prog, cwd, stdout, _THREADS)


def run_command(cmd: list[str], cwd: Path, fresh: bool = False) -> int:
    """Run one step's command from `cwd` and return its exit status: after run_in_process(), a project entry point
    as its `main(argv)` in this interpreter (call_in_process); anything else, or any command with `fresh` (a step
    that starts a vLLM engine, which a recipe keeps in its own process), as a subprocess that dies with this one."""
    entry = None if fresh or not _IN_PROCESS else entry_main(cmd, cwd)
    if entry is not None:
        return call_in_process(*entry, cwd)
    return subprocess.run(cmd, cwd=cwd, preexec_fn=die_with_parent()).returncode


class Steps:
    """Runs numbered steps (`== k/n title`, then `+ command`), stops the pipeline at the first failing one (raises
    StepFailed: `error: <name> step '<title>' failed (exit N)` and exit N from the recipe's `main`), and adds up
    the wall time of each stage. A step dies with the pipeline (common.process.die_with_parent): kill -9 of
    `make proof` leaves no step running."""

    def __init__(self, name: str, n_steps: int, cwd: Path, dry_run: bool = False, quote: bool = False,
                 log_dir: Path | None = None) -> None:
        self.name, self.n, self.cwd, self.dry_run, self.quote = name, n_steps, cwd, dry_run, quote
        self.times: dict[str, float] = {}
        self.log_dir = log_dir  # set: library log lines of each step go to a file there, not the terminal
        self.logged = 0

    def header(self, k: int, title: str) -> None:
        print(f"\n== {k}/{self.n} {title}", flush=True)

    def show(self, cmd: list[str]) -> None:
        print("+ " + (shlex.join(cmd) if self.quote else " ".join(cmd)), flush=True)

    def __call__(self, k: int, title: str, cmd: list[str], stage: str | None = None,
                 show: Callable[[str], str] | None = None) -> float:
        """Run `cmd` from `cwd` as step k (under --dry-run: only print it); returns its wall time."""
        self.header(k, title)
        return self.run(title, cmd, stage, show)

    def run(self, title: str, cmd: list[str], stage: str | None = None,
            show: Callable[[str], str] | None = None) -> float:
        """Print and run `cmd` (a step's command, or one more of it), adding its time to `stage` (or `title`).
        With `show`, the command's stdout is collected and `show(stdout)` printed instead."""
        self.show(cmd)
        if self.dry_run:
            return 0.0
        t = time.time()
        import tempfile

        entry = entry_main(cmd, self.cwd) if _IN_PROCESS else None
        with tempfile.TemporaryFile() as out:
            sink = out if show else None
            if entry is not None:  # run_in_process(): the step's main(argv) in a fork of this interpreter
                log = None
                if self.log_dir is not None:  # the same split as run_filtered, on this process's own output
                    self.log_dir.mkdir(parents=True, exist_ok=True)
                    log = self.log_dir / "steps.log"
                with filtered_output(log, cmd) if log else contextlib.nullcontext():
                    code = call_in_process(*entry, self.cwd, stdout=out.fileno() if show else None)
            elif self.log_dir is None:
                code = subprocess.run(cmd, cwd=self.cwd, stdout=sink, preexec_fn=die_with_parent()).returncode
                log = None
            else:
                self.log_dir.mkdir(parents=True, exist_ok=True)
                log = self.log_dir / "steps.log"
                code = run_filtered(cmd, self.cwd, log, stdout=sink)
            if show:
                out.seek(0)
                print(show(out.read().decode("utf-8", "replace")), flush=True)
        if code != 0:  # the step printed its own error; the entry point prints this line and exits with `code`
            where = f"; library logs in {log}" if log else ""
            raise StepFailed(f"{self.name} step '{title}' failed (exit {code}){where}", code)
        dt = time.time() - t
        print(f"   ({dt:.0f} s)", flush=True)
        self.add(stage or title, dt)
        return dt

    def add(self, stage: str, seconds: float) -> None:
        self.times[stage] = self.times.get(stage, 0.0) + seconds

    def table(self) -> str:
        """Markdown table of the wall time of each stage (in the order they ran) and the total."""
        rows = [f"| {stage} | {s:.0f} |" for stage, s in self.times.items()]
        total = sum(self.times.values())
        return "\n".join(["| stage | wall time (s) |", "|---|---:|", *rows, f"| total | {total:.0f} |"])


def run_filtered(cmd: list[str], cwd: Path, log: Path, stdout: Any = None) -> int:
    """Run `cmd` with its output split by common/process.py's line filter (`pump`): the listed harmless library
    lines appended to `log`, everything else (progress bars, which end in \\r, results, errors and any warning no
    pattern lists) passed on as it comes: stderr to ours, stdout to `stdout` (a file) or ours. Both streams are
    filtered, since vLLM logs to stdout. The step knows it is filtered (FILTERED_ENV) and adds no filter of its own."""
    import threading

    proc = subprocess.Popen(cmd, cwd=cwd, stderr=subprocess.PIPE, stdout=subprocess.PIPE,
                            env={**os.environ, FILTERED_ENV: "1"},
                            preexec_fn=die_with_parent())  # started before the pump threads
    lock = threading.Lock()
    with log.open("ab") as f:
        f.write(("+ " + " ".join(cmd) + "\n").encode())

        def writer(dst: Any) -> Callable[[bytes], None]:
            def write(seg: bytes) -> None:
                dst.write(seg)
                dst.flush()
            return write

        out = stdout if stdout is not None else sys.stdout.buffer
        threads = [threading.Thread(target=pump, args=(os.dup(proc.stdout.fileno()), writer(out), writer(f), lock)),
                   threading.Thread(target=pump, args=(os.dup(proc.stderr.fileno()), writer(sys.stderr.buffer),
                                                       writer(f), lock))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    proc.stdout.close()
    proc.stderr.close()
    return proc.wait()


@contextlib.contextmanager
def filtered_output(log: Path, cmd: list[str]) -> Iterator[None]:
    """For the block, this process's own stdout and stderr split as run_filtered splits a subprocess's
    (common/process.py `filtered_output`): an in-process step's listed harmless library lines go to `log`, its
    progress bars, results, errors and unknown warnings to the terminal."""
    with log.open("ab") as f:
        f.write(("+ " + " ".join(cmd) + "\n").encode())
        f.flush()
        with process_filtered_output(f, force=True):
            yield


def paired_gains(evals: Path, pairs: tuple[tuple[str, str, str], ...], n_boot: int = 1000,
                 seed: int = 0) -> dict[str, dict[str, Any]] | None:
    """For each (label, A, B): the overall gain of run evals/B over run evals/A in points with its paired,
    file-stratified 95% bootstrap interval (the statistic of `eval compare`). None when a pair shares no rows.

    Where both runs scored the same rows, all valid, `delta` is the difference of their results.json accuracies (what
    the comparison tables print): those round each file's accuracy to 4 places (batch_eval.py's rule) before
    averaging, so the unrounded paired point can differ from it by 0.01 (+10.07 beside a table of 10.06 vs 0.00).
    Otherwise (`same_rows` false) it is the paired point over the shared rows, which the tables do not show."""
    from eval.compare import bootstrap_delta, load_run

    names = [n for _, a, b in pairs for n in (a, b)]
    runs = {name: load_run(evals / name)[1:] for name in dict.fromkeys(names)}
    out: dict[str, dict[str, Any]] = {}
    for label, a, b in pairs:
        (res_a, rows_a), (res_b, rows_b) = runs[a], runs[b]
        d = bootstrap_delta(rows_a, rows_b, n_boot, seed)
        if not d["n_shared"]:
            return None
        (lo, hi) = d["overall"]["ci95"]
        same = set(rows_a) == set(rows_b) and len(rows_a) == res_a["n"] and len(rows_b) == res_b["n"]
        delta = round(res_b["overall"] - res_a["overall"], 2) + 0.0 if same else d["overall"]["delta"]
        out[label] = {"delta": delta, "lo": lo, "hi": hi, "n": d["n_shared"], "same_rows": same,
                      "beyond": "gain" if lo > 0 else "loss" if hi < 0 else None}
    return out


def gain_line(label: str, g: dict[str, Any], width: int = 20) -> str:
    """`  label  +d.dd [+lo, +hi]  gain beyond the 95% CI (n=N)` (or loss beyond it, or within it); `n=N shared` where
    the runs scored different rows (the delta is then over the shared rows, not the tables' difference)."""
    verdict = f"{g['beyond']} beyond the 95% CI" if g["beyond"] else "within the CI"
    shared = "" if g.get("same_rows", True) else " shared"
    return (f"  {label:<{width}} {g['delta']:+7.2f} [{g['lo']:+.2f}, {g['hi']:+.2f}]  {verdict} (n={g['n']}{shared})")
