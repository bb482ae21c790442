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

import html
import logging
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field

import psutil

from climnb.runtime.install import install_hint
from climnb.runtime.launch import (
    LAUNCHERS,
    SMALL_SESSION_BYTES,
    EnginesLostError,
    EngineStartError,
    LauncherName,
    LauncherSetup,
    SessionLimits,
    SlurmAllocation,
    detect_launcher,
    engines_per_node,
    has_module,
    mpi_settings,
    slurm_mpi_args,
)
from climnb.runtime.ranks import HorovodRanks
from climnb.runtime.slurmjob import SubmittedJob, cancel_job, job_state
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
    "new_cluster_id",
    "slurm_mpi_args",
    "SessionLimits",
    "SMALL_SESSION_BYTES",
]

#: Milliseconds between the controller's heartbeats to the engines (ipyparallel's default: 3000).
HEARTBEAT_MS = 1000


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


class Engines(LauncherSetup, SubmittedJob, HorovodRanks):
    """ipyparallel engines with Horovod; use as a context manager so that they always stop.

    Its jobs live beside it: the launcher's checks and settings
    (:class:`~climnb.runtime.launch.LauncherSetup`), the batch job of submitted engines
    (:class:`~climnb.runtime.slurmjob.SubmittedJob`) and Horovod on the engines
    (:class:`~climnb.runtime.ranks.HorovodRanks`).

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
        self.horovod = has_module("horovod")
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
        self.per_node = engines_per_node(n, self.launcher, self.slurm)
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
            cluster_id=new_cluster_id(),
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
            cancel_job(self.job_id)
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

    # --- health and display --------------------------------------------------------------------

    def check(self) -> None:
        """Raise :class:`EnginesLostError` if an engine has gone (killed, crashed, its job
        ended) since start; the message names the engines and, under Slurm, the job's state."""
        if self.client is None:
            raise EnginesLostError("the engines are not running (stopped, or never started)")
        lost = self.n - len(self.client.ids)
        if lost > 0 or (self.job_id and job_state(self.job_id)[0] != "RUNNING"):
            job = ""
            if self.job_id:
                state, reason = job_state(self.job_id)
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


def new_cluster_id() -> str:
    """A cluster id no other process picks: ipyparallel's own (the time in seconds and four
    characters of Python's ``random``) repeats in processes that seeded ``random`` alike (Keras'
    ``set_random_seed`` does), and two such processes starting engines in the same second would
    share the controller's connection files and, under Slurm, the engines' job name, which
    the watchdog cancels by. The characters here come from the operating system."""
    return f"{int(time.time())}-{secrets.token_hex(4)}"


def _end_process_group(pgid: int, grace: float = 3.0) -> None:
    """End what is left of the controller's process group (ipyparallel starts it in a session
    of its own): a controller stopped while it was still starting (its engines' job refused at
    once) leaves its schedulers behind, orphaned, where no search of our children finds them."""

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
    me = psutil.Process()
    deadline = time.monotonic() + timeout
    while engine_processes(me) and time.monotonic() < deadline:
        time.sleep(0.2)
    for proc in engine_processes(me):
        log.warning("killing stray engine process %d", proc.pid)
        proc.kill()
