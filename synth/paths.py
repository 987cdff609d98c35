"""Where an output can go: the one check behind every --out/--output_dir (synth, eval, the recipes), the
write lock every writing command takes on its output, and what `--force` may never remove."""
from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


def write_blocker(out: Path, include_self: bool = False) -> tuple[Path, str] | None:
    """The nearest existing folder on the way to `out` (from `out` itself with `include_self`, else from
    its parent) when it stops `out` being written: `(path, "file")` when that path is a file,
    `(path, "unwritable")` when the folder lacks write or search permission; None when `out` can be
    created there. Each caller words its own one-line error."""
    for d in ((out,) if include_self else ()) + tuple(out.parents):
        if d.exists():
            if not d.is_dir():
                return d, "file"
            if not os.access(d, os.W_OK | os.X_OK):
                return d, "unwritable"
            return None
    return None


# --- one lock rule for every command that writes -------------------------------------------------------
# A lock file beside the output (`.NAME.lock` in its parent, so it survives the output folder being swapped
# out and exists before the folder does) holds the writer's PID. It is taken atomically with flock(2): the
# kernel drops the lock when the process dies, so a lock left by a killed process is stale by construction,
# and its PID is only there to name the live writer in the refusal.
RUN_MARKERS = ("trainer_state.json", "metrics.jsonl")


_HELD: set[Path] = set()  # lock files this process holds (hold_output is re-entrant)


class OutputBusy(Exception):
    """Another live process is writing the same output (one line, naming that process)."""


def lock_path(out: Path) -> Path:
    out = Path(os.path.abspath(out))
    return out.parent / f".{out.name}.lock"


def _describe(pid: int | None) -> str:
    if pid is None:
        return "another process"
    try:
        cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode("utf-8", "replace").strip()
    except OSError:
        cmd = ""
    cmd = " ".join(cmd.split())  # one line, whatever the command line held
    return f"process {pid}" + (f" ({cmd[:120]})" if cmd else "")


@contextmanager
def hold_output(out: str | Path) -> Iterator[Path]:
    """Hold the write lock of `out` (a folder or a file) for the `with` block; raise OutputBusy naming the
    live process that holds it. Two commands writing one output interleave their lines or remove each
    other's temp folders; this makes the second one stop before it does any work."""
    lock = lock_path(Path(out))
    if lock in _HELD or write_blocker(lock.parent, include_self=True):
        # held already by this process (the CLI and the library function it calls both take it), or an
        # output the command refuses itself, in its own words
        yield lock
        return
    made = [d for d in (lock.parent, *lock.parent.parents) if not d.exists()]
    lock.parent.mkdir(parents=True, exist_ok=True)
    try:
        fd = _take(lock, out)
    except BaseException:
        _rmdirs(made)
        raise
    _HELD.add(lock)
    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        yield lock
    finally:
        _HELD.discard(lock)
        try:
            os.unlink(lock)
        except OSError:
            pass
        os.close(fd)
        _rmdirs(made)


def _rmdirs(made: list[Path]) -> None:
    """Remove the folders the lock had to create, if the command left them empty (it failed): a refused
    command adds nothing."""
    for d in made:  # deepest first
        try:
            d.rmdir()
        except OSError:
            break


def _take(lock: Path, out: str | Path) -> int:
    """Open and flock the lock file at `lock`; OutputBusy naming its holder when another process has it."""
    while True:
        fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            try:
                pid: int | None = int(os.pread(fd, 32, 0).decode().strip() or "x")
            except ValueError:
                pid = None
            os.close(fd)
            raise OutputBusy(f"{out} is being written by {_describe(pid)}; wait for it to finish, or write "
                             f"elsewhere") from None
        try:
            same = os.fstat(fd).st_ino == os.stat(lock).st_ino
        except FileNotFoundError:
            same = False
        if same:  # else the holder we waited on removed this file: lock the one now at the path
            return fd
        os.close(fd)


def holds_training(folder: Path, limit: int = 100_000) -> str | None:
    """The first training run or checkpoint found in `folder` at any depth (a path relative to it), else
    None. A run is marked by trainer_state.json, metrics.jsonl or a checkpoint-* folder."""
    seen = 0
    for root, dirs, files in os.walk(folder):
        rel = Path(root).relative_to(folder)
        for m in RUN_MARKERS:
            if m in files:
                return str(rel / m)
        for d in dirs:
            if d.startswith("checkpoint-"):
                return str(rel / d)
        seen += len(files) + len(dirs)
        if seen > limit:  # too big to be an earlier export: treat as precious
            return f"{rel} (over {limit} entries)"
    return None


def force_refusal(target: Path, reading: tuple[Path, ...] = ()) -> str | None:
    """Why `--force` must not remove the folder `target` (None when it may): it is or contains the
    current directory or a path being read, or it holds a training run or a checkpoint at any depth."""
    dst = Path(os.path.abspath(target)).resolve()
    cwd = Path.cwd().resolve()
    if dst == cwd or dst in cwd.parents:
        return f"{target} is or contains the current directory"
    for r in reading:
        src = Path(os.path.abspath(r)).resolve()
        if src == dst or dst in src.parents:
            return f"{target} is or contains {r}, which this command reads"
    if dst.is_dir():
        found = holds_training(dst)
        if found:
            return f"{target} holds a training run or checkpoint ({found})"
    return None


def os_error_line(e: OSError) -> str:
    """An OSError in one line that names the file when there is one and never prints an empty field
    ("error: : No space left on device" once did)."""
    what = e.strerror or str(e) or type(e).__name__
    names = [str(f) for f in (e.filename, getattr(e, "filename2", None)) if f]
    return f"{' -> '.join(names)}: {what}" if names else what


# --- replacing a whole output folder ---------------------------------------------------------------------
# No single rename replaces a folder: the old one goes aside into `.NAME.old-*`, the new one takes its place,
# then the old one is deleted. A kill between the two renames leaves only the `.old-*` folder, which
# `recover_replace` (run first, under the output's lock) puts back.


def replace_folder(new: Path, out: Path) -> None:
    """Put the finished folder `new` (a sibling temp folder) in place of `out`, whether `out` exists or not."""
    import shutil
    import tempfile

    new.chmod(0o755)  # mkdtemp makes 0700
    if not out.exists():
        os.replace(new, out)
        return
    old = Path(tempfile.mkdtemp(prefix=f".{out.name}.old-", dir=out.parent))
    os.replace(out, old / out.name)
    os.replace(new, out)
    shutil.rmtree(old, ignore_errors=True)


def recover_replace(out: Path) -> None:
    """Undo a `replace_folder` killed between its renames (the old folder comes back), and drop the
    `.NAME.tmp-*` folders of killed writers: the caller holds `out`'s lock, so no live writer owns one."""
    import shutil

    if not out.parent.is_dir():
        return
    for old in sorted(out.parent.glob(f".{out.name}.old-*")):
        if (old / out.name).is_dir() and not out.exists():
            os.replace(old / out.name, out)
        shutil.rmtree(old, ignore_errors=True)
    for stale in out.parent.glob(f".{out.name}.tmp-*"):
        shutil.rmtree(stale, ignore_errors=True)
