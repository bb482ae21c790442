"""Fields in, results out: NetCDF or Zarr, chosen by the path, streamed and written atomically.

* :func:`open_fields` opens NetCDF files (and globs) or Zarr stores lazily (dask) on climnb's
  canonical grid; :func:`input_grid` gives the latitude and longitude of the first input as the
  file has them (results go back onto it);
* :func:`check_output` is the one check of every command's outputs, before any work starts
  (the rule below);
* :func:`write` streams a lazy Dataset to NetCDF (``*.nc``) or Zarr (``*.zarr``, Zarr format 3)
  one dask chunk at a time, so memory stays bounded by a few chunks whatever the length of the
  period; the file (or store) appears under its name only when complete.

The output rule (``climnb label``, ``predict``, ``tracks``, ``samples``, ``stage``): a missing
parent folder is created when the output is written. Refused before any work, with one line
naming the path (exit status 2):

* an output that is an input, lies inside an input (a Zarr store, a sample folder) or, for a
  folder output, holds one; two outputs of one command that are the same path;
* a file output that is an existing directory (a Zarr store is replaced by a ``*.zarr``
  output), a folder output that is an existing file;
* an output whose parent is a file, or that cannot be written (permissions, read-only file
  system);
* a non-empty folder output without ``--overwrite`` (``climnb samples``; ``climnb stage``
  resumes in its folders), and with it a folder holding anything the command does not write.

An existing file output is replaced, atomically: the new one appears only when complete, so a
rerun redoes it and an interrupted run leaves the old one.

Examples
--------
>>> import tempfile
>>> from climnb.synthetic import make_dataset
>>> ds, _ = make_dataset(n_time=2, seed=0)
>>> out = tempfile.mkdtemp() + "/fields.zarr"
>>> write(ds[["TMQ", "PSL"]].chunk({"time": 1}), out).name
'fields.zarr'
>>> open_fields(out, required=["TMQ"]).TMQ.dims
('time', 'lat', 'lon')
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import uuid
from collections.abc import Collection, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from climnb.atomic import atomic_path

if TYPE_CHECKING:  # xarray and dask are imported where used: check_output runs without them
    import xarray as xr
    from dask.callbacks import Callback

__all__ = ["OutputError", "is_zarr", "expand", "open_fields", "input_grid", "check_output", "write"]

log = logging.getLogger(__name__)

PathLike = str | os.PathLike


def is_zarr(path: PathLike) -> bool:
    """A Zarr store: a ``*.zarr`` path, or a directory holding Zarr metadata
    (:func:`climnb.io.netcdf.is_zarr`)."""
    from climnb.io.netcdf import is_zarr as _is_zarr

    return _is_zarr(path)


class OutputError(ValueError):
    """An output path that must not be written (an input, a directory, not writable)."""


def expand(paths: PathLike | Sequence[PathLike]) -> list[Path]:
    """Input paths with globs expanded (sorted); raises ``FileNotFoundError`` naming a miss."""
    from climnb.io.netcdf import expand_paths

    return [Path(p) for p in expand_paths(paths)]


def open_fields(
    paths: PathLike | Sequence[PathLike], *, required: Iterable[str] | None = None, **options
) -> xr.Dataset:
    """NetCDF files, Zarr stores or GRIB files as one lazy Dataset on the canonical grid (joined
    along time, one time step per chunk): :func:`climnb.io.netcdf.open_dataset`, whose keyword
    arguments (``variables``, ``units``, ``regrid``, ``canonical``) ``options`` pass on. Errors
    name the file."""
    from climnb.io.netcdf import open_dataset

    return open_dataset(paths, required=required, **options)


def input_grid(paths: PathLike | Sequence[PathLike]) -> xr.Dataset | None:
    """The latitude and longitude coordinates of the first input as stored (names, order,
    -180..180 or 0..360), as a Dataset of coordinates; ``None`` for DeepCAM sample files."""
    import xarray as xr

    from climnb.grid import coord_names

    first = expand(paths)[0]
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


def check_output(
    out: PathLike,
    inputs: PathLike | Sequence[PathLike] = (),
    *,
    kind: str = "file",
    option: str = "--out",
    overwrite: bool = False,
    contents: Collection[str] | None = None,
    others: Mapping[str, PathLike] | None = None,
    what: str = "what this command writes",
) -> Path:
    """Refuse ``out`` before any work if writing it could destroy an input or must fail.

    The one rule for every output of climnb's commands (label, predict, tracks, samples,
    stage); see the module docstring. Raises :class:`OutputError`, one line naming the path.

    Parameters
    ----------
    out : the output path.
    inputs : the command's inputs (files, Zarr stores, sample folders).
    kind : ``"file"`` (a NetCDF/CSV file, or a Zarr store for a ``*.zarr`` name) or
        ``"folder"`` (a folder the command fills: a sample set, a staged set).
    option : the command-line option naming ``out``, for the message.
    overwrite : ``"folder"`` only: a non-empty folder may be written into (replaced or
        resumed); without it a non-empty folder is refused.
    contents : ``"folder"`` with ``overwrite``: the names a folder written by the command may
        hold; anything else in it (an input, say) is refused, as replacing it would delete it.
    others : the command's other outputs (option -> path): ``out`` must differ from each.
    what : what a folder output is, for the messages ("a sample set").
    """
    if kind not in ("file", "folder"):
        raise ValueError(f"kind must be 'file' or 'folder', got {kind!r}")
    out = Path(out)
    resolved = out.resolve()
    for other, path in (others or {}).items():
        if resolved == Path(path).resolve():
            raise OutputError(f"{option} {out} is the same file as {other}; give another name")
    if kind == "file":
        if out.is_dir() and not (is_zarr(out) and out.suffix == ".zarr"):
            raise OutputError(
                f"{option} {out} is a directory; give a file name (.nc, or .zarr for Zarr)"
            )
        if out.exists() and not out.is_dir() and out.suffix == ".zarr":
            raise OutputError(f"{option} {out} exists and is not a Zarr store")
    elif out.exists() and not out.is_dir():
        raise OutputError(f"{option} {out} exists and is not a directory")
    parent = resolved.parent
    while not parent.exists():
        parent = parent.parent
    if not parent.is_dir():
        raise OutputError(f"{option} {out}: cannot write in {parent} (not a directory)")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise OutputError(f"{option} {out}: cannot write in {parent} (permission denied)")
    if out.exists() and not os.access(out, os.W_OK | (os.X_OK if out.is_dir() else 0)):
        raise OutputError(f"{option} {out}: exists and is not writable")
    if kind == "folder" and out.is_dir():
        _check_folder(out, option, overwrite, contents, what)
    for p in map(Path, [inputs] if isinstance(inputs, (str, os.PathLike)) else inputs):
        src = p.resolve()
        if resolved == src or (out.exists() and p.exists() and os.path.samefile(out, p)):
            raise OutputError(f"{option} {out} is an input ({p}); refusing to overwrite it")
        if src.is_dir() and src in resolved.parents:
            raise OutputError(f"{option} {out} is inside the input {p}; write it elsewhere")
        if kind == "folder" and resolved in src.parents:
            raise OutputError(f"{option} {out} holds the input {p}; write it elsewhere")
    return out


def _check_folder(out: Path, option: str, overwrite: bool, contents, what: str) -> None:
    names = sorted(p.name for p in out.iterdir())
    if names and not overwrite:
        raise OutputError(
            f"{option} {out} is not empty; use --overwrite to replace {what}, or choose another "
            "folder"
        )
    foreign = [n for n in names if contents is not None and n not in contents]
    if foreign:
        raise OutputError(
            f"{option} {out} holds {', '.join(foreign[:3])}{' ...' if len(foreign) > 3 else ''}, "
            f"not part of {what}; --overwrite replaces only {what}: choose another folder"
        )


def write(
    ds: xr.Dataset,
    path: PathLike,
    *,
    encoding: dict | None = None,
    also: Sequence = (),
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
    also : further dask collections computed in the same pass (e.g. class counts of the data
        being written), so that shared tasks run once.
    progress : a tqdm bar over the dask tasks (``True``), or a dask ``Callback`` of one's own.
    workers : dask threads.

    Returns
    -------
    Path, or ``(Path, *results of also)`` when ``also`` is given.
    """
    import dask
    from dask.callbacks import Callback

    path = Path(path)
    zarr = path.suffix == ".zarr"
    encoding = {k: dict(v) for k, v in (encoding or {}).items()}
    if zarr:
        for enc in encoding.values():
            enc.pop("zlib", None)
    with _target(path, zarr) as tmp:
        if zarr:
            delayed = ds.to_zarr(
                tmp, mode="w-", zarr_format=3, consolidated=False, encoding=encoding, compute=False
            )
        else:
            delayed = ds.to_netcdf(tmp, encoding=encoding, compute=False)
        with dask.config.set(scheduler="threads", num_workers=max(1, workers)):
            bar = progress if isinstance(progress, Callback) else _bar(desc, bool(progress))
            with bar:
                _, *results = dask.compute(delayed, *also, optimize_graph=False)
    log.info("wrote %s", path)
    return (path, *results) if also else path


@contextlib.contextmanager
def _target(path: Path, zarr: bool):
    if not zarr:
        with atomic_path(path) as tmp:
            yield tmp
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex[:8]}.tmp")
    try:
        yield tmp
        if path.exists():  # swap: readers see the old store or the new one, never a mix
            old = path.with_name(f".{path.name}.{uuid.uuid4().hex[:8]}.old")
            os.replace(path, old)
            os.replace(tmp, path)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(tmp, path)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _bar(desc: str, enabled: bool):
    """A tqdm bar over the tasks of a dask computation (nothing shown when disabled)."""
    from dask.callbacks import Callback

    class _Bar(Callback):
        def __init__(self, desc: str, enabled: bool):
            super().__init__()
            self.desc, self.enabled, self.bar = desc, enabled, None

        def _start_state(self, dsk, state):
            if self.enabled:
                from tqdm.auto import tqdm

                total = sum(len(state[k]) for k in ("ready", "waiting", "running", "finished"))
                self.bar = tqdm(total=total, unit="task", desc=self.desc)

        def _posttask(self, key, result, dsk, state, worker_id):
            if self.bar is not None:
                self.bar.update(1)

        def _finish(self, dsk, state, errored):
            if self.bar is not None:
                self.bar.close()

    return _Bar(desc, enabled)
