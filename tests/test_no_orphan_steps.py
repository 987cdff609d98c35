"""A pipeline step dies with its pipeline (issue 36, orphans): `kill -9` of `make proof` / the demo / the ablation
driver used to leave its running step (an `eval run`, a training) alive, holding its output's lock against the
rerun. recipes/steps/pipeline.py starts each step with common.process.die_with_parent (PR_SET_PDEATHSIG)."""
from __future__ import annotations

import signal
import subprocess
import sys
import time

from tests.conftest import ROOT

DRIVER = ("import sys; from pathlib import Path; from recipes.steps.pipeline import Steps\n"
          "Steps('t', 1, Path('.'), log_dir=Path(sys.argv[2]) if sys.argv[2] != '-' else None)"
          "(1, 'sleep', [sys.executable, '-c', 'import time; time.sleep(120)', sys.argv[1]])\n")


def _step_dies_with_driver(tmp_path, log_dir: str) -> None:
    import psutil

    mark = str(tmp_path / "mark")  # names the step's process
    driver = subprocess.Popen([sys.executable, "-c", DRIVER, mark, log_dir], cwd=ROOT, stdout=subprocess.DEVNULL)
    step = None
    try:
        deadline = time.monotonic() + 60
        while step is None and time.monotonic() < deadline:
            step = next((p for p in psutil.Process(driver.pid).children() if mark in " ".join(p.cmdline())), None)
            time.sleep(0.05)
        assert step is not None, "the step never started"
        driver.send_signal(signal.SIGKILL)
        driver.wait(10)
        try:
            step.wait(5)  # killed by the kernel once its parent is gone (and reaped by init, or a zombie)
        except psutil.TimeoutExpired:
            assert step.status() == psutil.STATUS_ZOMBIE, "the step outlived its pipeline"
    finally:
        if step is not None and step.is_running() and step.status() != psutil.STATUS_ZOMBIE:
            step.kill()


def test_kill_9_of_a_pipeline_kills_its_step(tmp_path):
    _step_dies_with_driver(tmp_path, "-")


def test_kill_9_of_a_pipeline_with_filtered_logs_kills_its_step(tmp_path):
    _step_dies_with_driver(tmp_path, str(tmp_path / "logs"))


SPAWNER = ("import multiprocessing as mp, runpy, sys\n"
           "from common.process import spawned_children_die_with_me\n"
           "spawned_children_die_with_me()\n"
           "p = mp.get_context('spawn').Process(target=runpy.run_path, args=(sys.argv[1],)); p.start(); p.join()\n")
CHILD = ("import multiprocessing as mp, time\n"  # as vLLM's EngineCore starts its Worker: spawn again
         "p = mp.get_context('spawn').Process(target=time.sleep, args=(120,)); p.start(); p.join()\n")


def test_spawned_children_and_grandchildren_die_with_their_parent(tmp_path):
    """The mechanism under `python -m eval` (tests/test_vllm_orphans.py has the real vLLM engine, slow): a
    process spawned through multiprocessing, and the one it spawns in turn, die on kill -9 of the first parent.
    Neither watches its parent by itself (time.sleep), so only PR_SET_PDEATHSIG can end them."""
    import psutil

    child = tmp_path / "child.py"
    child.write_text(CHILD)
    driver = subprocess.Popen([sys.executable, "-c", SPAWNER, str(child)], cwd=ROOT)
    kids: list = []
    try:
        deadline = time.monotonic() + 60
        while len(kids) < 2 and time.monotonic() < deadline:
            kids = [k for k in psutil.Process(driver.pid).children(recursive=True)
                    if any("spawn_main" in a for a in k.cmdline())]
            time.sleep(0.05)
        assert len(kids) == 2, kids
        driver.send_signal(signal.SIGKILL)
        driver.wait(10)
        gone, alive = psutil.wait_procs(kids, timeout=5)
        assert not [k for k in alive if k.status() != psutil.STATUS_ZOMBIE], "a spawned process outlived its parent"
    finally:
        for k in kids:
            try:
                k.kill()
            except psutil.Error:
                pass
