"""Engines submitted as a Slurm batch job (the ``"sbatch"`` launcher): the job's script, its
start, its state and its cancellation.

:class:`SubmittedJob` is the part of :class:`climnb.runtime.cluster.Engines` that submits the
engines and waits for them; :func:`job_state` and :func:`cancel_job` ask and tell Slurm.

Examples
--------
>>> braces("--comment={x}")
'--comment={{x}}'
"""

from __future__ import annotations

import logging
import shlex
import subprocess
import time

from climnb.runtime.launch import EngineStartError, slurm_mpi_args

__all__ = ["SubmittedJob", "braces", "cancel_job", "job_state"]

log = logging.getLogger(__name__)


class SubmittedJob:
    """The engines' batch job, for :class:`climnb.runtime.cluster.Engines`."""

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
            *(braces(shlex.quote(o)) for o in c.sbatch_options),
        ]
        srun = [
            "srun",
            *slurm_mpi_args(c.launcher_args),
            "--kill-on-bad-exit=1",
            *(braces(a) for a in c.launcher_args),
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
            state, reason = job_state(self.job_id)
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


def braces(text: str) -> str:
    """``text`` safe in an ipyparallel batch template (which formats ``{...}``)."""
    return str(text).replace("{", "{{").replace("}", "}}")


def job_state(job_id: str) -> tuple[str | None, str]:
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


def cancel_job(job_id: str, timeout: float = 60.0) -> None:
    """Cancel ``job_id`` and wait until squeue no longer lists it (its processes have ended)."""
    subprocess.run(["scancel", str(job_id)], capture_output=True, timeout=30)
    deadline = time.monotonic() + timeout
    while job_state(job_id)[0] is not None:
        if time.monotonic() > deadline:
            log.warning("job %s still listed by squeue %.0f s after scancel", job_id, timeout)
            return
        time.sleep(0.3)
