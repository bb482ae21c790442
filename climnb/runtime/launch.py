"""Where the engines run and how they are launched: the session's limits, the Slurm
allocation, the launcher (``srun``, ``mpiexec``, local or a batch job) and its MPI settings.

:class:`LauncherSetup` is the part of :class:`climnb.runtime.cluster.Engines` that checks the
chosen launcher and configures ipyparallel's launcher for it.

Examples
--------
>>> detect_launcher({"PATH": ""})
'local'
>>> SessionLimits(memory=2 * 2**30).small
True
"""

from __future__ import annotations

import functools
import importlib.util
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from typing import Literal

__all__ = [
    "EngineStartError",
    "EnginesLostError",
    "LAUNCHERS",
    "LauncherSetup",
    "SMALL_SESSION_BYTES",
    "SessionLimits",
    "SlurmAllocation",
    "detect_launcher",
    "engines_per_node",
    "has_module",
    "mpi_settings",
    "slurm_mpi_args",
    "srun_mpi_types",
]

#: A session with at most this much memory is small (mybinder.org gives 2 GB): one engine.
SMALL_SESSION_BYTES = 4 * 2**30
_NO_LIMIT = 2**60  # cgroup v1 writes a huge number for "no limit"

LauncherName = Literal["auto", "slurm", "mpi", "local", "sbatch"]
LAUNCHERS = ("slurm", "mpi", "local", "sbatch")


class EngineStartError(RuntimeError):
    """Engines could not be started; the message says what to check."""


class EnginesLostError(RuntimeError):
    """Engines that were running are gone (killed, crashed, or their job ended)."""


@dataclass(frozen=True)
class SlurmAllocation:
    """What the Slurm environment variables say about the allocation we run in."""

    job_id: str
    n_nodes: int
    n_tasks: int | None
    cpus_on_node: int | None

    @classmethod
    def from_env(cls, env: dict | None = None) -> SlurmAllocation | None:
        env = os.environ if env is None else env
        if "SLURM_JOB_ID" not in env:
            return None

        def number(*names):
            for name in names:
                value = env.get(name, "").split("(")[0]
                if value.isdigit():
                    return int(value)
            return None

        return cls(
            job_id=env["SLURM_JOB_ID"],
            n_nodes=number("SLURM_JOB_NUM_NODES", "SLURM_NNODES") or 1,
            n_tasks=number("SLURM_NTASKS"),
            cpus_on_node=number("SLURM_CPUS_ON_NODE") or _fewest_cpus(env),
        )


def _fewest_cpus(env) -> int | None:
    """The fewest CPUs the allocation has on any of its nodes, from ``SLURM_JOB_CPUS_PER_NODE``
    (``"36(x2),18"``: 36 on each of two nodes, 18 on a third). ``salloc`` sets only this one:
    ``SLURM_CPUS_ON_NODE`` is set inside job steps and batch scripts, so a notebook started in
    an allocation has to go by it (or it would size each engine's threads by the whole node's
    cores, and srun refuses a step that asks for more CPUs than the allocation has)."""
    counts = [part.split("(")[0] for part in env.get("SLURM_JOB_CPUS_PER_NODE", "").split(",")]
    numbers = [int(c) for c in counts if c.isdigit()]
    return min(numbers) if numbers else None


@dataclass(frozen=True)
class SessionLimits:
    """Memory and CPUs this Jupyter session may use, as a hub or the kernel's cgroup says.

    JupyterHub's spawners (and so mybinder.org) set ``MEM_LIMIT`` (bytes) and ``CPU_LIMIT``
    (cores, may be fractional) in the user's environment; containers without them still have
    cgroup limits (``memory.max`` and ``cpu.max`` in cgroup v2, ``memory.limit_in_bytes`` and
    ``cpu.cfs_quota_us`` in v1). ``None``: no limit found.
    """

    memory: int | None = None
    cpus: float | None = None

    @classmethod
    def detect(cls, env: dict | None = None, cgroup: str = "/sys/fs/cgroup") -> SessionLimits:
        env = os.environ if env is None else env
        memory = _number(env.get("MEM_LIMIT")) or _cgroup_memory(cgroup)
        cpus = _number(env.get("CPU_LIMIT")) or _cgroup_cpus(cgroup)
        return cls(int(memory) if memory else None, float(cpus) if cpus else None)

    @property
    def small(self) -> bool:
        """At most :data:`SMALL_SESSION_BYTES` of memory (a Binder-sized session)."""
        return self.memory is not None and self.memory <= SMALL_SESSION_BYTES

    def cores(self) -> int:
        """Whole cores to use: the CPU limit (rounded up) or the machine's."""
        machine = os.cpu_count() or 1
        return max(1, min(machine, -int(-self.cpus // 1))) if self.cpus else machine


def _number(text) -> float | None:
    try:
        value = float(text)
    except (TypeError, ValueError):
        return None
    return value if 0 < value < _NO_LIMIT else None


def _read(path: str) -> str | None:
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return None


def _cgroup_memory(root: str) -> float | None:
    return _number(_read(f"{root}/memory.max")) or _number(
        _read(f"{root}/memory/memory.limit_in_bytes")
    )


def _cgroup_cpus(root: str) -> float | None:
    v2 = (_read(f"{root}/cpu.max") or "").split()
    if len(v2) == 2 and v2[0] != "max":
        return _number(int(v2[0]) / int(v2[1]))
    quota, period = _read(f"{root}/cpu/cpu.cfs_quota_us"), _read(f"{root}/cpu/cpu.cfs_period_us")
    if quota and period and int(quota) > 0:
        return _number(int(quota) / int(period))
    return None


def detect_launcher(env: dict | None = None) -> str:
    """``"slurm"`` inside an allocation with srun, else ``"mpi"`` if MPI works, else ``"local"``."""
    env = os.environ if env is None else env
    path = env.get("PATH")
    if "SLURM_JOB_ID" in env and shutil.which("srun", path=path):
        return "slurm"
    if shutil.which("mpiexec", path=path) and has_module("mpi4py"):
        return "mpi"
    return "local"


def mpi_settings(n_ranks: int) -> dict[str, str]:
    """OpenMPI environment variables for ``n_ranks`` ranks on this machine, set only where
    they apply: running as root (OpenMPI refuses unless told), more ranks than cores
    (oversubscribe), and as many ranks as cores or more, where Horovod's background thread
    shares each rank's core and an MPI that spins while it waits would take that core from the
    compute (measured: 67 % weak-scaling efficiency without yielding, 88 % with).
    """
    cores = os.cpu_count() or 1
    env = {}
    if os.geteuid() == 0:
        env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    if n_ranks > cores:
        env["OMPI_MCA_rmaps_base_oversubscribe"] = "1"
    if n_ranks >= cores:
        env["OMPI_MCA_mpi_yield_when_idle"] = "1"
    return env


def slurm_mpi_args(launcher_args=(), env: dict | None = None) -> list[str]:
    """``["--mpi=pmix"]`` where this Slurm offers PMIx and nothing chose an MPI type already
    (``SLURM_MPI_TYPE``, or an ``--mpi`` argument in ``launcher_args``); else ``[]``."""
    env = os.environ if env is None else env
    if "SLURM_MPI_TYPE" in env or any(str(a).startswith("--mpi") for a in launcher_args):
        return []
    return ["--mpi=pmix"] if "pmix" in srun_mpi_types(shutil.which("srun")) else []


@functools.lru_cache
def srun_mpi_types(srun: str | None) -> tuple[str, ...]:
    """The MPI plugin types ``srun --mpi=list`` offers (it needs no controller)."""
    if srun is None:
        return ()
    try:
        out = subprocess.run([srun, "--mpi=list"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return ()
    words = (out.stdout + out.stderr).replace(",", " ").split()
    return tuple(w for w in words if w.startswith("pmi") or w in ("none", "cray_shasta"))


def has_module(name: str) -> bool:
    """Whether ``name`` can be imported here (without importing it)."""
    return importlib.util.find_spec(name) is not None


def engines_per_node(n: int, launcher: str, slurm: SlurmAllocation | None) -> int:
    if launcher == "slurm" and slurm:
        return max(1, -(-n // slurm.n_nodes))
    return n


class LauncherSetup:
    """The launcher's checks and settings, for :class:`climnb.runtime.cluster.Engines`."""

    def _check_launcher(self) -> None:
        if self.launcher == "slurm":
            if not shutil.which("srun"):
                raise EngineStartError(
                    "launcher 'slurm' needs srun on PATH: run inside an "
                    "allocation (salloc/sbatch) on a Slurm system"
                )
            if self.slurm and self.slurm.n_tasks and self.n > self.slurm.n_tasks:
                raise EngineStartError(
                    f"the allocation {self.slurm.job_id} has {self.slurm.n_tasks} tasks but "
                    f"{self.n} engines were asked for: ask for fewer engines, or allocate more "
                    "(e.g. salloc --ntasks N)"
                )
        if self.launcher == "sbatch":
            missing = [c for c in ("sbatch", "squeue", "scancel") if not shutil.which(c)]
            if missing:
                raise EngineStartError(
                    f"launcher 'sbatch' needs {', '.join(missing)} on PATH: run on a login "
                    "node of a Slurm system (or use launcher='mpi' or 'local')"
                )
        if self.launcher in ("slurm", "mpi", "sbatch") and not has_module("mpi4py"):
            raise EngineStartError(
                "MPI engines need mpi4py: pip install mpi4py (make setup "
                "installs it), or use launcher='local' (Horovod over Gloo)"
            )
        if self.launcher == "mpi" and not shutil.which("mpiexec"):
            raise EngineStartError(
                "launcher 'mpi' needs mpiexec on PATH: install OpenMPI "
                "(apt-get install openmpi-bin) or use launcher='local'"
            )

    def _configure_launcher(self, config) -> None:
        env = {
            "OMP_NUM_THREADS": str(self.threads),
            "IPP_NONINTERACTIVE": "1",
            "TF_CPP_MIN_LOG_LEVEL": os.environ.get("TF_CPP_MIN_LOG_LEVEL", "2"),
            "PATH": f"{os.path.dirname(sys.executable)}{os.pathsep}{os.environ['PATH']}",
            **self.config.env,
        }
        args = list(self.config.launcher_args)
        # As many ranks as cores (a submitted job's ranks get one CPU each unless threads say
        # otherwise): OpenMPI must yield while it waits, as mpi_settings() says, or a rank
        # waiting in Horovod's collectives spins on the core its peer computes on (measured
        # under srun, 2 ranks on 2 cores: a 2-step toy training 17 s spinning, 6 s yielding)
        crowded = self.threads == 1 if self.launcher == "sbatch" else self.per_node >= self.cores
        if self.launcher in ("slurm", "sbatch") and crowded:
            env = {"OMPI_MCA_mpi_yield_when_idle": "1", **env}
        if self.launcher == "sbatch":
            config.SlurmEngineSetLauncher.batch_template = self.batch_script()
            config.SlurmEngineSetLauncher.environment = env
            # the script beside the logs in the profile, not in the notebook's folder
            folder = os.path.join(self.cluster.profile_dir, "log")
            os.makedirs(folder, exist_ok=True)
            script = os.path.join(folder, f"{self.job_name}.sbatch")
            config.SlurmEngineSetLauncher.batch_file_name = script
            return
        if self.launcher == "slurm":
            config.MPIEngineSetLauncher.mpi_cmd = ["srun"]
            args = [
                *slurm_mpi_args(args),
                f"--ntasks-per-node={self.per_node}",
                f"--cpus-per-task={self.threads}",
                "--kill-on-bad-exit=1",
                *args,
            ]
        elif self.launcher == "mpi":
            # stopping: mpiexec passes SIGTERM on to the engines and then waits 1 s
            # (odls_base_sigkill_timeout) before it kills them, whether they have gone or not
            env = {**mpi_settings(self.n), "OMPI_MCA_odls_base_sigkill_timeout": "0", **env}
            args = ["--bind-to", "none", *args]
        launcher = (
            config.LocalEngineSetLauncher
            if self.launcher == "local"
            else config.MPIEngineSetLauncher
        )
        launcher.environment = env
        if self.launcher != "local":
            config.MPIEngineSetLauncher.mpi_args = args

    def _launcher_output(self) -> str:
        try:
            return "\n".join(
                es.get_output(remove=False) for es in (self.cluster.engines or {}).values()
            )[-3000:]
        except Exception:
            return ""

    def _start_hint(self, err: BaseException, output: str) -> str:
        what = {
            "mpi": "that `mpiexec -n 2 python -c 'import mpi4py.MPI'` works, and that OpenMPI "
            "may run as root / oversubscribe on this machine",
            "slurm": "that the allocation is still running (squeue), has enough tasks for "
            f"{self.n} engines, and that srun can start {sys.executable}",
            "local": "that ipyparallel is installed in the notebook's environment",
            "sbatch": "that sbatch accepts the job (partition, account, walltime) and that "
            "the compute nodes can reach this machine",
        }[self.launcher]
        msg = (
            f"{self.n} {self.launcher} engines did not start within "
            f"{self.config.timeout:.0f} s ({type(err).__name__}: {err}). Check {what}."
        )
        return msg + (f"\nlauncher output:\n{output}" if output.strip() else "")
