"""Killed in the middle of writing a file, then run again: the half-written file never sits
under its final name (a reader or a rerun would take it for the output), the output a rerun
replaces survives the killed attempt whole, and the rerun ends with what an uninterrupted run
writes, nothing left beside it.

The kill lands at an exact point (:func:`_stopping.killed_midwrite`): the file being written is
cut to its first half, as a kill during its write leaves it, and the process kills itself.
Written in place instead of atomically, these tests fail: the half file would be the output."""

from __future__ import annotations

import hashlib
import subprocess

import h5py
import numpy as np
import pytest
import xarray as xr
from _stopping import killed_midwrite

from climnb.cli import main
from climnb.data.synthetic import make_dataset


@pytest.fixture(scope="module")
def fields(tmp_path_factory):
    """40 toy steps (enough for the block split's gaps) as a NetCDF file."""
    path = tmp_path_factory.mktemp("fields") / "f.nc"
    make_dataset(n_time=40, seed=5)[0].to_netcdf(path)
    return path


def _digests(root):
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def _opens(path) -> bool:
    try:
        with h5py.File(path, "r") as f:
            f["climate/data"][...]
        return True
    except OSError:
        return False


@pytest.mark.slow
def test_samples_killed_midwrite_leave_no_half_file_and_the_rerun_redoes_it(fields, tmp_path):
    args = ["samples", "--input", str(fields), "--no-progress"]
    assert main([*args, "--out", str(tmp_path / "clean")]) == 0
    out = tmp_path / "out"
    p = subprocess.run(killed_midwrite("samples", 4, *args, "--out", str(out)), timeout=300)
    assert p.returncode == -9 and not out.exists()
    (partial,) = tmp_path.glob(".out.*.partial")
    listed = (partial / "train" / ".manifest.jsonl").read_text().splitlines()
    assert len(listed) == 3  # the fourth was being written
    finals = sorted(partial.glob("*/data-*.h5"))
    assert len(finals) == 3 and all(_opens(f) for f in finals)  # none half-written
    (half,) = (partial / "train").glob(".data-*.tmp")  # the fourth, under its temporary name
    assert not _opens(half)
    assert main([*args, "--out", str(out)]) == 0  # the same command again
    assert _digests(out) == _digests(tmp_path / "clean")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["clean", "out"]


@pytest.mark.slow
def test_labels_killed_midwrite_keep_the_last_output_whole(fields, tmp_path):
    out = tmp_path / "labels.nc"
    args = ["label", str(fields), "--out", str(out), "--no-progress"]
    assert main(args) == 0
    with xr.open_dataset(out) as ds:
        first = ds.labels.load()
    before = out.read_bytes()
    p = subprocess.run(killed_midwrite("labels", 1, *args), timeout=300)
    assert p.returncode == -9
    assert out.read_bytes() == before  # the killed rewrite never touched the output
    (half,) = tmp_path.glob(".labels.nc.*.tmp")
    assert 0 < half.stat().st_size < len(before)
    assert main(args) == 0  # run again: written whole, the dead run's temporary gone
    with xr.open_dataset(out) as ds:
        np.testing.assert_array_equal(ds.labels.values, first.values)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["labels.events.csv", "labels.nc"]
