"""Shared fixtures: toy-size synthetic data made once per session, and MPI environment."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest

from climnb.cluster import mpi_settings
from climnb.synthetic import make_dataset

VENV_BIN = Path(sys.executable).parent


@pytest.fixture(scope="session")
def toy():
    """Eight toy-size (96 x 144) steps with 3 storms and 3 rivers: ``(ds, events)``."""
    return make_dataset(n_time=8, seed=11)


@pytest.fixture(scope="session")
def mpi_env():
    """Environment for launching the tests' MPI programs (two ranks): OpenMPI's settings for
    this machine from :func:`climnb.cluster.mpi_settings`, and the venv first on PATH.
    """
    if shutil.which("mpirun") is None:
        pytest.skip("mpirun not found: install OpenMPI (make setup does it with apt as root)")
    env = {**os.environ, **mpi_settings(2)}
    env["PATH"] = f"{VENV_BIN}{os.pathsep}{env.get('PATH', '')}"
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    return env


@pytest.fixture
def mpi_environ(mpi_env, monkeypatch):
    """:func:`mpi_env` applied to this process, for engines started from the tests (they
    inherit it); no Slurm variables, no interactive progress widgets."""
    for key in (*mpi_settings(2), "PATH", "TF_CPP_MIN_LOG_LEVEL"):
        if key in mpi_env:
            monkeypatch.setenv(key, mpi_env[key])
    for key in [k for k in os.environ if k.startswith("SLURM_")]:
        monkeypatch.delenv(key)
    monkeypatch.setenv("IPP_NONINTERACTIVE", "1")
    return mpi_env


def pytest_runtest_logreport(report):
    """With ``CLIMNB_TEST_TIMES=FILE``, append each test phase's seconds to FILE as it ends
    (survives a killed run, unlike ``--durations``; for finding what makes the suite slow)."""
    path = os.environ.get("CLIMNB_TEST_TIMES")
    if path and getattr(report, "node", None) is None:  # xdist's controller: the worker wrote it
        with open(path, "a") as f:
            f.write(f"{report.duration:8.2f}\t{report.when}\t{report.outcome}\t{report.nodeid}\n")
