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
