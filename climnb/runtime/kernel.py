"""Register this environment as a Jupyter kernel, for JupyterHub and JupyterLab.

ipykernel's own installer writes the kernel spec (``argv`` runs this environment's Python);
climnb adds the environment the notebooks need to :func:`kernel_env`: this environment's
scripts folder first on ``PATH`` (``mpiexec`` of a conda environment, ``horovodrun``,
``ipengine``), whatever server starts the kernel, and TensorFlow's C++ logging quiet.
"""

from __future__ import annotations

import logging
import os
import shutil
import sys
import sysconfig
from dataclasses import dataclass
from pathlib import Path

from climnb.versions import __version__

log = logging.getLogger(__name__)

__all__ = [
    "KernelInstall",
    "default_display_name",
    "find_kernel",
    "install_kernel",
    "kernel_env",
    "notebook_kernelspec",
]

#: Kernel name of ``climnb kernel install`` without ``--name``.
DEFAULT_NAME = "climnb"
#: Launchers the notebooks call, reported after an install.
LAUNCHERS = ("mpiexec", "horovodrun")


@dataclass(frozen=True)
class KernelInstall:
    """An installed kernel spec: its name, folder, the Python it runs and launchers found."""

    name: str
    path: Path
    display_name: str
    python: str
    launchers: dict[str, str | None]


def kernel_env() -> dict[str, str]:
    """Environment variables of the kernel spec.

    ``PATH`` is this environment's scripts folder followed by ``${PATH}``, which Jupyter
    replaces by the server's own ``PATH`` when it starts the kernel; ``TF_CPP_MIN_LOG_LEVEL``
    2 hides TensorFlow's C++ info and warning lines in the notebooks.
    """
    return {
        "PATH": f"{_scripts()}{os.pathsep}${{PATH}}",
        "TF_CPP_MIN_LOG_LEVEL": "2",
    }


def default_display_name() -> str:
    """``climnb 0.1.0 (Python 3.11, ENV)``, ENV the environment's folder name."""
    python = f"Python {sys.version_info.major}.{sys.version_info.minor}"
    return f"climnb {__version__} ({python}, {Path(sys.prefix).name})"


def install_kernel(
    name: str = DEFAULT_NAME,
    *,
    display_name: str | None = None,
    user: bool = False,
    prefix: str | os.PathLike | None = None,
) -> KernelInstall:
    """Install the kernel spec of this environment with :func:`ipykernel.kernelspec.install`.

    Parameters
    ----------
    name : kernel name (letters, digits, ``.``, ``_``, ``-``); replaces a kernel of that name.
    display_name : name shown in JupyterLab; default :func:`default_display_name`.
    user : install for the current user (Jupyter's data folder, ``~/.local/share/jupyter``
        or ``$JUPYTER_DATA_DIR``).
    prefix : install under ``PREFIX/share/jupyter/kernels`` (``sys.prefix`` for this
        environment's own Jupyter). Neither: system-wide, which needs write access there.
    """
    from ipykernel.kernelspec import install

    if user and prefix is not None:
        raise ValueError("--user and --prefix/--sys-prefix: choose one")
    display_name = display_name or default_display_name()
    path = install(
        user=user,
        kernel_name=name,
        display_name=display_name,
        prefix=None if prefix is None else str(prefix),
        env=kernel_env(),
    )
    path_env = f"{_scripts()}{os.pathsep}{os.environ.get('PATH', '')}"
    launchers = {tool: shutil.which(tool, path=path_env) for tool in LAUNCHERS}
    log.info("installed kernel %s in %s", Path(path).name, path)
    return KernelInstall(Path(path).name, Path(path), display_name, sys.executable, launchers)


def find_kernel() -> tuple[str, str] | None:
    """The installed kernel that runs this Python, ``(name, display name)``: the one named
    :data:`DEFAULT_NAME` first, else the first by name; ``None`` where none does (or Jupyter's
    kernels cannot be listed)."""
    try:
        from jupyter_client.kernelspec import KernelSpecManager

        specs = KernelSpecManager().get_all_specs()
    except Exception as err:  # noqa: BLE001 - an unreadable kernel folder: as if none
        log.debug("cannot list the kernels: %s", err)
        return None
    here = os.path.realpath(sys.executable)
    mine = [
        (name, found["spec"].get("display_name") or name)
        for name, found in specs.items()
        if found["spec"].get("argv") and os.path.realpath(found["spec"]["argv"][0]) == here
    ]
    mine.sort(key=lambda kernel: (kernel[0] != DEFAULT_NAME, kernel[0]))
    return mine[0] if mine else None


def notebook_kernelspec() -> dict[str, str] | None:
    """The ``kernelspec`` metadata that makes a notebook open on :func:`find_kernel`'s kernel."""
    found = find_kernel()
    if found is None:
        return None
    name, display_name = found
    return {"name": name, "display_name": display_name, "language": "python"}


def _scripts() -> str:
    return sysconfig.get_path("scripts")
