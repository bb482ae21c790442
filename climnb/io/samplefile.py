"""One DeepCAM-style HDF5 sample file: its layout, its name, its checks, and reading it.

Layout (the one of the MLPerf HPC DeepCAM data, which other tools read and write):

* ``climate/data``: float32, (H, W, C) height x width x channel, stored contiguously;
* ``climate/labels_0``: (H, W), 0 background, 1 tropical cyclone, 2 atmospheric river
  (climnb writes uint8; DeepCAM's own files store float, cast on read);
* file name ``data-YYYY-MM-DD-HH-N.h5`` (``N``: the run or ensemble member).

climnb adds, so that a file describes itself: ``climate/lat`` and ``climate/lon`` datasets and
the attributes ``channels`` (names, in order) and ``time`` (ISO 8601) on the ``climate`` group.
Files without them (foreign DeepCAM files) read as well; channel names then default to
:data:`climnb.io.channels.CHANNEL_NAMES`.

A sample whose target is the per-class mean of several expert labellers (a *soft* target,
:func:`climnb.labels.expert.soft`) also holds ``climate/labels_soft``: float32 (H, W, classes),
the share of labellers that gave each pixel each class (summing to 1). ``climate/labels_0`` is
then its argmax, which is the labellers' majority (ties to the lower class): what metrics and
readers that know no soft targets use. The training pipeline feeds the shares to the loss
(:mod:`climnb.train.pipeline`).

Datasets are stored contiguous and aligned to 4 KiB, so :mod:`climnb.train.pipeline` can read the
bytes without h5py (see :func:`inspect_sample`). :mod:`climnb.io.samples` writes the files.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import h5py
import numpy as np

from climnb.io.channels import CHANNEL_NAMES, CLASS_NAMES, channel

__all__ = [
    "DATA",
    "LABELS",
    "SAMPLE_GLOB",
    "SOFT",
    "SampleError",
    "SampleInfo",
    "check_arrays",
    "check_soft",
    "check_values",
    "group_channels",
    "has_dates",
    "inspect_sample",
    "iso_hour",
    "iso_time",
    "list_samples",
    "open_checked",
    "open_sample",
    "read_sample",
    "read_soft_labels",
    "sample_name",
    "sample_names",
    "source_of",
]

PathLike = str | os.PathLike
SAMPLE_GLOB = "data-*.h5"
DATA = "climate/data"
LABELS = "climate/labels_0"
SOFT = "climate/labels_soft"  # per-class shares (H, W, classes) of a soft target, if any


class SampleError(ValueError):
    """A sample file or directory that cannot be used; the message names the file."""


@dataclass(frozen=True)
class SampleInfo:
    """What a sample file holds, and where its arrays lie in the file.

    Attributes
    ----------
    path : the file.
    shape : (H, W) of the grid.
    channels : channel names, in the order of the last axis of ``climate/data``.
    time : ISO 8601 time of the sample, or ``None`` for a file without it.
    labels_dtype : numpy dtype name of ``climate/labels_0`` as stored.
    data_offset, labels_offset : byte offsets of the two arrays when stored contiguously and
        uncompressed (``None`` otherwise: then only h5py can read them).
    has_soft : the file holds a soft target (``climate/labels_soft``).
    soft_offset : its byte offset, as above.
    """

    path: Path
    shape: tuple[int, int]
    channels: tuple[str, ...]
    time: str | None
    labels_dtype: str
    data_offset: int | None
    labels_offset: int | None
    has_soft: bool = False
    soft_offset: int | None = None

    @property
    def raw_readable(self) -> bool:
        """True when both arrays can be read as plain bytes at their offsets."""
        return self.data_offset is not None and self.labels_offset is not None


def sample_name(time, run: int = 1, labeller: int | None = None) -> str:
    """DeepCAM file name for a sample at ``time`` (anything numpy/pandas read as a time, or
    a cftime date of a model calendar such as ``360_day``, whose 2000-02-30 numpy refuses).

    ``labeller``: the sample of one expert labeller ``N`` of that time, named as ClimateNet
    names its files (``...-1_N``), so that the samples of one step never share a name.

    >>> sample_name("2106-05-06T03:00", run=2)
    'data-2106-05-06-03-2.h5'
    >>> import cftime
    >>> sample_name(cftime.Datetime360Day(2000, 2, 30, 6))
    'data-2000-02-30-06-1.h5'
    >>> sample_name("2011-06-01T03", labeller=2)
    'data-2011-06-01-03-1_2.h5'
    """
    n = run if labeller is None else f"{run}_{int(labeller)}"
    return f"data-{iso_hour(time).replace('T', '-')}-{n}.h5"


def iso_hour(time) -> str:
    """``YYYY-MM-DDTHH`` of ``time`` (numpy, pandas, text, or a cftime date)."""
    if hasattr(time, "calendar") and hasattr(time, "strftime"):  # cftime: any calendar
        return f"{time.year:04d}-{time.month:02d}-{time.day:02d}T{time.hour:02d}"
    t = np.datetime64(str(time) if not isinstance(time, np.datetime64) else time, "h")
    return str(t)[:13]


def iso_time(time) -> str | None:
    """ISO 8601 text of ``time`` to the second (cftime dates too); ``None`` for ``None``."""
    if time is None:
        return None
    if hasattr(time, "calendar") and hasattr(time, "isoformat"):
        return time.isoformat(timespec="seconds") if hasattr(time, "isoformat") else str(time)
    return str(np.datetime64(str(time) if not isinstance(time, np.datetime64) else time, "s"))


def sample_names(ds, run: int = 1) -> list[str]:
    """File names for the time steps of ``ds``: :func:`sample_name` of each time, or, for
    data without a time coordinate (files with no time axis), ``data-step-NNNNNN-N.h5`` by
    position, so that steps never share a name.

    Two steps with the same name (a time repeated, overlapping input files, or steps finer
    than hourly) are refused, naming the input file(s) and the first repeated time.
    """
    if has_dates(ds):
        names = [sample_name(t, run) for t in ds.time.values]
    else:
        names = [f"data-step-{i:06d}-{run}.h5" for i in range(ds.sizes["time"])]
    seen: dict[str, int] = {}
    for i, name in enumerate(names):
        if name in seen:
            j = seen[name]
            what = (
                "the same time twice (overlapping input files?)"
                if str(ds.time.values[i]) == str(ds.time.values[j])
                else "two times within the same hour (finer than hourly?)"
            )
            raise SampleError(
                f"{_inputs_of(ds)}: time steps {j} and {i} ({ds.time.values[j]}, "
                f"{ds.time.values[i]}) both map to {name}: {what}; give each time once"
            )
        seen[name] = i
    return names


def has_dates(ds) -> bool:
    """Whether ``ds`` has a ``time`` coordinate of dates (numpy or cftime)."""
    if "time" not in ds.coords:
        return False
    dtype = ds.time.dtype
    return bool(np.issubdtype(dtype, np.datetime64) or dtype.kind == "O")


def _inputs_of(ds) -> str:
    """The input file(s) of ``ds``, for messages."""
    sources = ds.attrs.get("climnb_sources") or ds.encoding.get("source")
    if not sources:
        for v in ds.data_vars.values():
            if v.encoding.get("source"):
                sources = v.encoding["source"]
                break
    if isinstance(sources, (list, tuple)):
        return ", ".join(map(str, sources))
    return str(sources or "the data set")


def check_values(path, data: np.ndarray, labels: np.ndarray) -> None:
    """Refuse non-finite data and labels that are not class indices; name file and value."""
    bad = ~np.isfinite(data)
    if bad.any():
        where = np.argwhere(bad)[0]
        raise SampleError(
            f"{path}: {DATA} holds {int(bad.sum())} non-finite value(s), e.g. "
            f"{data[tuple(where)]} at (y, x, channel) {tuple(int(i) for i in where)}"
        )
    n = len(CLASS_NAMES)
    if labels.size:
        ok = np.isin(labels, np.arange(n))
        if not ok.all():
            value = labels[~ok].flat[0]
            raise SampleError(
                f"{path}: labels outside 0..{n - 1}: value {value} "
                f"({int((~ok).sum())} pixel(s)); labels must be class indices 0, 1 or 2"
            )


def check_soft(path, soft: np.ndarray, shape: tuple[int, int]) -> None:
    """Refuse a soft target that is not (H, W, classes) shares in 0..1 summing to 1 per pixel."""
    n = len(CLASS_NAMES)
    if soft.shape != (*shape, n):
        raise SampleError(f"{path}: {SOFT} has shape {soft.shape}, expected {(*shape, n)}")
    bad = ~np.isfinite(soft) | (soft < 0) | (soft > 1)
    if bad.any():
        raise SampleError(
            f"{path}: {SOFT} holds {int(bad.sum())} value(s) outside 0..1, e.g. "
            f"{soft[bad].flat[0]}; shares of labellers must lie in 0..1"
        )
    total = soft.sum(axis=-1)
    off = np.abs(total - 1) > 1e-3
    if off.any():
        raise SampleError(
            f"{path}: {SOFT} sums to {total[off].flat[0]:.4g} over the classes at "
            f"{int(off.sum())} pixel(s); the shares of a pixel must sum to 1"
        )


def source_of(var) -> str:
    """The file an xarray variable was read from, for error messages (``the data set`` for
    data made in memory; the first file of several joined along time)."""
    return str(var.encoding.get("source") or "the data set")


def check_arrays(path, data_shape, labels_shape, n_channels, shape=None) -> None:
    """Refuse arrays that are not (H, W, ``n_channels``) data and (H, W) labels on one grid
    (``shape``, where given), naming the file."""
    if len(data_shape) != 3:
        raise SampleError(f"{path}: {DATA} has shape {data_shape}, expected (H, W, channels)")
    if data_shape[-1] != n_channels:
        raise SampleError(f"{path}: {DATA} has {data_shape[-1]} channels, expected {n_channels}")
    if tuple(labels_shape) != tuple(data_shape[:2]):
        raise SampleError(f"{path}: {LABELS} has shape {labels_shape}, expected {data_shape[:2]}")
    if shape is not None and tuple(data_shape[:2]) != tuple(shape):
        raise SampleError(f"{path}: grid is {data_shape[:2]}, expected {tuple(shape)}")


@contextlib.contextmanager
def open_checked(
    path: PathLike, *, shape: tuple[int, int] | None = None
) -> Iterator[tuple[SampleInfo, h5py.File]]:
    """Open a sample file once with h5py, checked: yields ``(info, file)``.

    Any failure inside, reads included, becomes a :class:`SampleError` naming the file.
    """
    path = Path(path)
    try:
        with h5py.File(path, "r") as f:
            yield _info(path, f, shape), f
    except SampleError:
        raise
    except FileNotFoundError as err:
        if not path.exists():  # HDF5 says "not found" of some damaged files that exist
            what = (
                "a symbolic link whose target is missing" if path.is_symlink() else "no such file"
            )
            raise SampleError(f"{path}: {what}") from None
        raise SampleError(
            f"{path}: not a readable HDF5 file (truncated or corrupt?): {err}"
        ) from err
    except (OSError, KeyError, RuntimeError, TypeError) as err:
        raise SampleError(
            f"{path}: not a readable HDF5 file (truncated or corrupt?): {err}"
        ) from err


def inspect_sample(path: PathLike, *, shape: tuple[int, int] | None = None) -> SampleInfo:
    """Check a sample file and describe it; raise :class:`SampleError` naming what is wrong.

    Parameters
    ----------
    path : the file.
    shape : expected (H, W), if known (for example the first file's).
    """
    with open_checked(path, shape=shape) as (info, _):
        return info


def _info(path: Path, f: h5py.File, shape) -> SampleInfo:
    for name in (DATA, LABELS):
        if name not in f or not isinstance(f[name], h5py.Dataset):
            raise SampleError(f"{path}: no dataset {name}")
    data, labels = f[DATA], f[LABELS]
    g = f["climate"]
    channels = group_channels(g)
    check_arrays(path, data.shape, labels.shape, len(channels), shape)
    if data.dtype != np.float32:
        raise SampleError(f"{path}: {DATA} is {data.dtype}, expected float32")
    time = g.attrs.get("time")
    soft = f.get(SOFT)
    if soft is not None:
        n = len(CLASS_NAMES)
        if not isinstance(soft, h5py.Dataset) or soft.shape != (*data.shape[:2], n):
            raise SampleError(
                f"{path}: {SOFT} has shape {getattr(soft, 'shape', None)}, expected "
                f"{(*data.shape[:2], n)}"
            )
        if soft.dtype != np.float32:
            raise SampleError(f"{path}: {SOFT} is {soft.dtype}, expected float32")
    return SampleInfo(
        path=path,
        shape=tuple(data.shape[:2]),
        channels=channels,
        time=_text(time) if time is not None else None,
        labels_dtype=labels.dtype.str,
        data_offset=_raw_offset(data, path),
        labels_offset=_raw_offset(labels, path),
        has_soft=soft is not None,
        soft_offset=_raw_offset(soft, path) if soft is not None else None,
    )


def group_channels(group) -> tuple[str, ...]:
    """Channel names from a ``climate`` group; DeepCAM's own files have the standard 16."""
    names = group.attrs.get("channels")
    return CHANNEL_NAMES if names is None else tuple(_text(v) for v in names)


def _text(v) -> str:
    return v.decode() if isinstance(v, bytes) else str(v)


def _raw_offset(dset: h5py.Dataset, path: Path) -> int | None:
    if dset.chunks is not None or dset.compression is not None:
        return None
    offset = dset.id.get_offset()
    if offset is None:
        return None
    end = offset + dset.size * dset.dtype.itemsize
    if end > path.stat().st_size:
        raise SampleError(
            f"{path}: truncated: {dset.name} ends at byte {end}, file has {path.stat().st_size}"
        )
    return int(offset)


def read_sample(
    path: PathLike, *, channels: Sequence[int] | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Read one sample: ``(data (H, W, C) float32, labels (H, W) uint8)``.

    ``channels`` picks channel indices (default: all). Errors name the file and the problem.
    """
    with open_checked(path) as (info, f):
        data, labels = f[DATA][...], f[LABELS][...]
    if channels is not None:
        data = np.take(data, list(channels), axis=-1)
    return data, _labels_uint8(labels, info.path)


def read_soft_labels(path: PathLike) -> np.ndarray | None:
    """The soft target of a sample file: (H, W, classes) float32 shares, or ``None`` for a
    file with class ids only."""
    with open_checked(path) as (info, f):
        return f[SOFT][...] if info.has_soft else None


def _labels_uint8(labels: np.ndarray, path) -> np.ndarray:
    if labels.dtype == np.uint8:
        return labels
    out = labels.astype(np.uint8)
    if not np.array_equal(out, labels):
        raise SampleError(f"{path}: {LABELS} holds values that are not class indices")
    return out


def open_sample(path: PathLike):
    """Read a sample file as an xarray Dataset: one variable per channel, plus ``labels``.

    Coordinates come from the file where it has them (``time``, ``lat``, ``lon``), else the
    dimensions are plain indices.
    """
    import xarray as xr  # here, not at the top: reader worker processes import this module

    with open_checked(path) as (info, f):
        data, labels = f[DATA][...], _labels_uint8(f[LABELS][...], info.path)
        coords = {n: f[f"climate/{n}"][...] for n in ("lat", "lon") if f"climate/{n}" in f}
    variables = {}
    for i, name in enumerate(info.channels):
        attrs = channel(name).attrs if name in CHANNEL_NAMES else {}
        variables[name] = (("lat", "lon"), data[..., i], attrs)
    variables["labels"] = (
        ("lat", "lon"),
        labels,
        {
            "flag_values": np.arange(len(CLASS_NAMES), dtype=np.uint8),
            "flag_meanings": " ".join(CLASS_NAMES),
        },
    )
    ds = xr.Dataset(variables, coords=coords, attrs={"source": str(info.path)})
    if info.time is not None:
        ds = ds.assign_coords(time=np.datetime64(info.time, "ns"))
    return ds


def list_samples(directory: PathLike) -> list[Path]:
    """Sample files (``data-*.h5``) of a directory, sorted; error if there are none."""
    directory = Path(directory)
    if not directory.is_dir():
        raise SampleError(f"{directory}: not a directory")
    files = sorted(directory.glob(SAMPLE_GLOB))
    if not files:
        raise SampleError(f"{directory}: no sample files ({SAMPLE_GLOB})")
    return files
