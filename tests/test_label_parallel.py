"""Labelling in parallel (climnb.labels.dataset): each label task reads its own time step, so
the same labels come out of one worker or two, threads or processes, and a file-backed task
carries the file's address, not its fields (one step a chunk, as a full-size field opens;
a toy file opens in chunks of many steps, which the tasks then share)."""

from __future__ import annotations

import pickle
import warnings

import numpy as np
import pandas as pd
import pytest
import xarray as xr

from climnb.cli import main
from climnb.data.synthetic import make_dataset
from climnb.io import netcdf
from climnb.io.files import open_fields
from climnb.labels import compute, label_dataset, save_labelled
from climnb.labels.dataset import StepInputs, worker_processes

STEPS = 6
ONE_STEP = {"time": 1}  # the chunks a full-size field (768 x 1152) gets by default


@pytest.fixture(scope="module")
def series(tmp_path_factory):
    """Toy fields in three NetCDF files of two steps each (with a missing patch and CAM5
    fill values), in a Zarr store of one step per chunk, and their labels computed in memory
    in one thread (the reference)."""
    folder = tmp_path_factory.mktemp("series")
    ds, _ = make_dataset(n_time=STEPS, seed=21)
    ds = ds.drop_vars("truth").copy(deep=True)
    ds["TMQ"][1, 40:50, 10:20] = np.nan
    ds["PSL"][2, :4, :9] = 1e36
    paths = []
    for k in range(0, STEPS, 2):
        paths.append(folder / f"fields-{k}.nc")
        ds.isel(time=slice(k, k + 2)).to_netcdf(paths[-1])
    store = folder / "fields.zarr"
    ds.chunk({"time": 1}).to_zarr(store, zarr_format=3, consolidated=False)
    labels, events = compute(*label_dataset(ds), scheduler="sync")
    return {"ds": ds, "nc": [str(p) for p in paths], "zarr": str(store)}, labels, events


def _label_tasks(labels):
    graph = dict(labels.__dask_graph__())
    return [v for k, v in graph.items() if str(k).startswith("label-step")]


def _same(result, labels, events):
    got_labels, got_events = result
    np.testing.assert_array_equal(got_labels.values, labels.values)
    # (times: microseconds in memory, nanoseconds from a file)
    pd.testing.assert_frame_equal(got_events, events, check_dtype=False)


@pytest.mark.parametrize("source", ["nc", "zarr"])
def test_file_backed_tasks_carry_the_address_not_the_fields(series, source):
    inputs, labels, _ = series
    opened = open_fields(inputs[source], canonical=False, chunks=ONE_STEP)
    lazy, _ = label_dataset(opened)
    tasks = _label_tasks(lazy)
    assert len(tasks) == STEPS
    field_bytes = 7 * labels[0].size * 4  # the float32 fields one step needs
    for task in tasks:
        (reader,) = [a for a in task.args if isinstance(a, StepInputs)]
        size = len(pickle.dumps(task))
        # the toy step is ~390 kB of fields; the task is its file's address and the grid
        assert size < field_bytes / 8, (size, field_bytes)
    # in memory, the same task has to carry the step's fields: the measure above can fail
    in_memory = _label_tasks(label_dataset(inputs["ds"])[0])
    assert len(pickle.dumps(in_memory[0])) > field_bytes


@pytest.mark.parametrize(
    "scheduler,workers",
    [("sync", 1), ("threads", 1), ("threads", 2), ("processes", 1), ("processes", 2)],
)
def test_same_labels_with_any_workers(series, scheduler, workers):
    inputs, labels, events = series
    opened = open_fields(inputs["nc"], canonical=False)
    result = compute(*label_dataset(opened), scheduler=scheduler, num_workers=workers)
    _same(result, labels, events)


@pytest.mark.parametrize("workers", [1, 2])
def test_same_labels_in_worker_processes(series, workers):
    """... and errors come back from them (on the same processes: starting them takes
    seconds)."""
    inputs, labels, events = series
    opened = open_fields(inputs["zarr"], canonical=False)
    bad = series[0]["ds"].isel(time=slice(0, 2)).copy(deep=True)
    bad["TMQ"][1] = np.nan  # one step without any valid value
    with worker_processes(workers):
        result = compute(*label_dataset(opened), scheduler="threads", num_workers=workers)
        with pytest.raises(ValueError, match="TMQ has no valid values"):
            compute(*label_dataset(bad), scheduler="threads", num_workers=workers)
    _same(result, labels, events)


def test_shared_reads_are_not_repeated(tmp_path, series):
    """A file opened as one chunk of several steps is read by one task that the steps share:
    each label task would read the whole file again, so its inputs stay outside the task."""
    inputs, labels, events = series
    whole = xr.open_dataset(inputs["nc"][0], chunks={})  # both steps in one dask chunk
    lazy = label_dataset(whole)
    assert not any(isinstance(a, StepInputs) for t in _label_tasks(lazy[0]) for a in t.args)
    _same(
        compute(*lazy, scheduler="threads", num_workers=2),
        labels[:2],
        events[events.time.isin(labels.time[:2].values)].reset_index(drop=True),
    )


def test_open_chunks_whole_steps_by_size_without_splitting_stored_chunks(tmp_path, series):
    ds = series[0]["ds"]
    contiguous, compressed = tmp_path / "contiguous.nc", tmp_path / "compressed.nc"
    ds.to_netcdf(contiguous)
    encoding = {v: {"zlib": True, "chunksizes": (3, 96, 144)} for v in ds.data_vars}
    ds.to_netcdf(compressed, encoding=encoding)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no "chunks separate the stored chunks" warning
        assert open_fields(str(contiguous)).TMQ.chunks[0] == (STEPS,)  # toy: all in one
        assert open_fields(str(contiguous), chunks=ONE_STEP).TMQ.chunks[0] == (1,) * STEPS
        stored = open_fields(str(compressed), chunks=ONE_STEP).TMQ.data
    # stored chunks of three steps are read whole, then split
    assert any("rechunk" in str(k) for k in dict(stored.__dask_graph__()))


@pytest.mark.parametrize(
    "grid,steps,chunks",
    [((768, 1152), 3, (1, 1, 1)), ((96, 144), 100, (50, 50)), ((96, 144), 480, (69,) * 6 + (66,))],
    ids=["full-size", "toy-100", "toy-480"],
)
def test_default_chunks_hold_whole_steps_up_to_a_few_mib(tmp_path, grid, steps, chunks):
    """A full-size field (3.4 MiB a step) opens one step a chunk, as its label tasks read it;
    a toy one (54 KiB) tens of steps a chunk, evened out (not one step a chunk: dask's
    overhead per task outweighed reading a toy step thousands of times over)."""
    path = tmp_path / "f.nc"
    field = np.zeros((steps, *grid), np.float32)
    time = pd.date_range("2000-01-01", periods=steps, freq="3h")
    lat, lon = np.linspace(-90, 90, grid[0]), np.arange(grid[1]) * 360.0 / grid[1]
    xr.Dataset(
        {"TMQ": (("time", "lat", "lon"), field)}, coords={"time": time, "lat": lat, "lon": lon}
    ).to_netcdf(path)
    assert open_fields(str(path)).TMQ.chunks[0] == chunks
    assert open_fields(str(path), chunks={"time": 2}).TMQ.chunks[0][0] == 2  # as asked


def test_chunks_of_several_steps_give_the_same_labels_and_file(tmp_path, series, monkeypatch):
    """Chunks of two steps (as a toy file opens, here cut by one-step label tasks and the
    percentile threshold's pass) give the labels, events and saved file of one step a chunk."""
    inputs, labels, events = series
    path = tmp_path / "whole.nc"
    inputs["ds"].to_netcdf(path)
    monkeypatch.setattr(netcdf, "CHUNK_BYTES", 2 * inputs["ds"].TMQ[0].nbytes)
    several = open_fields(str(path), canonical=False)
    assert several.TMQ.chunks[0] == (2, 2, 2)
    one = open_fields(str(path), canonical=False, chunks=ONE_STEP)
    saved = []
    for opened in (several, one):
        got = compute(*label_dataset(opened), scheduler="threads", num_workers=2)
        _same(got, labels, events)
        saved.append(save_labelled(opened, got[0], got[1], tmp_path / f"{len(saved)}.nc"))
    with xr.open_dataset(saved[0]) as a, xr.open_dataset(saved[1]) as b:
        xr.testing.assert_identical(a.load(), b.load())


def test_cli_workers_give_the_same_files(tmp_path, series):
    inputs, labels, events = series
    written = {}
    for workers in ("1", "2"):
        for suffix in (".nc", ".zarr"):
            out = tmp_path / f"labels-{workers}{suffix}"
            argv = ["label", *inputs["nc"], "--out", str(out), "--workers", workers]
            assert main([*argv, "--no-progress"]) == 0
            opened = (
                xr.open_zarr(out, consolidated=False) if suffix == ".zarr" else xr.open_dataset(out)
            )
            with opened:
                written[workers, suffix] = opened.labels.values
            table = pd.read_csv(out.with_suffix(".events.csv"))
            assert len(table) == len(events)
    for value in written.values():
        np.testing.assert_array_equal(value, labels.values)


def test_worker_processes_exit_when_their_parent_is_killed(tmp_path):
    import os
    import signal
    import subprocess
    import sys
    import time

    script = (
        "import os, sys, time\n"
        "from climnb.labels.dataset import worker_processes\n"
        "if __name__ == '__main__':\n"
        "    with worker_processes(2) as pool:\n"
        "        print(*{pool.submit(os.getpid).result() for _ in range(8)}, flush=True)\n"
        "        time.sleep(60)\n"
    )
    (tmp_path / "hold.py").write_text(script)
    hold = [sys.executable, str(tmp_path / "hold.py")]
    with subprocess.Popen(hold, stdout=subprocess.PIPE) as proc:
        workers = [int(p) for p in proc.stdout.readline().split()]
        proc.send_signal(signal.SIGKILL)  # (leaving the block closes the pipe and waits)
    assert workers and proc.pid not in workers
    deadline = time.monotonic() + 10
    alive = workers
    while alive and time.monotonic() < deadline:
        time.sleep(0.2)
        alive = [p for p in workers if os.path.exists(f"/proc/{p}") and _running(p)]
    assert not alive, f"worker processes {alive} outlived their parent"


def _running(pid: int) -> bool:
    """Not a zombie (an exited process its new parent has not reaped yet)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_flipped_file_in_processes_matches_memory(tmp_path, series):
    """Descending latitudes, longitudes -180..180 and other coordinate names: the steps read
    inside the tasks are put on the canonical grid there, and the labels come back on the
    file's grid as when the fields are in memory."""
    ds = series[0]["ds"].isel(time=slice(0, 3))
    flipped = ds.roll(lon=ds.sizes["lon"] // 2, roll_coords=True)
    flipped = flipped.assign_coords(lon=((flipped.lon + 180) % 360) - 180)
    flipped = flipped.isel(lat=slice(None, None, -1)).rename(lat="latitude", lon="longitude")
    path = tmp_path / "flipped.nc"
    flipped.to_netcdf(path)
    expected, expected_events = compute(*label_dataset(flipped), scheduler="sync")
    opened = open_fields(str(path), canonical=False, chunks=ONE_STEP)
    lazy = label_dataset(opened)
    assert all(any(isinstance(a, StepInputs) for a in t.args) for t in _label_tasks(lazy[0]))
    got, events = compute(*lazy, scheduler="processes", num_workers=2)
    assert got.dims == ("time", "latitude", "longitude")
    np.testing.assert_array_equal(got.latitude.values, flipped.latitude.values)
    np.testing.assert_array_equal(got.values, expected.values)
    pd.testing.assert_frame_equal(events, expected_events, check_dtype=False)


def test_a_worker_keeps_the_files_it_reads_open(series):
    """In a worker process each task arrives as a fresh copy; without keeping the lazy file
    arrays, the copy closed the file when the task ended and every step opened it again."""
    import gc

    from xarray.backends.file_manager import FILE_CACHE

    from climnb.labels import dataset

    path = series[0]["nc"][1]
    # xarray closes a file when its last manager goes only if it gets the HDF5 lock at once:
    # one collected while another thread read (the threaded tests above) stays in the cache.
    # Those are not this test's; it looks at the entries its own opening adds.
    before = {key for key in FILE_CACHE if path in str(key)}
    opened = open_fields(path, canonical=False, chunks=ONE_STEP)
    blob = pickle.dumps(
        [a for a in _label_tasks(label_dataset(opened)[0])[0].args if isinstance(a, StepInputs)]
    )
    dataset._OPENED.clear()
    del opened
    gc.collect()

    def files_open():
        return [key for key in FILE_CACHE if path in str(key) and key not in before]

    assert not files_open()
    (first,) = pickle.loads(blob)
    first.read()
    del first
    gc.collect()
    assert files_open(), "the file was closed when the task's copy went"
    (second,) = pickle.loads(blob)
    kept = dict(dataset._OPENED)
    second.read()
    assert all(dataset._OPENED[k] is v for k, v in kept.items())  # the same open arrays


def test_worker_processes_start_at_once_and_load_the_labeller():
    """The processes start as the block opens (spawn would start them at the first task) and
    import the labeller there, while the caller opens its input."""
    import multiprocessing

    from climnb.labels import workers

    before = set(multiprocessing.active_children())  # other tests' children may linger
    with worker_processes(2) as pool:
        started = len(set(multiprocessing.active_children()) - before)
        loaded = pool.submit(_loaded, "climnb.labels.dataset").result()
        # the block's own pool: the writer opens no other inside it
        assert workers.current_pool() is pool
    assert started == 2
    assert loaded
    assert workers.current_pool() is None


def _loaded(module: str) -> bool:
    import sys
    import time

    deadline = time.monotonic() + 60  # the other process may have taken this one's warm-up
    while module not in sys.modules and time.monotonic() < deadline:
        time.sleep(0.05)
    return module in sys.modules


def test_a_worker_leaves_without_the_interpreters_teardown(tmp_path):
    """When the pool closes, a worker process exits after its exit handlers, without freeing
    every module and object (a second of a full-size labeller's worker that the pool waited
    for): a finalizer left in it does not run."""
    import subprocess
    import sys

    script = (
        "import os, sys\n"
        "from climnb.labels.dataset import worker_processes\n"
        "class Left:\n"
        "    def __init__(self, path):\n"
        "        self.path, self.touch = path, os.open\n"
        "    def __del__(self):\n"
        "        self.touch(self.path, os.O_CREAT | os.O_WRONLY)\n"
        "def leave_one(path):\n"
        "    sys.modules['__mp_main__'].kept = Left(path)\n"
        "if __name__ == '__main__':\n"
        "    with worker_processes(1) as pool:\n"
        "        pool.submit(leave_one, sys.argv[1]).result()\n"
    )
    (tmp_path / "leave.py").write_text(script)
    mark = tmp_path / "torn-down"
    done = subprocess.run(
        [sys.executable, str(tmp_path / "leave.py"), str(mark)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert not mark.exists()


def test_label_files_uses_one_pool(monkeypatch, tmp_path, series):
    """``climnb label --workers 2`` starts its worker processes once, before opening the
    input; the writer labels on them."""
    from climnb.labels import files, workers, writer

    opened = []
    real = workers.worker_processes

    def counted(n, **kwargs):
        opened.append(n)
        return real(n, **kwargs)

    monkeypatch.setattr(files, "worker_processes", counted)
    monkeypatch.setattr(writer, "worker_processes", counted)
    request = files.LabelRequest(
        inputs=tuple(series[0]["nc"]), out=tmp_path / "l.nc", workers=2, progress=False
    )
    files.label_files(request)
    assert opened == [2]


def test_the_dashboard_link_is_logged_not_printed(monkeypatch, caplog, capsys):
    import contextlib
    import logging

    from climnb.labels import files
    from climnb.runtime import scheduler

    class Client(contextlib.nullcontext):
        dashboard_link = "http://127.0.0.1:8787/status"

    monkeypatch.setattr(scheduler, "dask_client", lambda *a, **k: Client())
    request = files.LabelRequest(inputs=("x.nc",), out="y.nc", scheduler="tcp://host:8786")
    with caplog.at_level(logging.WARNING, logger="climnb.labels.files"):
        files._client(request)
    assert "http://127.0.0.1:8787/status" in caplog.text
    assert capsys.readouterr().out == ""
