"""Open NetCDF files, Zarr stores and GRIB files as they come, lazily, on climnb's canonical grid.

:func:`open_fields` opens one or many files lazily (dask, as many whole time steps a chunk as
fit :data:`CHUNK_BYTES`), joins them along time and puts them on climnb's names and grid
(:func:`~climnb.io.canonical.normalize`); :func:`expand_paths` expands globs, naming a miss. A
file that cannot be read, and files whose grids or variables differ or whose times repeat, are
refused, naming the files. The canonical form and the way back to a file's own grid are
:mod:`climnb.io.canonical`'s (:func:`normalize`, :func:`input_grid`, :class:`InputGrid`, ...),
all importable from here too.

Examples
--------
>>> import tempfile
>>> from climnb.data.synthetic import make_dataset, save_dataset
>>> path = tempfile.mkdtemp() + "/fields.nc"
>>> _ = save_dataset(*make_dataset(n_time=2, seed=0), path)
>>> ds = open_fields(path, required=["TMQ"])
>>> ds.TMQ.dims, ds.sizes["time"]
(('time', 'lat', 'lon'), 2)
"""

from __future__ import annotations

import logging
import math
import os
import re
import warnings
from collections.abc import Iterable, Mapping, Sequence

import numpy as np
import xarray as xr

from climnb.io.canonical import (
    CF_KEYS,
    COORD_ALIASES,
    DIMS,
    FILL_LIMIT,
    LAT_ATTRS,
    LON_ATTRS,
    TOL_DEG,
    InputGrid,
    coord_names,
    input_grid,
    missing_message,
    normalize,
    time_steps,
)
from climnb.io.grib import is_grib, open_grib
from climnb.io.paths import expand_paths
from climnb.io.zarrstore import ZarrStoreError, check_store, guard_reads, is_zarr

__all__ = [
    "normalize",
    "open_fields",
    "input_grid",
    "InputGrid",
    "expand_paths",
    "coord_names",
    "time_steps",
    "time_chunk",
    "CHUNK_BYTES",
    "missing_message",
    "is_zarr",
    "DIMS",
    "FILL_LIMIT",
    "LAT_ATTRS",
    "LON_ATTRS",
    "COORD_ALIASES",
]

log = logging.getLogger(__name__)

#: The most bytes of one variable's dask chunk that :func:`open_fields` makes by default: it
#: puts as many whole time steps in a chunk as fit (at least one). A full-size CAM5 field
#: (768 x 1152 float32, 3.4 MiB a step) stays at one step a chunk, which each label task then
#: reads alone (:class:`climnb.labels.dataset.StepInputs`); a toy field (96 x 144, 54 KiB a
#: step) gets some 70 steps a chunk, where one step a chunk cost dask's overhead per task
#: thousands of times (notebook 01 saving its 480 toy steps: 11-15 s -> about 1 s).
CHUNK_BYTES = 4 * 2**20


def time_chunk(ds: xr.Dataset, time: str = "time", target: int | None = None) -> int:
    """Time steps per dask chunk for ``ds``: as many whole steps as fit ``target`` bytes
    (default :data:`CHUNK_BYTES`) in its largest variable along ``time`` (at least 1), evened
    out over the series (480 steps of up to 75 a chunk: 7 chunks of 69 or fewer, not 6 of 75
    and one of 30). Reads no data.

    Examples
    --------
    >>> import numpy as np, xarray as xr
    >>> toy = xr.Dataset({"TMQ": (("time", "lat", "lon"), np.zeros((480, 96, 144), "f4"))})
    >>> time_chunk(toy), time_chunk(toy.isel(lat=slice(0, 1), lon=slice(0, 1)))
    (69, 480)
    """
    n = int(ds.sizes.get(time, 0))
    step = max(  # from the shape and type: no backend is asked (or read)
        (v.size // n * v.dtype.itemsize for v in ds.data_vars.values() if time in v.dims and n),
        default=0,
    )
    if n < 2 or step == 0:
        return max(n, 1)
    fit = min(max((CHUNK_BYTES if target is None else target) // step, 1), n)
    return math.ceil(n / math.ceil(n / fit))  # the same steps in as few chunks, evened out


def _check_utf8(path: str) -> None:
    """Refuse a NetCDF file whose name is not UTF-8, which the NetCDF library takes names as
    (it would be called unreadable), saying how to rename it."""
    try:
        path.encode("utf-8")
    except UnicodeEncodeError:
        shown = str(os.fsencode(path))[2:-1]  # its bytes, the undecodable ones as \xNN
        raise ValueError(
            f"{shown}: the file name is not UTF-8 (Latin-1 or another encoding?), which the "
            "NetCDF library cannot open; rename it with a UTF-8 name (convmv -f latin1 -t "
            "utf8 --notest NAME)"
        ) from None


def _open_one(path: str, chunks) -> xr.Dataset:
    zarr = is_zarr(path)
    if os.path.isdir(path) and not zarr:
        raise ValueError(f"{path}: is a directory, not a NetCDF file or Zarr store")
    if not zarr and is_grib(path):
        try:
            return open_grib(path, chunks)
        except ImportError:
            raise
        except Exception as err:  # ecCodes raises many kinds
            raise ValueError(
                f"{path}: cannot be read as GRIB ({type(err).__name__}: {_gist(err)})"
            ) from None
    if zarr and os.path.isdir(path):
        _check_zarr(path)
    if not zarr:
        _check_utf8(path)
    try:
        # dask from the start (chunks={} keeps the file's own), so that the arrays' names come
        # from the path and modification time: the same file gives the same dask token in any
        # process, which resuming an interrupted `climnb samples` relies on
        if zarr:  # a chunk whose bytes are damaged is named when it is read
            return guard_reads(xr.open_zarr(path, consolidated=False, chunks=chunks or {}), path)
        # the engine named: guessing it loads every backend, cfgrib's imports ecCodes (~0.2 s).
        # Opened once, without dask (the file's lazy arrays), and chunked afterwards
        # (:func:`_chunk_file`): opening it a second time with the chunks chosen cost ~20 ms of
        # HDF5 open and the decoding again for each file of a month
        # (cache=False: the lazy arrays as xarray gives them with chunks, not kept in memory once
        # read whole)
        ds = xr.open_dataset(path, chunks=None, cache=False, engine="netcdf4")
        time = coord_names(ds).get("time")
        if time in ds.dims and _steps_apart(ds, time):
            # the chunks straight from the file (not the file's whole contiguous variable split
            # afterwards): each chunk of steps is then read by a task of its own; stored chunks
            # of several steps are read whole and split or joined by open_fields
            return _chunk_file(ds, path, chunks or {time: time_chunk(ds, time)})
        return _chunk_file(ds, path, {})
    except Exception as err:  # backends raise many kinds (OSError, ValueError, ...)
        kind = "a Zarr store" if zarr else "NetCDF"
        raise ValueError(
            f"{path}: cannot be read as {kind} ({type(err).__name__}: {_gist(err)})"
        ) from None


def _chunk_file(ds: xr.Dataset, path: str, chunks: dict) -> xr.Dataset:
    """``ds`` (a file opened without dask) as ``xr.open_dataset(path, chunks=chunks)`` gives it:
    each variable's dims not in ``chunks`` in the file's own chunks, and dask names from the
    path, modification time and chunks, so that the same file gives the same dask keys in any
    process (resuming ``climnb samples``, a label worker's kept open files)."""
    from dask.base import tokenize

    try:
        mtime = os.path.getmtime(path)
    except OSError:  # not a local file: its path alone, as xarray does
        mtime = None
    token = tokenize(path, mtime, "netcdf4", chunks)
    chunked = {}
    for name, var in ds.variables.items():
        if var._in_memory:  # the index coordinates, read already
            continue
        preferred = var.encoding.get("preferred_chunks", {})
        wanted = {d: chunks.get(d) or preferred.get(d, ds.sizes[d]) for d in var.dims}
        key = f"open_dataset-{name}-{tokenize(token, str(wanted))}"  # as xarray names them
        chunked[name] = var.chunk(wanted, from_array_kwargs={"name": key})
    coords = {n: v for n, v in chunked.items() if n in ds.coords}
    ds = ds.assign({n: v for n, v in chunked.items() if n not in coords})
    return ds.assign_coords(coords) if coords else ds


def _gist(err: BaseException) -> str:
    """The first sentence of an error's first line (a path's dots do not end it)."""
    lines = str(err).strip().splitlines()
    return re.split(r"\.(?:\s|$)", lines[0] if lines else "")[0] if lines else ""


def _check_zarr(path: str) -> None:
    """Refuse a store that lacks a chunk or a variable's metadata (read as zeros or skipped
    otherwise); a store that cannot be read at all is left to the opener's message."""
    try:
        check_store(path)
    except ZarrStoreError:  # names the store, the variable and what is missing
        raise
    except Exception:  # noqa: BLE001 - zarr's own errors: the opener below names them
        return


def _steps_apart(ds: xr.Dataset, time: str) -> bool:
    """Whether any steps of every variable along ``time`` can be read alone without reading
    more of the file: stored contiguously or in chunks of one step (compressed chunks of
    several steps are better read whole)."""
    for var in ds.data_vars.values():
        if time not in var.dims or ds.sizes[time] < 2:
            continue
        sizes = var.encoding.get("chunksizes")
        if not var.encoding.get("contiguous") and not (sizes and sizes[var.dims.index(time)] == 1):
            return False
    return True


def open_fields(
    paths: str | os.PathLike | Sequence[str | os.PathLike],
    *,
    required: Iterable[str] | None = None,
    chunks: dict | None = None,
    variables: Mapping[str, str] | None = None,
    units: Mapping[str, str] | None = None,
    canonical: bool = True,
    regrid: float | None = None,
) -> xr.Dataset:
    """Open one or many NetCDF files, Zarr stores or GRIB files lazily (dask) and
    :func:`normalize` them.

    Parameters
    ----------
    paths : a file, a glob pattern, or a list of them; several files are joined along time.
        They must share one grid (within 1e-6 degrees) and must not repeat a time.
    required : variables that must be present (see :func:`normalize`).
    chunks : dask chunks, e.g. ``{"time": 1}``; default whole lat/lon fields and as many whole
        time steps a chunk as fit :data:`CHUNK_BYTES` in the largest variable
        (:func:`time_chunk`): one step of a full-size 768 x 1152 field, tens of steps of a toy
        one. Stored chunks of several steps (compressed) are read whole, then split or joined.
    variables : extra mapping from the files' variable names to climnb's.
    units : units to take instead of the files' ``units`` attributes (see :func:`normalize`).
    canonical : False returns the files joined along time as they are (names, grid, units),
        for callers that normalise later and want results on the input's own grid.
    regrid : the spacing (degrees) a projected or curvilinear grid is put on (see
        :func:`normalize`).

    Raises
    ------
    FileNotFoundError
        For a path that does not exist.
    ValueError
        For a file that cannot be read or lacks what is required, naming the file; for files
        whose grids differ or whose times repeat, naming both files.
    """
    files = expand_paths(paths)
    parts = []
    for f in files:
        ds = _open_one(f, chunks)
        time = coord_names(ds).get("time", "time")
        ds = ds.chunk(chunks or ({time: time_chunk(ds, time)} if time in ds.dims else {}))
        try:
            part = normalize(ds, required=required, variables=variables, units=units, regrid=regrid)
        except ValueError as err:
            raise ValueError(f"{f}: {err}") from None
        _check_repeats(f, part)
        parts.append((f, part, ds))
    if len(parts) > 1:  # in time order, whatever the files' names
        _check_same_variables([(f, part) for f, part, _ in parts])
        parts.sort(key=lambda p: p[1].time.values[0] if p[1].sizes["time"] else 0)
        _check_joinable([(f, part) for f, part, _ in parts])
    log.info(
        "opened %d file(s), %d time steps",
        len(files),
        sum(part.sizes["time"] for _, part, _ in parts),
    )
    chosen = [part if canonical else raw for _, part, raw in parts]
    if len(chosen) == 1:
        return chosen[0]
    dim = "time" if canonical else coord_names(chosen[0]).get("time", "time")
    return xr.concat(
        chosen, dim=dim, data_vars="minimal", coords="minimal", compat="override", join="override"
    )


def _check_same_variables(parts: Sequence[tuple[str, xr.Dataset]]) -> None:
    """Refuse files (canonical) of which one lacks a variable along time that another holds:
    joined, its steps would hold no values of it (missing, not a field of another file)."""
    bounds = {
        str(v.attrs["bounds"])
        for _, ds in parts
        for v in ds.variables.values()
        if "bounds" in v.attrs
    }

    def fields(ds):  # the variables along time, not the coordinates' cell bounds
        return {n for n, v in ds.data_vars.items() if "time" in v.dims and n not in bounds}

    held = [(f, fields(ds)) for f, ds in parts]
    every = set().union(*(names for _, names in held))
    for f, names in held:
        lacking = sorted(every - names)
        if lacking:
            other = next(g for g, n in held if lacking[0] in n)
            raise ValueError(
                f"{f}: lacks variable(s) {', '.join(lacking)}, which {other} holds: files "
                "joined along time must hold the same variables; give the missing variable "
                "or leave the file out"
            )


def _check_joinable(parts: Sequence[tuple[str, xr.Dataset]]) -> None:
    """Refuse files (canonical) whose grids differ or whose times repeat or go back."""
    first, ref = parts[0]
    for f, ds in parts[1:]:
        for dim in ("lat", "lon"):
            a, b = ref[dim].values, ds[dim].values
            if a.shape != b.shape:
                raise ValueError(
                    f"{f}: its grid differs from that of {first}: {ds.sizes[dim]} "
                    f"{CF_KEYS[dim]}s instead of {ref.sizes[dim]}; regrid one of them first"
                )
            bad = np.flatnonzero(~np.isclose(a, b, rtol=0, atol=TOL_DEG))
            if bad.size:
                raise ValueError(
                    f"{f}: its grid differs from that of {first}: {CF_KEYS[dim]} "
                    f"{b[bad[0]]:g} instead of {a[bad[0]]:g} (index {bad[0]}); regrid one of "
                    "them first"
                )
    seen: dict = {}
    last = None
    for f, ds in parts:
        if "time" not in ds.coords:  # no times (steps joined in file order): nothing to repeat
            continue
        times = ds.time.values
        for t in times:
            if t in seen:
                raise ValueError(
                    f"{f}: time {_fmt_time(t)} is also in {seen[t]}; give each time once "
                    "(leave out the overlapping file)"
                )
        if last is not None and times.size and times[0] < last[1]:
            raise ValueError(
                f"{f}: its times ({_fmt_time(times[0])} on) overlap those of {last[0]} (to "
                f"{_fmt_time(last[1])}); give each time once"
            )
        seen.update(dict.fromkeys(list(times), f))
        if times.size:
            last = (f, times[-1])


def _check_repeats(f: str, ds: xr.Dataset) -> None:
    """Refuse a file (canonical) that holds a time twice, naming it, the time and the steps."""
    if "time" not in ds.coords:
        return
    first: dict = {}
    for i, t in enumerate(ds.time.values):
        j = first.setdefault(t, i)
        if j != i:
            raise ValueError(
                f"{f}: time {_fmt_time(t)} is repeated (steps {j} and {i}): the same time "
                "twice; give each time once"
            )


def _fmt_time(t) -> str:
    return str(np.datetime_as_string(t, unit="m")) if isinstance(t, np.datetime64) else str(t)


def __getattr__(name: str):
    if name == "open_dataset":  # the name before the one door (climnb.io.files)
        warnings.warn(
            "climnb.io.netcdf.open_dataset is now climnb.io.files.open_fields; import that",
            DeprecationWarning,
            stacklevel=2,
        )
        return open_fields
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
