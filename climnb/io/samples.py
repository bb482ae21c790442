"""DeepCAM-style HDF5 sample files: one file per time step, 16 channels and a label mask.

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
bytes without h5py (see :func:`inspect_sample`).

Examples
--------
>>> import tempfile
>>> from climnb.data.synthetic import make_dataset
>>> ds, _ = make_dataset(n_time=2, seed=0)
>>> paths = write_samples(ds, ds.truth, tempfile.mkdtemp())
>>> [p.name for p in paths]
['data-2000-01-01-00-1.h5', 'data-2000-01-01-03-1.h5']
>>> data, labels = read_sample(paths[0])
>>> data.shape, data.dtype, labels.dtype
((96, 144, 16), dtype('float32'), dtype('uint8'))
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import h5py
import numpy as np

from climnb.io.atomic import atomic_path
from climnb.io.channels import CHANNEL_NAMES, CLASS_NAMES, channel
from climnb.io.manifest import JOURNAL_NAME, MANIFEST_NAME, Entry, Manifest, sha256_file
from climnb.io.steps import iter_steps

__all__ = [
    "SAMPLE_GLOB",
    "SampleError",
    "SampleInfo",
    "SOFT",
    "check_values",
    "group_channels",
    "inspect_sample",
    "list_samples",
    "open_checked",
    "open_sample",
    "read_sample",
    "read_soft_labels",
    "sample_name",
    "sample_names",
    "write_sample",
    "write_samples",
]

log = logging.getLogger(__name__)

PathLike = str | os.PathLike
SAMPLE_GLOB = "data-*.h5"
DATA = "climate/data"
LABELS = "climate/labels_0"
SOFT = "climate/labels_soft"  # per-class shares (H, W, classes) of a soft target, if any
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


def _check_step(ds, labels, channels, i: int, data, lab, name: str) -> None:
    """Refuse time step ``i`` of the input before it is written as ``name``: non-finite
    fields, labels that are not class indices; name the input file, the variable and the
    time."""
    t = iso_time(ds.time.values[i]) if has_dates(ds) else None
    when = f"time step {i}" if t is None else f"time {t}"
    when += f" (sample {name})"
    bad = ~np.isfinite(data)
    if bad.any():
        y, x, c = (int(j) for j in np.argwhere(bad)[0])
        var = ds[channels[c]]
        raise SampleError(
            f"{source_of(var)}: variable {channels[c]} holds non-finite value(s) at {when}, "
            f"e.g. {data[y, x, c]} at (lat, lon) index ({y}, {x}); fields must be finite"
        )
    ok = np.isin(lab, np.arange(len(CLASS_NAMES)))
    if not ok.all():
        raise SampleError(
            f"{source_of(labels)}: label variable {labels.name} at {when}: labels outside "
            f"0..{len(CLASS_NAMES) - 1}: value {lab[~ok].flat[0]} ({int((~ok).sum())} "
            "pixel(s)); labels must be class indices 0, 1 or 2"
        )


def write_sample(
    path: PathLike,
    data: np.ndarray,
    labels: np.ndarray,
    *,
    channels: Sequence[str] = CHANNEL_NAMES,
    time=None,
    lat: np.ndarray | None = None,
    lon: np.ndarray | None = None,
    soft: np.ndarray | None = None,
    expert: dict | None = None,
) -> Path:
    """Write one sample file atomically and record its digest in the folder's manifest.

    Parameters
    ----------
    path : file to write.
    data : (H, W, C) array, stored as float32; NaN or infinite values are refused.
    labels : (H, W) class indices 0, 1, 2, stored as uint8; other values are refused.
    channels : names of the C channels.
    time, lat, lon : coordinates kept in the file so that it describes itself.
    soft : (H, W, classes) per-class shares, a soft target (:data:`SOFT`); ``labels`` should
        be its argmax.
    expert : where the target came from, for the manifest: ``labeller``, or ``labellers``
        and ``consensus`` (:class:`climnb.io.manifest.Entry`).
    """
    path = Path(path)
    entry = _write(
        path,
        data,
        labels,
        channels=channels,
        time=time,
        lat=lat,
        lon=lon,
        soft=soft,
        expert=expert,
    )
    Manifest.append(path.parent, path.name, entry)
    return path


def _write(path: Path, data, labels, *, channels, time, lat, lon, soft=None, expert=None) -> Entry:
    data = np.asarray(data, dtype=np.float32)
    labels = np.asarray(labels)
    _check_arrays(path, data.shape, labels.shape, len(channels))
    check_values(path, data, labels)
    labels = labels.astype(np.uint8)
    if soft is not None:
        soft = np.asarray(soft, np.float32)
        check_soft(path, soft, labels.shape)
    with atomic_path(path) as tmp:
        with h5py.File(tmp, "w", alignment_threshold=1, alignment_interval=_ALIGN) as f:
            g = f.create_group("climate")
            g.create_dataset("data", data=data)
            g.create_dataset("labels_0", data=labels)
            if soft is not None:
                g.create_dataset("labels_soft", data=soft)
                g["labels_soft"].attrs["classes"] = np.array(
                    list(CLASS_NAMES), dtype=h5py.string_dtype()
                )
            for key, value in (expert or {}).items():  # the file describes itself
                g.attrs[key] = np.asarray(value) if key == "labellers" else value
            g.attrs["channels"] = np.array(list(channels), dtype=h5py.string_dtype())
            g.attrs["classes"] = np.array(list(CLASS_NAMES), dtype=h5py.string_dtype())
            if time is not None:
                g.attrs["time"] = iso_time(time)
            if lat is not None:
                g.create_dataset("lat", data=np.asarray(lat, np.float64))
                g["lat"].attrs["units"] = "degrees_north"
            if lon is not None:
                g.create_dataset("lon", data=np.asarray(lon, np.float64))
                g["lon"].attrs["units"] = "degrees_east"
        # the digest of the bytes just written, before the file is visible under its name
        entry = Entry(
            bytes=tmp.stat().st_size,
            sha256=sha256_file(tmp),
            time=iso_time(time),
            class_counts=tuple(
                int(c) for c in np.bincount(labels.ravel(), minlength=len(CLASS_NAMES))
            ),
            **_expert_fields(expert),
        )
    return entry


def _expert_fields(expert: dict | None) -> dict:
    out = dict(expert or {})
    unknown = set(out) - {"labeller", "labellers", "consensus"}
    if unknown:
        raise ValueError(f"unknown expert field(s) {sorted(unknown)}")
    if out.get("labellers") is not None:
        out["labellers"] = tuple(int(n) for n in out["labellers"])
    if out.get("labeller") is not None:
        out["labeller"] = int(out["labeller"])
    return out


def write_samples(
    ds,
    labels,
    out_dir: PathLike,
    *,
    run: int = 1,
    channels: Sequence[str] = CHANNEL_NAMES,
    progress=None,
    resume: bool = False,
    names: Sequence[str] | None = None,
    soft=None,
    expert: Sequence[dict] | None = None,
) -> list[Path]:
    """Write one sample file per time step of an xarray Dataset, and the folder's manifest.

    Parameters
    ----------
    ds : xarray.Dataset with the channel variables on (time, lat, lon); may be dask-backed,
        one time step is loaded at a time.
    labels : (time, lat, lon) DataArray of class indices, or the name of a variable of ``ds``.
    out_dir : directory for the files (made if missing); ``manifest.json`` in it lists them.
    run : the ``N`` of the file names (run or ensemble member).
    channels : the channels to write, in order.
    progress : called with the number of files written after each file (a progress bar).
    resume : continue an interrupted write of *these same steps* into ``out_dir``: a file
        already there whose SHA-256 matches its entry in the folder's manifest or journal is
        kept (it is hashed once, a read of its bytes), any other file is written again, and
        files or entries of other names are removed, so that the folder ends as an
        uninterrupted run leaves it. The caller makes sure the steps and options are the
        same (:func:`climnb.io.sampleset.write_sample_set` keys its folder by them).
    names : the file names of the steps (default :func:`sample_names`); a caller writing a
        part of a larger data set passes the part's names in the whole, so that steps
        without a time get names unique across the parts.
    soft : (time, class_id, lat, lon) per-class shares of each step, a soft target
        (:func:`climnb.labels.expert.soft`), stored as :data:`SOFT` beside ``labels``.
    expert : for each step, where its target came from (``labeller``, or ``labellers`` and
        ``consensus``), recorded in the manifest and the file.

    Returns
    -------
    list of Path
        The files written, in time order.
    """
    if isinstance(labels, str):
        labels = ds[labels]
    missing = [c for c in channels if c not in ds]
    if missing:
        raise SampleError(f"{source_of(labels)}: lacks channel(s) {', '.join(missing)}")
    fields = ds[list(channels)].to_dataarray("channel").transpose("time", "lat", "lon", "channel")
    labels = labels.transpose("time", "lat", "lon")
    if labels.shape != fields.shape[:3]:
        raise SampleError(f"labels have shape {labels.shape}, fields {fields.shape[:3]}")
    names = list(sample_names(ds, run) if names is None else names)
    if len(names) != ds.sizes.get("time", 0):
        raise SampleError(f"{out_dir}: {len(names)} names for {ds.sizes.get('time', 0)} steps")
    if not names:
        raise SampleError(f"{out_dir}: the data have no time steps, nothing to write")
    if soft is not None:
        soft = soft.transpose("time", "lat", "lon", ...)
        if soft.shape[:3] != labels.shape:
            raise SampleError(f"soft targets have shape {soft.shape[:3]}, labels {labels.shape}")
    if expert is not None and len(expert) != len(names):
        raise SampleError(f"{out_dir}: {len(expert)} expert records for {len(names)} steps")
    has_time = has_dates(ds)
    lat, lon = ds.lat.values, ds.lon.values
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    kept = _resumable(out, names) if resume else {}
    times = ds.time.values if has_time else None
    todo = [i for i, name in enumerate(names) if name not in kept]
    if kept and progress is not None:
        progress(len(kept))
    for i, (data, lab, sft) in iter_steps([fields, labels, soft], todo):  # blocks of steps
        _check_step(ds, labels, channels, i, data, lab, names[i])
        entry = _write(
            out / names[i],
            data,
            lab,
            channels=channels,
            time=None if times is None else times[i],
            lat=lat,
            lon=lon,
            soft=sft,
            expert=None if expert is None else expert[i],
        )
        Manifest.append(out, names[i], entry)
        if progress is not None:
            progress(1)
    paths = [out / name for name in names]
    manifest = Manifest.read(out) or Manifest()
    if resume:  # exactly the files of these steps, as an uninterrupted run lists them
        manifest = Manifest(files={n: manifest.files[n] for n in names})
    manifest.with_files({}, channels=tuple(channels), grid=tuple(fields.shape[1:3])).write(out)
    log.info("wrote %d sample files to %s (%d kept)", len(paths) - len(kept), out_dir, len(kept))
    return paths


def _resumable(out: Path, names: Sequence[str]) -> dict[str, Entry]:
    """Files of ``names`` in ``out`` whose SHA-256 matches the folder's manifest/journal;
    everything else a killed run left there (other files, unfinished temporaries) is removed."""
    try:
        manifest = Manifest.read(out) or Manifest()
    except ValueError as err:  # a manifest.json cut short: nothing can be trusted
        log.warning("%s: %s; writing every file again", out, err)
        manifest = Manifest()
    wanted, kept = set(names), {}
    for path in sorted(out.iterdir()):
        entry = manifest.files.get(path.name)
        if path.name in wanted and entry is not None and sha256_file(path) == entry.sha256:
            kept[path.name] = entry
        elif path.name not in (MANIFEST_NAME, JOURNAL_NAME) and path.is_file():
            path.unlink()  # unlisted, changed, or a temporary of a killed write
    manifest = Manifest(files=kept)
    manifest.write(out)  # the journal now lists only what is kept
    log.info("%s: resuming, %d of %d files kept (SHA-256 verified)", out, len(kept), len(names))
    return kept


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
    _check_arrays(path, data.shape, labels.shape, len(channels), shape)
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
