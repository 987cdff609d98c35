"""The run folder: its write lock, refusing a folder that holds another run, picking the checkpoint to
resume from (complete ones only), trimming metrics.jsonl to it, and the saved resolved configuration."""
from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

from common.errors import TaseError


def check_output_dir(output_dir: str) -> Path:
    """output_dir must be a folder or creatable as one."""
    from common.paths import blocker_line

    out = Path(output_dir)
    why = blocker_line(out, "output_dir")
    if why:
        raise TaseError(why)
    if out.exists() and not out.is_dir():
        raise TaseError(f"output_dir {out} is a file, not a folder")
    return out


def holds_run(out: Path) -> list[str]:
    """What marks `out` as holding a training run (checkpoints, trainer_state.json, metrics.jsonl)."""
    marks = sorted(p.name for p in out.glob("checkpoint-*"))[:3]
    return marks + [m for m in ("trainer_state.json", "metrics.jsonl") if (out / m).exists()]


WEIGHTS_ONLY = "WEIGHTS_ONLY"  # in a checkpoint whose optimizer state the finished run removed (finish_run)
WEIGHTS_ONLY_WHY = ("weights only: its optimizer state was removed when the run finished; --keep_optimizer_state "
                    "true keeps it")


def checkpoint_problem(ckpt: Path, weights_only_ok: bool = False) -> str | None:
    """Why a Trainer checkpoint cannot be resumed from (None when complete): weights, optimizer and
    scheduler state and trainer_state.json must all be present and whole. The Trainer writes them in that
    order into the folder itself, so a kill during a save leaves a folder that fails one of these checks.
    A finished run's checkpoint marked WEIGHTS_ONLY is whole but not resumable (WEIGHTS_ONLY_WHY), unless
    `weights_only_ok` (export and select_checkpoint read only its weights)."""
    st = ckpt / "trainer_state.json"
    try:
        state = json.loads(st.read_text(encoding="utf-8"))
        if not isinstance(state.get("global_step"), int):
            return "trainer_state.json without global_step"
    except FileNotFoundError:
        return "no trainer_state.json"
    except (OSError, ValueError, AttributeError, RecursionError):
        return "unreadable trainer_state.json"
    why = weights_problem(ckpt, adapter_ok=True)
    if why:
        return why
    if any(ckpt.glob("global_step*")):  # DeepSpeed keeps optimizer state in its own folder
        if not (ckpt / "latest").is_file():
            return "DeepSpeed state without 'latest'"
    elif (ckpt / WEIGHTS_ONLY).is_file():
        if not weights_only_ok:
            return WEIGHTS_ONLY_WHY
    else:
        for name in ("optimizer.pt", "scheduler.pt"):
            if not _whole_zip(ckpt / name):
                return f"{name} missing or incomplete"
    for rng in ckpt.glob("rng_state*.pth"):
        if not _whole_zip(rng):
            return f"{rng.name} incomplete"
    return None


def weights_problem(folder: Path, adapter_ok: bool = False) -> str | None:
    """Why `folder` holds no whole safetensors model (None when it does): a sharded model's index readable and
    every shard it names whole, else model.safetensors whole (or, for a resume, a PEFT adapter's weights). The
    weights half of checkpoint_problem, shared with select_checkpoint, which evaluates checkpoints saved with
    --save_only_model (no optimizer state) and must skip a torn one rather than load it."""
    index = folder / "model.safetensors.index.json"
    if index.is_file():
        try:
            shards = sorted(set(json.loads(index.read_text(encoding="utf-8"))["weight_map"].values()))
        except (OSError, ValueError, KeyError, TypeError, AttributeError, RecursionError):
            return "unreadable model.safetensors.index.json"
    else:
        names = ("model.safetensors", "adapter_model.safetensors") if adapter_ok else ("model.safetensors",)
        shards = [n for n in names if (folder / n).is_file()][:1]
        if not shards:
            return "no safetensors weights"
    for name in shards:
        if not _whole_safetensors(folder / name):
            return f"{name} incomplete"
    return None


def _whole_safetensors(path: Path) -> bool:
    """Header readable and the file exactly as long as the header says (common.models.safetensors_problem, the one
    check); a shard that is missing or cannot be read is not whole either."""
    from common.models import safetensors_problem

    try:
        return safetensors_problem(path) is None
    except OSError:
        return False


def _whole_zip(path: Path) -> bool:
    """torch.save files are zip archives: a truncated one has no readable central directory."""
    import zipfile

    try:
        with zipfile.ZipFile(path) as z:
            return bool(z.namelist())
    except (OSError, zipfile.BadZipFile, ValueError):
        return False


def resolve_resume(output_dir: str, resume: Any) -> str | None:
    """The checkpoint to resume from. `true`/`latest`: the newest *complete* checkpoint-N of output_dir
    (newer incomplete ones, left by a kill during a save, are moved aside to checkpoint-N.incomplete and
    named), or a fresh start when there is none; an explicit path must be complete. Prints one line."""
    if resume is None or resume is False or (isinstance(resume, str) and resume.lower() in ("", "false", "none")):
        return None
    out = Path(output_dir)
    if not (resume is True or (isinstance(resume, str) and resume.lower() in ("true", "latest"))):
        why = checkpoint_problem(Path(resume)) if Path(resume).is_dir() else "no such folder"
        if why:
            raise TaseError(f"resume_from_checkpoint {resume}: cannot resume from it ({why})")
        return str(resume)
    main = int(os.environ.get("RANK", "0")) == 0  # under accelerate every process chooses; one moves and prints
    cands = sorted((p for p in out.glob("checkpoint-*") if p.is_dir() and p.name.split("-", 1)[1].isdigit()),
                   key=lambda p: int(p.name.split("-", 1)[1]), reverse=True)
    skipped = []
    for c in cands:
        why = checkpoint_problem(c)
        if why is None:
            note = f"; skipped newer {', '.join(skipped)}" if skipped else ""
            if main:
                print(f"resuming from {c} (newest complete checkpoint{note})", file=sys.stderr)
            return str(c)
        if why == WEIGHTS_ONLY_WHY:  # whole, not torn: left where it is
            skipped.append(f"{c.name} ({why})")
            continue
        aside = c.with_name(c.name + ".incomplete")
        k = 1
        while aside.exists():
            aside, k = c.with_name(f"{c.name}.incomplete{k}"), k + 1
        if main:
            os.replace(c, aside)
        skipped.append(f"{c.name} ({why}; moved to {aside.name})")
    finished = _saved(out) and final_state(out)
    if not finished and any(WEIGHTS_ONLY_WHY in s for s in skipped):
        raise TaseError(f"{out}: its checkpoints hold weights only (the run finished and removed its optimizer state) "
                        "but its final model is gone; choose another --output_dir (--model_name_or_path "
                        f"{out}/checkpoint-N starts a new run from one)")
    if main and not finished:  # a finished run: already_finished says what happens
        print(f"no complete checkpoint in {out}" + (f" (skipped {', '.join(skipped)})" if skipped else "")
              + "; starting from step 0", file=sys.stderr)
    return None


def trim_metrics(output_dir: str, step: int) -> None:
    """Drop metrics.jsonl lines logged after `step` (the resumed run logs those steps again)."""
    path = Path(output_dir) / "metrics.jsonl"
    if not path.is_file():
        return
    keep = []
    for line in path.read_text(encoding="utf-8").splitlines(keepends=True):
        try:
            if int(json.loads(line).get("step", 0)) <= step:
                keep.append(line)
        except (ValueError, TypeError, AttributeError, RecursionError):
            continue  # a torn last line from the kill
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text("".join(keep), encoding="utf-8")
    os.replace(tmp, path)


def hold_output_dir(output_dir: str) -> None:
    """Take output_dir's write lock for the rest of the process (the first process of a distributed run
    only: the others write where it says). A second run into the same folder stops with one line naming
    the first; the kernel drops the lock when this process ends, however it ends."""
    if int(os.environ.get("RANK", "0")) != 0:
        return
    import atexit

    from common.paths import OutputBusy, hold_output

    lock = hold_output(output_dir)
    try:
        lock.__enter__()
    except OutputBusy as e:
        raise TaseError(str(e)) from e
    atexit.register(lock.__exit__, None, None, None)


def prepare_output_dir(output_dir: str, resume: Any, check: Callable[[str | None], None] | None = None) -> str | None:
    """Take output_dir's write lock (hold_output_dir), then refuse an unusable output_dir, or one that
    holds a run unless resuming it; returns the checkpoint
    to resume from (see resolve_resume; `check` may refuse it, before anything changes) and trims metrics.jsonl to
    it."""
    out = check_output_dir(output_dir)
    hold_output_dir(output_dir)
    want = not (resume is None or resume is False or (isinstance(resume, str) and resume.lower() in ("", "false")))
    marks = holds_run(out) if out.is_dir() else []
    if marks and not want:
        raise TaseError(f"output_dir {out} already holds a training run ({', '.join(marks)}); pass "
             "--resume_from_checkpoint true to continue it, or choose another --output_dir")
    ckpt = resolve_resume(output_dir, resume) if want else None
    if want and check is not None:
        check(ckpt)
    if want and int(os.environ.get("RANK", "0")) == 0:
        step = 0
        if ckpt:
            step = json.loads((Path(ckpt) / "trainer_state.json").read_text(encoding="utf-8"))["global_step"]
        trim_metrics(output_dir, step)
    return ckpt


def already_finished(output_dir: str, ckpt: str | None, max_steps: int) -> bool:
    """A rerun of a finished command: the run reached its final save (the model, then trainer_state.json at the
    top of output_dir), or the resumed checkpoint is at max_steps and the final model was saved. Resuming the
    Trainer at the end would run one step past max_steps (seen with TRL 1.16 GRPO), and a run saved without
    checkpoints (save_strategy: no, as the SFT warm-up) would start again from step 0 and overwrite its model,
    so the recipes stop instead, and say so. A larger max_steps than the finished run planned is a
    request to train on: from a checkpoint, or refused in one line when there is none."""
    out = Path(output_dir)
    saved = _saved(out)
    final = final_state(out) if saved else None
    if final is not None:
        step, planned = final.get("global_step"), final.get("max_steps")
        if max_steps <= 0 or not isinstance(planned, int) or max_steps <= planned:
            print(f"{output_dir}: already trained (step {step} of {planned}) and saved; nothing to do")
            return True
        if not ckpt:
            light = any((c / WEIGHTS_ONLY).is_file() for c in out.glob("checkpoint-*"))
            raise TaseError(f"output_dir {output_dir} holds a finished run (step {step} of {planned}) and no "
                 f"checkpoint to train on from to max_steps {max_steps}"
                 + (" (its checkpoints hold weights only: the optimizer state was removed when it finished; "
                    "--keep_optimizer_state true keeps it)" if light else "")
                 + f"; choose another --output_dir (--model_name_or_path {output_dir} starts a new run from it)")
    if not ckpt or max_steps <= 0:
        return False
    step = json.loads((Path(ckpt) / "trainer_state.json").read_text(encoding="utf-8"))["global_step"]
    if step >= max_steps and saved:
        print(f"{output_dir}: already trained to max_steps {max_steps} ({Path(ckpt).name}) and saved; nothing to do")
        return True
    return False


def disk_bytes(folder: Path) -> int:
    """Bytes the files under `folder` hold on disk, each file once however many hard links name it (du -sb)."""
    seen, total = set(), 0
    for root, _, files in os.walk(folder):
        for name in files:
            try:
                st = os.lstat(os.path.join(root, name))
            except OSError:
                continue
            if (st.st_dev, st.st_ino) not in seen:
                seen.add((st.st_dev, st.st_ino))
                total += st.st_size
    return total


def size_text(n: float) -> str:
    for unit in ("B", "kB", "MB", "GB"):
        if n < 1000 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return ""


def _link_over(src: Path, dst: Path) -> bool:
    """Make `dst` a hard link to `src` (same bytes, checked by the caller); False where the file system has none."""
    tmp = dst.with_name(f".{dst.name}.link")
    try:
        tmp.unlink(missing_ok=True)
        os.link(src, tmp)
        os.replace(tmp, dst)
        return True
    except OSError:
        tmp.unlink(missing_ok=True)
        return False


def finish_run(output_dir: str, keep_optimizer_state: bool, dtype: str) -> str:
    """After the final save of a finished run, what a small run keeps on disk, and the line that says it.

    * Each checkpoint's optimizer.pt (Adam: twice the model's size) is removed, unless `keep_optimizer_state`: a
      finished run is not resumed (already_finished), and export and select_checkpoint read only the weights. The
      WEIGHTS_ONLY marker is written first, so a kill midway never leaves a checkpoint that looks torn. DeepSpeed and
      FSDP checkpoints (their own optimizer folders) are left as they are. A run that has not finished never gets
      here, so its checkpoints keep everything an exact resume needs.
    * The newest checkpoint holds the final weights again (the Trainer saves at the last step): each of its files
      identical to the one at the top of output_dir becomes a hard link to it, so the final model is on disk once.
    """
    import filecmp

    out = Path(output_dir)
    ckpts = sorted((c for c in out.glob("checkpoint-*") if c.is_dir() and c.name.split("-", 1)[1].isdigit()),
                   key=lambda c: int(c.name.split("-", 1)[1]))
    removed, emptied = 0, []
    for c in ckpts if not keep_optimizer_state else []:
        opt = c / "optimizer.pt"
        if not opt.is_file() or any(c.glob("global_step*")) or checkpoint_problem(c) is not None:
            continue
        (c / WEIGHTS_ONLY).write_text(WEIGHTS_ONLY_WHY + "\n", encoding="utf-8")
        removed += opt.stat().st_size
        opt.unlink()
        emptied.append(c.name)
    shared = []
    if ckpts:
        for f in sorted(ckpts[-1].iterdir()):
            top = out / f.name
            if (f.is_file() and not f.is_symlink() and top.is_file() and not top.samefile(f)
                    and f.stat().st_size == top.stat().st_size and filecmp.cmp(f, top, shallow=False)):
                if not _link_over(top, f):
                    break
                shared.append(f.name)
    weights = sum(p.stat().st_size for p in out.glob("*.safetensors"))
    line = f"wrote {out}: {size_text(disk_bytes(out))} on disk; final model {size_text(weights)} ({dtype})"
    if shared:
        line += f", shared with {ckpts[-1].name} (hard links)"
    if emptied:
        line += (f"; optimizer state removed from {', '.join(emptied)} ({size_text(removed)}): the run finished, "
                 "--keep_optimizer_state true keeps it")
    return line


def _saved(out: Path) -> bool:
    """The final model's weights are in output_dir (full model, sharded, or a PEFT adapter)."""
    return (out / "model.safetensors").is_file() or (out / "adapter_model.safetensors").is_file() or any(
        out.glob("model-*.safetensors"))


def final_state(out: Path) -> dict[str, Any] | None:
    """The trainer_state.json the recipes write at the top of output_dir after the final model (None when absent
    or unreadable: then the run did not finish)."""
    try:
        state = json.loads((out / "trainer_state.json").read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        return None
    return state if isinstance(state, dict) and isinstance(state.get("global_step"), int) else None


def save_tase_config(output_dir: str, **parts: Any) -> None:
    """Record the resolved configuration next to the checkpoints (read by export.py's model card)."""
    os.makedirs(output_dir, exist_ok=True)
    out = {}
    for k, v in parts.items():
        out[k] = v if isinstance(v, dict) else (v.to_dict() if hasattr(v, "to_dict") else asdict(v))
    with open(os.path.join(output_dir, "tase_config.json"), "w", encoding="utf-8") as f:
        json.dump(out, f, indent=2, default=str)
