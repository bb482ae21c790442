"""ipyparallel engines on the nodes at hand, with Horovod initialised on every engine.

One call starts engines for the situation the notebook finds itself in:

* ``"slurm"`` — inside a Slurm allocation (``SLURM_JOB_ID`` set and ``srun`` found): engines are
  MPI ranks started with ``srun`` over the allocated nodes, one task per engine;
* ``"mpi"`` — elsewhere with MPI (``mpiexec`` and mpi4py found): engines started with
  ``mpiexec``; Horovod uses MPI;
* ``"local"`` — no MPI: plain local engines, Horovod over Gloo with the rendezvous server run
  by the notebook process;
* ``"sbatch"`` — outside any allocation (a JupyterHub login node): the engines are submitted as
  a batch job (ipyparallel's Slurm launcher, with walltime, partition, account and extra
  ``sbatch`` options); the controller runs here and listens on all interfaces. The job is
  cancelled by :meth:`Engines.stop`, at the end of the ``with`` block, and by the watchdog when
  the kernel dies; a job that stays pending longer than ``pending_timeout`` is cancelled with
  an error naming the job and Slurm's pending reason. Chosen explicitly, never detected.

Without Horovod (a hub environment that lacks it), the default is one engine, and
:meth:`Engines.init_horovod` readies it to train in one process (the training loop's one-rank
stand-in): :attr:`Engines.summary` says so in one line, with how to get Horovod. Several
engines cannot train together without it: :meth:`Engines.init_horovod` refuses them in one line.

Under Slurm (``"slurm"`` and ``"sbatch"``) the engines' ``srun`` gets ``--mpi=pmix`` when the
site's Slurm offers PMIx and neither ``SLURM_MPI_TYPE`` nor an ``--mpi`` launcher argument says
otherwise: OpenMPI ranks started by a bare ``srun`` fail in ``MPI_Init_thread`` where Slurm's
default MPI type is ``none``.

:class:`Engines` is a context manager, so the engines always stop. Each engine runs with a
number of threads that shares the node's cores between the engines on it.

Examples
--------
>>> from climnb.runtime.cluster import Engines                      # doctest: +SKIP
>>> with Engines(n=2) as engines:                            # doctest: +SKIP
...     print(engines.init_horovod())
   rank  local_rank  size        host  engine_id  threads
0     0           0     2  nid001234          0        1
1     1           1     2  nid001234          1        1
"""

from __future__ import annotations

import functools
import html
import logging
import os
import shlex
import shutil
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from typing import Literal

from climnb.runtime.install import install_hint
from climnb.runtime.watchdog import engine_processes

log = logging.getLogger(__name__)

__all__ = [
    "ClusterConfig",
    "Engines",
    "EngineStartError",
    "SlurmAllocation",
    "EnginesLostError",
    "detect_launcher",
    "mpi_settings",
    "slurm_mpi_args",
    "SessionLimits",
    "SMALL_SESSION_BYTES",
]

#: Milliseconds between the controller's heartbeats to the engines (ipyparallel's default: 3000).
HEARTBEAT_MS = 1000

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
            cpus_on_node=number("SLURM_CPUS_ON_NODE"),
        )


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


@dataclass(frozen=True)
class ClusterConfig:
    """Settings of the engines.

    Attributes
    ----------
    n : number of engines (Horovod ranks). ``None``: the allocation's task count under Slurm,
        else 2, or 1 in a small session (:class:`SessionLimits`: a Binder-sized hub session)
        or without Horovod.
    launcher : ``"auto"`` (detect), ``"slurm"``, ``"mpi"``, ``"local"`` or ``"sbatch"``
        (submit the engines as a batch job; never chosen by ``"auto"``).
    threads_per_engine : compute threads of each engine. ``None``: the cores of a node (as
        far as the session's CPU limit allows) divided by the engines on it (at least 1); 1
        for ``"sbatch"``.
    timeout : seconds to wait for all engines to register (under ``"sbatch"``: once the job
        runs).
    launcher_args : extra arguments for ``srun`` or ``mpiexec`` (e.g. ``("--gpus-per-task=1",)``).
    env : extra environment variables for the engines.
    walltime : ``"sbatch"`` only: the job's time limit (``--time``, e.g. ``"30"``, ``"1:00:00"``).
    partition : ``"sbatch"`` only: the partition (``None``: the site's default).
    account : ``"sbatch"`` only: the account to charge (``None``: the user's default).
    sbatch_options : ``"sbatch"`` only: further options, e.g. ``("--qos=debug",
        "--constraint=gpu")``.
    pending_timeout : ``"sbatch"`` only: seconds the job may wait in the queue before it is
        cancelled with an error.
    """

    n: int | None = None
    launcher: LauncherName = "auto"
    threads_per_engine: int | None = None
    timeout: float = 120.0
    launcher_args: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)
    walltime: str = "1:00:00"
    partition: str | None = None
    account: str | None = None
    sbatch_options: tuple[str, ...] = ()
    pending_timeout: float = 600.0


def detect_launcher(env: dict | None = None) -> str:
    """``"slurm"`` inside an allocation with srun, else ``"mpi"`` if MPI works, else ``"local"``."""
    env = os.environ if env is None else env
    path = env.get("PATH")
    if "SLURM_JOB_ID" in env and shutil.which("srun", path=path):
        return "slurm"
    if shutil.which("mpiexec", path=path) and _has_module("mpi4py"):
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
    return ["--mpi=pmix"] if "pmix" in _srun_mpi_types(shutil.which("srun")) else []


@functools.lru_cache
def _srun_mpi_types(srun: str | None) -> tuple[str, ...]:
    """The MPI plugin types ``srun --mpi=list`` offers (it needs no controller)."""
    if srun is None:
        return ()
    try:
        out = subprocess.run([srun, "--mpi=list"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return ()
    words = (out.stdout + out.stderr).replace(",", " ").split()
    return tuple(w for w in words if w.startswith("pmi") or w in ("none", "cray_shasta"))


def _has_module(name: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(name) is not None


def _engines_per_node(n: int, launcher: str, slurm: SlurmAllocation | None) -> int:
    if launcher == "slurm" and slurm:
        return max(1, -(-n // slurm.n_nodes))
    return n


class Engines:
    """ipyparallel engines with Horovod; use as a context manager so that they always stop.

    Parameters
    ----------
    config : a :class:`ClusterConfig`; keyword arguments override its fields.
    """

    def __init__(self, config: ClusterConfig | None = None, **overrides):
        config = config or ClusterConfig()
        if overrides:
            config = ClusterConfig(**{**config.__dict__, **overrides})
        self.launcher = detect_launcher() if config.launcher == "auto" else config.launcher
        if self.launcher not in LAUNCHERS:
            raise ValueError(
                f"launcher must be one of auto, {', '.join(LAUNCHERS)}; got {self.launcher!r}"
            )
        # a submitted job is an allocation of its own: the notebook's (if any) does not apply
        self.slurm = None if self.launcher == "sbatch" else SlurmAllocation.from_env()
        self.limits = SessionLimits.detect()
        #: Horovod can be imported here (the engines run this Python): several engines can
        #: train together; without it, one engine trains alone.
        self.horovod = _has_module("horovod")
        n = config.n
        if n is None and not self.horovod:
            n = 1
        if n is None:
            default = 1 if self.limits.small and self.launcher != "sbatch" else 2
            n = (self.slurm.n_tasks if self.launcher == "slurm" and self.slurm else None) or default
        if n < 1:
            raise ValueError(f"the number of engines must be at least 1, got {n}")
        self.n = n
        cores = (
            self.slurm.cpus_on_node
            if self.slurm and self.slurm.cpus_on_node
            else self.limits.cores()
        )
        self.cores = cores  # of a node, as far as this session knows
        self.per_node = _engines_per_node(n, self.launcher, self.slurm)
        default_threads = 1 if self.launcher == "sbatch" else max(1, cores // self.per_node)
        self.threads = config.threads_per_engine or default_threads
        self.config = config
        self.cluster = None
        self.client = None
        self.job_id: str | None = None
        self._job_cancelled = False
        self._cluster_id = None
        self.startup_s: float | None = None
        self._rendezvous = None
        self._watchdog = None

    # --- start and stop ------------------------------------------------------------------------

    def start(self) -> Engines:
        """Start the controller and ``n`` engines and wait until all have registered."""
        import ipyparallel as ipp

        self._check_launcher()
        start = time.perf_counter()
        kwargs = {}
        if self.launcher == "sbatch":  # the engines run elsewhere: listen on every interface
            kwargs = {"controller_ip": "*", "controller_location": socket.gethostname()}
        self.cluster = ipp.Cluster(
            engines={"local": "local", "sbatch": "slurm"}.get(self.launcher, "mpi"),
            n=self.n,
            engine_timeout=int(self.config.timeout),
            log_level=logging.ERROR,
            shutdown_atexit=True,
            # ipyparallel sleeps 1 s between starting the controller and the engines; the
            # engines need only its connection info, which start_engines waits for anyway
            delay=0,
            # the controller admits an engine at its next heartbeat: every 3 s by default, so
            # engines that are ready wait up to 3 s more (measured: 3.5 s of a 7 s start). Each
            # second instead; an engine is still dropped only after 10 missed beats in a row
            # (10 s; its heart answers from a thread of its own, busy or not)
            controller_args=[f"--HeartMonitor.period={HEARTBEAT_MS}"],
            **kwargs,
        )
        self._cluster_id = self.cluster.cluster_id
        self._start_watchdog()
        self._configure_launcher(self.cluster.config)
        try:
            if self.launcher == "sbatch":
                self._start_submitted()
            else:
                self.client = self.cluster.start_and_connect_sync()
                self.client.wait_for_engines(self.n, timeout=self.config.timeout)
        except BaseException as err:
            output = self._launcher_output()
            self.stop()
            if isinstance(err, EngineStartError):
                raise
            raise EngineStartError(self._start_hint(err, output)) from err
        self.startup_s = time.perf_counter() - start
        log.info("%d %s engines up in %.1f s", self.n, self.launcher, self.startup_s)
        return self

    def stop(self) -> None:
        """Stop engines and controller (idempotent), cancel the engines' job if submitted (and
        wait until Slurm has let it go), stop the Gloo rendezvous server if any."""
        if self.client is not None:
            self.client.close()
            self.client = None
        if self.cluster is not None:
            controller = getattr(self.cluster.controller, "pid", None)
            try:
                self.cluster.stop_cluster_sync()
            except Exception as err:  # engines already dead, or their job never ran: the
                log.debug("stopping cluster: %s", err)  # controller may still run
                try:
                    self.cluster.stop_controller_sync()
                except Exception as err:  # already dead: nothing left to stop
                    log.debug("stopping controller: %s", err)
            if controller:
                _end_process_group(controller)
            self.cluster = None
        if self.job_id is not None and not self._job_cancelled:
            _cancel_job(self.job_id)
            self._job_cancelled = True
        if self._rendezvous is not None:
            self._rendezvous.stop()
            self._rendezvous = None
        _reap_children()
        if self._watchdog is not None:
            self._watchdog.terminate()
            self._watchdog.wait()
            self._watchdog = None

    def _start_watchdog(self) -> None:
        """A process that stops the engines if this one dies without calling :meth:`stop`
        (a kernel killed with SIGKILL or by the out-of-memory killer): see climnb.runtime.watchdog.
        For submitted engines it also cancels their job, found by its unique name."""
        if self._watchdog is None:
            cmd = [sys.executable, "-m", "climnb.runtime.watchdog", str(os.getpid())]
            if self.launcher == "sbatch":
                cmd += ["--slurm-job-name", self.job_name]
            self._watchdog = subprocess.Popen(
                cmd,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                start_new_session=True,
            )

    def __enter__(self) -> Engines:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    @property
    def view(self):
        """A blocking DirectView on all engines, ordered by engine id."""
        if self.client is None:
            raise RuntimeError("the engines are not running: call start() or use `with Engines()`")
        view = self.client[sorted(self.client.ids)]
        view.block = True
        return view

    # --- submitted engines ---------------------------------------------------------------------

    @property
    def job_name(self) -> str:
        """The name of the engines' batch job (``"sbatch"``): unique to this cluster."""
        return f"climnb-engines-{self._cluster_id}"

    def batch_script(self) -> str:
        """The batch script submitted for ``"sbatch"`` (an ipyparallel template: the engine
        command goes where ``{program}``/``{program_args}`` stand)."""
        c = self.config
        options = [
            f"--job-name={self.job_name}",
            f"--ntasks={self.n}",
            f"--cpus-per-task={self.threads}",
            f"--time={c.walltime}",
            "--output={output_file}",
            *([f"--partition={c.partition}"] if c.partition else []),
            *([f"--account={c.account}"] if c.account else []),
            *(_braces(shlex.quote(o)) for o in c.sbatch_options),
        ]
        srun = [
            "srun",
            *slurm_mpi_args(c.launcher_args),
            "--kill-on-bad-exit=1",
            *(_braces(a) for a in c.launcher_args),
        ]
        lines = ["#!/bin/sh", *(f"#SBATCH {o}" for o in options), "#SBATCH --export=ALL"]
        # engine ids are MPI ranks (--mpi), as under mpiexec
        lines.append(f"{shlex.join(srun)} {{program}} --mpi {{program_args}}")
        return "\n".join(lines) + "\n"

    def _start_submitted(self) -> None:
        """Start the controller here, submit the engines, wait for the job and the engines."""
        self.cluster.start_controller_sync()
        try:
            self.cluster.start_engines_sync()
        except subprocess.CalledProcessError as err:  # sbatch refused: ask it why
            (engine_set,) = self.cluster.engines.values()
            self.cluster.engines.clear()  # no job to cancel
            why = subprocess.run(
                ["sbatch", "--test-only", engine_set.batch_file], capture_output=True, text=True
            ).stderr.strip()
            raise EngineStartError(
                f"sbatch refused the engines' job (exit status {err.returncode}): {why}\n"
                f"batch script:\n{self.batch_script()}"
            ) from err
        (engine_set,) = self.cluster.engines.values()
        self.job_id = engine_set.job_id
        log.info("engines submitted as job %s (%s)", self.job_id, self.job_name)
        self.client = self.cluster.connect_client_sync()
        submitted = time.monotonic()
        running_since = None
        while len(self.client.ids) < self.n:
            state, reason = _job_state(self.job_id)
            now = time.monotonic()
            if state == "PENDING" and now - submitted > self.config.pending_timeout:
                raise EngineStartError(
                    f"job {self.job_id} ({self.job_name}) still pending after "
                    f"{self.config.pending_timeout:.0f} s (reason: {reason}); it was cancelled. "
                    "`squeue --start` shows when Slurm expects to start such a job; ask for "
                    "another partition, fewer engines or a shorter walltime, or wait longer "
                    "(pending_timeout)"
                )
            if state in ("RUNNING", "COMPLETING") and running_since is None:
                running_since = now
            if running_since is not None and now - running_since > self.config.timeout:
                raise EngineStartError(
                    f"job {self.job_id} runs but only {len(self.client.ids)} of {self.n} "
                    f"engines registered within {self.config.timeout:.0f} s; job output:\n"
                    f"{self._launcher_output()}"
                )
            if state is None or state not in ("PENDING", "RUNNING", "CONFIGURING"):
                raise EngineStartError(
                    f"job {self.job_id} ({self.job_name}) ended ({state or 'gone'}"
                    f"{', ' + reason if reason and reason != 'None' else ''}) before its "
                    f"{self.n} engines registered; job output:\n{self._launcher_output()}"
                )
            time.sleep(0.5)

    # --- health and display --------------------------------------------------------------------

    def check(self) -> None:
        """Raise :class:`EnginesLostError` if an engine has gone (killed, crashed, its job
        ended) since start; the message names the engines and, under Slurm, the job's state."""
        if self.client is None:
            raise EnginesLostError("the engines are not running (stopped, or never started)")
        lost = self.n - len(self.client.ids)
        if lost > 0 or (self.job_id and _job_state(self.job_id)[0] != "RUNNING"):
            job = ""
            if self.job_id:
                state, reason = _job_state(self.job_id)
                job = f"; job {self.job_id} is {state or 'gone'} ({reason})"
            elif self.slurm:
                job = f" in allocation {self.slurm.job_id}"
            raise EnginesLostError(
                f"{lost} of {self.n} {self.launcher} engines are gone (registered now: "
                f"{sorted(self.client.ids)}){job}. Stop and start the engines again."
            )

    def _state(self) -> dict[str, str]:
        running = self.client is not None
        info = {
            "launcher": self.launcher,
            "engines": f"{len(self.client.ids) if running else 0} of {self.n} running",
            "threads per engine": str(self.threads),
        }
        if self.job_id:
            info["job"] = f"{self.job_id} ({self.job_name})"
        elif self.slurm:
            info["allocation"] = self.slurm.job_id
        if self.launcher == "sbatch":
            c = self.config
            info["partition"] = c.partition or "(default)"
            info["walltime"] = c.walltime
            if c.account:
                info["account"] = c.account
        if self.startup_s is not None and running:
            info["ready after"] = f"{self.startup_s:.1f} s"
        if running and self.client.ids:
            info["engine ids"] = ", ".join(map(str, sorted(self.client.ids)))
        return info

    @property
    def summary(self) -> str:
        """One line: the engines, their threads, and what training on them will do."""
        plural = "s" if self.n != 1 else ""
        line = f"{self.n} {self.launcher} engine{plural}, {self.threads} thread(s) each"
        if self.horovod:
            return line
        return (
            f"{line}; Horovod is not installed: training in one process without it (to train "
            f"on several: {install_hint('horovod')})"
        )

    def __repr__(self) -> str:
        body = ", ".join(f"{k}={v}" for k, v in self._state().items())
        return f"<Engines {body}>"

    def _repr_html_(self) -> str:
        rows = "".join(
            f"<tr><th style='text-align:left'>{html.escape(k)}</th>"
            f"<td style='text-align:left'>{html.escape(v)}</td></tr>"
            for k, v in self._state().items()
        )
        return f"<table><caption style='text-align:left'>Engines</caption>{rows}</table>"

    # --- Horovod -------------------------------------------------------------------------------

    def init_horovod(self):
        """Initialise Horovod on every engine; return a table of rank, host and engine id.

        Without Horovod: one engine is readied to train alone (rank 0 of 1, controller
        ``"none"``); several are refused with :class:`EngineStartError`, in one line."""
        import pandas as pd

        if not self.horovod and self.n > 1:
            raise EngineStartError(
                f"Horovod is not installed, so {self.n} engines cannot train together: start "
                f"one engine (n=1) to train in one process without it, or install Horovod: "
                f"{install_hint('horovod')}"
            )
        view = self.view
        # Every engine imports TensorFlow before any calls hvd.init: Horovod's Gloo rendezvous
        # gives up (and ends the engine) when a peer is still importing after its timeout, as
        # happened on a loaded 2-core machine.
        view.apply_async(_engine_set_threads, self.threads).get(timeout=self.config.timeout)
        local = self.launcher == "local" and self.horovod
        gloo = self._gloo_env() if local else [{}] * len(view.targets)
        rows = []
        results = [
            self.client[eid].apply_async(_engine_init_horovod, self.threads, env, self.horovod)
            for eid, env in zip(view.targets, gloo, strict=True)
        ]
        for eid, result in zip(view.targets, results, strict=True):
            rows.append({**result.get(timeout=self.config.timeout), "engine_id": eid})
        columns = [
            "rank",
            "local_rank",
            "size",
            "host",
            "engine_id",
            "threads",
            "controller",
            "pid",
        ]
        table = pd.DataFrame(rows)[columns].sort_values("rank").reset_index(drop=True)
        if sorted(table["rank"]) != list(range(self.n)):
            raise EngineStartError(f"Horovod ranks are not 0..{self.n - 1}:\n{table}")
        return table

    def check_allreduce(self) -> list[float]:
        """Sum ``rank + 1`` over all ranks with Horovod; every engine should return n(n+1)/2."""
        return self.view.apply(_engine_allreduce)

    def _gloo_env(self) -> list[dict[str, str]]:
        """Start a Horovod rendezvous server here and give each engine its slot."""
        from horovod.runner.common.util.hosts import get_host_assignments, parse_hosts
        from horovod.runner.http.http_server import RendezvousServer

        hostname = socket.gethostname()
        slots = get_host_assignments(parse_hosts(f"{hostname}:{self.n}"), self.n)
        self._rendezvous = RendezvousServer()
        port = self._rendezvous.start()
        self._rendezvous.init(slots)
        common = {
            "HOROVOD_GLOO_RENDEZVOUS_ADDR": "127.0.0.1",
            "HOROVOD_GLOO_RENDEZVOUS_PORT": str(port),
            "HOROVOD_CONTROLLER": "gloo",
            "HOROVOD_CPU_OPERATIONS": "gloo",
            "HOROVOD_GLOO_IFACE": "lo",
            "HOROVOD_GLOO_TIMEOUT_SECONDS": str(max(30, int(self.config.timeout))),
        }
        return [
            {
                **common,
                "HOROVOD_HOSTNAME": hostname,
                "HOROVOD_RANK": str(s.rank),
                "HOROVOD_SIZE": str(s.size),
                "HOROVOD_LOCAL_RANK": str(s.local_rank),
                "HOROVOD_LOCAL_SIZE": str(s.local_size),
                "HOROVOD_CROSS_RANK": str(s.cross_rank),
                "HOROVOD_CROSS_SIZE": str(s.cross_size),
            }
            for s in slots
        ]

    # --- helpers -------------------------------------------------------------------------------

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
        if self.launcher in ("slurm", "mpi", "sbatch") and not _has_module("mpi4py"):
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


def _braces(text: str) -> str:
    """``text`` safe in an ipyparallel batch template (which formats ``{...}``)."""
    return str(text).replace("{", "{{").replace("}", "}}")


def _job_state(job_id: str) -> tuple[str | None, str]:
    """Slurm's state and reason for ``job_id`` (``(None, "")`` once squeue no longer lists it)."""
    try:
        out = subprocess.run(
            ["squeue", "-h", "-j", str(job_id), "-o", "%T|%r"],
            capture_output=True,
            text=True,
            timeout=30,
        )
    except (OSError, subprocess.TimeoutExpired) as err:
        return None, f"squeue failed: {err}"
    line = out.stdout.strip().splitlines()
    if out.returncode or not line:  # squeue says "Invalid job id" once the job is purged
        return None, ""
    state, _, reason = line[0].partition("|")
    return state, reason


def _cancel_job(job_id: str, timeout: float = 60.0) -> None:
    """Cancel ``job_id`` and wait until squeue no longer lists it (its processes have ended)."""
    subprocess.run(["scancel", str(job_id)], capture_output=True, timeout=30)
    deadline = time.monotonic() + timeout
    while _job_state(job_id)[0] is not None:
        if time.monotonic() > deadline:
            log.warning("job %s still listed by squeue %.0f s after scancel", job_id, timeout)
            return
        time.sleep(0.3)


def _end_process_group(pgid: int, grace: float = 3.0) -> None:
    """End what is left of the controller's process group (ipyparallel starts it in a session
    of its own): a controller stopped while it was still starting (its engines' job refused at
    once) leaves its schedulers behind, orphaned, where no search of our children finds them."""
    import signal

    def alive() -> bool:
        try:
            os.killpg(pgid, 0)
            return True
        except (ProcessLookupError, PermissionError):
            return False

    deadline = time.monotonic() + 1.0  # stopped already: it is going, or it is stuck
    while alive() and time.monotonic() < deadline:
        time.sleep(0.1)
    for sig in (signal.SIGTERM, signal.SIGKILL):
        if not alive():
            return
        log.warning("ending what is left of the controller's processes (group %d)", pgid)
        os.killpg(pgid, sig)
        time.sleep(grace if sig == signal.SIGTERM else 0)


def _reap_children(timeout: float = 15.0) -> None:
    """Wait for the engine processes we started to exit; kill what is left after ``timeout``."""
    import psutil

    me = psutil.Process()
    deadline = time.monotonic() + timeout
    while engine_processes(me) and time.monotonic() < deadline:
        time.sleep(0.2)
    for proc in engine_processes(me):
        log.warning("killing stray engine process %d", proc.pid)
        proc.kill()


def _engine_set_threads(threads: int) -> None:
    """Runs on an engine: import TensorFlow and set its thread pools (once per process)."""
    import tensorflow as tf

    try:
        tf.config.threading.set_intra_op_parallelism_threads(threads)
        tf.config.threading.set_inter_op_parallelism_threads(min(2, threads))
    except RuntimeError:  # already initialised by an earlier call: keep its settings
        pass


def _engine_init_horovod(threads: int, env: dict[str, str], horovod: bool = True) -> dict:
    """Runs on an engine: set the Gloo variables, initialise Horovod, describe itself
    (without Horovod: rank 0 of 1, as the training loop will run there)."""
    import os
    import socket

    os.environ.update(env)
    _engine_set_threads(threads)
    if not horovod:
        return {
            "rank": 0,
            "local_rank": 0,
            "size": 1,
            "host": socket.gethostname(),
            "pid": os.getpid(),
            "threads": threads,
            "controller": "none",
        }
    import horovod.tensorflow as hvd

    hvd.init()
    return {
        "rank": hvd.rank(),
        "local_rank": hvd.local_rank(),
        "size": hvd.size(),
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "threads": threads,
        "controller": "mpi" if hvd.mpi_enabled() else "gloo",
    }


def _engine_allreduce() -> float:
    import horovod.tensorflow as hvd
    import tensorflow as tf

    return float(hvd.allreduce(tf.constant(hvd.rank() + 1.0), op=hvd.Sum))
