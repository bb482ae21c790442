"""Shared fixtures: toy-size synthetic data made once per session, and MPI environment."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest

from climnb.cluster import mpi_settings
from climnb.synthetic import make_dataset

ROOT = Path(__file__).resolve().parents[1]
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
