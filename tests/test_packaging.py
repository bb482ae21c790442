"""Packaging: pyproject, the conda environments and the conda recipe agree; import is light;
the version comes from one place; versions report."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import jinja2
import nbformat
import pytest
import yaml

import climnb
from climnb.cli import main
from climnb.data.synthetic import make_dataset
from climnb.demo import run_notebook
from climnb.labels import label_dataset

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - pytest needs tomli on Python 3.10
    import tomli as tomllib

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


def _pyproject() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def _pyproject_requirements(groups=("core", "train", "dev")) -> dict[str, str]:
    """Requirements of pyproject.toml (core and the given extras), by their conda names."""
    project = _pyproject()["project"]
    lists = {"core": project["dependencies"], **project["optional-dependencies"]}
    out = {}
    for group in groups:
        for requirement in lists[group]:
            name, spec = _split(requirement.partition(";")[0])
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


def _recipe() -> dict:
    """recipe/meta.yaml rendered as conda-build renders it (Jinja2, then YAML)."""
    text = jinja2.Template((ROOT / "recipe" / "meta.yaml").read_text()).render(PYTHON="python")
    return yaml.safe_load(text)


def _conda_spec(requirement: str) -> tuple[str, str]:
    """``"numpy >=1.26"`` -> ``("numpy", ">=1.26")``; a bare version is an exact match."""
    name, _, spec = requirement.partition(" ")
    spec = spec.replace(" ", "")
    return name.lower(), spec if not spec or spec[0] in "<>=!~" else f"=={spec}"


def test_conda_recipe_runs_what_environment_yml_and_pyproject_name():
    """The recipe's run requirements are environment.yml's and pyproject.toml's core and
    train lists (the dev list is not a run requirement), with the same versions."""
    recipe = _recipe()
    run = dict(_conda_spec(r) for r in recipe["requirements"]["run"])
    env = _conda_requirements(ROOT / "environment.yml")
    dev = set(_pyproject_requirements(("dev",)))
    expected = {k: v for k, v in env.items() if k not in dev | {"pip", "python"}}
    assert run.pop("python") == ">=3.10" and env["python"].startswith(">=3.10")
    assert run == expected
    pip = _pyproject_requirements(("core", "train"))
    assert set(run) - CONDA_ONLY == set(pip)
    assert {k: run[k] for k in pip} == pip


def test_conda_recipe_is_noarch_and_tests_the_command():
    recipe = _recipe()
    assert recipe["package"] == {"name": "climnb", "version": climnb.__version__}
    assert recipe["build"]["noarch"] == "python"
    assert "--no-deps" in recipe["build"]["script"]
    assert recipe["build"]["entry_points"] == ["climnb = climnb.cli:main"]
    assert "climnb" in recipe["test"]["imports"]
    assert "climnb --help" in recipe["test"]["commands"]


def test_binder_post_build_makes_toy_data():
    text = (ROOT / "binder" / "postBuild").read_text()
    assert "pip install --no-deps -e ." in text and "climnb synth" in text


def test_version_is_written_in_one_place():
    """pyproject.toml reads the version from climnb.versions; nothing else writes one."""
    setuptools = _pyproject()["tool"]["setuptools"]
    assert "version" in _pyproject()["project"]["dynamic"]
    assert setuptools["dynamic"]["version"] == {"attr": "climnb.versions.__version__"}
    assert climnb.__version__ == climnb.versions.__version__
    assert re.fullmatch(r"\d+\.\d+\.\d+\S*", climnb.__version__)
    written = [
        str(p.relative_to(ROOT))
        for p in (ROOT / "climnb").rglob("*.py")
        if re.search(r"^__version__\s*=", p.read_text(), re.M)
    ]
    assert written == ["climnb/versions.py"]


def test_version_option(capsys):
    with pytest.raises(SystemExit) as stop:
        main(["--version"])
    assert stop.value.code == 0
    assert capsys.readouterr().out.strip() == f"climnb {climnb.__version__}"


def test_label_and_field_files_record_the_version(tmp_path):
    ds, _ = make_dataset(n_time=1, seed=1)
    labels, _ = label_dataset(ds)
    for attrs in (ds.attrs, labels.attrs):
        assert attrs["source"].startswith(f"climnb {climnb.__version__} ("), attrs["source"]


@pytest.mark.notebook
def test_reports_record_the_version(tmp_path):
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    nb.cells = [nbformat.v4.new_code_cell("1 + 1")]
    nbformat.write(nb, tmp_path / "09_tiny.ipynb")
    run = run_notebook(tmp_path / "09_tiny.ipynb", tmp_path / "reports")
    assert json.loads(run.output.read_text())["metadata"]["climnb"] == {
        "version": climnb.__version__
    }
    assert f'<meta name="generator" content="climnb {climnb.__version__}">' in run.html.read_text()


def _fresh_python(code: str) -> str:
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return out.stdout


def test_import_is_light():
    loaded = _fresh_python(
        "import sys, climnb; print(' '.join(m for m in ('tensorflow', 'horovod', 'xarray',"
        " 'holoviews', 'ipyparallel') if m in sys.modules))"
    )
    assert loaded.strip() == ""


def test_show_versions_reports_stack_and_horovod_build(capsys):
    """``climnb versions`` (what it prints is ``climnb.show_versions()``'s report; one run:
    the Horovod check imports TensorFlow in a new process)."""
    from climnb.cli import main

    assert main(["versions"]) == 0
    text = capsys.readouterr().out
    for package in ("numpy", "xarray", "tensorflow", "horovod", "ipyparallel", "h5py"):
        assert re.search(rf"^{package} *: \d", text, re.M), package
    line = next(x for x in text.splitlines() if x.startswith("horovod build"))
    built = line.split(";")[0]
    assert "tensorflow" in built and "mpi" in built and "gloo" in built, line
