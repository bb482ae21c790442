"""What this environment has and lacks for the notebooks, one line each with how to get it.

``climnb versions --check`` prints :func:`check_environment`'s report: TensorFlow and the
precision training would choose, Horovod and its MPI/Gloo, ``mpiexec``/``srun``, mpi4py,
ipyparallel, a Jupyter kernel that runs this Python, and the JupyterLab extensions the live
views need. :func:`~climnb.runtime.install.install_hint` is the one place that says how to get a
missing piece, with conda where this is a conda environment, else with pip.

Examples
--------
>>> install_hint("ipyparallel", conda=False)
'pip install ipyparallel'
>>> install_hint("ipyparallel", conda=True)
'conda install -c conda-forge ipyparallel'
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from climnb.models.precision import auto_precision, resolve_precision
from climnb.runtime.install import conda_environment, install_hint
from climnb.runtime.kernel import find_kernel
from climnb.versions import __version__

__all__ = ["Check", "check_environment", "conda_environment", "install_hint", "format_report"]

#: JupyterLab extensions of the live views: (folder under labextensions, what, hint key).
LAB_EXTENSIONS = (
    ("@pyviz/jupyterlab_pyviz", "Panel and HoloViews views", "pyviz"),
    ("@jupyter-widgets/jupyterlab-manager", "widgets", "widgets"),
)


@dataclass(frozen=True)
class Check:
    """One line of the report: ``status`` is ``"ok"``, ``"missing"`` (something the
    notebooks want) or ``"optional"`` (absent, needed only elsewhere)."""

    status: str
    what: str
    detail: str
    fix: str = ""

    def line(self) -> str:
        text = f"{self.status:<9}{self.what:<22}{self.detail}"
        return text + (f"; get it: {self.fix}" if self.fix and self.status != "ok" else "")


def check_environment(env: dict | None = None) -> list[Check]:
    """Every check, in the order the notebooks need them (TensorFlow starts in a subprocess)."""
    env = os.environ if env is None else env
    conda = conda_environment()
    probe = _probe_tensorflow()
    return [
        _tensorflow(probe, conda),
        _horovod(probe, conda),
        _launcher("mpiexec", env, conda, "MPI engines (launcher 'mpi') and mpirun training"),
        _module("mpi4py", conda, "MPI engines and staging over MPI"),
        _srun(env),
        _module("ipyparallel", conda, "the engines of notebooks 02 and 04"),
        _kernel(conda),
        *_lab_extensions(conda),
    ]


def format_report(checks: list[Check]) -> str:
    where = "conda environment" if conda_environment() else "environment"
    head = f"climnb {__version__}, Python {sys.version.split()[0]}, {where} {sys.prefix}"
    return "\n".join([head, *(c.line() for c in checks)])


_PROBE = """
import json
out = {}
try:
    import tensorflow as tf
    out["tensorflow"] = tf.__version__
    out["gpus"] = [
        list(tf.config.experimental.get_device_details(g).get("compute_capability") or (0, 0))
        for g in tf.config.list_physical_devices("GPU")
    ]
except Exception as err:
    out["tensorflow_error"] = f"{type(err).__name__}: {err}"
try:
    import horovod.tensorflow as h
    out["horovod"] = {"mpi": bool(h.mpi_built()), "gloo": bool(h.gloo_built()),
                      "nccl": bool(h.nccl_built())}
except Exception as err:
    out["horovod_error"] = f"{type(err).__name__}: {err}"
print("PROBE" + json.dumps(out))
"""


def _probe_tensorflow() -> dict:
    """TensorFlow's version and GPUs, and Horovod's build, from a new process (importing
    TensorFlow here would start it in the caller)."""
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}
    try:
        out = subprocess.run(
            [sys.executable, "-c", _PROBE], capture_output=True, text=True, env=env, timeout=300
        )
    except (OSError, subprocess.TimeoutExpired) as err:
        return {"tensorflow_error": str(err), "horovod_error": str(err)}
    for line in out.stdout.splitlines():
        if line.startswith("PROBE"):
            return json.loads(line.removeprefix("PROBE"))
    last = (out.stderr.strip().splitlines() or ["no output"])[-1]
    return {"tensorflow_error": last, "horovod_error": last}


def _version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def _tensorflow(probe: dict, conda: bool) -> Check:
    if "tensorflow" not in probe:
        why = probe.get("tensorflow_error", "not installed")
        return Check("missing", "TensorFlow", f"cannot train ({why})", install_hint("tensorflow"))
    gpus = [tuple(c) for c in probe.get("gpus", [])]
    if gpus:
        name, why = auto_precision(gpus)
        where = f"{len(gpus)} GPU(s)"
    else:
        name, why = resolve_precision("auto")
        why = why.removeprefix("auto: ")
        where = "no GPU, on the CPU"
    return Check(
        "ok", "TensorFlow", f"{probe['tensorflow']}, {where}; precision auto: {name} ({why})"
    )


def _horovod(probe: dict, conda: bool) -> Check:
    build = probe.get("horovod")
    version = _version("horovod")
    if build is None:
        why = "not installed" if version is None else probe.get("horovod_error", "broken")
        return Check(
            "missing",
            "Horovod",
            f"{why}: notebook 04 and `climnb train` train in one process without it",
            install_hint("horovod", conda=conda),
        )
    with_ = [k.upper() if k != "gloo" else "Gloo" for k, v in build.items() if v]
    if not (build["mpi"] or build["gloo"]):
        return Check(
            "missing",
            "Horovod",
            f"{version} built with neither MPI nor Gloo: ranks cannot talk",
            install_hint("horovod", conda=conda),
        )
    return Check("ok", "Horovod", f"{version} with TensorFlow, {', '.join(with_)}")


def _launcher(name: str, env: dict, conda: bool, needed_for: str) -> Check:
    found = shutil.which(name, path=env.get("PATH"))
    if found:
        return Check("ok", name, found)
    return Check("missing", name, f"not on PATH: {needed_for}", install_hint(name, conda=conda))


def _srun(env: dict) -> Check:
    found = shutil.which("srun", path=env.get("PATH"))
    if found:
        return Check("ok", "srun", found)
    return Check(
        "optional",
        "srun",
        "not on PATH: needed only on a Slurm system (launcher 'slurm', 'sbatch')",
    )


def _module(name: str, conda: bool, needed_for: str) -> Check:
    version = _version(name)
    if version and importlib.util.find_spec(name) is not None:
        return Check("ok", name, version)
    return Check("missing", name, f"not installed: {needed_for}", install_hint(name, conda=conda))


def _kernel(conda: bool) -> Check:
    """A kernel spec that runs this Python (``climnb kernel install`` writes one)."""
    found = find_kernel()
    if found:
        name, display = found
        return Check("ok", "Jupyter kernel", f"'{name}' ({display}) runs this Python")
    return Check(
        "missing",
        "Jupyter kernel",
        "none runs this Python: the notebooks would open on another environment's kernel",
        install_hint("kernel", conda=conda),
    )


def _lab_extensions(conda: bool) -> list[Check]:
    from jupyter_core.paths import jupyter_path

    folders = [Path(p) for p in jupyter_path("labextensions")]
    checks = []
    for name, what, hint in LAB_EXTENSIONS:
        found = next((f / name for f in folders if (f / name / "package.json").is_file()), None)
        if found:
            checks.append(Check("ok", "JupyterLab extension", f"{name} ({what}): {found.parent}"))
        else:
            checks.append(
                Check(
                    "missing",
                    "JupyterLab extension",
                    f"{name} not found: {what} would not show live",
                    install_hint(hint, conda=conda),
                )
            )
    return checks
