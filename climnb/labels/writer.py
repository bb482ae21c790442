"""Write labels and their event table: NetCDF or Zarr, in one pass, in parallel, atomically.

:func:`write_labels` is what ``climnb label`` runs after :func:`climnb.labels.label_dataset`;
the accessor and the notebooks can call it too. Each step is labelled once: the write runs
the label tasks, and the event table is put together from the tables those tasks returned
(:class:`_StepTables`). Computing the write and the table side by side would label every step
twice: the write's graph (xarray's ``to_netcdf``/``to_zarr`` with ``compute=False``) holds a
copy of each label task under another name, which no shared key can merge.

* NetCDF (any name but ``*.zarr``): threads of this process schedule the work and write (the
  NetCDF writer's lock cannot go to other processes); with ``workers`` above 1 each label task
  reads and labels its steps in one of ``workers`` processes
  (:func:`climnb.labels.dataset.worker_processes`), so labelling scales past the GIL and
  HDF5's lock and only the uint8 labels come back. With a dask.distributed ``client``
  (:func:`climnb.runtime.scheduler.dask_client`) the work runs on its workers instead.
* Zarr (``*.zarr``): :func:`climnb.io.files.write`, the store replaced only when complete.

The event table goes to ``events_path`` (CSV), written atomically after the labels.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
from pathlib import Path

import dask
import pandas as pd
import xarray as xr

from climnb.io.atomic import atomic_path
from climnb.io.files import write
from climnb.io.netcdf import time_steps
from climnb.labels.dataset import compute, worker_processes
from climnb.labels.workers import current_pool
from climnb.progress import LogProgress, dask_progress, shows_bar
from climnb.runtime.scheduler import compute as compute_on

__all__ = ["write_labels"]

log = logging.getLogger(__name__)

_ENCODING = {"labels": {"dtype": "u1", "zlib": True}}


def _netcdf_encoding(labels: xr.DataArray) -> dict:
    """One HDF5 chunk a time step, as the labels are written and read. netCDF's default
    chunks span tens of steps, so writing step by step rewrote (and recompressed) each chunk
    that many times: a month of full-size labels went 5x slower to NetCDF than to Zarr."""
    chunks = tuple(1 if d == "time" else n for d, n in zip(labels.dims, labels.shape, strict=True))
    return {"labels": {**_ENCODING["labels"], "chunksizes": chunks}}


def write_labels(
    labels: xr.DataArray,
    events,
    out: str | os.PathLike,
    *,
    events_path: str | os.PathLike | None = None,
    workers: int = 1,
    client=None,
    progress: bool = True,
) -> pd.DataFrame:
    """Compute and write ``labels`` (lazy, from :func:`climnb.labels.label_dataset`) to ``out``
    and the ``events`` (its Delayed table) to ``events_path`` (default: ``out`` with the suffix
    ``.events.csv``); returns the event table.

    Parameters
    ----------
    workers : processes that label (NetCDF) or dask threads (Zarr), without ``client``.
    client : a dask.distributed client to compute on (NetCDF only), or ``None``.
    progress : show the progress of the labelling, in time steps (:mod:`climnb.progress`): a
        bar in a terminal or notebook, else log lines now and then.
    """
    if workers < 1:
        raise ValueError(f"--workers must be at least 1, got {workers}")
    out = Path(out)
    events_path = Path(events_path) if events_path else out.with_suffix(".events.csv")
    if out.suffix == ".zarr":
        if client is not None:
            raise ValueError(f"--out {out}: --scheduler writes NetCDF only; give a .nc name")
        with _processes(workers, client), _StepTables() as steps:
            write(
                labels.to_dataset(),
                out,
                encoding={"labels": {"dtype": "u1"}},
                progress=_progress(time_steps(labels), progress),
                workers=workers,
            )
            table = steps.table(events)
    else:
        table = _write_netcdf(labels, events, out, workers, client, progress)
    with atomic_path(events_path) as tmp:
        table.to_csv(tmp, index=False)
    log.info("wrote %s and %s", out, events_path)
    return table


def _write_netcdf(labels, events, out: Path, workers: int, client, progress: bool):
    n_steps = time_steps(labels)
    bar = _progress(n_steps, progress and client is None)
    with _processes(workers, client), atomic_path(out) as tmp, bar:
        with dask.config.set({"optimization.fuse.active": False}):  # see climnb.io.files.write
            write_task = labels.to_dataset().to_netcdf(
                tmp, compute=False, encoding=_netcdf_encoding(labels)
            )
        if client is not None:  # distributed's bar where a bar shows, else a last line
            drawn = shows_bar(progress)
            done = None
            if progress and not drawn:
                done = LogProgress(n_steps, desc="labelling", unit="step")
            with done or contextlib.nullcontext():
                _, table = compute_on(client, write_task, events, progress=drawn, notebook=False)
                if done is not None:
                    done.update(n_steps)
        else:
            threads = "sync" if workers == 1 else "threads"
            with dask.config.set(scheduler=threads, num_workers=workers), _StepTables() as steps:
                compute(write_task)
                table = steps.table(events)
    return table


#: A label task's key (:func:`climnb.labels.dataset.label_dataset`), maybe with a copy's suffix.
_STEP_KEY = re.compile(r"(label-step-[0-9a-f]+-\d+)(-[0-9a-f]+)?")


class _StepTables:
    """While a write computes on this process's schedulers, keep the event table each label
    task returns (the label arrays go to the file); :meth:`table` then makes the event table
    from them, labelling nothing again (a step it lacks is labelled then)."""

    def __init__(self):
        from dask.callbacks import Callback

        self.tables: dict[str, object] = {}
        self.callback = Callback(posttask=self._keep)

    def __enter__(self):
        self.callback.__enter__()
        return self

    def __exit__(self, *exc):
        return self.callback.__exit__(*exc)

    def _keep(self, key, result, dsk, state, worker_id) -> None:
        found = _STEP_KEY.fullmatch(key) if isinstance(key, str) else None
        if found and isinstance(result, tuple) and len(result) == 2:
            self.tables[found.group(1)] = (None, result[1])  # not the labels: memory stays flat

    def table(self, events) -> pd.DataFrame:
        from dask._task_spec import DataNode

        graph = dict(events.__dask_graph__())
        for key in [k for k in graph if k in self.tables]:  # the label tasks it kept
            graph[key] = DataNode(key, self.tables[key])
        (table,) = dask.get(graph, [events.key])
        return table


def _processes(workers: int, client):
    """The worker processes that label, for ``workers`` above 1 without a distributed
    client (whose workers are processes already); those of the caller's
    :func:`~climnb.labels.workers.worker_processes` block where it opened one."""
    if client is not None or workers < 2 or current_pool() is not None:
        return contextlib.nullcontext()
    return worker_processes(workers)


def _progress(total: int, enabled: bool):
    """The progress of the labelling on this process's schedulers: the label tasks done."""
    return dask_progress(
        desc="labelling", unit="step", total=total, counts=_is_step, enabled=enabled
    )


def _is_step(key) -> bool:
    name = key[0] if isinstance(key, tuple) else key
    return str(name).startswith("label-step")
