"""Engines on the nodes at hand: MPI, Slurm (a fake srun), local Gloo; and clear failures.
The real Slurm cluster's tests are in test_slurm.py."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys

import psutil
import pytest
from _engines import fake_slurm_allocation, no_engine_processes_left

from climnb.runtime.cluster import (
    Engines,
    EngineStartError,
    SessionLimits,
    detect_launcher,
)
from climnb.runtime.watchdog import is_engine_process

pytestmark = [pytest.mark.horovod, pytest.mark.slow]


def _check_allreduce(engines):
    assert engines.check_allreduce() == [3.0, 3.0]


# MPI engines running Horovod (their table, an allreduce, no process left after): asserted by
# test_train.py's test_engines_train_with_dashboard_and_recover_from_a_killed_engine, on the
# engines it starts anyway.


def test_local_engines_use_gloo_with_rendezvous_here(mpi_environ, monkeypatch):
    # A peer that comes late to the rendezvous (busy, or still importing TensorFlow on a loaded
    # machine) once made Gloo give up after its 30 s and end engine 0: here the peer is 4 s late
    # against a 2 s Gloo timeout inherited from the environment.
    monkeypatch.setenv("HOROVOD_GLOO_TIMEOUT_SECONDS", "2")
    with Engines(n=2, launcher="local", threads_per_engine=1) as engines:
        engines.client[engines.view.targets[1]].apply_async(__import__("time").sleep, 4)
        table = engines.init_horovod()
        assert set(table.controller) == {"gloo"} and list(table["rank"]) == [0, 1]
        assert set(table.threads) == {1}
        _check_allreduce(engines)
    no_engine_processes_left()


@pytest.fixture
def fake_slurm(tmp_path, mpi_environ, monkeypatch):
    return fake_slurm_allocation(tmp_path, mpi_environ, monkeypatch)


# Engines inside a Slurm allocation (detected, sized from it, started with srun and the right
# arguments, running Horovod): asserted by test_train.py's
# test_engines_train_with_dashboard_and_recover_from_a_killed_engine, whose second engines start
# in this fake allocation (this was test_slurm_allocation_uses_srun, which paid for two more
# engines loading TensorFlow).


def test_allocation_too_small_says_so(fake_slurm):
    with pytest.raises(EngineStartError, match="allocation 4242 has 2 tasks but 3 engines"):
        Engines(n=3).start()


def test_engines_that_never_register_fail_clearly(tmp_path, mpi_environ, monkeypatch):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    broken = bin_dir / "mpiexec"
    broken.write_text("#!/bin/sh\necho 'mpiexec: cannot start (simulated)' >&2\nexit 3\n")
    broken.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{mpi_environ['PATH']}")
    with pytest.raises(EngineStartError, match=r"did not start within 15 s.*Check that `mpiexec"):
        Engines(n=2, launcher="mpi", timeout=15).start()
    no_engine_processes_left()


def test_detects_local_without_mpi(tmp_path):
    env = {"PATH": str(tmp_path)}  # no mpiexec, no srun
    assert detect_launcher(env) == "local"
    (tmp_path / "bash").symlink_to(shutil.which("bash"))
    env_slurm = {"PATH": str(tmp_path), "SLURM_JOB_ID": "1"}
    assert detect_launcher(env_slurm) != "slurm"  # no srun there


def test_bad_settings():
    with pytest.raises(ValueError, match="at least 1"):
        Engines(n=0, launcher="local")
    with pytest.raises(
        ValueError, match="launcher must be one of auto, slurm, mpi, local, sbatch; got 'pbs'"
    ):
        Engines(n=1, launcher="pbs")


KERNEL = """
import json, sys, time
import psutil
from climnb.runtime.cluster import Engines
engines = Engines(n=2, launcher="mpi").start()
print(json.dumps([p.pid for p in psutil.Process().children(recursive=True)]), flush=True)
time.sleep(600)
"""


@pytest.mark.mpi
def test_engines_stop_when_the_kernel_is_killed(mpi_env, tmp_path):
    """A kernel killed with SIGKILL runs no clean-up: the watchdog stops its engines."""
    err = tmp_path / "stderr.txt"
    with open(err, "w") as stderr:
        kernel = subprocess.Popen(
            [sys.executable, "-c", KERNEL],
            env=mpi_env,
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
            start_new_session=True,
        )
    try:
        line = kernel.stdout.readline()
        assert line, f"the kernel stand-in failed: {err.read_text()[-2000:]}"
        started = [psutil.Process(pid) for pid in json.loads(line)]
        names = [" ".join(p.cmdline()) for p in started]
        assert sum(map(is_engine_process, started)) >= 4, names  # controller, mpiexec, 2 engines
        assert any("climnb.runtime.watchdog" in n for n in names), names
    finally:
        os.killpg(kernel.pid, signal.SIGKILL)  # the kernel and its process group, no clean-up
        kernel.wait()
    _, alive = psutil.wait_procs(started, timeout=30)
    assert not alive, [" ".join(p.cmdline()) for p in alive]
    assert "stopped engine processes" in err.read_text()


def test_the_test_slurm_cluster_says_why_it_cannot_start(tmp_path, monkeypatch):
    """tests/slurm_cluster.py skips the Slurm tests with a reason: not root, or no packages."""
    import slurm_cluster

    monkeypatch.setenv("PATH", str(tmp_path))  # no Slurm, no munge
    expected = "needs root" if os.geteuid() else "munged, mungekey, slurmctld, slurmd, srun"
    with pytest.raises(slurm_cluster.SlurmUnavailable, match=expected) as err:
        slurm_cluster.start(tmp_path / "slurm")
    if not os.geteuid():
        assert "apt-get install slurm-wlm munge" in str(err.value)
    assert not (tmp_path / "slurm").exists(), "nothing started or written"


def test_small_sessions_get_one_engine(tmp_path, monkeypatch):
    """MEM_LIMIT / CPU_LIMIT as JupyterHub and Binder set them, or the cgroup's limits."""
    binder = SessionLimits.detect({"MEM_LIMIT": "2147483648", "CPU_LIMIT": "0.5"}, str(tmp_path))
    assert binder == SessionLimits(2**31, 0.5) and binder.small and binder.cores() == 1
    (tmp_path / "memory.max").write_text("1073741824\n")
    (tmp_path / "cpu.max").write_text("150000 100000\n")
    cgroup = SessionLimits.detect({}, str(tmp_path))
    assert cgroup == SessionLimits(2**30, 1.5) and cgroup.small
    (tmp_path / "memory.max").write_text("max\n")
    (tmp_path / "cpu.max").write_text("max 100000\n")
    assert SessionLimits.detect({}, str(tmp_path)) == SessionLimits(None, None)
    assert not SessionLimits(64 * 2**30, None).small
    monkeypatch.setenv("MEM_LIMIT", "2147483648")
    monkeypatch.setenv("CPU_LIMIT", "1")
    engines = Engines(launcher="local")
    assert (engines.n, engines.threads) == (1, 1)
    assert Engines(n=2, launcher="local").n == 2, "an explicit count stands"
