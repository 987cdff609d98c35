"""python -m synth: stream generated TASE-style examples to a JSON-lines file."""
from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import os
import sys
import tempfile
from collections.abc import Iterable
from pathlib import Path

from common.errors import TaseError, one_line
from common.languages import codes
from common.paths import blocker_line, file_refusal, followed, hold_output, jsonl_with_keys, leftovers, os_error_line
from common.record import TASKS

from .core import TEXT_SOURCES, SynthError, available, combos, generate
from .guard import guard_from_specs
from .mixture import load_mixture  # noqa: F401  (also importable from here, as before)
from .rows import FORMATS, conversational_row


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m synth",
        description="Generate typed token-awareness examples (one JSON object per line). With several "
        "tasks/languages, N examples in total are interleaved round-robin over the task x language x "
        "subtask cells (or drawn with --mixture weights). Same seed, same bytes. "
        "`python -m synth stats --official DIR` compares generated and official length distributions.",
    )
    p.add_argument("--task", default="all", help=f"all or one of: {', '.join(TASKS)}")
    p.add_argument("--lang", default="all", help=f"all or one of: {', '.join(codes())}")
    p.add_argument("--subtask", default=None, help="restrict to one subtask (e.g. count, generate, split, combine)")
    p.add_argument("-n", "--n", type=int, required=True, help="number of examples to write")
    p.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    p.add_argument("--out", default="-", help="output .jsonl file ('-' = stdout); an existing file is "
                   "replaced only when synth wrote it, never inside another command's output but a proof's (its "
                   "held-out sets)")
    p.add_argument("--paraphrase", action="store_true", help="draw prompt wording from paraphrased templates")
    p.add_argument("--max-len", type=int, default=None, help="cap sequence lengths (tokens) for shorter prompts")
    p.add_argument("--harder", action="store_true", help="rows beyond the official files' range (longer words, "
                   "more pieces, more digits: each task's `harder` fields), a transfer test set; a task without "
                   "them is refused")
    p.add_argument(
        "--text-source",
        default="real",
        metavar="real|unigram",
        help="awareness tasks: real running text built like the official files (default) or the "
        "frequency-weighted unigram sample (ablation)",
    )
    p.add_argument("--mixture", default=None, help="YAML file with per-task mixing weights (task: weight)")
    p.add_argument(
        "--exclude",
        action="append",
        default=[],
        metavar="official:DIR|FILE.jsonl",
        help="drop examples whose normalised prompt matches one of this benchmark's prompts, or that share a "
        "13-token n-gram (words/characters/syllables) with one (repeatable; drops are reported by reason)",
    )
    p.add_argument(
        "--exclude-exact",
        action="append",
        default=[],
        metavar="official:DIR|FILE.jsonl",
        help="drop examples whose normalised prompt matches one of these prompts (exact only, no n-gram rule: "
        "a held-out split against generated training sets; repeatable)",
    )
    p.add_argument("--format", default="records", choices=FORMATS,
                   help="records (default: the record layout every command reads) or conversational: one GRPO "
                   "training row per line, `prompt` the chat the recipes train on (system prompt + user turn) beside "
                   "the columns the rewards read, for TRL's own `trl grpo --dataset_name DIR` (docs/training.md)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    return p


def check_out(out: Path) -> None:
    """Refuse, before generating anything, an --out that cannot be written: a folder, a path under a
    file, or a place without write permission."""
    why = blocker_line(out, "--out")
    if why:
        raise SynthError(why)
    if out.is_dir():
        raise SynthError(f"--out {out} is a folder")


def write_atomic(out: Path, stream: Iterable[dict]) -> None:
    """Write JSON lines to a hidden temp file beside `out`, fsync it and rename it over `out` only when
    the whole stream is written: a failed or killed run leaves the previous file byte for byte."""
    parent = out.parent
    parent.mkdir(parents=True, exist_ok=True)
    for stale in leftovers(out, "tmp"):  # the caller holds out's lock: only a killed run left these
        stale.unlink(missing_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{out.name}.tmp-", dir=parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as f:
            for rec in stream:
                f.write(json.dumps(rec, ensure_ascii=False) + "\n")
            f.flush()
            os.fsync(f.fileno())
        mode = out.stat().st_mode & 0o777 if out.exists() else 0o666 & ~_umask()
        os.chmod(tmp, mode)  # mkstemp makes 0600; keep the old file's mode, or the usual one
        os.replace(tmp, out)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _counted(stream: Iterable[dict], count: list[int]) -> Iterable[dict]:
    """The stream unchanged, counting its records into count[0] (a used-up generator writes fewer than -n)."""
    for rec in stream:
        count[0] += 1
        yield rec


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["stats"]:
        from .stats import main as stats_main

        return stats_main(argv[1:])
    args = build_parser().parse_args(argv)
    stack = contextlib.ExitStack()
    try:
        if args.n < 0:
            raise SynthError(f"-n must be >= 0, got {args.n}")
        if args.max_len is not None and args.max_len < 1:
            raise SynthError(f"--max-len must be >= 1 (tokens), got {args.max_len}")
        available()
        cells = combos(args.task, args.lang, args.subtask)  # validate before opening the output
        if args.harder:
            from .core import check_harder

            check_harder(cells)
        if args.text_source not in TEXT_SOURCES:
            raise SynthError(f"unknown text source {args.text_source!r}; choose from: {', '.join(TEXT_SOURCES)}")
        if args.out != "-":
            check_out(Path(args.out))
            inputs = [args.mixture, *(s.removeprefix("official:") for s in args.exclude + args.exclude_exact)]
            for i in filter(None, inputs):
                if Path(i).exists() and Path(i).resolve() == Path(args.out).resolve():
                    raise SynthError(f"--out {args.out} is an input of this command ({i}); write elsewhere")
            # the one rule for every output (common/paths.py): replace only an earlier synth file (records),
            # never a file of the user's own or a file inside another command's output but a proof's (its held-out
            # sets, OUT/heldout.jsonl and the like, are written by this command into the proof's marked folder)
            why = file_refusal(Path(args.out), "synth", own=lambda f: jsonl_with_keys(f, ("id", "task", "prompt")),
                               inside=("proof",))
            if why:
                raise SynthError(f"--out {why}; write elsewhere")
            # one writer per file, before any work; the temp files of killed runs are then surely stale
            stack.enter_context(hold_output(args.out))
        weights = load_mixture(args.mixture) if args.mixture else None
        from common.readers import DataError

        try:
            guard = guard_from_specs(args.exclude, args.exclude_exact)
        except DataError as e:
            raise SynthError(str(e)) from None
        stats: dict[str, int] = {}
        stream = generate(
            args.task, args.lang, sys.maxsize if guard else args.n, args.seed, args.subtask,
            paraphrase=args.paraphrase, weights=weights, max_len=args.max_len, text_source=args.text_source,
            stats=stats, harder=args.harder,
        )
        if guard:
            stream = itertools.islice(guard.filter(stream), args.n)
        written = [0]
        stream = _counted(stream, written)
        if args.format == "conversational":
            stream = map(conversational_row, stream)
        first = list(itertools.islice(stream, 1))  # bad options (mixture names, ...) fail here, before any output
        stream = itertools.chain(first, stream)
        if args.out == "-":
            for rec in stream:
                sys.stdout.write(json.dumps(rec, ensure_ascii=False) + "\n")
        else:
            if not args.no_progress:
                from tqdm import tqdm

                stream = tqdm(stream, total=args.n, unit="ex", desc="synth", file=sys.stderr)
            write_atomic(followed(args.out), stream)  # a symlinked --out: its target is replaced, the link stays
        if guard:
            print(guard.report(), file=sys.stderr)
        if stats["repeats"]:
            print(f"synth: skipped {stats['repeats']} generated examples whose prompt the stream had already given "
                  "(prompts are distinct within a seed stream)", file=sys.stderr)
        if written[0] < args.n:
            print(f"synth: wrote {written[0]} of the {args.n} examples asked for: the generator has no more "
                  "distinct prompts" + (" that pass the guard" if guard else ""), file=sys.stderr)
    except TaseError as e:  # SynthError, OutputBusy, DataError, ...: one line, exit 2
        return one_line(e)
    except OSError as e:
        print(f"error: cannot write {args.out}: {os_error_line(e)}", file=sys.stderr)
        return 2
    finally:
        stack.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
