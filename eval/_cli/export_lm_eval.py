"""`python -m eval export-lm-eval`: write an lm-evaluation-harness task folder scoring with rewards."""
from __future__ import annotations

import argparse

from .common import pos_int


def register(sub: argparse._SubParsersAction, fmt: type) -> None:
    e = sub.add_parser("export-lm-eval", formatter_class=fmt,
                       help="write an lm-evaluation-harness task folder scoring with rewards",
                       description="One lm-eval task per benchmark file (rows under OUT/data/, paths relative: "
                                   "the folder can be moved), a group per task and the group 'tase' whose metric "
                                   "`overall` is results.json's overall (mean of the ten task scores) and whose "
                                   "en/zh/ko are by_lang. utils.py scores with rewards.score, so install tase-grpo "
                                   "where lm-eval runs. Run: lm_eval run --model hf --model_args pretrained=MODEL "
                                   "--include_path OUT --tasks tase --apply_chat_template (the flag makes the "
                                   "prompts byte-identical to eval run's; the system prompt is in the tasks, "
                                   "so pass no --system_instruction).")
    e.add_argument("--data", required=True)
    e.add_argument("--out", required=True, help="a new or empty folder (an earlier export with --force)")
    e.add_argument("--force", action="store_true",
                   help="replace an earlier export at --out (never a folder holding the data, a run, or the "
                        "current directory)")
    e.add_argument("--max-new-tokens", type=pos_int, default=1024, help="max_gen_toks (default 1024)")
    e.add_argument("--limit", type=pos_int, default=None,
                   help="export at most N rows per file, evenly spread: the rows `eval run --limit N` takes "
                        "(lm_eval's own --limit takes each file's first N)")
    e.set_defaults(execute=execute)


def execute(args: argparse.Namespace) -> int:
    from ..lm_eval_export import INSTALL_HINT, export

    names = export(args.data, args.out, args.max_new_tokens, args.limit, force=args.force)
    print(f"wrote {len(names['files'])} lm-eval file tasks, groups {', '.join(names['tasks'])} and tase "
          f"to {args.out}")
    print(f"run: lm_eval run --model hf --model_args pretrained=MODEL --include_path {args.out} --tasks tase "
          f"--apply_chat_template")
    print(f"the tase row's `overall` is results.json's overall, its {', '.join(names['langs'])} are by_lang "
          f"(0-1; the project reports percent); {INSTALL_HINT}")
    return 0
