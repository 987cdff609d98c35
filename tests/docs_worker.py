"""One interpreter that runs documented `python -m MODULE ...` and `python SCRIPT ...` commands one after another, for
tests/test_docs_commands.py: each as `python` would (warm_python.run_as_main: `__main__`, its own argv and sys.path[0];
working folder and environment restored after), its output taken at the file-descriptor level. A fresh interpreter
per command spent most of the doc test's time importing torch and transformers again.

Protocol: one JSON request per stdin line, {"argv": [...], "cwd": "..."} (argv without the leading `python`); one
JSON reply per stdout line, {"code": int, "out": "..."}. The commands whose output must be free of library warnings
run in their own interpreter instead (a warning shown once per process would hide in a shared one)."""
from __future__ import annotations

import json
import os
import sys
import tempfile
import traceback

from warm_python import run_as_main  # this file's folder is sys.path[0]


def run_one(argv: list[str], cwd: str) -> tuple[int, str]:
    env, path, old_argv, here = dict(os.environ), list(sys.path), sys.argv, os.getcwd()
    os.chdir(cwd)
    with tempfile.TemporaryFile() as cap:
        sys.stdout.flush()
        sys.stderr.flush()
        saved = os.dup(1), os.dup(2)
        os.dup2(cap.fileno(), 1)
        os.dup2(cap.fileno(), 2)
        code: object = 0
        try:
            run_as_main(argv)
        except SystemExit as e:
            code = e.code
        except BaseException:  # noqa: BLE001 - what the interpreter would print, exit 1
            traceback.print_exc()
            code = 1
        finally:
            if isinstance(code, str):  # sys.exit("message"): printed, exit 1
                print(code, file=sys.stderr)
                code = 1
            sys.stdout.flush()
            sys.stderr.flush()
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            os.close(saved[0])
            os.close(saved[1])
            sys.argv, sys.path[:] = old_argv, path
            os.environ.clear()
            os.environ.update(env)
            os.chdir(here)
        cap.seek(0)
        out = cap.read().decode("utf-8", errors="replace")
    return int(code or 0), out


def serve() -> None:
    reply = os.fdopen(os.dup(1), "w", encoding="utf-8")
    for line in sys.stdin:
        req = json.loads(line)
        code, out = run_one(req["argv"], req["cwd"])
        reply.write(json.dumps({"code": code, "out": out}) + "\n")
        reply.flush()


if __name__ == "__main__":
    serve()
