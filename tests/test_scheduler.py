"""Labelling on dask.distributed: a LocalCluster by default, an address, bounded memory over a
long lazily opened series, the same labels as the local scheduler. (SLURMCluster: test_slurm.)"""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
import xarray as xr

from climnb.data.synthetic import make_dataset
from climnb.labels import compute as compute_locally
from climnb.labels import label_dataset
from climnb.runtime.scheduler import compute, dask_client

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def series_files(tmp_path_factory):
    """A series of 32 toy steps in 4 files: their glob pattern."""
    folder = tmp_path_factory.mktemp("series")
    for i in range(4):
        ds, _ = make_dataset(n_time=8, seed=i)
        ds = ds.assign_coords(time=ds.time + np.timedelta64(i, "D"))
        ds.to_netcdf(folder / f"fields-{i}.nc")
    return str(folder / "fields-*.nc")


@pytest.fixture(scope="module")
def series(series_files):
    """The series opened lazily (one dask chunk per step)."""
    ds = xr.open_mfdataset(series_files, chunks={"time": 1})
    assert ds.sizes["time"] == 32 and ds.TMQ.chunks[0] == (1,) * 32
    return ds


@pytest.fixture(scope="module")
def reference(series):
    """Labels and events computed with the single-threaded local scheduler."""
    return compute_locally(*label_dataset(series), scheduler="sync")


def test_local_cluster_labels_a_long_series_in_bounded_memory(series, reference, tmp_path):
    from distributed.diagnostics import MemorySampler

    labels, events = label_dataset(series)
    out = tmp_path / "labels.nc"
    sampler = MemorySampler()
    with dask_client("local", n_workers=1, memory_limit="2GB") as client:
        assert client.dashboard_link.startswith("http")
        cluster = client.cluster
        write = labels.to_dataset().to_netcdf(
            out, compute=False, encoding={"labels": {"dtype": "u1", "zlib": True}}
        )
        with sampler.sample("labelling", interval=0.02, measure="managed"):
            _, table = compute(client, write, events, progress=False)
    assert cluster.status.name == "closed", "closing the client closes its LocalCluster"
    ref_labels, ref_events = reference
    with xr.open_dataset(out) as written:
        np.testing.assert_array_equal(written.labels.values, ref_labels.values)
    assert len(table) == len(ref_events) > 0
    assert list(table.time) == list(ref_events.time)
    # the data held by the workers at any time is a few steps, not the series
    names = [v for v in series.data_vars if v in ("TMQ", "U850", "V850", "PSL", "T200", "T500")]
    total = sum(series[v].nbytes for v in names)
    peak = int(sampler.to_pandas()["labelling"].max())
    print(f"peak managed memory {peak / 1e6:.1f} MB for a {total / 1e6:.1f} MB series")
    assert 0 < peak < total / 4


def test_an_address_reaches_a_running_scheduler_and_bad_ones_are_refused(series, reference, capsys):
    """... and the progress bar reports on the terminal (on this test's cluster: a cluster
    of its own took seconds to start for it)."""
    from distributed import LocalCluster

    labels, events = label_dataset(series.isel(time=slice(0, 4)))
    with LocalCluster(n_workers=1, threads_per_worker=1, dashboard_address=":0") as cluster:
        address = cluster.scheduler_address
        with dask_client(address) as client:
            (table,) = compute(client, events, progress=True, notebook=False)
        assert "100% Completed" in capsys.readouterr().out
        assert cluster.status.name == "running", "a client of an address leaves it running"
        with dask_client(address.removeprefix("tcp://")) as client:  # host:port works too
            assert client.scheduler_info()["address"] == address
    expected = reference[1]
    assert len(table) == int((expected.time <= series.time.values[3]).sum())
    with pytest.raises(ValueError, match="'local', 'slurm' or an address like tcp://host:8786"):
        dask_client("pbs")
    with pytest.raises(ValueError, match="apply to 'local' or 'slurm'"):
        dask_client("tcp://127.0.0.1:8786", n_workers=2)


def test_label_command_on_a_local_cluster_writes_what_the_local_scheduler_writes(
    series_files, tmp_path, capsys
):
    """``climnb label --scheduler local`` in a process of its own (its LocalCluster's workers
    are processes); the reference and the refused address run in this process (the same
    command's code: no interpreter to start)."""
    import subprocess
    import sys

    from climnb.cli import main

    folder = tmp_path / "out"
    folder.mkdir()
    glob = series_files.replace("*", "[01]")  # two of the files: 16 steps
    outputs = {}
    assert main(["label", glob, "--out", str(folder / "sync.nc")]) == 0
    outputs["sync"] = (folder / "sync.nc", capsys.readouterr().out)
    out = folder / "local.nc"
    done = subprocess.run(
        [sys.executable, "-m", "climnb", "label", glob, "--out", str(out),
         "--scheduler", "local", "--workers", "2"],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    outputs["local"] = (out, done.stdout)
    assert "dask dashboard: http" in done.stderr  # a log line, not the command's output
    assert "16 time steps labelled" in outputs["local"][1]
    with xr.open_dataset(outputs["sync"][0]) as a, xr.open_dataset(outputs["local"][0]) as b:
        np.testing.assert_array_equal(a.labels.values, b.labels.values)
    events = [p.with_suffix(".events.csv").read_text() for p in (o[0] for o in outputs.values())]
    assert events[0] == events[1]
    bad = ["label", glob, "--out", str(folder / "x.nc"), "--scheduler", "no such place"]
    assert main(bad) == 2
    assert "scheduler must be 'local', 'slurm' or an address" in capsys.readouterr().err
    assert not (folder / "x.nc").exists()


def test_importing_dask_jobqueue_leaves_ctrl_c_alone():
    """dask_jobqueue sets SIGINT to sys.exit() as it is imported: ``--scheduler slurm`` would
    turn Ctrl-C into exit status 0. climnb imports it with the handler put back."""
    code = (  # Ctrl-C as in a terminal: a background job (CI started with &) inherits it ignored
        "import signal\n"
        "signal.signal(signal.SIGINT, signal.default_int_handler)\n"
        "from climnb.runtime.scheduler import _import_slurm_cluster\n"
        "_import_slurm_cluster()\n"
        "print(signal.getsignal(signal.SIGINT) is signal.default_int_handler)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "True"
