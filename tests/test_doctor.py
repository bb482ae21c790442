"""``climnb versions --check``: what this environment has and lacks, one line each, and how to
get what is missing, with conda in a conda environment, else with pip."""

from __future__ import annotations

import re

import pytest

from climnb import doctor
from climnb.cli import main


def test_check_reports_every_piece_one_line_each(capsys):
    code = main(["versions", "--check"])
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("climnb ")
    whats = [line[9:31].strip() for line in lines[1:]]
    assert whats == [
        "TensorFlow",
        "Horovod",
        "mpiexec",
        "mpi4py",
        "srun",
        "ipyparallel",
        "Jupyter kernel",
        "JupyterLab extension",
        "JupyterLab extension",
    ]
    tensorflow = r"ok +TensorFlow +2\.\d+\.\d+, .*; precision auto: (float32|mixed_)"
    assert re.match(tensorflow, lines[1]), lines[1]
    assert lines[2].startswith("ok       Horovod") and "MPI, Gloo" in lines[2]
    missing = [line for line in lines[1:] if line.startswith("missing")]
    assert all("; get it: " in line for line in missing), missing
    assert code == (1 if missing else 0)


def test_missing_pieces_say_how_to_get_them_with_pip_or_conda(monkeypatch):
    probe = {"tensorflow_error": "ModuleNotFoundError", "horovod_error": "ModuleNotFoundError"}
    monkeypatch.setattr(doctor, "_version", lambda dist: None)
    horovod = doctor._horovod(probe, conda=False)
    assert horovod.status == "missing"
    assert "train in one process without it" in horovod.detail
    assert horovod.line().endswith(
        "get it: HOROVOD_WITH_TENSORFLOW=1 HOROVOD_WITH_MPI=1 HOROVOD_WITH_GLOO=1 "
        "HOROVOD_WITHOUT_PYTORCH=1 HOROVOD_WITHOUT_MXNET=1 pip install --no-build-isolation "
        "--no-deps horovod==0.28.1 (builds against this TensorFlow: needs cmake, a C++ compiler "
        "and MPI headers)"
    )
    assert doctor._horovod(probe, conda=True).fix == "conda install -c conda-forge horovod"
    mpiexec = doctor._launcher("mpiexec", {"PATH": ""}, True, "MPI engines")
    assert mpiexec.line() == (
        "missing  mpiexec               not on PATH: MPI engines; get it: "
        "conda install -c conda-forge openmpi"
    )
    assert doctor._srun({"PATH": ""}).status == "optional"


@pytest.mark.parametrize("conda", [True, False], ids=["conda", "venv"])
def test_conda_environment_is_told_by_its_conda_meta(tmp_path, conda):
    if conda:
        (tmp_path / "conda-meta").mkdir()
    assert doctor.conda_environment(str(tmp_path)) is conda


def test_a_kernel_that_runs_this_python_is_found(tmp_path, monkeypatch):
    monkeypatch.setenv("JUPYTER_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path / "path"))
    assert main(["kernel", "install", "--user", "--name", "climnb-doctor"]) == 0
    kernel = doctor._kernel(conda=False)
    assert kernel.status == "ok" and "runs this Python" in kernel.detail
