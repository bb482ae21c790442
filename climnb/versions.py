"""climnb's version, in one place, and ``show_versions()`` for bug reports.

:data:`__version__` is the only place the version is written: ``pyproject.toml`` reads it
(``[tool.setuptools.dynamic]``), ``climnb --version`` prints it, and every file climnb writes
records it (bundles, label and field files, tracks, predictions, the demo's reports) through
:func:`written_by`.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import platform
import subprocess
import sys

__all__ = ["__version__", "written_by", "show_versions", "versions", "horovod_build"]

__version__ = "0.1.0"

_PACKAGES = (
    "climnb",
    "numpy",
    "scipy",
    "pandas",
    "xarray",
    "dask",
    "distributed",
    "h5py",
    "netCDF4",
    "holoviews",
    "bokeh",
    "panel",
    "ipywidgets",
    "jupyterlab",
    "ipyparallel",
    "papermill",
    "tensorflow",
    "keras",
    "horovod",
    "mpi4py",
)


def written_by(what: str = "") -> str:
    """``"climnb 0.1.0"`` (with ``what`` after it): the ``source`` recorded in output files.

    >>> written_by("climnb.labels.label_dataset")  # doctest: +ELLIPSIS
    'climnb ... (climnb.labels.label_dataset)'
    """
    return f"climnb {__version__}" + (f" ({what})" if what else "")


def versions() -> dict[str, str | None]:
    """Installed version of each package of the stack (``None`` where not installed).

    Read from package metadata, so nothing heavy (TensorFlow) is imported.
    """
    found = {}
    for name in _PACKAGES:
        candidates = [name, "tensorflow-cpu"] if name == "tensorflow" else [name]
        found[name] = None
        for dist in candidates:
            try:
                found[name] = importlib.metadata.version(dist)
                break
            except importlib.metadata.PackageNotFoundError:
                continue
    return found


def horovod_build() -> dict[str, bool] | None:
    """Which frameworks, controllers and tensor operations Horovod was built with.

    Runs in a subprocess because importing ``horovod.tensorflow`` starts TensorFlow.
    Returns ``None`` when Horovod is not installed.
    """
    if importlib.util.find_spec("horovod") is None:
        return None
    code = (
        "import horovod.tensorflow as h;"
        "print(h.mpi_built(), h.gloo_built(), h.nccl_built(), h.cuda_built(), h.rocm_built())"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    if out.returncode:
        return {"tensorflow": False}
    flags = [word == "True" for word in out.stdout.split()[-5:]]
    keys = ("mpi", "gloo", "nccl", "cuda", "rocm")
    return {"tensorflow": True, **{k: bool(v) for k, v in zip(keys, flags, strict=True)}}


def show_versions(file=None) -> None:
    """Print Python, platform, the stack's versions and Horovod's build, for bug reports."""
    file = file or sys.stdout
    print(f"python     : {sys.version.split()[0]} ({sys.executable})", file=file)
    print(f"platform   : {platform.platform()}", file=file)
    for name, version in versions().items():
        print(f"{name:<11}: {version or 'not installed'}", file=file)
    build = horovod_build()
    if build is None:
        print(
            "horovod build: not installed (`climnb versions --check` says how to get it)",
            file=file,
        )
    else:
        built = [k for k, v in build.items() if v]
        missing = [k for k, v in build.items() if not v]
        print(
            f"horovod build: with {', '.join(built) or 'nothing'}; "
            f"without {', '.join(missing) or 'nothing'}",
            file=file,
        )
