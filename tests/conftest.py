"""Shared fixtures: toy-size synthetic data made once per session, and MPI environment."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest

from climnb.synthetic import make_dataset

ROOT = Path(__file__).resolve().parents[1]
VENV_BIN = Path(sys.executable).parent


@pytest.fixture(scope="session")
def toy():
    """Eight toy-size (96 x 144) steps with 3 storms and 3 rivers: ``(ds, events)``."""
    return make_dataset(n_time=8, seed=11)


@pytest.fixture(scope="session")
def mpi_env():
    """Environment for launching MPI programs from the tests.

    OpenMPI refuses to run as root, and more ranks than cores, unless told; we tell it only
    when it applies (root; a 2-core machine), as a user would on such a machine.
    """
    if shutil.which("mpirun") is None:
        pytest.skip("mpirun not found: install OpenMPI (make setup does it with apt as root)")
    env = dict(os.environ)
    env["PATH"] = f"{VENV_BIN}{os.pathsep}{env.get('PATH', '')}"
    if os.geteuid() == 0:
        env["OMPI_ALLOW_RUN_AS_ROOT"] = "1"
        env["OMPI_ALLOW_RUN_AS_ROOT_CONFIRM"] = "1"
    if (os.cpu_count() or 1) < 4:
        env["OMPI_MCA_rmaps_base_oversubscribe"] = "1"
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    return env
