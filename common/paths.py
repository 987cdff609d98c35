"""Where an output can go: the one check behind every --out/--output_dir (synth, eval, the recipes), the
write lock every writing command takes on its output, and what `--force` may never remove."""
from __future__ import annotations

import errno
import fcntl
import hashlib
import os
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from common.errors import TaseError

BLOCKS = {"file": "a file, not a folder", "unwritable": "not writable",
          "too long": "a name longer than the file system allows"}  # how callers word write_blocker's reasons


def write_blocker(out: Path, include_self: bool = False) -> tuple[Path, str] | None:
    """The nearest existing folder on the way to `out` (from `out` itself with `include_self`, else from
    its parent) when it stops `out` being written: `(path, "file")` when that path is a file,
    `(path, "unwritable")` when the folder lacks write or search permission, `(path, "too long")` for the
    first name on the way that the file system refuses (ENAMETOOLONG, which os.stat raises instead of
    answering "no"; another error there, such as EACCES, counts as its folder unwritable); None when `out`
    can be created there. Each caller words its own one-line error (BLOCKS has the words)."""
    for d in reversed((out, *out.parents)):
        try:
            d.exists()
        except OSError as e:  # os.stat raises where it cannot answer: a name past the limit, a folder not searchable
            return (d, "too long") if e.errno == errno.ENAMETOOLONG else (d.parent, "unwritable")
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


class OutputBusy(TaseError):
    """Another live process is writing the same output (one line, naming that process)."""


NAME_MAX = 255  # bytes in one file name on the common Linux file systems (ext4, xfs, btrfs, tmpfs)


def blocker_line(out: Path, flag: str, include_self: bool = False) -> str | None:
    """write_blocker's answer as the one line every command refuses with ("FLAG OUT: it is ..." or "FLAG OUT: DIR is
    ..."), or None when `out` can be written there."""
    blocked = write_blocker(out, include_self=include_self)
    if blocked is None:
        return None
    d, why = blocked
    return f"{flag} {out}: {'it' if d == out else d} is {BLOCKS[why]}"


def out_folder_refusal(out: Path, command: str, new_or_own: bool = False) -> str | None:
    """The one refusal line of a command whose --out is a folder it resumes into (ablate, select, proof): where
    nothing can be written, or a folder that is or holds another command's output; None when `command` may write
    there. With `new_or_own` (ablate, proof: a layout of many names, some the user's own, such as arm names) also a
    folder that is not an earlier output of `command` and holds anything: the user's own `ablation.md` or
    `summary.md` was replaced. (select_checkpoint keeps a user's other files and refuses only its own names there,
    file_refusal.)"""
    line = blocker_line(out, "--out", include_self=True) or (
        f"--out {why}; write elsewhere" if (why := output_refusal(out, command, replace=False)) else None)
    if line or not new_or_own or not out.is_dir() or is_own(out, command):
        return line
    try:
        first = next((e for e in sorted(os.listdir(out)) if e != MARKER), None)
    except OSError as e:
        return f"--out {out}: {os_error_line(e)}"
    if first is not None:
        return (f"--out {out} is not an earlier {LABELS.get(command, command)} folder (it holds {first}); write "
                f"elsewhere, or into an empty or new folder")
    return None


def name_refusal(name: str, what: str, reserved: tuple[str, ...] = (), room: int = 32) -> str | None:
    """Why `name` cannot become one file or folder name inside an output (None when it can): the one check of every
    name a command turns into a path (ablate's arms, proof's files and arms). Never empty, `.` or `..` (the
    parent of --out), never holding `/` or NUL, within NAME_MAX bytes less `room` (the temp and lock names made
    beside it), and none of `reserved` (the command's own files and folders in the same place). `what` starts the
    line ("arm NAME", "files entry X")."""
    if not name or name in (".", "..") or "/" in name or "\0" in name:
        return f"{what}: not a single file name (empty, '.', '..', or holding '/')"
    if len(os.fsencode(name)) > NAME_MAX - room:
        return f"{what}: a name of {len(os.fsencode(name))} bytes; at most {NAME_MAX - room} become a file name"
    if name in reserved:
        return f"{what}: the name of this command's own {name}; choose another"
    return None


def relative_refusal(rel: str, what: str) -> str | None:
    """Why `rel`, a relative path of several names from a config or a command line (a proof's `files:` and
    `transfer: files:` entries, `<group>/<task>/<file>.csv`), cannot name a place inside the folder it is joined to
    (None when it can): each of its parts passes name_refusal, so `..`, an empty part or an absolute path never
    reaches outside."""
    if not isinstance(rel, str) or not rel:
        return f"{what}: not a relative path of file names"
    return next((why for part in rel.split("/") if (why := name_refusal(part, what))), None)


def inside_refusal(path: str | Path, folder: Path, what: str) -> str | None:
    """Why `path`, read from a file the project wrote earlier (selection.json's chosen model, a manifest's
    folders), is not a place inside `folder` once symlinks are followed (None when it is): an old state file, or
    a symlink put in its place, must not make `/etc` a model or an output."""
    try:
        real, root = Path(os.path.realpath(folder / path)), Path(os.path.realpath(folder))
    except (OSError, ValueError) as e:
        return f"{what}: {path!r} is not a usable path ({e})"
    if real != root and root not in real.parents:
        return f"{what}: {str(path)[:200]!r} is outside {folder} once links are followed"
    return None


def followed(out: str | Path) -> Path:
    """The path an output is written at: a symlinked --out is followed to its target, by every command (the link
    stays and the target is replaced; `eval score --force` once replaced the link with a folder and left the old
    scores at the target). Any other path is returned as given."""
    out = Path(out)
    try:
        link = out.is_symlink()
    except OSError:  # a name too long, an unsearchable folder: not a link; write_blocker words the refusal
        return out
    return Path(os.path.realpath(out)) if link else out


def lock_path(out: Path) -> Path:
    """`.NAME.lock` beside `out` (beside its target when `out` is a symlink: one lock however it is named); where
    that name would pass NAME_MAX (an output name within 6 bytes of the limit), a shortened name with a digest of
    the whole one, so every output that can exist has a lock."""
    out = Path(os.path.abspath(followed(out)))
    name = f".{out.name}.lock"
    if len(os.fsencode(name)) > NAME_MAX:
        name = f".{out.name[:50]}-{hashlib.sha256(os.fsencode(out.name)).hexdigest()[:16]}.lock"
    return out.parent / name


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


# --- what an output may replace: one rule for every command that writes (issue 36) -------------------------
# Every command that writes an output folder leaves MARKER in it, written with the folder (inside the temp
# folder before it is swapped in, or atomically beside its files): the command's name and the files it wrote.
# A command may then replace only what it wrote itself: an earlier output of its own (its marker, or for
# outputs from before markers its known files), never a folder holding anything else at any depth, and never
# a file inside another command's output. `output_refusal` and `file_refusal` are that rule; each command
# calls one of them before it writes anything, and words the refusal as one line.
MARKER = ".tase-output.json"
LABELS = {"export": "export", "export-lm-eval": "export-lm-eval", "score": "eval score", "compare": "eval compare",
          "synth": "synth", "gold": "eval gold", "demo": "demo", "tokstats": "eval tokstats",
          "robustness": "eval robustness", "plot-training": "eval plot-training", "select": "select_checkpoint",
          "stats": "synth stats", "ablate": "recipes/ablate.py", "proof": "recipes/proof.py"}
# subfolders that are part of a command's own output though they are another command's output themselves:
# `eval robustness run` keeps its `eval run` in OUT/run
_OWN_PARTS = {"robustness": ("run",), "select": ("step-*",),  # select_checkpoint: an `eval run` per checkpoint
              "ablate": ("*",),  # recipes/ablate.py: a training run, an export, eval runs and comparisons per arm
              "proof": ("*",)}  # recipes/proof.py: its training runs, evaluations and comparisons
_WALK_LIMIT = 100_000  # entries: a folder this big is not an earlier output; treat it as precious
# files an export from before markers may hold (what save_pretrained and the tokenizer write, and the card)
_OLD_EXPORT_FILES = ("config.json", "generation_config.json", "*.safetensors", "model.safetensors.index.json",
                     "tokenizer.json", "tokenizer_config.json", "tokenizer.model", "special_tokens_map.json",
                     "added_tokens.json", "vocab.json", "merges.txt", "chat_template.jinja", "chat_template.json",
                     "README.md", "tase_config.json")
_OLD_LM_EVAL_FILES = ("*.yaml", "utils.py", "data", "data/*.jsonl")
# what others add to a command's output and may go with it: Python's bytecode cache of the lm-eval export's
# utils.py, written by lm-eval when it loads the tasks
_REGENERATED = {"export-lm-eval": ("__pycache__/**",)}
CARD_LINE = "Exported by tase-grpo `recipes/export.py`"


def write_marker(folder: Path, command: str, files: list[str] | None = None) -> None:
    """Mark `folder` as written by `command`, listing `files` (default: everything in it now, at any depth).
    Written to a temp name and renamed, so a marker is never torn."""
    import json

    if files is None:
        files = sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.name != MARKER)
    tmp = folder / f".{MARKER}.tmp"
    tmp.write_text(json.dumps({"command": command, "files": files}, indent=1) + "\n", encoding="utf-8")
    os.replace(tmp, folder / MARKER)


def read_marker(folder: Path) -> dict | None:
    """The marker of `folder` ({"command", "files"}), or None when it has none or an unreadable one."""
    import json

    try:
        m = json.loads((folder / MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):  # RecursionError: JSON nested too deeply, no ValueError
        return None
    ok = isinstance(m, dict) and isinstance(m.get("command"), str) and isinstance(m.get("files"), list)
    return m if ok else None


def output_kind(folder: Path) -> tuple[str, str] | None:
    """Which command's output the folder `folder` itself is: (command, "what (the file that shows it)"), or
    None for a folder of the user's own. Outputs are known by the marker, or by the files each command has
    always written (outputs from before markers, training runs, downloaded models)."""
    m = read_marker(folder)
    if m:
        cmd = m["command"]
        return cmd, f"an `{LABELS.get(cmd, cmd)}` output ({MARKER})"
    try:
        names = set(os.listdir(folder))
    except OSError:
        return None
    for f in RUN_MARKERS:
        if f in names:
            return "training", f"a training run or checkpoint ({f})"
    ck = sorted(n for n in names if n.startswith("checkpoint-") and (folder / n).is_dir())
    if ck:
        return "training", f"a training run or checkpoint ({ck[0]})"
    if "run_config.json" in names:
        return "run", "an `eval run` output (run_config.json)"
    if "results.json" in names or "samples.jsonl" in names:
        return "score", "an `eval score` output (" + ("results.json" if "results.json" in names else
                                                      "samples.jsonl") + ")"
    if "tase.yaml" in names and "utils.py" in names:
        return "export-lm-eval", "an `export-lm-eval` output (tase.yaml)"
    if "config.json" in names:
        try:
            card = (folder / "README.md").read_text(encoding="utf-8", errors="replace")[:2000]
        except OSError:
            card = ""
        if CARD_LINE in card:
            return "export", "an exported model (README.md)"
        if any(n.endswith((".safetensors", ".bin", ".gguf")) for n in names):
            return "model", "a model (config.json)"
    if "comparison.json" in names:
        return "compare", "an `eval compare` output (comparison.json)"
    if "selection.json" in names and "selection.md" in names:  # select_checkpoint from before its marker
        return "select", "a `select_checkpoint` output (selection.json)"
    if "official" in names and "sft" in names and (folder / "official").is_dir():  # recipes/proof.py before its marker
        return "proof", "a `recipes/proof.py` output (official)"
    if "manifest.json" in names and "robustness_data.jsonl" in names:
        return "robustness", "an `eval robustness` output (manifest.json)"
    return None


def _walk(folder: Path) -> Iterator[tuple[Path, list[str], list[str]]]:
    """os.walk in name order (so a refusal names the same path every time)."""
    for root, dirs, files in os.walk(folder):
        dirs.sort()
        yield Path(root), dirs, sorted(files)


def _old_own_files(command: str) -> tuple[str, ...] | None:
    return {"export": _OLD_EXPORT_FILES, "export-lm-eval": _OLD_LM_EVAL_FILES}.get(command)


def holds_output(folder: Path, skip_root: bool = False, own_parts: tuple[str, ...] = ()) -> str | None:
    """The first output of any command inside `folder` at any depth (the folder itself unless `skip_root`,
    and not in its subfolders `own_parts`), as the rest of a refusal: "is WHAT (FILE)", "holds WHAT at REL
    (FILE)", or for a training run, as the refusal always said, "holds a training run or checkpoint
    (REL/FILE)"; else None."""
    seen = 0
    for root, dirs, files in _walk(folder):
        if root == folder and own_parts:
            dirs[:] = [d for d in dirs if not matches(d, own_parts)]  # prunes the walk below them
        rel = root.relative_to(folder)
        kind = None if skip_root and root == folder else output_kind(root)
        if kind:
            what, shown = kind[1].rsplit(" (", 1)
            if kind[0] == "training":
                return f"holds {what} ({rel / shown.rstrip(')')})"
            return f"is {kind[1]}" if root == folder else f"holds {what} at {rel} ({shown}"
        seen += len(files) + len(dirs)
        if seen > _WALK_LIMIT:  # too big to be an earlier output: treat it as precious
            return f"holds over {_WALK_LIMIT} entries (stopped at {rel})"
    return None


def holds_training(folder: Path, limit: int = _WALK_LIMIT) -> str | None:
    """The first training run or checkpoint found in `folder` at any depth (a path relative to it), else
    None. A run is marked by trainer_state.json, metrics.jsonl or a checkpoint-* folder."""
    seen = 0
    for root, dirs, files in _walk(folder):
        rel = root.relative_to(folder)
        for m in RUN_MARKERS:
            if m in files:
                return str(rel / m)
        for d in dirs:
            if d.startswith("checkpoint-"):
                return str(rel / d)
        seen += len(files) + len(dirs)
        if seen > limit:
            return f"{rel} (over {limit} entries)"
    return None


def force_refusal(target: Path, reading: tuple[Path, ...] = ()) -> str | None:
    """Why no command may remove or write into the folder `target` (None when it may): it is or contains
    the current directory or a path being read, or it holds a training run or checkpoint at any depth."""
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


def is_own(folder: Path, command: str) -> bool:
    """Whether `folder` is an earlier output of `command`: its marker, or (outputs from before markers) the
    files that command has always written."""
    m = read_marker(folder)
    if m:
        return m["command"] == command
    kind = output_kind(folder)
    return bool(kind) and kind[0] == command


def output_refusal(target: Path, command: str, reading: tuple[Path, ...] = (), replace: bool = True) -> str | None:
    """Why `command` must not write its output folder `target` (None when it may). For every command: never
    a file, never a folder that is or holds another command's output (a training run, an eval run, scores,
    an export, ...) at any depth. With `replace` (the command deletes the old folder: export,
    export-lm-eval) also never the current directory or what the command reads, and never a folder holding
    anything its own earlier output did not (notes, other files) at any depth. Without it (score, compare:
    the command replaces its own files and keeps the others, so nothing is deleted) the user's own files
    may stay. The reason starts with `target`."""
    if target.exists() and not target.is_dir():
        return f"{target} is a file, not a folder"
    why = force_refusal(target, reading) if replace else None
    if why or not target.is_dir():
        return why
    own = is_own(target, command)
    found = holds_output(target, skip_root=own, own_parts=_OWN_PARTS.get(command, ()) if own else ())
    if found:
        return f"{target} {found}"
    if not replace:
        return None
    entries = []
    for root, dirs, files in _walk(target):
        entries += [str((root / n).relative_to(target)) for n in dirs + files]
        if len(entries) > _WALK_LIMIT:
            return f"{target} holds over {_WALK_LIMIT} entries"
    entries = [e for e in entries if e != MARKER]
    label = LABELS.get(command, command)
    if not own:
        return f"{target} is not an earlier {label} folder (it holds {entries[0]})" if entries else None
    m = read_marker(target)
    regenerated = _REGENERATED.get(command, ())
    if m:
        listed = set(m["files"])
        extra = [e for e in entries if e not in listed and not matches(e, regenerated)]
    else:
        pats = (_old_own_files(command) or ()) + regenerated
        extra = [e for e in entries if not matches(e, pats)]
    if extra:
        return f"{target} holds {extra[0]}, which {label} did not write"
    return None


def matches(entry: str, patterns: tuple[str, ...]) -> bool:
    """Whether the relative path `entry` is one of `patterns`: a glob for a path of the same depth, or
    "NAME/**" for NAME (a glob) and everything under it."""
    from fnmatch import fnmatchcase

    for p in patterns:
        if p.endswith("/**"):
            if fnmatchcase(entry.split("/")[0], p[:-3]):
                return True
        elif entry.count("/") == p.count("/") and fnmatchcase(entry, p):
            return True
    return False


def foreign_entry(folder: Path, patterns: tuple[str, ...]) -> str | None:
    """The first path in `folder` (at any depth, relative to it) that is none of `patterns`, else None: what
    stops a command deleting a folder of its own layout (the demo's --fresh)."""
    seen = 0
    for root, dirs, files in _walk(folder):
        for n in dirs + files:
            rel = str((root / n).relative_to(folder))
            if not matches(rel, patterns):
                return rel
        seen += len(dirs) + len(files)
        if seen > 10 * _WALK_LIMIT:
            return f"over {10 * _WALK_LIMIT} entries"
    return None


def file_refusal(target: Path, command: str, own: Callable[[Path], bool] | None = None,
                 inside: tuple[str, ...] = ()) -> str | None:
    """Why `command` must not write the file `target` (None when it may): its folder is another command's
    output (a run's samples.jsonl or results.json is that run's, not a file to replace) other than the kinds
    `inside` names (plot-training's PNG belongs in its training run), or `target` exists, is not empty and
    `own` says that command did not write it (a notes file). The reason starts with `target`."""
    try:
        kind = output_kind(target.parent) if target.parent.is_dir() else None
        if kind and kind[0] not in inside:
            return f"{target} is inside {target.parent}, {kind[1]}"
        if own is not None and target.is_file() and target.stat().st_size and not own(target):
            return f"{target} holds something {LABELS.get(command, command)} did not write"
    except OSError:
        return None  # the command's own checks word an unreadable place
    return None


def out_file_refusal(out: str | Path, flag: str = "--out") -> str | None:
    """Why a script cannot write its report to the file `out` (None when it can): a folder, or a file whose folder
    is missing. Checked before the work, so that minutes of work do not end in a traceback at the write."""
    p = Path(out)
    if p.is_dir():
        return f"{flag} {out}: is a folder; give a file path"
    if not p.parent.is_dir():
        return f"{flag} {out}: no folder {p.parent}; give a file path in an existing folder"
    return None


def jsonl_with_keys(path: Path, keys: tuple[str, ...]) -> bool:
    """Whether the first line of `path` is a JSON object with `keys`: how a command knows a JSON-lines file
    it wrote earlier (synth: records; gold: predictions), where a marker cannot go inside."""
    import json

    try:
        with path.open("rb") as f:
            line = f.readline(10_000_000)
        obj = json.loads(line)
    except (OSError, ValueError, RecursionError):
        return False
    return isinstance(obj, dict) and all(k in obj for k in keys)


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


_TEMP_TAIL = re.compile(r"[a-z0-9_]+")  # the random part tempfile.mkstemp/mkdtemp add (8 of these), or a pid


def leftovers(out: Path, tag: str) -> list[Path]:
    """The `.NAME.<tag>-XXXXXXXX` siblings of `out` (tag "tmp" or "old") that mkstemp/mkdtemp made for `out`
    itself, in name order. Matched on the exact prefix and a tail of tempfile's characters, never as a glob: an
    output named `data[1].jsonl` or `dir/*` must not take another output's temp or backup for its own
    (`glob(".data[1].jsonl.tmp-*")` matched `.data1.jsonl.tmp-*`), nor `x` take `x.tmp-y`'s."""
    prefix = f".{out.name}.{tag}-"
    try:
        names = os.listdir(out.parent)
    except OSError:
        return []
    return [out.parent / n for n in sorted(names) if n.startswith(prefix) and _TEMP_TAIL.fullmatch(n[len(prefix):])]


def recover_replace(out: Path) -> None:
    """Undo a `replace_folder` killed between its renames (the old folder comes back), and drop the
    `.NAME.tmp-*` folders of killed writers: the caller holds `out`'s lock, so no live writer owns one."""
    import shutil

    if not out.parent.is_dir():
        return
    for old in leftovers(out, "old"):
        if (old / out.name).is_dir() and not out.exists():
            os.replace(old / out.name, out)
        shutil.rmtree(old, ignore_errors=True)
    for stale in leftovers(out, "tmp"):
        shutil.rmtree(stale, ignore_errors=True)
