"""The launchers (launch/) build commands as bash arrays, never through `eval` (issue 36): a model, config path or
recipe option with spaces, quotes, `;` or `$(...)` reaches the program as the one argument it was, and `--dry-run`
prints each command shell-quoted, so that pasting a printed line runs exactly that argv. The programs the launchers
start (srun, sbatch, scontrol, python, vllm, trl) are replaced on PATH by tiny scripts that record the argv they got;
what is under test is the launchers' own bash. All bash, no Python start-up: about a second in all."""
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.conftest import ROOT, run_shellcheck

RECORD = 'printf "%s\\0" "$@" > "$REC/$(basename "$0").$(date +%s%N).$$"\n'
SHIMS = {
    # the vLLM-port / main-port probes print a port; the CUDA probes (python -c '...torch.cuda...') say yes (8 GPUs);
    # a trainer waits (up to 5 s) until $WAIT_FOR (PROG:N) holds, N calls of PROG were recorded: the launcher
    # stops the server's background step when training ends, which could otherwise come before it recorded
    "python": RECORD + 'case "$*" in *socket*) echo 8001 ;; *device_count*) echo 8 ;; esac\n'
              'if [[ "$*" == *accelerate.commands.launch* && -n "${WAIT_FOR:-}" ]]; then\n'
              '  for _ in {1..50}; do\n'
              '    (( $(find "$REC" -name "${WAIT_FOR%:*}.*" | wc -l) >= ${WAIT_FOR#*:} )) && break; sleep 0.1\n'
              '  done\n'
              'fi\n',
    "vllm": RECORD, "trl": RECORD, "sbatch": RECORD,
    # srun runs its command as one task of rank 0 (SLURM_PROCID), after its own --options
    "srun": RECORD + 'while [[ "$1" == --* ]]; do shift; done\nSLURM_PROCID=0 exec "$@"\n',
    "scontrol": 'if [[ "$2" == hostnames ]]; then printf "node%s\\n" 0 1 2; else echo "NodeName=$3 '
                'NodeAddr=10.0.0.${3#node}"; fi\n',
}


@pytest.fixture
def shim(tmp_path):
    """A bin folder of recording shims first on PATH, a record folder, and an environment that uses them."""
    bin_, rec = tmp_path / "bin", tmp_path / "rec"
    bin_.mkdir(), rec.mkdir()
    for name, body in SHIMS.items():
        (bin_ / name).write_text("#!/usr/bin/env bash\n" + body)
        (bin_ / name).chmod(0o755)
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
    env.update(PATH=f"{bin_}:{env['PATH']}", REC=str(rec), PYTHON=str(bin_ / "python"))
    return env, rec


def calls(rec: Path, prog: str) -> list[list[str]]:
    """Every recorded argv of PROG, in call order."""
    files = sorted(rec.glob(f"{prog}.*"), key=lambda p: int(p.name.split(".")[1]))
    return [p.read_text().split("\0")[:-1] for p in files]


@pytest.fixture
def odd(tmp_path):
    """Values that a shell would split or run: a config path with a space, a model that is a command, options with
    quotes, `$(...)`, an empty string and a newline."""
    pwned = tmp_path / "pwned"
    cfg_dir = tmp_path / "my configs"
    cfg_dir.mkdir()
    cfg = cfg_dir / "it's a config.yaml"
    shutil.copy(ROOT / "recipes/configs/grpo_smollm2_zero3_cpu.yaml", cfg)
    model = f"x;touch {pwned};"
    extra = ["--output_dir", "runs/a b", "--run_name", "it's \"quoted\"", "--x", f"$(touch {pwned})", "--y", "",
             "--z", "line1\nline2", "--w", f"`touch {pwned}`;"]
    return dict(pwned=pwned, cfg=str(cfg), model=model, extra=extra)


def sbatch(args, env, timeout=60):
    return subprocess.run(["bash", "launch/slurm/grpo.sbatch", *args], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=timeout)


def after(argv: list[str], flag: str) -> str:
    return argv[argv.index(flag) + 1]


@pytest.mark.parametrize("plan", [["--cpu"], [], ["--async"]])
def test_sbatch_inside_a_job_passes_every_value_intact(shim, odd, plan):
    """Inside a job (SLURM_JOB_ID set): the server's and the trainers' srun get the values unchanged, the
    trainers' rank is the node's $SLURM_PROCID, nothing is executed from a value; the dry run prints the same
    commands, and each printed line, run by bash, gives the same argv."""
    env, rec = shim
    env = {**env, "SLURM_JOB_ID": "7", "SLURM_NNODES": "3", "SLURM_JOB_NODELIST": "node[0-2]",
           "SLURM_GPUS_PER_NODE": "gpu:8", "WAIT_FOR": "srun:3"}  # the port probe, the server, the trainers
    args = [*plan, "--config", odd["cfg"], "--model", odd["model"], "--", *odd["extra"]]
    res = sbatch(args, env)
    assert res.returncode == 0, res.stderr
    assert not odd["pwned"].exists()
    steps = [c for c in calls(rec, "srun") if not any("socket" in a for a in c)]  # not the port probe
    (server,) = [c for c in steps if "--nodelist=node2" in c]  # in the background: in either order
    (train,) = [c for c in steps if c is not server]
    served = {"--cpu": "-m", "": "vllm-serve", "--async": "serve"}["".join(plan)]
    assert served in server and server[2] == "--nodelist=node2"
    model_flag = "--model" if "--async" not in plan else "serve"
    assert after(server, model_flag) == odd["model"]
    assert train[train.index("-c") + 2:train.index("-c") + 3] == ["tase-train"]
    assert after(train, "--config") == odd["cfg"] and train[-len(odd["extra"]):] == odd["extra"]
    assert after(train, "--main_process_ip") == "10.0.0.0"
    # what the trainer's python finally got: rank from the node, the recipe's options unchanged
    launched = [c for c in calls(rec, "python") if "accelerate.commands.launch" in c]
    assert len(launched) == 1 and after(launched[0], "--machine_rank") == "0"
    assert after(launched[0], "--config") == odd["cfg"] and launched[0][-len(odd["extra"]):] == odd["extra"]

    env = {k: v for k, v in env.items() if k not in ("SLURM_JOB_ID", "WAIT_FOR")}
    dry = sbatch(["--dry-run", *args], env)
    assert dry.returncode == 0, dry.stderr
    lines = [line.removesuffix(" &") for line in dry.stdout.splitlines() if line.startswith("srun ")]
    assert len(lines) == 2
    for line in lines:
        for p in rec.iterdir():
            p.unlink()
        subprocess.run(["bash", "-c", line], env=env, check=True, timeout=30)
        (printed,) = calls(rec, "srun")
        if "--config" in printed:  # the trainers' line
            assert after(printed, "--config") == odd["cfg"] and printed[-len(odd["extra"]):] == odd["extra"]
            (got,) = [c for c in calls(rec, "python") if "accelerate.commands.launch" in c]
            assert got[-len(odd["extra"]):] == odd["extra"] and after(got, "--machine_rank") == "0"
        else:
            assert after(printed, model_flag) == odd["model"]
    assert not odd["pwned"].exists()


def test_sbatch_submits_itself_with_the_arguments_unchanged(shim, odd):
    env, rec = shim
    args = ["--cpu", "--config", odd["cfg"], "--model", odd["model"], "--", *odd["extra"]]
    res = sbatch(args, env)
    assert res.returncode == 0, res.stderr
    assert calls(rec, "sbatch") == [["launch/slurm/grpo.sbatch", *args]]
    assert not odd["pwned"].exists()


def test_local_sync_and_async_pass_every_value_intact(shim, odd):
    env, rec = shim
    cfg = odd["cfg"]
    res = subprocess.run(["bash", "launch/local.sh", "--gpus", "2", "--config", cfg, "--", *odd["extra"]], cwd=ROOT,
                         env=env, capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    (launch,) = [c for c in calls(rec, "python") if "accelerate.commands.launch" in c]
    assert after(launch, "--config") == cfg and launch[-len(odd["extra"]):] == odd["extra"]

    res = subprocess.run(["bash", "launch/local.sh", "--async", "--gpus", "3", "--vllm-gpus", "1", "--config", cfg,
                          "--", *odd["extra"]], cwd=ROOT, env={**env, "WAIT_FOR": "vllm:1"}, capture_output=True,
                         text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    (serve,) = calls(rec, "vllm")
    assert serve[:1] == ["serve"] and after(serve, "--weight-transfer-config") == '{"backend":"nccl"}'
    train = calls(rec, "python")[-1]
    assert after(train, "--config") == cfg and train[-len(odd["extra"]):] == odd["extra"]
    assert not odd["pwned"].exists()

    # the dry run's printed commands, run by bash, give the argv the real run gave
    dry = subprocess.run(["bash", "launch/local.sh", "--async", "--gpus", "3", "--vllm-gpus", "1", "--config", cfg,
                          "--dry-run", "--", *odd["extra"]], cwd=ROOT, env=env, capture_output=True, text=True,
                         timeout=60)
    assert dry.returncode == 0, dry.stderr
    line = next(line for line in dry.stdout.splitlines() if "accelerate.commands.launch" in line)
    for p in rec.iterdir():
        p.unlink()
    subprocess.run(["bash", "-c", line], cwd=ROOT, env=env, check=True, timeout=30)
    assert calls(rec, "python") == [train]
    assert not odd["pwned"].exists()


def test_cpu_launcher_passes_every_value_intact(shim, odd, tmp_path):
    env, rec = shim
    out = str(tmp_path / f"out dir;touch {odd['pwned']}")
    res = subprocess.run(["bash", "launch/cpu.sh", "--out", out, "--steps", "2", "--", *odd["extra"]], cwd=ROOT,
                         env=env, capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    sft, grpo, export = calls(rec, "python")
    assert after(sft, "--output_dir") == f"{out}/sft" and after(grpo, "--model_name_or_path") == f"{out}/sft"
    assert grpo[-len(odd["extra"]):] == odd["extra"] and export[1:4] == [f"{out}/grpo", "--out", f"{out}/export"]
    assert not odd["pwned"].exists()


def test_cpu_launcher_former_granularity_flag_is_one_deprecation_line(shim):
    """`launch/cpu.sh --granularity G` is now `--reward_granularity G` (one name for the reward's granularity): the
    former flag still sets it, with exactly one deprecation line on stderr (the recipes' own text), the new one none."""
    from recipes.shared.parser import deprecation_note

    env, rec = shim
    note = deprecation_note("granularity", "reward_granularity") + "\n"
    for argv, want, err in ((["--granularity", "coarse", "--granularity", "strict"], "strict", note),
                            (["--reward_granularity", "coarse"], "coarse", "")):
        for p in rec.iterdir():
            p.unlink()
        res = subprocess.run(["bash", "launch/cpu.sh", *argv], cwd=ROOT, env=env, capture_output=True, text=True,
                             timeout=60)
        assert res.returncode == 0 and res.stderr == err, res.stderr
        assert after(calls(rec, "python")[1], "--reward_granularity") == want


@pytest.mark.parametrize("script,flag,bad", [
    ("launch/local.sh", "--gpus", "0"), ("launch/local.sh", "--gpus", "two"), ("launch/local.sh", "--vllm-gpus", "0"),
    ("launch/local.sh", "--port", "80a"), ("launch/cpu.sh", "--steps", "0"), ("launch/cpu.sh", "--steps", "-3"),
    ("launch/slurm/grpo.sbatch", "--tp", "0"), ("launch/slurm/grpo.sbatch", "--nodes", "1"),
    ("launch/slurm/grpo.sbatch", "--dp", "x"), ("launch/slurm/grpo.sbatch", "--gpus-per-node", "0"),
])
def test_counts_that_are_not_whole_numbers_are_one_line(shim, script, flag, bad):
    """`launch/local.sh --gpus 0` ran accelerate with 0 processes: an AssertionError traceback."""
    env, rec = shim
    res = subprocess.run(["bash", script, flag, bad], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert res.returncode == 2 and res.stderr.count("\n") == 1 and flag in res.stderr, res.stderr
    assert not list(rec.iterdir())  # nothing started


def test_launchers_are_shellcheck_clean():
    res = run_shellcheck("-x", "launch/local.sh", "launch/cpu.sh", "launch/_options.sh", "launch/slurm/grpo.sbatch")
    assert res.returncode == 0, res.stdout
    assert not [p for p in (ROOT / "launch").rglob("*") if p.is_file() and "eval " in p.read_text()]


def test_local_without_the_gpus_is_one_line(tmp_path):
    """`launch/local.sh --gpus 8` on a machine without them: one line and exit 2 from the launcher, before any rank
    starts (the recipe's refusal in 8 ranks printed its line 8 times under torch.distributed's traceback)."""
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": ""}
    for extra in ([], ["--async"]):
        res = subprocess.run(["bash", "launch/local.sh", "--gpus", "8", *extra], cwd=ROOT, env=env,
                             capture_output=True, text=True, timeout=120)
        assert res.returncode == 2, res.stderr
        assert res.stderr.count("error:") == 1 and "needs 8 CUDA GPUs and 0 are visible" in res.stderr, res.stderr
        assert "Traceback" not in res.stderr and res.stdout == ""
