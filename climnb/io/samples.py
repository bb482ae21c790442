"""DeepCAM-style HDF5 sample files: one file per time step, 16 channels and a label mask.

Layout (the one of the MLPerf HPC DeepCAM data, which other tools read and write):

* ``climate/data``: float32, (H, W, C) height x width x channel, stored contiguously;
* ``climate/labels_0``: (H, W), 0 background, 1 tropical cyclone, 2 atmospheric river
  (climnb writes uint8; DeepCAM's own files store float, cast on read);
* file name ``data-YYYY-MM-DD-HH-N.h5`` (``N``: the run or ensemble member).

climnb adds, so that a file describes itself: ``climate/lat`` and ``climate/lon`` datasets and
the attributes ``channels`` (names, in order) and ``time`` (ISO 8601) on the ``climate`` group.
Files without them (foreign DeepCAM files) read as well; channel names then default to
:data:`climnb.channels.CHANNEL_NAMES`.

Datasets are stored contiguous and aligned to 4 KiB, so :mod:`climnb.pipeline` can read the
bytes without h5py (see :func:`inspect_sample`).

Examples
--------
>>> import tempfile
>>> from climnb.synthetic import make_dataset
>>> ds, _ = make_dataset(n_time=2, seed=0)
>>> paths = write_samples(ds, ds.truth, tempfile.mkdtemp())
>>> [p.name for p in paths]
['data-2000-01-01-00-1.h5', 'data-2000-01-01-03-1.h5']
>>> data, labels = read_sample(paths[0])
>>> data.shape, data.dtype, labels.dtype
((96, 144, 16), dtype('float32'), dtype('uint8'))
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import h5py
import numpy as np

from climnb.atomic import atomic_path
from climnb.channels import CHANNEL_NAMES, CLASS_NAMES

__all__ = [
    "SAMPLE_GLOB",
    "SampleError",
    "SampleInfo",
    "inspect_sample",
    "list_samples",
    "open_sample",
    "read_sample",
    "sample_name",
    "write_sample",
    "write_samples",
]

log = logging.getLogger(__name__)

PathLike = str | os.PathLike
SAMPLE_GLOB = "data-*.h5"
DATA = "climate/data"
LABELS = "climate/labels_0"
_ALIGN = 4096  # dataset offsets aligned to a page: raw reads can slice without copying


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
    """

    path: Path
    shape: tuple[int, int]
    channels: tuple[str, ...]
    time: str | None
    labels_dtype: str
    data_offset: int | None
    labels_offset: int | None

    @property
    def raw_readable(self) -> bool:
        """True when both arrays can be read as plain bytes at their offsets."""
        return self.data_offset is not None and self.labels_offset is not None


def sample_name(time, run: int = 1) -> str:
    """DeepCAM file name for a sample at ``time`` (anything numpy/pandas read as a time).

    >>> sample_name("2106-05-06T03:00", run=2)
    'data-2106-05-06-03-2.h5'
    """
    t = np.datetime64(str(time) if not isinstance(time, np.datetime64) else time, "h")
    day, hour = str(t).split("T")
    return f"data-{day}-{hour[:2]}-{run}.h5"


def write_sample(
    path: PathLike,
    data: np.ndarray,
    labels: np.ndarray,
    *,
    channels: Sequence[str] = CHANNEL_NAMES,
    time=None,
    lat: np.ndarray | None = None,
    lon: np.ndarray | None = None,
) -> Path:
    """Write one sample file atomically.

    Parameters
    ----------
    path : file to write.
    data : (H, W, C) array, stored as float32.
    labels : (H, W) class indices, stored as uint8.
    channels : names of the C channels.
    time, lat, lon : coordinates kept in the file so that it describes itself.
    """
    path = Path(path)
    data = np.asarray(data, dtype=np.float32)
    labels = np.asarray(labels)
    _check_arrays(path, data.shape, labels.shape, len(channels))
    if labels.size and (labels.min() < 0 or labels.max() >= len(CLASS_NAMES)):
        raise SampleError(f"{path}: labels outside 0..{len(CLASS_NAMES) - 1}")
    with atomic_path(path) as tmp:
        with h5py.File(tmp, "w", alignment_threshold=1, alignment_interval=_ALIGN) as f:
            g = f.create_group("climate")
            g.create_dataset("data", data=data)
            g.create_dataset("labels_0", data=labels.astype(np.uint8))
            g.attrs["channels"] = np.array(list(channels), dtype=h5py.string_dtype())
            g.attrs["classes"] = np.array(list(CLASS_NAMES), dtype=h5py.string_dtype())
            if time is not None:
                g.attrs["time"] = str(np.datetime64(str(time), "s"))
            if lat is not None:
                g.create_dataset("lat", data=np.asarray(lat, np.float64))
                g["lat"].attrs["units"] = "degrees_north"
            if lon is not None:
                g.create_dataset("lon", data=np.asarray(lon, np.float64))
                g["lon"].attrs["units"] = "degrees_east"
    return path


def write_samples(
    ds,
    labels,
    out_dir: PathLike,
    *,
    run: int = 1,
    channels: Sequence[str] = CHANNEL_NAMES,
) -> list[Path]:
    """Write one sample file per time step of an xarray Dataset.

    Parameters
    ----------
    ds : xarray.Dataset with the channel variables on (time, lat, lon); may be dask-backed,
        one time step is loaded at a time.
    labels : (time, lat, lon) DataArray of class indices, or the name of a variable of ``ds``.
    out_dir : directory for the files (made if missing).
    run : the ``N`` of the file names (run or ensemble member).
    channels : the channels to write, in order.

    Returns
    -------
    list of Path
        The files written, in time order.
    """
    if isinstance(labels, str):
        labels = ds[labels]
    missing = [c for c in channels if c not in ds]
    if missing:
        raise SampleError(f"data set lacks channel(s) {', '.join(missing)}")
    fields = ds[list(channels)].to_dataarray("channel").transpose("time", "lat", "lon", "channel")
    labels = labels.transpose("time", "lat", "lon")
    if labels.shape != fields.shape[:3]:
        raise SampleError(f"labels have shape {labels.shape}, fields {fields.shape[:3]}")
    names = [sample_name(t, run) for t in ds.time.values]
    if len(set(names)) != len(names):
        raise SampleError("two time steps map to the same file name (finer than hourly?)")
    lat, lon = ds.lat.values, ds.lon.values
    paths = []
    for i, name in enumerate(names):
        paths.append(
            write_sample(
                Path(out_dir) / name,
                fields[i].values,
                labels[i].values,
                channels=channels,
                time=ds.time.values[i],
                lat=lat,
                lon=lon,
            )
        )
    log.info("wrote %d sample files to %s", len(paths), out_dir)
    return paths


def inspect_sample(path: PathLike, *, shape: tuple[int, int] | None = None) -> SampleInfo:
    """Check a sample file and describe it; raise :class:`SampleError` naming what is wrong.

    Parameters
    ----------
    path : the file.
    shape : expected (H, W), if known (for example the first file's).
    """
    path = Path(path)
    try:
        with h5py.File(path, "r") as f:
            return _info(path, f, shape)
    except SampleError:
        raise
    except FileNotFoundError:
        raise SampleError(f"{path}: no such file") from None
    except (OSError, KeyError, RuntimeError) as err:
        raise SampleError(
            f"{path}: not a readable HDF5 file (truncated or corrupt?): {err}"
        ) from err


def _info(path: Path, f: h5py.File, shape) -> SampleInfo:
    for name in (DATA, LABELS):
        if name not in f or not isinstance(f[name], h5py.Dataset):
            raise SampleError(f"{path}: no dataset {name}")
    data, labels = f[DATA], f[LABELS]
    g = f["climate"]
    channels = _channel_names(g)
    _check_arrays(path, data.shape, labels.shape, len(channels), shape)
    if data.dtype != np.float32:
        raise SampleError(f"{path}: {DATA} is {data.dtype}, expected float32")
    time = g.attrs.get("time")
    return SampleInfo(
        path=path,
        shape=tuple(data.shape[:2]),
        channels=channels,
        time=_text(time) if time is not None else None,
        labels_dtype=labels.dtype.str,
        data_offset=_raw_offset(data, path),
        labels_offset=_raw_offset(labels, path),
    )


def _channel_names(group) -> tuple[str, ...]:
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


def _check_arrays(path, data_shape, labels_shape, n_channels, shape=None) -> None:
    if len(data_shape) != 3:
        raise SampleError(f"{path}: {DATA} has shape {data_shape}, expected (H, W, channels)")
    if data_shape[-1] != n_channels:
        raise SampleError(f"{path}: {DATA} has {data_shape[-1]} channels, expected {n_channels}")
    if tuple(labels_shape) != tuple(data_shape[:2]):
        raise SampleError(f"{path}: {LABELS} has shape {labels_shape}, expected {data_shape[:2]}")
    if shape is not None and tuple(data_shape[:2]) != tuple(shape):
        raise SampleError(f"{path}: grid is {data_shape[:2]}, expected {tuple(shape)}")


def read_sample(
    path: PathLike, *, channels: Sequence[int] | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Read one sample: ``(data (H, W, C) float32, labels (H, W) uint8)``.

    ``channels`` picks channel indices (default: all). Errors name the file and the problem.
    """
    path = Path(path)
    try:
        with h5py.File(path, "r") as f:
            _info(path, f, None)
            data = f[DATA][...]
            labels = f[LABELS][...]
    except SampleError:
        raise
    except FileNotFoundError:
        raise SampleError(f"{path}: no such file") from None
    except (OSError, KeyError, RuntimeError, TypeError) as err:
        raise SampleError(
            f"{path}: not a readable HDF5 file (truncated or corrupt?): {err}"
        ) from err
    if channels is not None:
        data = np.take(data, list(channels), axis=-1)
    return data, _labels_uint8(labels, path)


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
    import xarray as xr

    from climnb.channels import channel

    info = inspect_sample(path)
    data, labels = read_sample(path)
    coords = {}
    with h5py.File(path, "r") as f:
        for name in ("lat", "lon"):
            if f"climate/{name}" in f:
                coords[name] = f[f"climate/{name}"][...]
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
