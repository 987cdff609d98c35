"""The warm interpreter the suite forks its CLI runs from (tests/warm_python.py): a forked run behaves as an exec'd
`python` would, for everything the suite's tests look at, and what it cannot show goes to a fresh interpreter."""
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest
import warm_python
from conftest import ROOT

SCRIPT = textwrap.dedent("""\
    import json, os, sys, tempfile
    print(json.dumps({"argv": sys.argv, "cwd": os.getcwd(), "path0": sys.path[0], "path1": sys.path[1],
                      "mark": os.environ.get("TASE_MARK"), "tmp": tempfile.gettempdir(), "pid": os.getpid(),
                      "torch": "torch" in sys.modules, "main": __name__, "stdin": sys.stdin.read(),
                      "frozen": __import__("gc").get_freeze_count()}))
    sys.stdout.flush()
    print("to stderr", file=sys.stderr)
    if len(sys.argv) > 1 and sys.argv[1] == "fail":
        raise ValueError("boom")
    if len(sys.argv) > 1 and sys.argv[1] == "exit":
        sys.exit("one line")
    if len(sys.argv) > 1 and sys.argv[1] == "sleep":
        import time
        time.sleep(60)
    sys.exit(int(sys.argv[1]) if len(sys.argv) > 1 and sys.argv[1].isdigit() else 0)
""")


@pytest.fixture
def script(tmp_path):
    p = tmp_path / "show.py"
    p.write_text(SCRIPT, encoding="utf-8")
    return p


def decisions(tmp_path, monkeypatch):
    log = tmp_path / "warm.jsonl"
    monkeypatch.setenv(warm_python.LOG_ENV, str(log))
    return log


def test_a_forked_run_is_the_script_with_its_own_argv_cwd_env_fds_and_exit_status(script, tmp_path, monkeypatch):
    import json

    assert subprocess.Popen is warm_python.WarmPopen  # the autouse fixture installed the client
    log = decisions(tmp_path, monkeypatch)
    env = {**os.environ, "TASE_MARK": "m1", "TMPDIR": str(tmp_path), "PYTHONPATH": str(tmp_path)}
    res = subprocess.run([sys.executable, str(script), "3"], cwd=tmp_path, env=env, input="hello", capture_output=True,
                         text=True, timeout=60)
    assert res.returncode == 3, res.stderr
    got = json.loads(res.stdout)
    assert got["argv"] == [str(script), "3"] and got["cwd"] == str(tmp_path) and got["main"] == "__main__"
    assert got["path0"] == str(tmp_path) and got["path1"] == str(tmp_path)  # script folder, then $PYTHONPATH
    assert got["mark"] == "m1" and got["tmp"] == str(tmp_path) and got["stdin"] == "hello"
    assert got["torch"] is True  # forked warm: torch came with the server (a fresh `python show.py` has none)
    assert got["frozen"] > 100_000  # and its heap, frozen: the run's collections skip it (warm_python.preload)
    assert got["pid"] != os.getpid() and res.stderr == "to stderr\n"
    assert [json.loads(line)["warm"] for line in log.read_text().splitlines()] == [True]

    # `-m`: sys.path[0] is the working folder, as for `python -m`
    res = subprocess.run([sys.executable, "-m", "show"], cwd=tmp_path, env=env, capture_output=True, text=True,
                         timeout=60)
    assert res.returncode == 0 and json.loads(res.stdout)["path0"] == str(tmp_path), res.stderr


def test_exceptions_sys_exit_and_signals_end_the_process_as_in_a_fresh_interpreter(script, tmp_path):
    res = subprocess.run([sys.executable, str(script), "fail"], capture_output=True, text=True, timeout=60)
    assert res.returncode == 1 and res.stderr.rstrip().endswith("ValueError: boom"), res.stderr
    res = subprocess.run([sys.executable, str(script), "exit"], capture_output=True, text=True, timeout=60)
    assert res.returncode == 1 and res.stderr.endswith("one line\n"), res.stderr
    proc = subprocess.Popen([sys.executable, str(script), "sleep"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)
    assert proc.stdout.readline().startswith("{")  # running
    assert proc.poll() is None
    with pytest.raises(subprocess.TimeoutExpired):
        proc.wait(timeout=0.5)
    assert os.getpgid(proc.pid) == proc.pid  # start_new_session
    os.killpg(proc.pid, signal.SIGTERM)
    assert proc.wait(timeout=30) == -signal.SIGTERM
    proc.stdout.close()
    proc.stderr.close()
    proc = subprocess.Popen([sys.executable, str(script), "sleep"], stdout=subprocess.DEVNULL)
    time.sleep(1)
    proc.kill()
    assert proc.wait(timeout=30) == -signal.SIGKILL


def test_what_a_fork_cannot_show_runs_fresh(script, tmp_path, monkeypatch):
    import json

    log = decisions(tmp_path, monkeypatch)
    # a variable a library reads at import (the hub's offline switch) differs from the server's: exec'd fresh
    res = subprocess.run([sys.executable, str(script)], env={**os.environ, "HF_HUB_OFFLINE": "0"},
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 0 and json.loads(res.stdout)["torch"] is False, res.stderr
    # interpreter options, `-c`, other programs: exec'd as before
    res = subprocess.run([sys.executable, "-c", "import sys; print('torch' in sys.modules)"], capture_output=True,
                         text=True, timeout=60)
    assert res.stdout == "False\n"
    assert subprocess.run(["true"]).returncode == 0
    whys = [json.loads(line)["why"] for line in log.read_text().splitlines()]
    assert whys == ["environment: HF_HUB_OFFLINE", "interpreter option -c", "not this python"], whys


@pytest.mark.fresh_python
def test_a_fresh_python_test_execs_every_run(script):
    import json

    assert subprocess.Popen is warm_python._RealPopen
    res = subprocess.run([sys.executable, str(script)], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert res.returncode == 0 and json.loads(res.stdout)["torch"] is False, res.stderr
