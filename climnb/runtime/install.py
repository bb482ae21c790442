"""How to get a missing piece here: the conda command in a conda environment, else pip's.

The one place that says it, for :mod:`climnb.doctor`'s report and for the errors of the
engines and the trainer.

Examples
--------
>>> install_hint("ipyparallel", conda=False)
'pip install ipyparallel'
>>> install_hint("ipyparallel", conda=True)
'conda install -c conda-forge ipyparallel'
"""

from __future__ import annotations

import sys
from pathlib import Path

__all__ = ["conda_environment", "install_hint"]

HOROVOD_PIP = (
    "HOROVOD_WITH_TENSORFLOW=1 HOROVOD_WITH_MPI=1 HOROVOD_WITH_GLOO=1 HOROVOD_WITHOUT_PYTORCH=1 "
    "HOROVOD_WITHOUT_MXNET=1 pip install --no-build-isolation --no-deps horovod==0.28.1 "
    "(builds against this TensorFlow: needs cmake, a C++ compiler and MPI headers)"
)

# what -> (with conda, with pip)
HINTS: dict[str, tuple[str, str]] = {
    "tensorflow": ("conda install -c conda-forge tensorflow=2.18", "pip install 'climnb[train]'"),
    "horovod": ("conda install -c conda-forge horovod", HOROVOD_PIP),
    "mpi4py": (
        "conda install -c conda-forge mpi4py openmpi",
        "pip install mpi4py (with an MPI found: the site's MPI module, or apt-get install "
        "libopenmpi-dev)",
    ),
    "mpiexec": (
        "conda install -c conda-forge openmpi",
        "load the site's MPI module (module load openmpi), or apt-get install openmpi-bin",
    ),
    "ipyparallel": ("conda install -c conda-forge ipyparallel", "pip install ipyparallel"),
    "kernel": ("climnb kernel install --user", "climnb kernel install --user"),
    "pyviz": (
        "conda install -c conda-forge pyviz_comms, in the environment the Jupyter server runs in",
        "pip install pyviz_comms, in the environment the Jupyter server runs in",
    ),
    "widgets": (
        "conda install -c conda-forge jupyterlab_widgets, in the environment the Jupyter "
        "server runs in",
        "pip install jupyterlab_widgets, in the environment the Jupyter server runs in",
    ),
}


def conda_environment(prefix: str | None = None) -> bool:
    """Whether ``prefix`` (default: this Python's) is a conda environment."""
    return (Path(prefix or sys.prefix) / "conda-meta").is_dir()


def install_hint(what: str, *, conda: bool | None = None) -> str:
    """How to get ``what`` (``"horovod"``, ``"tensorflow"``, ``"mpiexec"``, ...) here: the
    conda command in a conda environment, else pip's (or the system's)."""
    conda = conda_environment() if conda is None else conda
    with_conda, with_pip = HINTS[what]
    return with_conda if conda else with_pip
