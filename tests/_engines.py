"""Engines for the tests: a stand-in ``srun`` that makes this machine look like a one-node Slurm
allocation (used by test_cluster.py and by test_train.py's engines, which resume a run inside
one), and the check that no engine process is left."""

from __future__ import annotations

import os
import shlex
import textwrap
from pathlib import Path

import psutil

FAKE_SRUN = textwrap.dedent(
    """\
    #!/bin/bash
    # A stand-in for Slurm's srun: records its arguments, then starts the tasks with mpiexec.
    if [[ $1 == --mpi=list ]]; then
        printf 'MPI plugin types are...\\n\\tnone\\n\\tpmix\\n'; exit
    fi
    printf '%s\\n' "$*" >> {log}
    n=1; args=()
    while [[ $# -gt 0 ]]; do
        case $1 in
            -n|--ntasks) n=$2; shift 2;;
            --ntasks-per-node=*|--cpus-per-task=*|--kill-on-bad-exit=*|--mpi=*) shift;;
            *) args+=("$1"); shift;;
        esac
    done
    # stopped (SIGTERM), kill the tasks at once as srun's tasks are, not after mpiexec's 1 s
    export OMPI_MCA_odls_base_sigkill_timeout=0
    exec mpiexec --oversubscribe --bind-to none -n "$n" "${{args[@]}}"
    """
)


def fake_slurm_allocation(folder, mpi_environ: dict, monkeypatch) -> Path:
    """Put a stand-in ``srun`` (in ``folder``/bin) first on PATH and set the variables of
    allocation 4242 (one node, 2 tasks, 2 CPUs); return the file where srun records its
    arguments, one line per call."""
    bin_dir = Path(folder) / "bin"
    bin_dir.mkdir(parents=True)
    log = Path(folder) / "srun.log"
    srun = bin_dir / "srun"
    srun.write_text(FAKE_SRUN.format(log=shlex.quote(str(log))))
    srun.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{mpi_environ['PATH']}")
    monkeypatch.setenv("SLURM_JOB_ID", "4242")
    monkeypatch.setenv("SLURM_JOB_NUM_NODES", "1")
    monkeypatch.setenv("SLURM_NTASKS", "2")
    monkeypatch.setenv("SLURM_CPUS_ON_NODE", "2")
    if os.geteuid() == 0:
        monkeypatch.setenv("OMPI_ALLOW_RUN_AS_ROOT", "1")
        monkeypatch.setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
    return log


def check_srun_recorded(log: Path) -> None:
    """What Engines in allocation 4242 passed to srun: all its tasks on its node, one CPU each,
    Slurm's PMIx for the OpenMPI ranks, and an ipyparallel engine as the program."""
    recorded = log.read_text().split()
    assert recorded[:2] == ["-n", "2"]
    assert "--ntasks-per-node=2" in recorded and "--cpus-per-task=1" in recorded
    assert "--mpi=pmix" in recorded, "OpenMPI ranks need Slurm's PMIx where it offers it"
    assert any("ipyparallel" in word or "ipengine" in word for word in recorded)


def no_engine_processes_left() -> None:
    left = [
        p
        for p in psutil.Process().children(recursive=True)
        if "ipyparallel" in " ".join(p.cmdline())
    ]
    assert not left, f"engine processes left: {left}"
