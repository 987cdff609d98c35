"""`python -m eval robustness {make,run,report}`: accuracy under answer-preserving perturbations."""
from __future__ import annotations

import argparse
from pathlib import Path

from ..perturb import KINDS
from . import run
from .common import add_generation_args, n_boot, pos_int

PERTURBATION_KINDS = tuple(KINDS)  # for the help text (eval.perturb reads the task registry only when used)


def register(sub: argparse._SubParsersAction, fmt: type) -> None:
    rb = sub.add_parser("robustness", formatter_class=fmt,
                        help="accuracy under answer-preserving perturbations (homoglyphs, typos, ...)",
                        description="TokSuite-style perturbations of benchmark prompts that keep the gold answer "
                                    "(see docs/robustness.md): `make` writes the data, `run` generates and scores "
                                    "it with one model, `report` compares models by relative accuracy drop.")
    rs = rb.add_subparsers(dest="rcmd", required=True, metavar="ACTION")

    def data_args(x: argparse.ArgumentParser) -> None:
        x.add_argument("--data", required=True, help="official:DIR or FILE.jsonl")
        x.add_argument("--kinds", default="all", help="comma-separated kinds or 'all' (default): "
                                                      + ", ".join(PERTURBATION_KINDS))
        x.add_argument("--rate", type=float, default=0.3,
                       help="share of perturbable words/2-character pieces changed per prompt (default 0.3; "
                            "at least one)")
        x.add_argument("--perturb-seed", type=int, default=0, help="seed of the perturbations (default 0)")
        x.add_argument("--limit", type=pos_int, default=None, help="at most N canonical rows per file, evenly spread")

    m = rs.add_parser("make", formatter_class=fmt, help="write the canonical + perturbed data set",
                      description="Write OUT/robustness_data.jsonl (canonical rows, plus `<id>@<kind>` copies "
                                  "for every row a kind can change) and OUT/manifest.json. Score it elsewhere with "
                                  "`python -m eval score --data OUT/robustness_data.jsonl ...`.")
    data_args(m)
    m.add_argument("--out", required=True)
    rr = rs.add_parser("run", formatter_class=fmt, help="make the data, generate, score and report for one model",
                       description="`make` into OUT, then `eval run` on it into OUT/run (resumable), then the "
                                   "report for this model into OUT.")
    rr.add_argument("--model", default="default", help="HF folder, .gguf file or 'default'")
    data_args(rr)
    rr.add_argument("--out", required=True)
    add_generation_args(rr)
    rp = rs.add_parser("report", formatter_class=fmt, help="relative drop per kind for several models",
                       description="Relative accuracy drop per kind with paired bootstrap intervals; models after "
                                   "the first also get their drop minus the first's. Writes OUT/robustness.md, "
                                   ".json and .png.")
    rp.add_argument("dirs", nargs="+", metavar="DIR", help="robustness folders (or eval folders scored on the data)")
    rp.add_argument("--out", required=True)
    rp.add_argument("--names", default=None, help="comma-separated display names (default: folder names)")
    rp.add_argument("--metric", choices=["coarse", "fine"], default="coarse")
    rp.add_argument("--n-boot", type=n_boot, default=1000)
    rp.add_argument("--seed", type=int, default=0, help="bootstrap seed (default 0)")
    rb.set_defaults(execute=execute)


def inner_run_args(args: argparse.Namespace, data: str, out: str) -> argparse.Namespace:
    """The `eval run` that `robustness run` keeps in OUT/run: `eval run`'s own defaults (read from its parser, so an
    option it gains is never missing here: every row, one greedy sample each), with this command's model and
    generation options, on the data just made."""
    parser = argparse.ArgumentParser(add_help=False)
    run.register(parser.add_subparsers(dest="cmd"), argparse.HelpFormatter)
    inner = parser.parse_args(["run", "--data", data, "--out", out])
    for key, value in vars(args).items():
        if key in vars(inner) and key not in ("data", "out", "limit", "execute", "cmd"):
            setattr(inner, key, value)
    return inner


def _mark(out: str | Path) -> None:
    """Mark OUT as this command's output (common/paths.py), listing the files it wrote there."""
    from common.paths import write_marker

    from .. import robustness as rob

    own = (rob.DATA, rob.MANIFEST, *(f"{rob.REPORT}.{x}" for x in ("md", "json", "png")))
    write_marker(Path(out), "robustness", sorted(p.name for p in Path(out).iterdir() if p.name in own))


def execute(args: argparse.Namespace) -> int:
    from common.paths import output_refusal

    from .. import robustness as rob

    # the one output rule (common/paths.py): never into another command's output at any depth; its own earlier
    # folder (and the `eval run` it keeps in OUT/run) and the user's own files beside it are fine
    why = output_refusal(Path(args.out), "robustness", replace=False)
    if why:
        raise rob.RobustnessError(f"--out {why}; write into another --out")
    if args.rcmd in ("make", "run"):
        man = rob.make_data(args.data, args.out, rob.parse_kinds(args.kinds), args.perturb_seed, args.rate,
                            args.limit)
        print(f"{man['n_canonical']} canonical rows; perturbed copies: "
              + ", ".join(f"{k} {v['n']}" for k, v in man["kinds"].items()))
        _mark(args.out)
        print(f"wrote {Path(args.out) / rob.DATA} and {rob.MANIFEST}")
        if args.rcmd == "make":
            return 0
        out = args.out
        run.execute(inner_run_args(args, data=str(Path(out) / rob.DATA), out=str(Path(out) / "run")))
        rep = rob.write_report([out], out, n_boot=1000, names=[Path(str(args.model)).name or "model"])
    else:
        names = [n.strip() for n in args.names.split(",")] if args.names else None
        if names and len(names) != len(args.dirs):
            raise rob.RobustnessError(f"--names gives {len(names)} names for {len(args.dirs)} folders")
        rep = rob.write_report(args.dirs, args.out, args.metric, args.n_boot, args.seed, names)
    _mark(args.out)
    print(rep["markdown"])
    print(f"wrote {Path(args.out) / (rob.REPORT + '.md')}, .json and .png")
    return 0
