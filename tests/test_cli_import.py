"""The command line's help and version load no science: what each command needs comes in run()."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
#: Libraries the parser must not import (each costs from a tenth of a second to seconds).
HEAVY = ("xarray", "dask", "tensorflow", "pandas", "scipy", "holoviews", "h5py", "netCDF4")


def _python(*args: str) -> subprocess.CompletedProcess:
    path = os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])
    env = {**os.environ, "PYTHONPATH": path}
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, env=env)


def _imported(stderr: str) -> set[str]:
    """Top-level packages named by ``python -X importtime``."""
    return {m.group(1) for m in re.finditer(r"^import time:.*\|\s*(\w+)", stderr, re.M)}


@pytest.mark.parametrize("argv", [["--version"], ["label", "--help"]], ids=["version", "help"])
def test_climnb_version_and_help_import_no_heavy_library(argv):
    done = _python("-X", "importtime", "-m", "climnb", *argv)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "climnb" in done.stdout
    imported = _imported(done.stderr)
    assert "climnb" in imported  # the timing lines were read
    assert not imported & set(HEAVY), sorted(imported & set(HEAVY))


def test_every_command_module_imports_light():
    code = (
        "import sys\n"
        "from climnb.cli import build_parser\n"
        "build_parser()\n"
        f"print(' '.join(m for m in {HEAVY!r} if m in sys.modules))"
    )
    done = _python("-c", code)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == ""


def test_labels_package_loads_the_labeller_on_first_use():
    code = (
        "import sys\n"
        "import climnb.labels, climnb.labels.schema\n"
        "light = 'xarray' not in sys.modules and 'dask' not in sys.modules\n"
        "from climnb.labels import label_dataset\n"
        "print(light, label_dataset.__module__, 'dask' in sys.modules)"
    )
    done = _python("-c", code)
    assert done.stdout.split() == ["True", "climnb.labels.dataset", "True"], done.stderr[-2000:]


def test_labels_package_names_a_missing_attribute():
    import climnb.labels

    with pytest.raises(AttributeError, match="no attribute 'nothing'"):
        climnb.labels.nothing  # noqa: B018
    assert {"label_dataset", "LabelConfig"} <= set(dir(climnb.labels))


def test_label_files_loads_nothing_heavy_before_its_workers_start():
    """``climnb label`` checks and claims its outputs and starts its worker processes before
    xarray and dask are imported, so that the workers start while this process loads them."""
    code = (
        "import sys\n"
        "import climnb.labels.files\n"
        f"print(' '.join(m for m in {HEAVY!r} if m in sys.modules))"
    )
    done = _python("-c", code)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == ""
