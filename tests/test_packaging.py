"""Packaging: pyproject and the conda environments agree; import is light; versions report."""

from __future__ import annotations

import importlib.metadata
import io
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

import climnb

ROOT = Path(__file__).resolve().parents[1]
# pip name -> conda-forge name(s), where they differ
PIP_TO_CONDA = {
    "dask[distributed]": ["dask", "distributed"],
    "tensorflow-cpu": ["tensorflow"],
    "netcdf4": ["netcdf4"],
    "cf-xarray": ["cf_xarray"],
    "eccodes": ["python-eccodes"],
}
# conda-only entries: the interpreter, pip, and what pip cannot install (MPI, Horovod)
CONDA_ONLY = {"python", "pip", "openmpi", "horovod"}


def _split(requirement: str) -> tuple[str, str]:
    name, spec = re.match(r"^([A-Za-z0-9_.\-\[\]]+)\s*(.*)$", requirement.strip()).groups()
    return name.lower(), spec.replace(" ", "")


def _pyproject_requirements() -> dict[str, str]:
    """Core, train and dev requirements, from the installed metadata (make setup reinstalls
    whenever pyproject.toml changes)."""
    out = {}
    for requirement in importlib.metadata.requires("climnb"):
        requirement, _, marker = requirement.partition(";")
        if "extra" in marker and not re.search(r'extra == "(train|dev)"', marker):
            continue
        name, spec = _split(requirement)
        for conda_name in PIP_TO_CONDA.get(name, [name]):
            out[conda_name] = spec
    return out


def _conda_requirements(path: Path) -> dict[str, str]:
    env = yaml.safe_load(path.read_text())
    assert "conda-forge" in env["channels"]
    deps = [d for d in env["dependencies"] if isinstance(d, str)]
    return dict(_split(d) for d in deps)


@pytest.mark.parametrize("env_file", ["environment.yml", "binder/environment.yml"])
def test_conda_environment_matches_pyproject(env_file):
    conda = _conda_requirements(ROOT / env_file)
    pip = _pyproject_requirements()
    assert set(conda) - CONDA_ONLY == set(pip), "names differ"
    assert {k: conda[k] for k in pip} == pip, "version specifiers differ"
    assert conda["horovod"] == "==0.28.1"


def test_binder_post_build_makes_toy_data():
    text = (ROOT / "binder" / "postBuild").read_text()
    assert "pip install --no-deps -e ." in text and "climnb synth" in text


def _fresh_python(code: str) -> str:
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return out.stdout


def test_import_is_light():
    loaded = _fresh_python(
        "import sys, climnb; print(' '.join(m for m in ('tensorflow', 'horovod', 'xarray',"
        " 'holoviews', 'ipyparallel') if m in sys.modules))"
    )
    assert loaded.strip() == ""


def test_show_versions_reports_stack_and_horovod_build():
    buf = io.StringIO()
    climnb.show_versions(file=buf)
    text = buf.getvalue()
    for package in ("numpy", "xarray", "tensorflow", "horovod", "ipyparallel", "h5py"):
        assert re.search(rf"^{package} *: \d", text, re.M), package
    line = next(x for x in text.splitlines() if x.startswith("horovod build"))
    built = line.split(";")[0]
    assert "tensorflow" in built and "mpi" in built and "gloo" in built, line
