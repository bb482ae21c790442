"""Per-channel statistics of a set of sample files: ``stats.h5`` beside the files.

The layout is DeepCAM's: ``climate/minval``, ``climate/maxval``, ``climate/mean``,
``climate/sqmean`` (mean of squares; the sum of squares is ``sqmean * count``) and
``climate/count``, one value per channel. climnb adds ``climate/class_counts`` (pixels of
each class, so that loss weights can come from the data), the channel names (attribute
``channels``), the digest of the files summarised (attribute ``summarises``: see
:meth:`climnb.io.manifest.Manifest.digest`), so a reader can check that the statistics belong
to its files, and the settings of the labeller that made the files' labels (attribute
``label_config``, JSON of :meth:`climnb.labels.LabelConfig.to_dict`), which training copies
into the model bundle. All are optional on read, so DeepCAM's own ``stats.h5`` reads too,
including its ``climate/count`` written as ONE integer (the number of files summarised).
Statistics holding NaN or infinite values are refused on read, naming file, statistic and
channel.

Each file is reduced on its own (a few rows at a time, in float64) and the partial results are
merged, in parallel with dask (threads by default: numpy's reductions release the GIL) or
across MPI ranks; no step holds more than one file's data.

Examples
--------
>>> import tempfile
>>> from climnb.data.synthetic import make_dataset
>>> from climnb.io.samples import write_samples
>>> ds, _ = make_dataset(n_time=3, seed=0)
>>> files = write_samples(ds, ds.truth, tempfile.mkdtemp())
>>> stats = compute_stats(files)
>>> int(stats.count[0]) == 3 * 96 * 144, int(stats.class_counts.sum()) == 3 * 96 * 144
(True, True)
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import h5py
import numpy as np

from climnb.io.atomic import atomic_path
from climnb.io.channels import CLASS_NAMES
from climnb.io.samples import (
    DATA,
    LABELS,
    SampleError,
    group_channels,
    inspect_sample,
    open_checked,
)

__all__ = ["STATS_NAME", "Stats", "compute_stats", "file_stats", "read_stats", "write_stats"]

log = logging.getLogger(__name__)

PathLike = str | os.PathLike
STATS_NAME = "stats.h5"
_ROWS = 64  # rows reduced at a time: bounded float64 temporaries


@dataclass(frozen=True, eq=False)
class Stats:
    """Per-channel statistics (arrays of length C) and per-class pixel counts.

    Attributes
    ----------
    channels : channel names.
    minval, maxval, mean, sqmean : float64, per channel (``sqmean`` is the mean of squares).
    count : pixels per channel (for DeepCAM's own files: the number of files, per channel).
    class_counts : pixels of each class (length 3), or ``None`` when the file lacks them.
    summarises : digest of the files the statistics were computed from (``None``: unknown).
    label_config : the labeller's settings the files' labels were made with (a
        :meth:`climnb.labels.LabelConfig.to_dict`; ``None``: not recorded, e.g. expert labels).
    """

    channels: tuple[str, ...]
    minval: np.ndarray
    maxval: np.ndarray
    mean: np.ndarray
    sqmean: np.ndarray
    count: np.ndarray
    class_counts: np.ndarray | None = None
    summarises: str | None = None
    label_config: dict | None = None

    @property
    def std(self) -> np.ndarray:
        """Standard deviation per channel."""
        return np.sqrt(np.maximum(self.sqmean - self.mean**2, 0.0))

    @property
    def class_frequencies(self) -> np.ndarray | None:
        """Fraction of pixels in each class, or ``None`` without class counts."""
        if self.class_counts is None:
            return None
        return self.class_counts / max(int(self.class_counts.sum()), 1)

    def select(self, channels: Sequence[int]) -> Stats:
        """The statistics of a subset of channels (by index)."""
        idx = list(channels)
        return Stats(
            tuple(self.channels[i] for i in idx),
            self.minval[idx],
            self.maxval[idx],
            self.mean[idx],
            self.sqmean[idx],
            self.count[idx],
            self.class_counts,
            self.summarises,
            self.label_config,
        )

    def check_channels(self, channels: Sequence[str], where: str = "") -> None:
        """Raise :class:`SampleError` unless these statistics are of ``channels``, in order."""
        if tuple(self.channels) != tuple(channels):
            raise SampleError(
                f"{where or 'statistics'}: channels {', '.join(self.channels)} do not match the "
                f"files' {', '.join(channels)} (another order or set: recompute stats.h5)"
            )


@dataclass(frozen=True, eq=False)
class _Partial:
    """Mergeable sums of one or more files."""

    minval: np.ndarray
    maxval: np.ndarray
    total: np.ndarray
    sumsq: np.ndarray
    count: np.ndarray
    class_counts: np.ndarray

    def __add__(self, other: _Partial) -> _Partial:
        return _Partial(
            np.minimum(self.minval, other.minval),
            np.maximum(self.maxval, other.maxval),
            self.total + other.total,
            self.sumsq + other.sumsq,
            self.count + other.count,
            self.class_counts + other.class_counts,
        )

    def finish(self, channels: tuple[str, ...]) -> Stats:
        n = np.maximum(self.count, 1)
        return Stats(
            channels,
            self.minval,
            self.maxval,
            self.total / n,
            self.sumsq / n,
            self.count,
            self.class_counts,
        )


def file_stats(path: PathLike, n_classes: int = len(CLASS_NAMES)) -> _Partial:
    """Sums of one sample file, read a block of rows at a time."""
    with open_checked(path) as (info, f):
        c = len(info.channels)
        lo, hi = np.full(c, np.inf), np.full(c, -np.inf)
        total, sumsq = np.zeros(c), np.zeros(c)
        data, labels = f[DATA], f[LABELS]
        for r in range(0, info.shape[0], _ROWS):
            block = data[r : r + _ROWS].reshape(-1, c).astype(np.float64)
            lo = np.minimum(lo, block.min(axis=0))
            hi = np.maximum(hi, block.max(axis=0))
            total += block.sum(axis=0)
            sumsq += np.einsum("ij,ij->j", block, block)
        classes = _class_counts(labels[...], n_classes, path)
    if not (np.isfinite(lo).all() and np.isfinite(hi).all()):
        raise SampleError(f"{path}: {DATA} holds NaN or infinite values")
    count = np.full(c, info.shape[0] * info.shape[1], np.int64)
    return _Partial(lo, hi, total, sumsq, count, classes)


def _class_counts(labels: np.ndarray, n_classes: int, path) -> np.ndarray:
    flat = labels.ravel()
    if flat.dtype != np.uint8:
        flat = flat.astype(np.int64)
    counts = np.bincount(flat, minlength=n_classes)
    if counts.size > n_classes:
        raise SampleError(f"{path}: {LABELS} has values >= {n_classes}")
    return counts.astype(np.int64)


def compute_stats(
    files: Sequence[PathLike],
    *,
    scheduler: str | None = "threads",
    comm=None,
    progress=None,
) -> Stats:
    """Statistics over ``files``, computed in parallel.

    Parameters
    ----------
    files : sample files (all with the same channels).
    scheduler : dask scheduler for the per-file reductions (``"threads"``, ``"processes"``,
        ``"synchronous"``, or ``None`` for dask's default / an active distributed client).
    comm : an mpi4py communicator; when given, each rank reduces every ``size``-th file
        serially and the partial sums are merged over MPI (all ranks get the result).
    progress : called with 1 after each file is summarised (a progress bar's ``update``).
    """
    files = [Path(f) for f in files]
    if not files:
        raise SampleError("no sample files to compute statistics from")
    channels = inspect_sample(files[0]).channels
    one = file_stats
    if progress is not None:

        def one(f):
            part = file_stats(f)
            progress(1)
            return part

    if comm is not None:
        part = _merge([one(f) for f in files[comm.rank :: comm.size]])
        parts = [p for p in comm.allgather(part) if p is not None]
        total = _merge(parts)
    else:
        import dask

        tasks = [dask.delayed(one)(f) for f in files]
        total = dask.delayed(_merge)(tasks).compute(scheduler=scheduler)
    log.info("statistics of %d files", len(files))
    return total.finish(channels)


def _merge(parts: list[_Partial]) -> _Partial | None:
    out = None
    for p in parts:
        out = p if out is None else out + p
    return out


def write_stats(
    stats: Stats,
    path: PathLike,
    *,
    summarises: str | None = None,
    label_config: Mapping | None = None,
) -> Path:
    """Write ``stats.h5`` (atomically); ``summarises``: digest of the files summarised
    (default: ``stats.summarises``); ``label_config``: the labeller's settings (default:
    ``stats.label_config``)."""
    path = Path(path)
    summarises = summarises or stats.summarises
    label_config = label_config or stats.label_config
    with atomic_path(path) as tmp, h5py.File(tmp, "w") as f:
        g = f.create_group("climate")
        for name in ("minval", "maxval", "mean", "sqmean"):
            g.create_dataset(name, data=np.asarray(getattr(stats, name), np.float64))
        g.create_dataset("count", data=np.asarray(stats.count, np.int64))
        if stats.class_counts is not None:
            g.create_dataset("class_counts", data=np.asarray(stats.class_counts, np.int64))
            g["class_counts"].attrs["classes"] = np.array(
                list(CLASS_NAMES), dtype=h5py.string_dtype()
            )
        g.attrs["channels"] = np.array(list(stats.channels), dtype=h5py.string_dtype())
        if summarises:
            g.attrs["summarises"] = summarises
        if label_config:
            g.attrs["label_config"] = json.dumps(label_config)
    return path


def read_stats(path: PathLike) -> Stats:
    """Read a ``stats.h5`` written by climnb or by DeepCAM's tools."""
    path = Path(path)
    if path.is_dir():
        path = path / STATS_NAME
    try:
        with h5py.File(path, "r") as f:
            return _read(path, f)
    except SampleError:
        raise
    except FileNotFoundError:
        raise SampleError(f"{path}: no such file") from None
    except (OSError, KeyError) as err:
        raise SampleError(f"{path}: not a readable statistics file: {err}") from err


def _read(path: Path, f: h5py.File) -> Stats:
    names = ("minval", "maxval", "mean", "sqmean", "count")
    missing = [n for n in names if f"climate/{n}" not in f]
    if missing:
        raise SampleError(f"{path}: no dataset(s) {', '.join('climate/' + n for n in missing)}")
    arrays = {n: np.asarray(f[f"climate/{n}"][...]).ravel() for n in names}
    c = arrays["minval"].size
    if arrays["count"].size == 1:  # DeepCAM's summariser: one integer, the number of files
        arrays["count"] = np.full(c, arrays["count"][0])
    bad = [n for n, a in arrays.items() if a.size != c]
    if bad:
        raise SampleError(f"{path}: {', '.join(bad)} do not have {c} values like minval")
    g = f["climate"]
    channels = group_channels(g)
    if len(channels) != c:
        raise SampleError(f"{path}: {c} values per statistic but {len(channels)} channel names")
    for n in names:
        finite = np.isfinite(arrays[n].astype(np.float64))
        if not finite.all():
            i = int(np.flatnonzero(~finite)[0])
            raise SampleError(
                f"{path}: climate/{n} is {arrays[n][i]} for channel {channels[i]}: "
                "statistics must be finite (recompute stats.h5)"
            )
    classes = f["climate/class_counts"][...].astype(np.int64) if "class_counts" in g else None
    summarises, labelled = (_text(g.attrs.get(k)) for k in ("summarises", "label_config"))
    try:
        label_config = json.loads(labelled) if labelled else None
    except ValueError:
        raise SampleError(
            f"{path}: attribute label_config is not JSON: {labelled[:80]!r}"
        ) from None
    return Stats(
        channels,
        *(arrays[n].astype(np.float64) for n in names[:4]),
        arrays["count"].astype(np.int64),
        classes,
        summarises,
        label_config if isinstance(label_config, dict) else None,
    )


def _text(value) -> str | None:
    return value.decode() if isinstance(value, bytes) else value
