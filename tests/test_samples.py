"""DeepCAM-style sample files, stats.h5 and the train/validation/test split."""

from __future__ import annotations

import subprocess
import sys

import h5py
import numpy as np
import pytest
import xarray as xr

from climnb.cli import main
from climnb.io.channels import CHANNEL_NAMES
from climnb.io.samples import (
    SampleError,
    inspect_sample,
    list_samples,
    open_sample,
    read_sample,
    sample_name,
    write_samples,
)
from climnb.io.split import split_counts, split_files
from climnb.io.stats import compute_stats, read_stats, write_stats


@pytest.fixture(scope="module")
def samples(toy, tmp_path_factory):
    ds = toy[0]
    return ds, write_samples(ds, ds.truth, tmp_path_factory.mktemp("samples"))


def write_foreign(path, data, labels, *, chunked=False):
    """A file as DeepCAM's own tools write it: float labels, no metadata."""
    with h5py.File(path, "w") as f:
        opts = {"chunks": (16, 16, data.shape[-1]), "compression": "gzip"} if chunked else {}
        f.create_dataset("climate/data", data=data, **opts)
        f.create_dataset("climate/labels_0", data=labels.astype(np.float32))
    return path


def test_names_follow_deepcam(samples):
    ds, files = samples
    assert [f.name for f in files] == [sample_name(t) for t in ds.time.values]
    assert files[1].name == "data-2000-01-01-03-1.h5"
    assert sample_name(np.datetime64("2106-05-06T21:00"), run=3) == "data-2106-05-06-21-3.h5"


def test_round_trip(samples):
    ds, files = samples
    for t, path in enumerate(files):
        data, labels = read_sample(path)
        assert data.shape == (96, 144, 16) and data.dtype == np.float32
        assert labels.dtype == np.uint8
        for c, name in enumerate(CHANNEL_NAMES):
            np.testing.assert_array_equal(data[..., c], ds[name].values[t])
        np.testing.assert_array_equal(labels, ds.truth.values[t])


def test_layout_and_self_description(samples):
    ds, files = samples
    with h5py.File(files[0]) as f:
        assert f["climate/data"].shape == (96, 144, 16)
        assert f["climate/labels_0"].shape == (96, 144)
        assert f["climate/data"].chunks is None  # contiguous: raw reads work
    info = inspect_sample(files[0])
    assert info.channels == CHANNEL_NAMES and info.raw_readable
    assert info.data_offset % 4096 == 0
    one = open_sample(files[2])
    assert one.time.values == ds.time.values[2]
    xr.testing.assert_equal(one.TMQ.drop_vars("time"), ds.TMQ.isel(time=2).drop_vars("time"))
    assert one.TMQ.attrs["units"] == "kg m-2"
    np.testing.assert_array_equal(one.labels.values, ds.truth.values[2])


def test_channel_subset(samples):
    ds, files = samples
    data, _ = read_sample(files[0], channels=[7, 0])
    np.testing.assert_array_equal(data[..., 0], ds.PSL.values[0])
    np.testing.assert_array_equal(data[..., 1], ds.TMQ.values[0])


def test_foreign_deepcam_file_reads(samples, tmp_path):
    ds, files = samples
    data, labels = read_sample(files[0])
    path = write_foreign(tmp_path / "data-2106-01-01-00-1.h5", data, labels, chunked=True)
    info = inspect_sample(path)
    assert info.channels == CHANNEL_NAMES and info.time is None and not info.raw_readable
    d2, l2 = read_sample(path)
    np.testing.assert_array_equal(d2, data)
    assert l2.dtype == np.uint8
    np.testing.assert_array_equal(l2, labels)


def _truncated(tmp_path, files):
    raw = files[0].read_bytes()
    (tmp_path / "data-t.h5").write_bytes(raw[: len(raw) // 2])
    return tmp_path / "data-t.h5", "truncated"


def _garbage(tmp_path, files):
    (tmp_path / "data-g.h5").write_bytes(b"not an hdf5 file at all" * 100)
    return tmp_path / "data-g.h5", "not a readable HDF5"


def _channels(tmp_path, files):
    p = write_foreign(tmp_path / "data-c.h5", np.zeros((8, 8, 15), np.float32), np.zeros((8, 8)))
    return p, "15 channels, expected 16"


def _label_shape(tmp_path, files):
    p = write_foreign(tmp_path / "data-l.h5", np.zeros((8, 8, 16), np.float32), np.zeros((8, 9)))
    return p, "labels_0 has shape (8, 9)"


def _two_d(tmp_path, files):
    p = write_foreign(tmp_path / "data-2.h5", np.zeros((8, 16), np.float32), np.zeros((8,)))
    return p, "expected (H, W, channels)"


def _no_labels(tmp_path, files):
    p = tmp_path / "data-n.h5"
    with h5py.File(p, "w") as f:
        f["climate/data"] = np.zeros((8, 8, 16), np.float32)
    return p, "no dataset climate/labels_0"


@pytest.mark.parametrize(
    "make",
    [_truncated, _garbage, _channels, _label_shape, _two_d, _no_labels],
    ids=lambda f: f.__name__.strip("_"),
)
def test_bad_file_errors_name_file_and_problem(samples, tmp_path, make):
    path, problem = make(tmp_path, samples[1])
    for fn in (inspect_sample, read_sample):
        with pytest.raises(SampleError) as err:
            fn(path)
        assert str(path) in str(err.value) and problem in str(err.value)


def test_wrong_grid_is_named(samples):
    with pytest.raises(SampleError, match=r"grid is \(96, 144\), expected \(768, 1152\)"):
        inspect_sample(samples[1][0], shape=(768, 1152))


def test_empty_or_missing_directory(tmp_path):
    with pytest.raises(SampleError, match=rf"{tmp_path}: no sample files"):
        list_samples(tmp_path)
    with pytest.raises(SampleError, match="not a directory"):
        list_samples(tmp_path / "nope")


def test_interrupted_write_leaves_nothing(toy, tmp_path, monkeypatch):
    ds = toy[0].isel(time=[0])
    real = h5py.Group.create_dataset

    def failing(self, name, *a, **k):
        if name == "labels_0":
            raise KeyboardInterrupt  # as if the job were killed half-way
        return real(self, name, *a, **k)

    monkeypatch.setattr(h5py.Group, "create_dataset", failing)
    with pytest.raises(KeyboardInterrupt):
        write_samples(ds, ds.truth, tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_write_rejects_bad_labels(toy, tmp_path):
    ds = toy[0].isel(time=[0])
    with pytest.raises(SampleError, match="labels outside 0..2: value 5"):
        write_samples(ds, ds.truth + 5, tmp_path)
    with pytest.raises(SampleError, match="labels have shape"):
        write_samples(ds, ds.truth.isel(lat=slice(0, 10)), tmp_path)


# --- statistics -------------------------------------------------------------------------------


def expected_stats(ds):
    x = np.stack([ds[c].values.astype(np.float64) for c in CHANNEL_NAMES], -1).reshape(-1, 16)
    return dict(
        minval=x.min(0),
        maxval=x.max(0),
        mean=x.mean(0),
        sqmean=(x**2).mean(0),
        count=np.full(16, x.shape[0]),
        class_counts=np.bincount(ds.truth.values.ravel(), minlength=3),
    )


@pytest.mark.parametrize("scheduler", ["threads", "synchronous", "processes"])
def test_stats_match_numpy(samples, scheduler):
    ds, files = samples
    stats = compute_stats(files, scheduler=scheduler)
    for name, value in expected_stats(ds).items():
        np.testing.assert_allclose(getattr(stats, name), value, rtol=1e-10, err_msg=name)
    assert stats.channels == CHANNEL_NAMES
    np.testing.assert_allclose(
        stats.std,
        np.stack([ds[c].values.astype(np.float64).std() for c in CHANNEL_NAMES]),
        rtol=1e-6,
    )
    assert stats.class_frequencies.sum() == pytest.approx(1.0)


def test_stats_file_round_trip_and_foreign(samples, tmp_path):
    stats = compute_stats(samples[1])
    back = read_stats(write_stats(stats, tmp_path / "stats.h5"))
    for name in ("minval", "maxval", "mean", "sqmean", "count", "class_counts"):
        np.testing.assert_array_equal(getattr(back, name), getattr(stats, name))
    assert back.channels == CHANNEL_NAMES and back.label_config is None
    teacher = {"ar": {"method": "transport", "ivt_lat_band": [25.0, 70.0]}}
    path = write_stats(stats, tmp_path / "labelled.h5", label_config=teacher)
    assert read_stats(path).label_config == teacher  # the teacher's settings kept
    with h5py.File(path, "a") as f:
        f["climate"].attrs["label_config"] = "{ar: transport"
    with pytest.raises(SampleError, match="labelled.h5: attribute label_config is not JSON"):
        read_stats(path)
    with h5py.File(tmp_path / "deepcam.h5", "w") as f:  # DeepCAM's: no class counts, no names
        for name in ("minval", "maxval", "mean", "sqmean", "count"):
            f[f"climate/{name}"] = getattr(stats, name).astype(np.float32)
    foreign = read_stats(tmp_path / "deepcam.h5")
    assert foreign.class_counts is None and foreign.class_frequencies is None
    assert foreign.channels == CHANNEL_NAMES
    np.testing.assert_allclose(foreign.maxval, stats.maxval, rtol=1e-6)


def test_stats_errors(samples, tmp_path):
    with pytest.raises(SampleError, match="no such file"):
        read_stats(tmp_path / "stats.h5")
    with h5py.File(tmp_path / "bad.h5", "w") as f:
        f["climate/minval"] = np.zeros(16)
    with pytest.raises(SampleError, match=r"bad.h5: no dataset\(s\) climate/maxval"):
        read_stats(tmp_path / "bad.h5")
    with pytest.raises(SampleError, match="no sample files"):
        compute_stats([])


MPI_STATS = """
import sys, numpy as np
from mpi4py import MPI
from climnb.io.stats import compute_stats
files = sys.argv[1:]
stats = compute_stats(files, comm=MPI.COMM_WORLD)
if MPI.COMM_WORLD.rank == 0:
    np.save("stats-mpi.npy", np.stack([stats.minval, stats.maxval, stats.mean, stats.sqmean]))
"""


@pytest.mark.mpi
def test_stats_over_mpi_equal_serial(samples, tmp_path, mpi_env):
    files = [str(f) for f in samples[1]]
    (tmp_path / "s.py").write_text(MPI_STATS)
    subprocess.run(
        ["mpirun", "-np", "2", sys.executable, "s.py", *files],
        cwd=tmp_path,
        env=mpi_env,
        check=True,
        timeout=120,
    )
    serial = compute_stats(files)
    got = np.load(tmp_path / "stats-mpi.npy")
    np.testing.assert_allclose(
        got, np.stack([serial.minval, serial.maxval, serial.mean, serial.sqmean]), rtol=1e-12
    )


# --- split ------------------------------------------------------------------------------------


def test_split_is_seeded_80_10_10():
    names = [f"data-{i:03d}.h5" for i in range(50)]
    split = split_files(names, seed=3)
    parts = [set(split.train), set(split.validation), set(split.test)]
    assert [len(p) for p in parts] == [40, 5, 5]
    assert set.union(*parts) == {p for p in map(__import__("pathlib").Path, names)}
    assert not (parts[0] & parts[1] or parts[0] & parts[2] or parts[1] & parts[2])
    assert split == split_files(names[::-1], seed=3)
    assert split != split_files(names, seed=4)
    assert split_counts(16) == [12, 2, 2]
    with pytest.raises(ValueError, match="summing to 1"):
        split_counts(10, (0.5, 0.1, 0.1))


def test_samples_command(toy, tmp_path):
    ds = toy[0]
    ds.to_netcdf(tmp_path / "fields.nc")
    assert (
        main(
            [
                "samples",
                "--input",
                str(tmp_path / "fields.nc"),
                "--out",
                str(tmp_path / "out"),
                "--seed",
                "1",
                "--split",
                "random",
                "--no-progress",
            ]
        )
        == 0
    )
    parts = {p: list_samples(tmp_path / "out" / p) for p in ("train", "validation", "test")}
    assert [len(v) for v in parts.values()] == [6, 1, 1]
    stats = read_stats(tmp_path / "out" / "stats.h5")
    np.testing.assert_allclose(stats.minval, compute_stats(parts["train"]).minval)
    assert (
        main(
            [
                "samples",
                "--input",
                str(tmp_path / "fields.nc"),
                "--out",
                str(tmp_path / "x"),
                "--labels",
                "nope",
            ]
        )
        == 2
    )
