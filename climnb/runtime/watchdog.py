"""Stop a notebook's engines when its kernel dies without running its clean-up.

``python -m climnb.runtime.watchdog PID`` runs in its own session beside the process ``PID`` (the
kernel that started :class:`climnb.runtime.cluster.Engines`). While ``PID`` lives, it notes, once a
second, the ipyparallel controller, engines and ``mpiexec``/``srun`` launchers among its
descendants. When ``PID`` is gone — a kernel killed with SIGKILL, or out of memory, runs no
``atexit`` handler — it terminates those processes (SIGTERM, then SIGKILL after a grace
period) and exits. :meth:`Engines.stop` ends the watchdog after a normal shutdown.

``python -m climnb.runtime.watchdog PID --slurm-job-name NAME`` also cancels the Slurm jobs of that
name (engines submitted with sbatch run outside the kernel's process tree).

ipyparallel stops engines whose controller goes away, but only after its heartbeat times out,
and nothing stops the controller itself when the process that started it dies; hence this.
Written by hand because psutil gives the process tree but no library watches a parent for us
(``prctl(PR_SET_PDEATHSIG)`` would have to be set inside ipyparallel's launchers, and does not
cover the grandchildren that ``mpiexec`` starts).
"""

from __future__ import annotations

import subprocess
import sys
import time

import psutil

#: Seconds between looks at the parent's process tree.
INTERVAL = 1.0
#: Seconds between SIGTERM and SIGKILL.
GRACE = 5.0


def is_engine_process(proc: psutil.Process) -> bool:
    """Whether ``proc`` is an ipyparallel controller or engine, or the launcher of engines."""
    try:
        cmd = " ".join(proc.cmdline())
    except psutil.Error:
        return False
    if "climnb.runtime.watchdog" in cmd:
        return False
    return "ipyparallel" in cmd or "ipengine" in cmd or "mpiexec" in cmd or "srun" in cmd


def engine_processes(parent: psutil.Process) -> list[psutil.Process]:
    """The engine-related processes among ``parent``'s descendants."""
    try:
        return [p for p in parent.children(recursive=True) if is_engine_process(p)]
    except psutil.Error:
        return []


def terminate(procs: list[psutil.Process], grace: float = GRACE) -> None:
    """SIGTERM ``procs`` (those still running: psutil checks the pid was not reused), then
    SIGKILL what is left after ``grace`` seconds."""
    alive = []
    for proc in procs:
        try:
            if proc.is_running():
                proc.terminate()
                alive.append(proc)
        except psutil.Error:
            pass
    _, alive = psutil.wait_procs(alive, timeout=grace)
    for proc in alive:
        try:
            proc.kill()
        except psutil.Error:
            pass


def _alive(proc: psutil.Process) -> bool:
    try:
        return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def watch(pid: int, interval: float = INTERVAL) -> list[int]:
    """Watch ``pid`` until it dies; then stop the engines it left. Returns their pids."""
    try:
        parent = psutil.Process(pid)
    except psutil.NoSuchProcess:
        return []
    seen: dict[int, psutil.Process] = {}
    while _alive(parent):
        for proc in engine_processes(parent):
            seen.setdefault(proc.pid, proc)
        time.sleep(interval)
    # the descendants that outlived the parent were re-parented: also take their children
    left = [p for p in seen.values() if p.is_running()]
    for proc in list(left):
        try:
            left.extend(c for c in proc.children(recursive=True) if c.pid not in seen)
        except psutil.Error:
            pass
    terminate(left)
    return [p.pid for p in left]


def cancel_jobs(name: str) -> str:
    """``scancel --name NAME`` (the current user's jobs of that name); its error text if any."""
    try:
        out = subprocess.run(
            ["scancel", "--name", name], capture_output=True, text=True, timeout=60
        )
    except (OSError, subprocess.TimeoutExpired) as err:
        return str(err)
    return out.stderr.strip()


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog="python -m climnb.runtime.watchdog")
    parser.add_argument("pid", type=int)
    parser.add_argument("--slurm-job-name", help="cancel the Slurm jobs of this name too")
    args = parser.parse_args(argv)
    stopped = watch(args.pid)
    if stopped:
        print(
            f"climnb watchdog: process {args.pid} died; stopped engine processes {stopped}",
            file=sys.stderr,
        )
    if args.slurm_job_name:  # watch() returns only once the kernel has died
        error = cancel_jobs(args.slurm_job_name)
        print(
            f"climnb watchdog: process {args.pid} died; cancelled Slurm jobs named "
            f"{args.slurm_job_name}" + (f" ({error})" if error else ""),
            file=sys.stderr,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
