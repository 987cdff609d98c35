"""bench/gpu_proof.sh (issue 49's GPU run): its CPU-side checks. The GPU runs themselves are recorded in
docs/results/en_combine_proof_h100 and docs/results/digital_proof_h200; here, bad input is one line and exit 2, before
anything is written."""
from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from conftest import run_shellcheck

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "bench" / "gpu_proof.sh"


def sh(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(SCRIPT), *args], capture_output=True, text=True, cwd=cwd, timeout=60)


def test_shellcheck_clean():
    res = run_shellcheck(str(SCRIPT))
    assert res.returncode == 0, res.stdout


def test_help_names_every_mode_and_the_config():
    res = sh("--help")
    assert res.returncode == 0 and res.stderr == ""
    for word in ("--prepare", "--call 1", "--call 3", "--resume", "--rehearse", "--budget", "proof_combine_gpu.yaml"):
        assert word in res.stdout
    assert (ROOT / "recipes" / "configs" / "proof_combine_gpu.yaml").is_file()


@pytest.mark.parametrize("args, message", [
    ((), "error: give --prepare, --call N, --resume or --rehearse"),
    (("--call", "4"), "error: --call needs 1, 2 or 3"),
    (("--budget", "soon", "--resume"), "error: --budget needs a whole number of seconds"),
    (("--prepare", "--resume"), "error: give one mode"),
    (("--frobnicate",), "error: unknown argument '--frobnicate'"),
    (("--config", "recipes/configs/proof_digital_gpu.yaml", "--resume"), "error: --config goes with --prepare"),
])
def test_bad_arguments_are_one_line_and_exit_2(args, message):
    res = sh(*args)
    assert res.returncode == 2 and res.stdout == ""
    assert res.stderr.startswith(message) and res.stderr.count("\n") == 1


def test_prepare_refuses_a_folder_that_is_not_the_release(tmp_path):
    res = sh("--prepare", "--official", str(tmp_path))
    assert res.returncode == 2 and res.stderr.count("\n") == 1
    assert "no tasks/token_structure/component_split/en_combine.csv" in res.stderr


def test_a_call_whose_folder_was_not_carried_says_so(tmp_path):
    """A copy of the script in an empty checkout: call 2 without its carried folder stops before copying."""
    (tmp_path / "bench").mkdir()
    (tmp_path / "bench" / "gpu_proof.sh").write_text(SCRIPT.read_text())
    res = subprocess.run(["bash", "bench/gpu_proof.sh", "--call", "2"], capture_output=True, text=True, cwd=tmp_path)
    assert res.returncode == 2 and res.stderr.count("\n") == 1
    assert "runs/gpu_proof/prep/call2 was not carried" in res.stderr
    assert not (tmp_path / "runs").exists()


def test_resume_without_the_parts_names_the_missing_call(tmp_path):
    (tmp_path / "bench").mkdir()
    (tmp_path / "bench" / "gpu_proof.sh").write_text(SCRIPT.read_text())
    res = subprocess.run(["bash", "bench/gpu_proof.sh", "--resume"], capture_output=True, text=True, cwd=tmp_path,
                         env={"PATH": "/usr/bin:/bin", "OUT": str(tmp_path / "out")})
    assert res.returncode == 2 and res.stderr.count("\n") == 1
    assert "gguf.part1 is missing: call 1 did not run on this machine" in res.stderr


def test_prepare_takes_the_config_s_one_file(tmp_path):
    """--config names the file the release must hold (the digital config's, not en_combine's); a config with
    two files, or none, is refused in one line."""
    res = sh("--prepare", "--official", str(tmp_path), "--config", "recipes/configs/proof_digital_gpu.yaml")
    assert res.returncode == 2 and res.stderr.count("\n") == 1
    assert "no tasks/token_structure/variant_normalize/digital.csv" in res.stderr
    two = tmp_path / "two.yaml"
    two.write_text("out: runs/x\nfiles:\n  - a/b/c.csv\n  - a/b/d.csv\nsft:\n  config: x\n")
    res = sh("--prepare", "--official", str(tmp_path), "--config", str(two))
    assert res.returncode == 2 and res.stderr.count("\n") == 1
    assert "needs an out: and exactly one file under files:" in res.stderr
    res = sh("--prepare", "--config", str(tmp_path / "missing.yaml"))
    assert res.returncode == 2 and res.stderr == f"error: no proof config {tmp_path / 'missing.yaml'}\n"
