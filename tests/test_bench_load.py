"""bench/grpo_step.py says how busy the machine was (issue 65): each row measures the cores the other processes
used while it ran, and a "quiet" condition run beside other work is called loaded; and the benchmark makes the
entry points' process settings (OpenMP's passive waits) before torch loads, in itself and so in its children."""
from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import time

from conftest import ROOT

_spec = importlib.util.spec_from_file_location("grpo_step", ROOT / "bench" / "grpo_step.py")
grpo_step = importlib.util.module_from_spec(_spec)  # bench/ is no package: loaded from its file
_spec.loader.exec_module(grpo_step)


def test_a_spinning_process_beside_the_row_is_measured_and_the_row_not_called_quiet():
    spin = subprocess.Popen([sys.executable, "-c", "while True: pass"])  # not ours until waited: another process
    try:
        time.sleep(0.5)  # past its start-up
        with grpo_step.OtherLoad() as load:
            time.sleep(1.5)
    finally:
        spin.kill()
        spin.wait()
    assert load.cores is not None and load.cores >= grpo_step.QUIET_CORES, load.cores
    line = grpo_step.load_verdict("quiet", [0.0, load.cores])
    assert "NOT quiet" in line and "these timings are loaded" in line, line
    assert "NOT quiet" not in grpo_step.load_verdict("quiet", [0.0, 0.1])
    assert "could not be measured" in grpo_step.load_verdict("quiet", [])


def test_the_benchmark_sets_passive_waits_before_torch():
    code = ("import os, runpy, sys; sys.argv = ['grpo_step.py', '--steps', '1']\n"
            "try:\n    runpy.run_path(sys.argv[0] and {!r}, run_name='__main__')\n"
            "except SystemExit:\n    pass\n"
            "print(os.environ.get('OMP_WAIT_POLICY'), 'torch' in "
            "sys.modules)").format(str(ROOT / "bench" / "grpo_step.py"))
    env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert out.stdout.split() == ["PASSIVE", "False"], out.stdout + out.stderr
    assert "--steps must be >= 2" in out.stderr  # it stopped at the argument check, after the settings
