"""A real one-node SLURM cluster on this machine for the tests (Debian ``slurm-wlm`` + ``munge``, as root).

munged, slurmctld and slurmd run in the foreground as children of the test (their pids are the Popen
pids), with their own config, key, socket, ports, state, spool, pid and log files under one folder, so
they touch nothing of the host's /etc/slurm or /run/munge and two clusters can run side by side. The
node is this host on 127.0.0.1 with its CPUs and a ``gpu`` GRES backed by character devices made with
``mknod`` in that folder (NVIDIA's major number 195): SLURM allocates them and sets
``CUDA_VISIBLE_DEVICES`` as on a GPU node, though nothing can compute on them. Process tracking is
``proctrack/linuxproc`` (no cgroups); accounting is off, so job states come from ``squeue`` (kept for
``MinJobAge``), not ``sacct``. Jobs exceeding the node are refused at submission (``EnforcePartLimits``).

    with start_cluster(tmp_path) as c:    # skips (one line) where it cannot run
        subprocess.run(["sbatch", ...], env=c.env)

Stopping cancels every job, waits for the node's job steps to end, then stops slurmd, slurmctld and munged
by pid (SIGTERM, then SIGKILL), also when the test fails.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import time
from contextlib import closing, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

DAEMONS = ("munged", "slurmctld", "slurmd")
CLIENTS = ("sbatch", "squeue", "scancel", "scontrol", "srun", "sinfo")
PARTITION = "gpu"  # the name the SLURM profile's default-resources ask for (workflow/profiles/slurm)
GPU_MAJOR = 195  # /dev/nvidia<N>


def unavailable() -> str | None:
    """Why a cluster cannot be started here (one line), or None."""
    if os.name != "posix" or os.geteuid() != 0:
        return "SLURM cluster tests need root (slurmd and munged run as root)"
    if not Path("/etc/debian_version").is_file():
        return "SLURM cluster tests need Debian (apt packages slurm-wlm and munge)"
    missing = [b for b in (*DAEMONS, *CLIENTS) if shutil.which(b) is None
               and not Path("/usr/sbin", b).is_file()]
    if missing:
        return f"SLURM cluster tests: {', '.join(missing)} not installed; apt-get install -y slurm-wlm munge"
    return None


def _exe(name: str) -> str:
    return shutil.which(name) or f"/usr/sbin/{name}"


def _free_port() -> int:
    with closing(socket.socket(socket.AF_INET, socket.SOCK_STREAM)) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _mem_mb() -> int:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemTotal:"):
            return int(line.split()[1]) // 1024 * 8 // 10  # 80 %: slurmd drains a node that has less
    raise RuntimeError("no MemTotal in /proc/meminfo")


@dataclass
class Cluster:
    root: Path
    host: str
    cpus: int
    gpus: int
    mem_mb: int
    env: dict[str, str]
    procs: dict[str, subprocess.Popen] = field(default_factory=dict)

    def run(self, *cmd: str, check: bool = True, timeout: float = 60) -> subprocess.CompletedProcess:
        return subprocess.run(list(cmd), env=self.env, capture_output=True, text=True, check=check,
                              timeout=timeout)

    def node_state(self) -> str:
        proc = self.run("sinfo", "-h", "-N", "-o", "%T", check=False)
        return proc.stdout.strip() if proc.returncode == 0 else ""

    def jobs(self) -> list[dict[str, str]]:
        """Every job slurmctld still knows (finished ones are kept for MinJobAge)."""
        out = self.run("squeue", "-h", "--states=all", "-o", "%i|%T|%k|%C|%D").stdout
        keys = ("id", "state", "comment", "cpus", "nodes")
        return [dict(zip(keys, line.split("|"))) for line in out.splitlines() if line]

    def job_field(self, job_id: str, key: str) -> str:
        """One ``Key=value`` of ``scontrol show job`` (e.g. AllocTRES)."""
        text = self.run("scontrol", "show", "job", job_id).stdout
        m = re.search(rf"\b{key}=(\S*)", text)
        return m[1] if m else ""

    def log(self, name: str, tail: int = 3000) -> str:
        path = self.root / f"{name}.log"
        return path.read_text(errors="replace")[-tail:] if path.is_file() else f"({path} missing)"


def _write_config(root: Path, host: str, cpus: int, gpus: int, mem_mb: int) -> dict[str, str]:
    dev = root / "dev"
    dev.mkdir()
    for i in range(gpus):
        os.mknod(dev / f"nvidia{i}", 0o666 | 0o020000, os.makedev(GPU_MAJOR, i))  # S_IFCHR
    for d in ("state", "spool", "munge"):
        (root / d).mkdir(mode=0o700)
    key = root / "munge" / "munge.key"
    key.write_bytes(os.urandom(1024))
    key.chmod(0o400)
    ctld_port, slurmd_port = _free_port(), _free_port()
    conf = root / "slurm.conf"
    conf.write_text(f"""\
ClusterName=creditbench
SlurmctldHost={host}(127.0.0.1)
SlurmctldPort={ctld_port}
SlurmdPort={slurmd_port}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={root}/munge/munge.socket
StateSaveLocation={root}/state
SlurmdSpoolDir={root}/spool
SlurmctldPidFile={root}/slurmctld.pid
SlurmdPidFile={root}/slurmd.pid
SlurmctldLogFile={root}/slurmctld.log
SlurmdLogFile={root}/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
SwitchType=switch/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU_Memory
GresTypes=gpu
ReturnToService=2
MinJobAge=3600
KillWait=5
InactiveLimit=0
EnforcePartLimits=ALL
SlurmdParameters=config_overrides
NodeName={host} NodeAddr=127.0.0.1 CPUs={cpus} RealMemory={mem_mb} Gres=gpu:{gpus} State=UNKNOWN
PartitionName={PARTITION} Nodes={host} Default=YES MaxTime=INFINITE State=UP
""")
    files = f"{dev}/nvidia[0-{gpus - 1}]" if gpus > 1 else f"{dev}/nvidia0"
    (root / "gres.conf").write_text(f"AutoDetect=off\nNodeName={host} Name=gpu File={files}\n")
    (root / "cgroup.conf").write_text("CgroupPlugin=autodetect\nIgnoreSystemd=yes\n")
    # A site's srun reads /etc/slurm/slurm.conf; this cluster's lives here, named by SLURM_CONF, which the
    # jobstep plugin (0.6) strips before its `srun -n1` inside a job: an srun first on PATH puts it back.
    (root / "bin").mkdir()
    srun = root / "bin" / "srun"
    srun.write_text(f'#!/bin/sh\nSLURM_CONF="${{SLURM_CONF:-{conf}}}" exec {_exe("srun")} "$@"\n')
    srun.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "SBATCH_", "SRUN_"))}
    env["SLURM_CONF"] = str(conf)
    env["PATH"] = f"{root / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    return env


def _wait(predicate, what: str, cluster: Cluster, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        dead = [n for n, p in cluster.procs.items() if p.poll() is not None]
        if dead or time.monotonic() > deadline:
            why = f"{', '.join(dead)} exited" if dead else f"timed out after {timeout:g} s"
            logs = "\n".join(f"--- {n}.log\n{cluster.log(n)}" for n in DAEMONS)
            raise RuntimeError(f"SLURM test cluster: waiting for {what}: {why}\n{logs}")
        time.sleep(0.2)


def _stop(proc: subprocess.Popen, timeout: float = 15) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


def _teardown(c: Cluster) -> None:
    """Cancel every job, wait until the node runs no step, then stop the daemons (reverse start order)."""
    if all(c.procs.get(n) is not None and c.procs[n].poll() is None for n in ("slurmctld", "slurmd")):
        c.run("scancel", "--full", "-u", "root", check=False)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            active = [j for j in c.jobs() if j["state"] in ("PENDING", "RUNNING", "COMPLETING", "CONFIGURING",
                                                              "SUSPENDED")]
            steps = c.run("scontrol", "listpids", check=False).stdout.strip().splitlines()[1:]
            if not active and not steps:
                break
            time.sleep(0.5)
    for name in reversed(DAEMONS):
        if name in c.procs:
            _stop(c.procs[name])


@contextmanager
def start_cluster(root: Path, cpus: int | None = None, gpus: int = 2, timeout: float = 60) -> Iterator[Cluster]:
    """Start munged, slurmctld and slurmd under ``root``; yield once the node is idle; stop them after."""
    root.mkdir(parents=True, exist_ok=True)
    host = socket.gethostname().split(".")[0]
    cpus = cpus or os.cpu_count() or 1
    env = _write_config(root, host, cpus, gpus, _mem_mb())
    c = Cluster(root, host, cpus, gpus, _mem_mb(), env)
    out = lambda name: open(root / f"{name}.out", "w")  # noqa: E731 (daemons' own stdout/stderr)
    try:
        m = root / "munge"
        c.procs["munged"] = subprocess.Popen(
            [_exe("munged"), "-F", "--force", f"--socket={m}/munge.socket", f"--key-file={m}/munge.key",
             f"--pid-file={m}/munged.pid", f"--seed-file={m}/munged.seed", f"--log-file={root}/munged.log"],
            stdout=out("munged"), stderr=subprocess.STDOUT, env=env)
        _wait(lambda: (m / "munge.socket").exists(), "munged's socket", c, timeout)
        c.procs["slurmctld"] = subprocess.Popen([_exe("slurmctld"), "-D", "-i", "-f", env["SLURM_CONF"]],
                                                stdout=out("slurmctld"), stderr=subprocess.STDOUT, env=env)
        _wait(lambda: c.run("scontrol", "ping", check=False).stdout.count("UP") > 0, "slurmctld", c, timeout)
        c.procs["slurmd"] = subprocess.Popen([_exe("slurmd"), "-D", "-N", host, "-f", env["SLURM_CONF"]],
                                             stdout=out("slurmd"), stderr=subprocess.STDOUT, env=env)
        _wait(lambda: c.node_state() == "idle", "the node to be idle", c, timeout)
        yield c
    finally:
        _teardown(c)
