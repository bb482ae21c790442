"""The one door for files: every command, the accessor and the notebooks open fields and write
results here, and go back to the caller's grid the same way.

* :func:`expand_paths` expands globs (sorted), naming a miss; :func:`open_fields` opens NetCDF
  files, Zarr stores or GRIB files lazily (dask) on climnb's canonical grid and names
  (:mod:`climnb.io.netcdf` does the work);
* :func:`input_grid` remembers a Dataset's own grid, and :meth:`InputGrid.restore` (or
  :func:`to_caller_grid`) puts a result back on it; :func:`read_grid` reads that grid from the
  first input file as stored (names, order, -180..180 or 0..360), for callers that hold paths;
* :func:`check_output` (and :func:`check_outputs`) is the one check of every command's outputs,
  before any work starts (the output rule, :mod:`climnb.io.outputs`);
* :func:`write` streams a lazy Dataset to NetCDF (``*.nc``) or Zarr (``*.zarr``, Zarr format 3)
  one dask chunk at a time, so memory stays bounded by a few chunks whatever the length of the
  period; the file (or store) appears under its name only when complete. Every chunk of a
  store is written (also those holding only the fill value), so that a missing chunk is always
  damage (:func:`climnb.io.zarrstore.check_store`).

Temporary names carry the writer's process id (:func:`climnb.io.atomic.temp_path`): what a
killed run left is removed before writing, a store displaced by a swap that was cut short is
put back, and a second live run writing the same output is refused
(:class:`climnb.io.atomic.OutputBusy`).

Examples
--------
>>> import tempfile
>>> from climnb.data.synthetic import make_dataset
>>> ds, _ = make_dataset(n_time=2, seed=0)
>>> out = tempfile.mkdtemp() + "/fields.zarr"
>>> write(ds[["TMQ", "PSL"]].chunk({"time": 1}), out).name
'fields.zarr'
>>> open_fields(out, required=["TMQ"]).TMQ.dims
('time', 'lat', 'lon')
>>> input_grid(ds).restore(open_fields(out).TMQ).dims
('time', 'lat', 'lon')
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import xarray as xr

from climnb.io.atomic import atomic_path, remove_leftovers, temp_path
from climnb.io.grid import cf_coords, coord_names, to_caller_grid
from climnb.io.netcdf import InputGrid, expand_paths, input_grid, is_zarr, open_fields
from climnb.io.outputs import OutputError, check_output, check_outputs
from climnb.progress import dask_progress

if TYPE_CHECKING:  # dask is imported where used
    from dask.callbacks import Callback

__all__ = [
    "expand_paths",
    "open_fields",
    "is_zarr",
    "input_grid",
    "InputGrid",
    "read_grid",
    "to_caller_grid",
    "cf_coords",
    "OutputError",
    "check_output",
    "check_outputs",
    "write",
]

log = logging.getLogger(__name__)

PathLike = str | os.PathLike


def read_grid(paths: PathLike | Sequence[PathLike]) -> xr.Dataset | None:
    """The latitude and longitude coordinates of the first input as stored (names, order,
    -180..180 or 0..360), as a Dataset of coordinates; ``None`` for DeepCAM sample files.
    :func:`to_caller_grid` puts a result back on it."""
    first = Path(expand_paths(paths)[0])
    if first.suffix == ".h5" or (first.is_dir() and not is_zarr(first)):
        return None
    with (
        xr.open_zarr(first, consolidated=False) if is_zarr(first) else xr.open_dataset(first) as ds
    ):
        try:
            names = list(coord_names(ds))
        except ValueError:
            return None
        return ds[names].coords.to_dataset().reset_coords(drop=True)[names].load()


def write(
    ds: xr.Dataset,
    path: PathLike,
    *,
    encoding: dict | None = None,
    progress: bool | Callback = False,
    workers: int = 2,
    desc: str = "writing",
):
    """Stream ``ds`` to NetCDF or Zarr (by the suffix ``.zarr``), atomically.

    Parameters
    ----------
    ds : the Dataset; dask-backed variables are computed one chunk at a time while writing.
    path : ``*.zarr`` for a Zarr (format 3) store, anything else for NetCDF-4. An existing
        file or store is replaced only once the new one is complete.
    encoding : per-variable encoding (``dtype``; ``zlib`` is dropped for Zarr, whose default
        codec compresses).
    progress : show the progress over the dask tasks (``True``; :mod:`climnb.progress`: a bar
        in a terminal or notebook, else log lines now and then), or a dask ``Callback`` of
        one's own.
    workers : dask threads.

    Returns
    -------
    Path

    Nothing else should be computed in the same pass from ``ds``'s tasks: xarray's write graph
    holds copies of them under other names, so they would run twice (a dask callback that keeps
    the results of the write's own tasks is the way: :mod:`climnb.labels.writer`).
    """
    import dask
    from dask.callbacks import Callback

    path = Path(path)
    zarr = path.suffix == ".zarr"
    encoding = {k: dict(v) for k, v in (encoding or {}).items()}
    if zarr:
        for enc in encoding.values():
            enc.pop("zlib", None)
    # no fusing as the writes are built: a fused chain runs under a new name, so no callback
    # (:mod:`climnb.labels.writer`) could see the tasks it holds
    with _target(path, zarr) as tmp, dask.config.set({"optimization.fuse.active": False}):
        if zarr:
            delayed = ds.to_zarr(
                tmp,
                mode="w-",
                zarr_format=3,
                consolidated=False,
                encoding=encoding,
                compute=False,
                write_empty_chunks=True,  # a chunk of fill values too: missing means damaged
            )
        else:
            delayed = ds.to_netcdf(tmp, encoding=encoding, compute=False)
        with dask.config.set(scheduler="threads", num_workers=max(1, workers)):
            bar = progress
            if not isinstance(progress, Callback):
                bar = dask_progress(desc=desc, unit="task", enabled=bool(progress))
            with bar:
                dask.compute(delayed, optimize_graph=False)
    log.info("wrote %s", path)
    return path


@contextlib.contextmanager
def _target(path: Path, zarr: bool):
    """A temporary name beside ``path`` (with this process's id) that becomes ``path`` when
    complete. What killed runs left for ``path`` goes first; a live run writing it is refused
    (:func:`climnb.io.atomic.remove_leftovers`)."""
    remove_leftovers(path.parent, path.name)
    if not zarr:
        with atomic_path(path) as tmp:
            yield tmp
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = temp_path(path)
    try:
        yield tmp
        _swap(tmp, path)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _swap(tmp: Path, path: Path) -> None:
    """Put the complete store ``tmp`` at ``path``: readers see the old store or the new one,
    never a mix. A kill between the two renames leaves the old store under a ``.old`` name,
    which the next run puts back (:func:`climnb.io.atomic.remove_leftovers`)."""
    if not path.exists():
        os.replace(tmp, path)
        return
    old = temp_path(path, ".old")
    os.replace(path, old)
    os.replace(tmp, path)
    shutil.rmtree(old, ignore_errors=True)
