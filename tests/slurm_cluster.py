"""A real SLURM cluster on one machine, for tests: munged, slurmctld and N slurmd (node0..node{N-1}), each node with
fake GPUs as GRES, all under one temp folder, stopped by PID.

    with LocalSlurm(tmp_path, nodes=3, gpus_per_node=8) as cluster:
        subprocess.run(["sbatch", "--wait", "job.sh"], env=cluster.env)

Needs root and Debian's `slurm-wlm` (22.05) and `munge`; `ensure_installed()` installs them with apt-get when they
are missing. Nothing is written outside the folder: `SLURM_CONF` points every SLURM command at the folder's
slurm.conf, and munged runs with its own key and socket there (`AuthInfo=socket=...`). Several slurmd on one host
are the Debian build's multiple-slurmd support (`NodeName=nodeK NodeAddr=127.0.0.1 Port=P_K`, `slurmd -N nodeK`);
the fake GPUs are character devices (`mknod fakegpuK c 1 3`, /dev/null's numbers) listed in gres.conf, so
`--gpus-per-node=G` is accepted and jobs see `CUDA_VISIBLE_DEVICES`. Every daemon runs in the foreground as a
child of this process, so `stop()` ends exactly the processes it started. `MinJobAge=5` keeps `sbatch --wait`
polling every 2 s: it backs off 2 -> 8 -> 32 s while its interval is under MinJobAge / 2 (src/sbatch/sbatch.c,
`_job_wait`), so with the default 300 it saw a finished job up to 32 s late; 5 s still outlasts one 2 s poll.
"""
from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

PACKAGES = {"slurmctld": "slurm-wlm", "slurmd": "slurm-wlm", "sbatch": "slurm-wlm", "munged": "munge"}


def ensure_installed() -> str | None:
    """Install slurm-wlm and munge with apt-get when missing; returns why it cannot (not root, apt failed)."""
    missing = sorted({pkg for exe, pkg in PACKAGES.items() if shutil.which(exe) is None
                      and not Path("/usr/sbin", exe).exists()})
    if not missing:
        return None
    if os.geteuid() != 0:
        return f"needs {' '.join(missing)} (apt-get install as root)"
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    cmd = ["apt-get", "install", "-y", "-q", "--no-install-recommends", *missing]
    if subprocess.run(cmd, env=env, capture_output=True).returncode != 0:
        subprocess.run(["apt-get", "update", "-q"], env=env, capture_output=True)
        res = subprocess.run(cmd, env=env, capture_output=True, text=True)
        if res.returncode != 0:
            return f"apt-get install {' '.join(missing)} failed: {res.stderr.strip().splitlines()[-1:]}"
    return None


def free_ports(n: int) -> list[int]:
    socks = []
    try:
        for _ in range(n):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def _exe(name: str) -> str:
    return shutil.which(name) or str(Path("/usr/sbin", name))


class LocalSlurm:
    """munged + slurmctld + `nodes` slurmd with `gpus_per_node` fake GPUs each, under `root`."""

    def __init__(self, root: Path, nodes: int = 3, gpus_per_node: int = 8, cpus: int = 2):
        self.root, self.nodes, self.gpus, self.cpus = Path(root), nodes, gpus_per_node, cpus
        self.procs: list[subprocess.Popen] = []
        self.conf = self.root / "slurm.conf"
        self.env = {**os.environ, "SLURM_CONF": str(self.conf)}

    # ------------------------------------------------------------------------------------------------ set-up
    def _write(self) -> None:
        r = self.root
        for d in ("state", "spool", "log", "dev", "munge"):
            (r / d).mkdir(parents=True, exist_ok=True)
        os.chmod(r / "munge", 0o700)
        for g in range(self.gpus):
            dev = r / "dev" / f"fakegpu{g}"
            if not dev.exists():
                os.mknod(dev, 0o666 | 0o020000, os.makedev(1, 3))  # a character device with /dev/null's numbers
        ctld, *node_ports = free_ports(1 + self.nodes)
        self.ctld_port = ctld
        nodes = "\n".join(
            f"NodeName=node{k} NodeAddr=127.0.0.1 NodeHostname={socket.gethostname()} Port={p} CPUs={self.cpus} "
            f"RealMemory=2000 Gres=gpu:{self.gpus} State=UNKNOWN" for k, p in enumerate(node_ports))
        self.conf.write_text(f"""\
ClusterName=tase
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort={ctld}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={r}/munge/munge.socket
StateSaveLocation={r}/state
SlurmdSpoolDir={r}/spool/%n
SlurmctldPidFile={r}/slurmctld.pid
SlurmdPidFile={r}/slurmd-%n.pid
SlurmctldLogFile={r}/log/slurmctld.log
SlurmdLogFile={r}/log/slurmd-%n.log
SlurmdParameters=config_overrides
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
GresTypes=gpu
ReturnToService=2
JobCompType=jobcomp/none
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
SlurmctldTimeout=30
SlurmdTimeout=30
InactiveLimit=0
KillWait=5
MinJobAge=5
{nodes}
PartitionName=main Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=EXCLUSIVE
""")
        (self.root / "gres.conf").write_text(
            f"NodeName=node[0-{self.nodes - 1}] Name=gpu File={r}/dev/fakegpu[0-{self.gpus - 1}]\n")
        key = r / "munge" / "munge.key"
        if not key.exists():
            key.write_bytes(os.urandom(128))
            os.chmod(key, 0o600)

    def _spawn(self, name: str, cmd: list[str]) -> None:
        log = open(self.root / "log" / f"{name}.out", "ab")
        self.procs.append(subprocess.Popen(cmd, env=self.env, stdout=log, stderr=subprocess.STDOUT,
                                           start_new_session=True))

    def start(self, timeout: float = 60) -> LocalSlurm:
        why = ensure_installed()
        if why:
            raise RuntimeError(why)
        self._write()
        r = self.root
        self._spawn("munged", [_exe("munged"), "--foreground", "--force", f"--socket={r}/munge/munge.socket",
                               f"--key-file={r}/munge/munge.key", f"--pid-file={r}/munge/munged.pid",
                               f"--seed-file={r}/munge/munged.seed", f"--log-file={r}/log/munged.log"])
        self._wait(lambda: (r / "munge" / "munge.socket").exists(), timeout, "munged")
        self._spawn("slurmctld", [_exe("slurmctld"), "-D", "-i", "-f", str(self.conf)])
        for k in range(self.nodes):
            self._spawn(f"slurmd-node{k}", [_exe("slurmd"), "-D", "-N", f"node{k}", "-f", str(self.conf)])
        self._wait(self._all_idle, timeout, "slurmd nodes idle")
        return self

    def _all_idle(self) -> bool:
        res = subprocess.run(["sinfo", "-h", "-N", "-o", "%N %t"], env=self.env, capture_output=True, text=True)
        states = dict(line.split() for line in res.stdout.splitlines() if line.strip())
        return len(states) == self.nodes and all(s == "idle" for s in states.values())

    def _wait(self, ok, timeout: float, what: str) -> None:
        end = time.time() + timeout
        while time.time() < end:
            for p in self.procs:
                if p.poll() is not None:
                    raise RuntimeError(f"{p.args[0]} exited with {p.returncode}; logs in {self.root / 'log'}:\n"
                                       + self.logs())
            if ok():
                return
            time.sleep(0.3)
        raise RuntimeError(f"timed out waiting for {what}; logs in {self.root / 'log'}:\n" + self.logs())

    def logs(self, tail: int = 30) -> str:
        out = []
        for f in sorted((self.root / "log").glob("*")):
            lines = f.read_text(errors="replace").splitlines()[-tail:]
            out.append(f"== {f.name}\n" + "\n".join(lines))
        return "\n".join(out)

    # ------------------------------------------------------------------------------------------------ stop
    def stop(self) -> None:
        """SIGTERM each daemon this object started (by PID; each leads its own session, so job steps the slurmd
        started go too), then SIGKILL what is left after 10 s. Jobs of this cluster are cancelled first, so that
        slurmstepd ends their processes."""
        if self.procs and self.procs[1:2] and self.procs[1].poll() is None:
            subprocess.run(["scancel", "--full", "--user", str(os.getuid())], env=self.env, capture_output=True,
                           timeout=30)
            end = time.time() + 15
            while time.time() < end and subprocess.run(["squeue", "-h"], env=self.env, capture_output=True,
                                                        text=True).stdout.strip():
                time.sleep(0.5)
        for p in reversed(self.procs):
            if p.poll() is None:
                try:
                    os.killpg(p.pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
        end = time.time() + 10
        for p in self.procs:
            try:
                p.wait(max(0.1, end - time.time()))
            except subprocess.TimeoutExpired:
                try:
                    os.killpg(p.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                p.wait()
        self.procs.clear()

    def __enter__(self) -> LocalSlurm:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
