"""python -m eval {run,score,compare,export-lm-eval,gold,tokstats,robustness,plot-training}: the one evaluator for
base and tuned models. Prompts and scoring are those of the official TASE runner (system prompt asking for
<answer></answer>, verdicts from `rewards.score`); tables are aggregated as the official release does."""
from __future__ import annotations

import argparse
import contextlib
import sys

from ._cli import SUBCOMMANDS
from ._cli.robustness import PERTURBATION_KINDS  # noqa: F401  (importable from here, as before)

EPILOG = """examples:
  python -m eval run --model default --data official:/path/to/Tase --out runs/eval/base --limit 100
  python -m eval run --model runs/export --data data/test.jsonl --backend vllm --out runs/eval/tuned
  python -m eval run --backend openai --base-url https://api.openai.com/v1 --model-name gpt-4.1-mini
      --data official:/path/to/Tase --out runs/eval/api --limit 100      (key from $OPENAI_API_KEY)
  python -m eval score --data official:/path/to/Tase --predictions preds.jsonl --out runs/eval/api
  python -m eval compare runs/eval/base runs/eval/tuned --out runs/eval/cmp
  python -m eval export-lm-eval --data official:/path/to/Tase --out lm_eval_tasks
  python -m eval robustness run --model runs/export --data official:/path/to/Tase --limit 50 --out runs/rob/tuned
  python -m eval robustness report runs/rob/base runs/rob/tuned --out runs/rob/cmp
  python -m eval plot-training runs/proof/coarse runs/proof/fine --out runs/proof/training.png
Bad input (unknown model, unreadable data, unknown prediction ids, a broken vllm install, no API key for
a remote --base-url) prints one line starting with "error:" and exits 2. See docs/evaluation.md."""


class OneLineParser(argparse.ArgumentParser):
    """argparse with its errors in one line ("error: python -m eval run: argument --top-p: ..."), exit 2,
    instead of the usage text: the project's rule for bad input. Subcommand parsers inherit it."""

    def error(self, message: str) -> None:  # type: ignore[override]
        print(f"error: {self.prog}: {message} (see --help)", file=sys.stderr)
        raise SystemExit(2)


def build_parser() -> argparse.ArgumentParser:
    fmt = argparse.HelpFormatter
    p = OneLineParser(prog="python -m eval", description=__doc__, epilog=EPILOG,
                      formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--verbose", action="store_true",
                   help="library logs at INFO (vLLM's included); default: WARNING and above, plus progress bars "
                        "(also anywhere on the command line, or TASE_VERBOSE=1)")
    sub = p.add_subparsers(dest="cmd", required=True, metavar="COMMAND")
    for cmd in SUBCOMMANDS:
        cmd.register(sub, fmt)
    return p


def main(argv: list[str] | None = None) -> int:
    from common import process

    argv = sys.argv[1:] if argv is None else list(argv)
    verbose = "--verbose" in argv
    if verbose:
        argv.remove("--verbose")
    process.apply(verbose or None)  # before anything imports torch or vLLM (common/process.py)
    process.spawned_children_die_with_me()  # vLLM's engine processes end with this one, even after kill -9
    args = build_parser().parse_args(argv)
    from common.errors import TaseError, one_line
    from common.paths import hold_output, os_error_line

    try:
        out = getattr(args, "out", None)
        # quiet by default: the listed harmless lines of the libraries and of vLLM's engine processes are dropped
        with process.quiet_output(), hold_output(out) if out else contextlib.nullcontext():
            # one writer per output: a second command on the same --out stops at hold_output, naming the first
            return args.execute(args)
    except TaseError as e:  # every library refusal (DataError, RunError, OutputBusy, ...): one line, exit 2
        return one_line(e)
    except MemoryError:
        print("error: out of memory (a smaller --limit, --batch-size or --n-boot needs less)", file=sys.stderr)
        return 2
    except OSError as e:
        print(f"error: {os_error_line(e)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted; finished samples are saved, rerun the same command to resume", file=sys.stderr)
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
