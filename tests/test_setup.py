"""The one-command set-up: idempotent, and clear where it cannot install system packages."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_second_setup_is_a_no_op():
    # `make test` has just run the set-up, so the stamp for these dependency files exists
    out = subprocess.run(["bash", "tools/setup.sh"], cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout == "" and out.stderr == ""


def test_without_root_or_apt_it_says_what_to_do(tmp_path):
    """Not root, system packages missing: stop before touching anything, point to conda."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("cat", "sha256sum", "cut", "grep", "dirname"):
        (bin_dir / tool).symlink_to(shutil.which(tool))
    (bin_dir / "id").write_text("#!/bin/sh\necho 1000\n")
    (bin_dir / "dpkg-query").write_text("#!/bin/sh\nexit 1\n")
    for fake in ("id", "dpkg-query"):
        (bin_dir / fake).chmod(0o755)
    env = {"PATH": str(bin_dir), "HOME": str(tmp_path), "VENV": str(tmp_path / "venv")}
    out = subprocess.run(
        [shutil.which("bash"), "tools/setup.sh"], cwd=ROOT, env=env, capture_output=True, text=True
    )
    assert out.returncode == 1
    assert "missing system packages: build-essential cmake openmpi-bin" in out.stderr
    assert "conda env create -f environment.yml" in out.stderr
    assert not (tmp_path / "venv").exists()
    assert os.environ.get("PATH")  # the real environment is untouched


def _kept_venvs() -> list[Path]:
    cache = Path(
        os.environ.get("CLIMNB_CACHE")
        or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "climnb"
    )
    return [p for p in (cache / "venvs").glob("*") if (p / ".climnb-snapshot").is_file()]


def test_a_new_venv_is_a_copy_of_the_kept_one_with_this_clones_climnb(tmp_path):
    """The set-up that made this venv kept it (tools/setup.sh); a set-up into a new folder (a
    new clone's .venv) copies it: its scripts name the new venv, it imports this clone's
    climnb, Horovod loads, and the kept venv is left as it was."""
    if os.environ.get("CLIMNB_VENV_CACHE") == "0":
        import pytest

        pytest.skip("CLIMNB_VENV_CACHE=0: the set-up keeps no venv")
    (kept,) = _kept_venvs()  # one: the set-up removes those of other dependency files
    made_in = (kept / ".climnb-snapshot").read_text().strip()
    jupyter_before = (kept / "bin" / "jupyter").read_text()
    venv = tmp_path / "venv"
    out = subprocess.run(
        ["bash", "tools/setup.sh"],
        cwd=ROOT,
        env={**os.environ, "VENV": str(venv), "CLIMNB_SKIP_APT": "1"},
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert "copying the venv of an earlier set-up" in out.stdout
    assert "Horovod 0.28.1: TensorFlow, MPI and Gloo built" in out.stdout
    assert (venv / "bin" / "jupyter").read_text().startswith(f"#!{venv}/bin/python")
    assert made_in not in (venv / "bin" / "activate").read_text()
    where = subprocess.run(
        [venv / "bin" / "python", "-c", "import climnb; print(climnb.__file__)"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert where.stdout.strip() == str(ROOT / "climnb" / "__init__.py")
    assert (kept / "bin" / "jupyter").read_text() == jupyter_before
    assert (kept / ".climnb-snapshot").read_text().strip() == made_in
    assert not list(venv.glob(".climnb-snapshot"))
    # a second set-up there is a no-op (its stamp)
    again = subprocess.run(
        ["bash", "tools/setup.sh"],
        cwd=ROOT,
        env={**os.environ, "VENV": str(venv)},
        capture_output=True,
        text=True,
    )
    assert again.returncode == 0 and again.stdout == ""
