"""Count the suite's checks, so "no fewer assertions than before" is a number and not an impression (issue 39).

    python bench/count_asserts.py                       # this tree: totals, then per file
    python bench/count_asserts.py --rev main            # the same counts for a commit (extracted with git archive)
    python bench/count_asserts.py --at-least main       # exit 1 if any total here is below that commit's
    python bench/count_asserts.py --json                # machine-readable
    python bench/count_asserts.py --no-collect          # the static counts only (no pytest run)

Counts, from the files under tests/ (every .py: test modules and the helper scripts the tests run, such as
tests/vllm_sync_check.py):
- tests: the test ids `pytest --collect-only -q` collects (every parametrized case counts; slow tests included);
- assert: `assert` statements (AST; an assert in a loop or a helper counts once, where it is written);
- raises: `pytest.raises(...)` and `pytest.warns(...)` calls (a `with` block or a call; also `raises` imported
  from pytest);
- fail: `pytest.fail(...)` calls (checks written as a branch that fails).
Static counts say how many checks are written, not how often they run; the collected count says how many tests
run. Both together are what a cut in test time must not lower. A file that does not parse is one line, exit 2.
"""
from __future__ import annotations

import argparse
import ast
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import NoReturn

ROOT = Path(__file__).resolve().parents[1]
KINDS = ("assert", "raises", "fail")


def die(msg: str) -> NoReturn:
    """Bad input or a failed step: one line on stderr, exit 2."""
    print(f"error: {msg}", file=sys.stderr)
    raise SystemExit(2)


def count_file(source: str, name: str) -> dict[str, int]:
    """The static counts of one Python file."""
    try:
        tree = ast.parse(source, filename=name)
    except SyntaxError as e:
        die(f"{name}: does not parse ({e.msg}, line {e.lineno})")
    from_pytest = {a.asname or a.name: a.name for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)
                   and node.module == "pytest" for a in node.names}
    out = dict.fromkeys(KINDS, 0)
    for node in ast.walk(tree):
        if isinstance(node, ast.Assert):
            out["assert"] += 1
        elif isinstance(node, ast.Call):
            f = node.func
            if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id == "pytest":
                called = f.attr
            elif isinstance(f, ast.Name) and f.id in from_pytest:
                called = from_pytest[f.id]
            else:
                continue
            if called in ("raises", "warns"):
                out["raises"] += 1
            elif called == "fail":
                out["fail"] += 1
    return out


def static_counts(root: Path) -> dict[str, dict[str, int]]:
    """Per file under root/tests (relative path -> counts)."""
    return {str(p.relative_to(root)): count_file(p.read_text(encoding="utf-8"), str(p.relative_to(root)))
            for p in sorted((root / "tests").rglob("*.py"))}


def collected(root: Path) -> int:
    """How many tests pytest collects in root (slow ones included)."""
    env = {**os.environ, "PYTHONPATH": str(root)}
    res = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", "tests"],
                         cwd=root, env=env, capture_output=True, text=True)
    m = re.search(r"^(\d+) tests? collected", res.stdout, re.M) or re.search(r"(\d+)(?: tests?)? collected",
                                                                           res.stdout)
    if res.returncode != 0 or not m:
        tail = (res.stdout + res.stderr).strip().splitlines()[-1:] or ["no output"]
        die(f"pytest --collect-only failed in {root} (exit {res.returncode}): {tail[0]}")
    return int(m.group(1))


def counts(root: Path, collect: bool) -> dict:
    per_file = static_counts(root)
    total = {k: sum(c[k] for c in per_file.values()) for k in KINDS}
    if collect:
        total = {"tests": collected(root), **total}
    return {"total": total, "files": per_file}


def at_rev(rev: str, collect: bool) -> dict:
    """The counts of a commit: its tree extracted into a temporary folder (git archive), counted there."""
    sha = subprocess.run(["git", "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}"], cwd=ROOT,
                         capture_output=True, text=True)
    if sha.returncode != 0:
        die(f"{rev}: not a commit in {ROOT}")
    with tempfile.TemporaryDirectory(prefix="count-asserts-") as tmp:
        archive = subprocess.run(["git", "archive", sha.stdout.strip()], cwd=ROOT, capture_output=True, check=True)
        subprocess.run(["tar", "-x", "-C", tmp], input=archive.stdout, check=True)
        out = counts(Path(tmp), collect)
    out["rev"] = sha.stdout.strip()
    return out


def show(label: str, c: dict) -> str:
    return f"{label}: " + ", ".join(f"{k} {v}" for k, v in c["total"].items())


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rev", help="count this commit instead of the working tree")
    ap.add_argument("--at-least", metavar="REV", help="exit 1 if a total here is below REV's")
    ap.add_argument("--no-collect", action="store_true", help="static counts only (no pytest --collect-only)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    collect = not args.no_collect
    here = at_rev(args.rev, collect) if args.rev else counts(ROOT, collect)
    base = at_rev(args.at_least, collect) if args.at_least else None
    if args.json:
        print(json.dumps({"counts": here, "at_least": base}, indent=1))
    else:
        print(show(args.rev or "working tree", here))
        if base:
            print(show(f"{args.at_least} ({base['rev'][:7]})", base))
        else:
            for f, c in here["files"].items():
                if any(c.values()):
                    print(f"  {f}: " + ", ".join(f"{k} {v}" for k, v in c.items()))
    if base:
        lower = [k for k, v in base["total"].items() if here["total"].get(k, 0) < v]
        if lower:
            print(f"fewer than {args.at_least}: " + ", ".join(lower), file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
