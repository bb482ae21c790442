"""The tf.data input pipeline: sample files to normalised, weighted batches.

Steps, in order:

1. the file list is sorted and sharded by rank (``files[rank::size]``, :func:`shard_files`);
2. every epoch the shard is reshuffled with the seed ``seed + epoch`` (:func:`epoch_order`)
   and cut into batches that never straddle two epochs;
3. ``workers`` reader processes read the files of each batch, ``read_ahead`` batches ahead of
   TensorFlow, with min-max normalisation from ``stats.h5``, the optional channel subset, the
   labels and the per-pixel loss weights fused into the read, straight into a batch in shared
   memory (:class:`climnb.io.reader.BatchLoader`);
4. with ``augment="roll"`` (training batches only), each sample of the batch, data, labels and
   weights together, is rolled along longitude by its own random number of columns
   (:func:`roll_shifts`, seeded by ``seed``, the epoch and the batch). On a periodic global
   grid a rolled sample is an exact sample of the same climate: storms and rivers keep their
   shape across the 0/360 seam, so the network cannot learn where on the map events sit. It
   costs one copy of the batch;
5. TensorFlow takes the batch over without a copy (DLPack), and prefetches.

Soft targets: a sample set of expert labels written with ``--labellers mean`` holds, beside
the class ids, the share of labellers giving each pixel each class
(:mod:`climnb.labels.expert`). Training batches (shuffled) of such files carry ``y`` as those
shares, (B, H, W, classes) float32, which :func:`climnb.models.losses.weighted_cross_entropy`
takes as a soft target; validation batches (in file order) carry the class ids, the shares'
argmax (the labellers' majority), which the IoU is computed on (``PipelineConfig.targets``).

Why processes and shared memory, and what else was measured: see :mod:`climnb.io.reader` and
``benchmarks/bench_pipeline.py``. TensorFlow is imported only by :func:`make_dataset`.

Where the files come from: a training rank passes its node's staged copies, which never lie in
the shared folder (:class:`climnb.io.sampleset.StagedSet`; the staged list is already this
rank's, so ``rank=0, size=1``)::

    staged = StagedSet.for_rank("/local/scratch/{node}", rank=rank, local_size=local_size)
    ds = make_dataset(staged.files("train"), staged.stats(), class_weights=w, epochs=None)

The statistics must list the files' channels in the files' order (checked by the reader).

Examples
--------
>>> epoch_order(5, seed=0, epoch=0, shuffle=False)
array([0, 1, 2, 3, 4])
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np

from climnb.io.reader import BatchLoader, SampleReader
from climnb.io.samples import SampleError
from climnb.io.stats import Stats
from climnb.models.backend import quiet_tensorflow

__all__ = [
    "AUGMENTS",
    "TARGETS",
    "PipelineConfig",
    "SampleReader",
    "epoch_order",
    "make_dataset",
    "mirror_batch",
    "mirror_flags",
    "roll_batch",
    "roll_shifts",
    "shard_files",
    "throughput",
]

PathLike = str | os.PathLike

#: Augmentations :class:`PipelineConfig` knows (``None``: none).
AUGMENTS = ("roll", "mirror", "roll+mirror")

#: Channels whose sign a north-south mirror flips: the meridional (northward) components.
MERIDIONAL = ("V850", "VBOT", "V200", "V500", "IVTV")

#: What ``y`` holds (:class:`PipelineConfig` ``targets``).
TARGETS = ("auto", "classes", "soft")


@dataclass(frozen=True)
class PipelineConfig:
    """Settings of the input pipeline.

    Attributes
    ----------
    batch_size : samples per batch.
    seed : shuffling seed; epoch ``e`` is shuffled with ``seed + e``.
    shuffle : reshuffle every epoch (``False``: file order).
    channels : names of the channels to feed, in order (default: all of the file's).
    workers : reader processes (0: read in TensorFlow's thread, for debugging).
    read_ahead : batches the readers work on ahead of the one TensorFlow asks for.
    prefetch : batches TensorFlow keeps ready ahead of the consumer.
    drop_remainder : drop an epoch's last, smaller batch.
    block_rows : rows read and normalised at a time (a block should fit in the CPU cache).
    autotune : let tf.data's autotuner run. Off by default: the sizes above are fixed, so it
        has nothing to tune, and its model thread made destroying an iterator wait ~5 s at
        random (at the end of most epochs of a two-rank run; benchmarks/bench_training.py).
    augment : ``"roll"``: roll each sample (data, labels, weights together) by a random number
        of longitude columns, seeded (:func:`roll_shifts`). Exact only on a periodic global
        grid (longitudes covering 0-360, the last column next to the first). For training
        batches only: it needs ``shuffle``, so validation batches (read in file order) are
        never augmented. ``"mirror"``: mirror half the samples (seeded, :func:`mirror_flags`)
        north to south, with the meridional channels (:data:`MERIDIONAL`) negated: the same
        weather in the other hemisphere. Exact for labels that follow the hemisphere (storms'
        vorticity sign, rivers' poleward transport: climnb's labeller) on a grid symmetric
        about the equator. ``"roll+mirror"``: both.
    targets : what ``y`` holds. ``"classes"``: class ids (B, H, W) int32. ``"soft"``: per-class
        shares (B, H, W, classes) float32: a file's soft target (expert labellers' mean), or
        the one-hot of its class ids; ``w`` is then each pixel's mean class weight under the
        shares. ``"auto"`` (default): soft for shuffled (training) batches when every file holds
        a soft target, else class ids; so validation batches, read in file order, are scored
        on the class ids (the argmax of the shares).

    Memory: about ``(read_ahead + prefetch + 2) * batch_size`` samples of shared memory
    (57 MB each at full size, plus labels and weights).
    """

    batch_size: int = 1
    seed: int = 0
    shuffle: bool = True
    channels: tuple[str, ...] | None = None
    workers: int = 2
    read_ahead: int = 2
    prefetch: int = 2
    drop_remainder: bool = False
    block_rows: int = 16
    autotune: bool = False
    augment: str | None = None
    targets: str = "auto"

    def __post_init__(self):
        if self.targets not in TARGETS:
            raise ValueError(f"targets must be one of {TARGETS}, got {self.targets!r}")
        if self.augment is not None and self.augment not in AUGMENTS:
            raise ValueError(f"augment must be one of {AUGMENTS} or None, got {self.augment!r}")
        if self.augment and not self.shuffle:
            raise ValueError(
                f"augment={self.augment!r} is for training batches, which are shuffled; "
                "validation batches (shuffle=False) are never augmented"
            )
        for name in ("batch_size", "block_rows"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1, got {getattr(self, name)}")
        for name in ("workers", "read_ahead", "prefetch"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0, got {getattr(self, name)}")


def shard_files(files: Sequence[PathLike], rank: int = 0, size: int = 1) -> list[Path]:
    """This rank's share of ``files``: sorted, then every ``size``-th from ``rank``.

    >>> [p.name for p in shard_files(["c.h5", "a.h5", "b.h5"], rank=1, size=2)]
    ['b.h5']
    """
    if not 0 <= rank < size:
        raise ValueError(f"rank must be in 0..{size - 1}, got {rank}")
    return sorted(Path(f) for f in files)[rank::size]


def epoch_order(n: int, *, seed: int, epoch: int, shuffle: bool = True) -> np.ndarray:
    """Order in which the ``n`` files of a shard are read in ``epoch`` (seeded by seed + epoch)."""
    if not shuffle:
        return np.arange(n, dtype=np.int64)
    return np.random.default_rng(seed + epoch).permutation(n).astype(np.int64)


def roll_shifts(n: int, width: int, *, seed: int, epoch: int, batch: int) -> np.ndarray:
    """Longitude shifts (columns, ``0 .. width - 1``) of the ``n`` samples of one batch.

    The same ``seed``, epoch and batch give the same shifts, however many reader processes run.

    >>> roll_shifts(3, 144, seed=0, epoch=0, batch=0).tolist() == roll_shifts(
    ...     3, 144, seed=0, epoch=0, batch=0).tolist()
    True
    """
    return np.random.default_rng([seed, epoch, batch]).integers(0, width, size=n)


def roll_batch(arrays: Sequence[np.ndarray], shifts: np.ndarray) -> list[np.ndarray]:
    """Copies of (B, H, W, ...) ``arrays`` with sample ``i`` rolled by ``shifts[i]`` along W.

    The same as ``np.roll(a[i], shifts[i], axis=1)`` for every array and sample.

    >>> x = np.arange(8).reshape(2, 1, 4)
    >>> roll_batch([x], np.array([1, 0]))[0].tolist()
    [[[3, 0, 1, 2]], [[4, 5, 6, 7]]]
    """
    out = []
    for a in arrays:
        rolled = aligned_empty(a.shape, a.dtype)  # handed to TensorFlow without a copy
        width = a.shape[2]
        for i, s in enumerate(int(s) % width for s in shifts):
            rolled[i, :, s:] = a[i, :, : width - s]
            rolled[i, :, :s] = a[i, :, width - s :]
        out.append(rolled)
    return out


def mirror_flags(n: int, *, seed: int, epoch: int, batch: int) -> np.ndarray:
    """Which of the ``n`` samples of one batch are mirrored north to south (about half),
    seeded like :func:`roll_shifts` but drawn apart from the shifts.

    >>> mirror_flags(4, seed=0, epoch=0, batch=0).dtype
    dtype('bool')
    """
    return np.random.default_rng([seed, epoch, batch, 1]).random(n) < 0.5


def mirror_batch(
    arrays: Sequence[np.ndarray], flips: np.ndarray, negate: dict[int, float]
) -> list[np.ndarray]:
    """``arrays`` (B, H, W, ...) with the samples where ``flips`` is set mirrored along H
    (rows); in the first array (the fields, min-max scaled), channel ``k`` of ``negate``
    becomes ``negate[k] - x`` (the field negated, in the same scaling). Flipped samples are
    copied; the arrays are changed in place otherwise never.

    >>> x = np.arange(4, dtype=np.float32).reshape(1, 2, 1, 2)
    >>> mirror_batch([x], np.array([True]), {1: 1.0})[0][0, :, 0].tolist()
    [[2.0, -2.0], [0.0, 0.0]]
    """
    if not flips.any():
        return list(arrays)
    out = []
    for j, a in enumerate(arrays):
        mirrored = aligned_empty(a.shape, a.dtype)  # handed to TensorFlow without a copy
        mirrored[...] = a
        mirrored[flips] = a[flips, ::-1]
        if j == 0:
            for k, c in negate.items():
                mirrored[flips, ..., k] = c - mirrored[flips, ..., k]
        out.append(mirrored)
    return out


#: TensorFlow's alignment of tensor memory (Eigen's ``EIGEN_MAX_ALIGN_BYTES``): a buffer it
#: takes over by DLPack must start on such a boundary, else the process aborts
#: ("Check failed: IsAligned()").
TENSOR_ALIGNMENT = 64


def aligned_empty(shape, dtype, alignment: int = TENSOR_ALIGNMENT) -> np.ndarray:
    """An uninitialised array whose data start on an ``alignment``-byte boundary.

    >>> a = aligned_empty((2, 3), np.float32)
    >>> a.shape, a.dtype.name, a.ctypes.data % TENSOR_ALIGNMENT
    ((2, 3), 'float32', 0)
    """
    dtype = np.dtype(dtype)
    nbytes = int(np.prod(shape)) * dtype.itemsize
    room = max(nbytes, dtype.itemsize)  # numpy moves the pointer of an empty slice: keep one item
    buffer = np.empty(room + alignment, np.uint8)
    start = -buffer.ctypes.data % alignment
    return buffer[start : start + room].view(dtype)[: int(np.prod(shape))].reshape(shape)


class _Schedule:
    """Which files make batch ``b`` of epoch ``e``, and which batches come after it."""

    def __init__(self, n: int, cfg: PipelineConfig, stop: int | None):
        self.cfg, self.stop = cfg, stop
        size = cfg.batch_size
        self.n_batches = n // size if cfg.drop_remainder else -(-n // size)
        if self.n_batches == 0:
            raise SampleError(f"{n} files make no batch of {size} (drop_remainder is set)")
        self.order = lru_cache(maxsize=4)(
            lambda e: epoch_order(n, seed=cfg.seed, epoch=e, shuffle=cfg.shuffle)
        )

    def indices(self, e: int, b: int) -> np.ndarray:
        size = self.cfg.batch_size
        return self.order(e)[b * size : (b + 1) * size]

    def after(self, e: int, b: int):
        while True:
            b += 1
            if b == self.n_batches:
                e, b = e + 1, 0
            if self.stop is not None and e >= self.stop:
                return
            yield (e, b), self.indices(e, b)

    def is_last(self, e: int, b: int) -> bool:
        return self.stop is not None and (e, b) == (self.stop - 1, self.n_batches - 1)


def make_dataset(
    files: Sequence[PathLike],
    stats: Stats | PathLike,
    *,
    class_weights: Sequence[float] | None = None,
    rank: int = 0,
    size: int = 1,
    epochs: int | None = 1,
    start_epoch: int = 0,
    config: PipelineConfig = PipelineConfig(),
):
    """A ``tf.data.Dataset`` of ``(x, y, w)`` batches from sample files.

    Parameters
    ----------
    files : all sample files; this rank keeps ``files[rank::size]`` (sorted).
    stats : statistics for min-max normalisation (a :class:`Stats` or ``stats.h5``).
    class_weights : per-class loss weights, turned into per-pixel weights ``w``.
    rank, size : this process's rank and the number of ranks (Horovod or MPI).
    epochs : epochs to produce (``None``: repeat for ever); epoch ``e`` is shuffled with
        ``config.seed + e``.
    start_epoch : number of the first epoch (to resume a run with the same order).
    config : :class:`PipelineConfig`.

    Returns
    -------
    tf.data.Dataset
        Elements ``x`` (B, H, W, C) float32 min-max scaled, ``y`` (B, H, W) int32 classes (or
        (B, H, W, classes) float32 shares, a soft target: ``config.targets``) and ``w``
        (B, H, W) float32 weights. The reader processes stop after the last batch.
    """
    tf = _tensorflow()
    shard = shard_files(files, rank, size)
    if not shard:
        raise SampleError(f"rank {rank} of {size} gets none of the {len(files)} files")
    cfg = config
    soft = {"classes": False, "soft": True, "auto": None if cfg.shuffle else False}[cfg.targets]
    reader = SampleReader(
        shard,
        stats,
        channels=cfg.channels,
        class_weights=class_weights,
        block_rows=cfg.block_rows,
        soft=soft,
    )
    loader = BatchLoader(reader, cfg.batch_size, workers=cfg.workers, ahead=cfg.read_ahead)
    stop = start_epoch + epochs if epochs is not None else None
    plan = _Schedule(len(shard), cfg, stop)
    read = _batch_reader(tf, reader, loader, plan, cfg)
    last = _FOR_EVER if stop is None else stop
    return _as_dataset(tf, read, reader, plan, range(start_epoch, last), cfg)


_FOR_EVER = np.iinfo(np.int64).max  # the last epoch of a pipeline that repeats for ever


def _batch_reader(tf, reader: SampleReader, loader: BatchLoader, plan: _Schedule, cfg):
    """``read(e, b)``: batch ``b`` of epoch ``e`` as TensorFlow tensors ``[x, y, w]``, taken
    over from the loader's shared memory without a copy, augmented as ``cfg`` asks; the
    loader is closed after the last batch."""
    width = reader.shape[1]
    # a negated field in min-max units: -(x * span + lo) -> c - x with c = -2 lo / span
    negate = {
        k: float(-2.0 * reader.offset[k] * reader.scale[k])
        for k, name in enumerate(reader.channels)
        if name in MERIDIONAL
    }

    def read(e, b):
        e, b = int(e), int(b)
        views = loader.get((e, b), plan.indices(e, b), plan.after(e, b))
        if cfg.augment in ("roll", "roll+mirror"):
            shifts = roll_shifts(len(views[0]), width, seed=cfg.seed, epoch=e, batch=b)
            views = roll_batch(views, shifts)
        if cfg.augment in ("mirror", "roll+mirror"):
            flips = mirror_flags(len(views[0]), seed=cfg.seed, epoch=e, batch=b)
            views = mirror_batch(views, flips, negate)
        if plan.is_last(e, b):
            loader.close()
        return [tf.experimental.dlpack.from_dlpack(v.__dlpack__()) for v in views]

    return read


def _as_dataset(tf, read, reader: SampleReader, plan: _Schedule, epochs: range, cfg):
    """The ``tf.data.Dataset`` of ``epochs``' batches, each made by ``read(e, b)``."""
    (h, w), c = reader.shape, len(reader.index)
    y_type = tf.float32 if reader.soft else tf.int32
    y_shape = [None, h, w, reader.class_weights.size] if reader.soft else [None, h, w]

    def read_op(e, b):
        x, y, wt = tf.py_function(read, [e, b], [tf.float32, y_type, tf.float32])
        return (
            tf.ensure_shape(x, [None, h, w, c]),
            tf.ensure_shape(y, y_shape),
            tf.ensure_shape(wt, [None, h, w]),
        )

    def batches(e):
        return tf.data.Dataset.range(plan.n_batches).map(lambda b: (e, b))

    ds = tf.data.Dataset.range(epochs.start, epochs.stop).flat_map(batches)
    ds = ds.map(read_op)  # in order, one call at a time: the parallelism is in the readers
    ds = ds.prefetch(cfg.prefetch) if cfg.prefetch else ds
    options = tf.data.Options()
    options.autotune.enabled = cfg.autotune  # see PipelineConfig.autotune
    return ds.with_options(options)


def throughput(dataset, *, batches: int | None = None) -> dict[str, float]:
    """Time a pass over ``dataset`` from its second batch on (start-up is left out).

    Returns the samples timed, samples per second and MB per second of ``x``.
    """
    it = iter(dataset.take(batches + 1) if batches else dataset)
    next(it)
    n, nbytes, t0 = 0, 0, time.perf_counter()
    for x, *_ in it:
        n += int(x.shape[0])
        nbytes += int(np.prod(x.shape)) * 4
    dt = time.perf_counter() - t0
    return {
        "samples": n,
        "samples_per_s": n / dt if dt else 0.0,
        "mb_per_s": nbytes / dt / 1e6 if dt else 0.0,
    }


def _tensorflow():
    quiet_tensorflow()
    try:
        import tensorflow as tf
    except ImportError as err:  # pragma: no cover - depends on the environment
        raise ImportError(
            "climnb.train.pipeline needs TensorFlow: pip install 'climnb[train]' (tensorflow-cpu) "
            "or 'climnb[gpu]'"
        ) from err
    return tf
