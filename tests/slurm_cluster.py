"""A real one-node Slurm cluster on localhost for the tests (Debian's slurm-wlm and munge).

:func:`start` writes a munge key and a ``slurm.conf`` generated from this machine's CPUs and
memory (``slurmd -C``) into a temporary folder, starts ``munged``, ``slurmctld`` and ``slurmd``
there on free ports, and waits until the node is idle; :meth:`SlurmCluster.stop` cancels what
is left and stops the daemons. Nothing outside the folder is touched (the daemons use their own
munge socket, state, spool, logs and pid files), so it runs beside a system Slurm or another
test session. Clients find it through ``SLURM_CONF``.

Two partitions: ``debug`` (default, up) and ``closed`` (down: jobs sent there stay pending with
reason ``PartitionDown``).

The fixture ``slurm`` (session-scoped) starts it once and skips, with the reason, where it
cannot: not root, packages missing, or a daemon that does not come up.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import psutil
import pytest

DAEMONS = ("munged", "mungekey", "slurmctld", "slurmd")
CLIENTS = ("srun", "salloc", "sbatch", "squeue", "scancel", "sinfo", "scontrol")


class SlurmUnavailable(RuntimeError):
    """Why a cluster cannot run here."""


@dataclass
class SlurmCluster:
    root: Path
    conf: Path
    node: str
    cpus: int
    env: dict[str, str]

    def run(self, *cmd: str, check: bool = True, timeout: float = 60) -> str:
        out = subprocess.run(
            cmd, env=self.env, capture_output=True, text=True, timeout=timeout, check=False
        )
        if check and out.returncode:
            raise RuntimeError(f"{' '.join(cmd)} failed ({out.returncode}): {out.stderr}")
        return out.stdout

    def jobs(self) -> list[str]:
        """Ids of the jobs pending, running or completing."""
        return self.run("squeue", "-h", "-o", "%i").split()

    def wait_idle(self, timeout: float = 60) -> None:
        """Wait until no job is left (squeue empty) and the node is idle."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            state = self.run("sinfo", "-h", "-n", self.node, "-o", "%T").split()
            if not self.jobs() and state and state[0] == "idle":
                return
            time.sleep(0.3)
        raise TimeoutError(f"jobs still there after {timeout} s: {self.run('squeue')}")

    def logs(self) -> str:
        return "\n".join(
            f"--- {p.name}\n{p.read_text()[-3000:]}" for p in sorted(self.root.glob("*.log"))
        )

    def stop(self) -> None:
        """Cancel every job, then stop the three daemons together (each takes about 2 s to
        shut down: one after the other they took 6 s) and wait up to 10 s for them to go."""
        self.run("scancel", "--full", "--user", "root", check=False)
        pids = []
        for name in ("slurmd", "slurmctld", "munged"):
            pid_file = self.root / f"{name}.pid"
            try:
                pid = int(pid_file.read_text())
                os.kill(pid, signal.SIGTERM)
            except (OSError, ValueError):
                continue
            pids.append(pid)
        deadline = time.monotonic() + 10
        while pids and time.monotonic() < deadline:
            time.sleep(0.05)
            pids = [pid for pid in pids if psutil.pid_exists(pid)]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("", 0))
        return s.getsockname()[1]


def _node_line() -> tuple[str, str, int]:
    """``NodeName=... CPUs=... RealMemory=...`` from ``slurmd -C``: name, line, CPUs."""
    line = subprocess.run(["slurmd", "-C"], capture_output=True, text=True).stdout.splitlines()[0]
    fields = dict(item.split("=", 1) for item in line.split())
    memory = int(int(fields["RealMemory"]) * 0.9)  # leave the system some
    line = line.replace(f"RealMemory={fields['RealMemory']}", f"RealMemory={memory}")
    return fields["NodeName"], line, int(fields["CPUs"])


def write_conf(root: Path, munge_socket: Path) -> tuple[Path, str, int]:
    node, node_line, cpus = _node_line()
    conf = root / "slurm.conf"
    conf.write_text(
        f"""\
ClusterName=climnbtest
SlurmctldHost={node}
SlurmctldPort={_free_port()}
SlurmdPort={_free_port()}
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={munge_socket}
SlurmUser=root
SlurmdUser=root
StateSaveLocation={root}/state
SlurmdSpoolDir={root}/spool
SlurmctldPidFile={root}/slurmctld.pid
SlurmdPidFile={root}/slurmd.pid
SlurmctldLogFile={root}/slurmctld.log
SlurmdLogFile={root}/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=none
ReturnToService=2
SchedulerType=sched/backfill
# batch jobs are scheduled at once, not up to 3 s later (batch_sched_delay's default)
SchedulerParameters=batch_sched_delay=0
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
JobAcctGatherType=jobacct_gather/none
InactiveLimit=0
KillWait=5
MinJobAge=60
{node_line}
PartitionName=debug Nodes={node} Default=YES MaxTime=INFINITE State=UP
PartitionName=closed Nodes={node} MaxTime=INFINITE State=DOWN
"""
    )
    for sub in ("state", "spool"):
        (root / sub).mkdir(exist_ok=True)
    return conf, node, cpus


def start(root: Path, timeout: float = 60) -> SlurmCluster:
    """Start munged, slurmctld and slurmd in ``root``; raise :class:`SlurmUnavailable`."""
    if os.geteuid() != 0:
        raise SlurmUnavailable("a test Slurm cluster needs root (slurmd runs jobs as any user)")
    missing = [cmd for cmd in DAEMONS + CLIENTS if shutil.which(cmd) is None]
    if missing:
        raise SlurmUnavailable(
            f"{', '.join(missing)} not found: apt-get install slurm-wlm munge (make setup does "
            "it as root)"
        )
    root.mkdir(parents=True, exist_ok=True)
    root.chmod(0o700)
    key, sock = root / "munge.key", root / "munge.socket"
    subprocess.run(["mungekey", "--create", "--keyfile", str(key), "--force"], check=True)
    key.chmod(0o600)
    subprocess.run(
        [
            "munged",
            "--force",
            f"--key-file={key}",
            f"--socket={sock}",
            f"--pid-file={root}/munged.pid",
            f"--log-file={root}/munged.log",
            f"--seed-file={root}/munged.seed",
        ],
        check=True,
        capture_output=True,
    )
    conf, node, cpus = write_conf(root, sock)
    env = {**os.environ, "SLURM_CONF": str(conf)}
    cluster = SlurmCluster(root, conf, node, cpus, env)
    try:
        subprocess.run(["slurmctld", "-c", "-f", str(conf)], env=env, check=True)
        subprocess.run(["slurmd", "-c", "-f", str(conf)], env=env, check=True)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            out = subprocess.run(
                ["sinfo", "-h", "-p", "debug", "-o", "%T"], env=env, capture_output=True, text=True
            )
            if out.stdout.strip() == "idle":
                return cluster
            time.sleep(0.3)
        raise SlurmUnavailable(f"the node did not become idle in {timeout} s:\n{cluster.logs()}")
    except BaseException:
        cluster.stop()
        raise


@pytest.fixture(scope="session")
def slurm(tmp_path_factory):
    """A running one-node Slurm cluster; ``SLURM_CONF`` set in this process for its lifetime."""
    try:
        cluster = start(tmp_path_factory.mktemp("slurm"))
    except (SlurmUnavailable, subprocess.CalledProcessError) as err:
        print(f"no Slurm cluster: {err}")
        pytest.skip(f"no Slurm cluster: {err}")
    old = os.environ.get("SLURM_CONF")
    os.environ["SLURM_CONF"] = str(cluster.conf)
    try:
        yield cluster
    finally:
        cluster.stop()
        if old is None:
            os.environ.pop("SLURM_CONF", None)
        else:
            os.environ["SLURM_CONF"] = old
