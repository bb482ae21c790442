"""Fast batch reads of sample files for the input pipeline (numpy only; no TensorFlow).

:class:`SampleReader` turns one sample file into normalised data, labels and per-pixel loss
weights, written straight into arrays the caller gives it. :class:`BatchLoader` runs it on a
pool of worker processes that write into shared memory, keeping a few batches in flight ahead
of the consumer; :mod:`climnb.train.pipeline` wraps it in tf.data.

Why processes and shared memory: h5py holds the GIL and its own lock while it reads, so
threads reading with h5py run one at a time; a process pool that returns arrays the usual way
pickles each 57 MB sample through a pipe. Here a worker reads the file's bytes with
``os.preadv`` (the arrays of climnb's files are contiguous at known offsets, see
:func:`climnb.io.samples.inspect_sample`; other files go through h5py) a block of rows at a
time into the batch in shared memory, and normalises each block while it is still in the CPU
cache. The consumer receives views on that memory, which TensorFlow takes over without a copy
(DLPack); a batch's memory is reused once every view on it, and every tensor made from one,
is gone.

Examples
--------
>>> import tempfile
>>> from climnb.data.synthetic import make_dataset
>>> from climnb.io.samples import write_samples
>>> from climnb.io.stats import compute_stats
>>> ds, _ = make_dataset(n_time=4, seed=0)
>>> files = write_samples(ds, ds.truth, tempfile.mkdtemp())
>>> reader = SampleReader(files, compute_stats(files), class_weights=[1.0, 20.0, 5.0])
>>> x, y, w = reader.read([0, 1])
>>> x.shape, y.shape, round(float(x.min()), 6), round(float(x.max()), 6)
((2, 96, 144, 16), (2, 96, 144), 0.0, 1.0)
"""

from __future__ import annotations

import contextlib
import logging
import mmap
import multiprocessing
import os
import queue
import signal
import sys
import tempfile
import threading
import uuid
import weakref
from collections.abc import Iterable, Sequence
from itertools import islice

import h5py
import numpy as np

from climnb.io.samples import DATA, LABELS, SOFT, SampleError, SampleInfo, inspect_sample
from climnb.io.stats import Stats, read_stats

__all__ = ["BatchLoader", "SampleReader"]

log = logging.getLogger(__name__)

PathLike = str | os.PathLike
_ALIGN = 64  # TensorFlow refuses tensors whose memory is not 64-byte aligned
# Map batch memory with its pages in place: one call instead of a page fault per 4 KiB
_MAP_FLAGS = mmap.MAP_SHARED | getattr(mmap, "MAP_POPULATE", 0)


#: :func:`_inspect`'s findings, by file and what ``os.stat`` says of it
_INSPECTED: dict[tuple, SampleInfo] = {}


def _inspect(path: PathLike, *, shape: tuple[int, int] | None = None) -> SampleInfo:
    """:func:`~climnb.io.samples.inspect_sample`, remembered while the file is unchanged (same
    device, inode, size and modification time, as ``make`` and ``rsync`` judge): a training
    run opens its files' readers again every epoch, and opening each HDF5 file to check it
    again cost ~2 ms a file (0.4 s of each toy epoch of 185 files, twice with validation)."""
    try:
        st = os.stat(path)
    except OSError:
        return inspect_sample(path, shape=shape)  # its error names the file
    key = (os.fspath(path), st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
    info = _INSPECTED.get(key)
    if info is None:
        info = inspect_sample(path, shape=shape)
        if len(_INSPECTED) > 100_000:  # a bound, not a policy: millions of files are not seen
            _INSPECTED.clear()
        _INSPECTED[key] = info
    elif shape is not None and info.shape != shape:
        inspect_sample(path, shape=shape)  # raises the checked error naming the file
    return info


class SampleReader:
    """Reads sample files into normalised float32 data, int32 labels and loss weights.

    Parameters
    ----------
    files : the sample files (all on the same grid with the same channels).
    stats : :class:`climnb.io.stats.Stats` or the path of a ``stats.h5``; the data are scaled
        with ``(x - minval) / (maxval - minval)``.
    channels : channel names to keep, in order (default: all).
    class_weights : loss weight of each class (default: 1 for all), e.g. from the loss module.
    block_rows : rows read and normalised at a time (a block should fit in the CPU cache).
    soft : targets as per-class shares: ``y`` is (H, W, classes) float32, the file's soft
        target (``climate/labels_soft``, expert labellers' mean) or the one-hot of its class
        ids, and ``w`` the target's mean class weight. ``None``: soft when every file holds
        a soft target. ``False`` (default): ``y`` the class ids.
    """

    def __init__(
        self,
        files: Sequence[PathLike],
        stats: Stats | PathLike,
        *,
        channels: Sequence[str] | None = None,
        class_weights: Sequence[float] | None = None,
        block_rows: int = 16,
        soft: bool | None = False,
    ):
        if not len(files):
            raise SampleError("no sample files to read")
        first = _inspect(files[0])
        self.infos: list[SampleInfo] = [first]
        for f in files[1:]:
            info = _inspect(f, shape=first.shape)
            if info.channels != first.channels:
                raise SampleError(f"{f}: channels differ from those of {first.path}")
            self.infos.append(info)
        stats = stats if isinstance(stats, Stats) else read_stats(stats)
        if stats.minval.size != len(first.channels):
            raise SampleError(
                f"statistics have {stats.minval.size} channels, files {len(first.channels)}"
            )
        stats.check_channels(first.channels, where=f"statistics for {first.path}")
        self.channels = tuple(channels) if channels else first.channels
        unknown = [c for c in self.channels if c not in first.channels]
        if unknown:
            raise ValueError(
                f"unknown channel(s) {', '.join(unknown)}; files have {', '.join(first.channels)}"
            )
        self.index = np.array([first.channels.index(c) for c in self.channels])
        self.subset = self.index.tolist() != list(range(len(first.channels)))
        lo, span = stats.minval[self.index], (stats.maxval - stats.minval)[self.index]
        self.offset = lo.astype(np.float32)
        self.scale = np.divide(1.0, span, out=np.zeros_like(span), where=span > 0).astype(
            np.float32
        )
        weights = np.ones(3) if class_weights is None else np.asarray(class_weights, float)
        self.class_weights = weights.astype(np.float32)
        self.shape = first.shape
        self.n_file_channels = len(first.channels)
        self.block_rows = block_rows
        self.soft = all(i.has_soft for i in self.infos) if soft is None else bool(soft)
        self._scratch = None

    def __len__(self) -> int:
        return len(self.infos)

    def __getstate__(self):
        return {**self.__dict__, "_scratch": None}

    def batch_shapes(self, n: int) -> list[tuple[tuple[int, ...], np.dtype]]:
        """Shapes and dtypes of ``x``, ``y`` and ``w`` for a batch of ``n``."""
        h, w = self.shape
        y = ((n, h, w, self.class_weights.size), np.float32) if self.soft else ((n, h, w), np.int32)
        return [
            ((n, h, w, len(self.index)), np.dtype(np.float32)),
            (y[0], np.dtype(y[1])),
            ((n, h, w), np.dtype(np.float32)),
        ]

    def read(self, indices: Sequence[int]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Read files ``indices`` into new arrays ``x`` (B, H, W, C), ``y`` and ``w`` (B, H, W)."""
        x, y, w = (np.empty(shape, dtype) for shape, dtype in self.batch_shapes(len(indices)))
        for k, i in enumerate(indices):
            self.read_into(int(i), x[k], y[k], w[k])
        return x, y, w

    def read_into(self, i: int, x: np.ndarray, y: np.ndarray, w: np.ndarray) -> None:
        """Read file ``i`` into ``x`` (H, W, C), ``y`` and ``w`` (H, W)."""
        info = self.infos[i]
        try:
            labels = self._read_raw(info, x) if info.raw_readable else self._read_h5py(info, x)
        except OSError as err:
            raise SampleError(f"{info.path}: cannot read: {err}") from err
        self._check_labels(info, labels)
        if not self.soft:
            np.copyto(y, labels, casting="unsafe")
            np.take(self.class_weights, y, out=w)
            return
        if info.has_soft:
            self._read_soft(info, y)
        else:  # class ids as a one-hot target
            np.equal(labels[..., None], np.arange(y.shape[-1]), out=y, casting="unsafe")
        np.matmul(y, self.class_weights, out=w)

    def check_labels(self) -> None:
        """Read every file's class ids, not its data (a 64th of the bytes of 16 float32
        channels), and refuse what :meth:`read_into` would refuse only when a batch reaches
        the file: a :class:`SampleError` naming the first file whose labels are not class
        indices of this reader. Training calls it before it builds the model."""
        for info in {str(i.path): i for i in self.infos}.values():  # a staged draw repeats
            try:
                if info.labels_offset is not None:
                    labels = np.empty(self.shape, np.dtype(info.labels_dtype))
                    fd = os.open(info.path, os.O_RDONLY)
                    try:
                        _pread(fd, labels, info.labels_offset, info.path)
                    finally:
                        os.close(fd)
                else:
                    with h5py.File(info.path, "r") as f:
                        labels = f[LABELS][...]
            except OSError as err:
                raise SampleError(f"{info.path}: cannot read: {err}") from err
            self._check_labels(info, labels)

    def _check_labels(self, info: SampleInfo, labels: np.ndarray) -> None:
        if labels.dtype.kind == "f" and not np.array_equal(labels, np.round(labels)):
            raise SampleError(f"{info.path}: {LABELS} holds values that are not class indices")
        if labels.min() < 0 or labels.max() >= self.class_weights.size:
            raise SampleError(
                f"{info.path}: {LABELS} has values outside 0..{self.class_weights.size - 1}"
            )

    def _read_soft(self, info: SampleInfo, y: np.ndarray) -> None:
        try:
            if info.soft_offset is None:
                with h5py.File(info.path, "r") as f:
                    f[SOFT].read_direct(y)
            else:
                fd = os.open(info.path, os.O_RDONLY)
                try:
                    _pread(fd, y, info.soft_offset, info.path)
                finally:
                    os.close(fd)
        except OSError as err:
            raise SampleError(f"{info.path}: cannot read: {err}") from err
        lo, hi = float(y.min()), float(y.max())
        if not (lo >= 0 and hi <= 1):  # NaN fails too
            raise SampleError(f"{info.path}: {SOFT} holds values outside 0..1 ({lo}, {hi})")

    def _read_h5py(self, info: SampleInfo, out: np.ndarray) -> np.ndarray:
        with h5py.File(info.path, "r") as f:
            data, labels = f[DATA][...], f[LABELS][...]
        np.take(data, self.index, axis=-1, out=out)
        self._normalise(out)
        return labels

    def _read_raw(self, info: SampleInfo, out: np.ndarray) -> np.ndarray:
        h, w = self.shape
        row_bytes = w * self.n_file_channels * 4
        fd = os.open(info.path, os.O_RDONLY)
        try:
            for r in range(0, h, self.block_rows):
                block = out[r : r + self.block_rows]
                target = self._block(len(block)) if self.subset else block
                _pread(fd, target, info.data_offset + r * row_bytes, info.path)
                if self.subset:
                    np.take(target, self.index, axis=-1, out=block)
                self._normalise(block)
            labels = np.empty((h, w), np.dtype(info.labels_dtype))
            _pread(fd, labels, info.labels_offset, info.path)
        finally:
            os.close(fd)
        return labels

    def _block(self, rows: int) -> np.ndarray:
        if self._scratch is None:
            shape = (self.block_rows, self.shape[1], self.n_file_channels)
            self._scratch = np.empty(shape, np.float32)
        return self._scratch[:rows]

    def _normalise(self, block: np.ndarray) -> None:
        np.subtract(block, self.offset, out=block)
        np.multiply(block, self.scale, out=block)


def _pread(fd: int, out: np.ndarray, offset: int, path) -> None:
    view = memoryview(out.reshape(-1).view(np.uint8))
    done = 0
    while done < len(view):
        n = os.preadv(fd, [view[done:]], offset + done)
        if n == 0:
            raise SampleError(f"{path}: truncated: ends before byte {offset + len(view)}")
        done += n


# --- shared-memory batches ----------------------------------------------------------------------


def _layout(shapes) -> tuple[list[int], int]:
    """Byte offsets of the arrays of a batch in one buffer, each aligned; and the total."""
    offsets, end = [], 0
    for shape, dtype in shapes:
        end = -(-end // _ALIGN) * _ALIGN
        offsets.append(end)
        end += int(np.prod(shape)) * dtype.itemsize
    return offsets, end


def _views(buf, shapes, n: int | None = None) -> list[np.ndarray]:
    offsets, _ = _layout(shapes)
    arrays = [
        np.frombuffer(buf, dtype, int(np.prod(shape)), off).reshape(shape)
        for (shape, dtype), off in zip(shapes, offsets, strict=True)
    ]
    return [a[:n] for a in arrays] if n is not None else arrays


class _Slot:
    """One batch's worth of shared memory, mapped; workers open it by ``path``.

    On Linux the memory is an anonymous file (``memfd_create``) that the workers open through
    ``/proc/<pid>/fd``: it has no name to leak and goes away with the processes however they
    end. Elsewhere it is a named file in the temporary directory, removed by :meth:`close`.
    ``users`` counts the views handed out; the slot is free again when they are all gone.
    """

    def __init__(self, nbytes: int):
        proc = f"/proc/{os.getpid()}/fd"
        self.named = not (hasattr(os, "memfd_create") and os.path.isdir(proc))
        if self.named:
            self.path = os.path.join(tempfile.gettempdir(), f"climnb-batch-{uuid.uuid4().hex}")
            self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
        else:
            self.fd = os.memfd_create("climnb-batch", os.MFD_CLOEXEC)
            self.path = f"{proc}/{self.fd}"
        os.ftruncate(self.fd, nbytes)
        self.buf = mmap.mmap(self.fd, nbytes, flags=_MAP_FLAGS)
        self.users = 0
        self.closed = False

    def close(self) -> None:
        """Give the memory back once the views on it are gone (they stay valid until then)."""
        if self.closed:
            return
        self.closed = True
        os.close(self.fd)
        if self.named:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.path)


def _worker(reader: SampleReader, shapes, tasks, done) -> None:
    """Worker process: read samples into the batch slots named by the tasks."""
    # Ctrl-C / a kernel shutdown signals the whole process group: the parent stops its
    # workers (a None task, or terminate() as daemons), so they need no traceback of their own
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    maps: dict[str, mmap.mmap] = {}
    while (task := tasks.get()) is not None:
        key, path, k, i = task
        try:
            if path not in maps:
                with open(path, "r+b") as f:
                    maps[path] = mmap.mmap(f.fileno(), 0, flags=_MAP_FLAGS)
            x, y, w = _views(maps[path], shapes)
            reader.read_into(i, x[k], y[k], w[k])
            done.put((key, None))
        except Exception as err:  # reported to the consumer, which raises it
            done.put((key, str(err) if isinstance(err, SampleError) else repr(err)))


class BatchLoader:
    """Reads batches on worker processes into shared memory, a few batches in advance.

    Parameters
    ----------
    reader : the :class:`SampleReader`.
    batch_size : the largest batch.
    workers : worker processes (0: read in the calling thread, nothing ahead).
    ahead : batches started ahead of the one asked for.

    Call :meth:`get` for each batch in order, passing the batches to come in ``upcoming`` so
    that they are read meanwhile. A batch is named by a key (any hashable) and must always
    hold the same files for the same key. The arrays returned are views on shared memory,
    reused once they (and any tensors made from them) are gone.
    """

    def __init__(self, reader: SampleReader, batch_size: int, *, workers: int = 2, ahead: int = 2):
        self.reader, self.workers, self.ahead = reader, workers, ahead
        self.shapes = reader.batch_shapes(batch_size)
        self.nbytes = _layout(self.shapes)[1]
        self._free: queue.SimpleQueue = queue.SimpleQueue()
        self._slots: list[_Slot] = []
        self._lock = threading.Lock()
        self._pending: dict = {}  # key -> [slot, samples left, error]
        self._procs: list = []
        self._queues: dict = {}  # "tasks" and "done", once the workers run
        # stops the workers and frees the memory when the loader is collected or Python exits
        self._closer = weakref.finalize(self, _shutdown, self._procs, self._queues, self._slots)
        self.slots_made = 0  # batch buffers allocated so far: how many batches lived at once

    def _start(self) -> None:
        if self._procs or not self.workers:
            return
        ctx = multiprocessing.get_context("spawn")  # the parent may run TensorFlow's threads
        self._queues.update(tasks=ctx.Queue(), done=ctx.Queue())
        args = (self.reader, self.shapes, self._queues["tasks"], self._queues["done"])
        self._procs.extend(
            ctx.Process(target=_worker, args=args, daemon=True) for _ in range(self.workers)
        )
        with _main_hidden():
            for p in self._procs:
                p.start()
        log.debug("started %d reader processes", self.workers)

    def _slot(self) -> _Slot:
        while True:
            try:
                slot = self._free.get_nowait()
            except queue.Empty:
                with self._lock:
                    slot = _Slot(self.nbytes)
                    self._slots.append(slot)
                    self.slots_made += 1
                return slot
            if not slot.closed:
                return slot

    def _submit(self, key, indices) -> None:
        slot = self._slot()
        self._pending[key] = entry = [slot, len(indices), None]
        for k, i in enumerate(indices):
            if self.workers:
                self._queues["tasks"].put((key, slot.path, k, int(i)))
            else:
                x, y, w = _views(slot.buf, self.shapes)
                self.reader.read_into(int(i), x[k], y[k], w[k])
                entry[1] -= 1

    def get(self, key, indices, upcoming: Iterable = ()) -> list[np.ndarray]:
        """The batch ``key`` of files ``indices``; ``upcoming``: ``(key, indices)`` pairs of the
        batches to come, the first ``ahead`` of which are started now."""
        self._start()
        ahead = list(islice(upcoming, self.ahead)) if self.workers else []
        for k, idx in [(key, indices), *ahead]:
            if k not in self._pending:
                self._submit(k, idx)
        entry = self._pending[key]
        while entry[1] > 0:
            done_key, error = self._receive()
            if done_key in self._pending:
                self._pending[done_key][1] -= 1
                self._pending[done_key][2] = self._pending[done_key][2] or error
        del self._pending[key]
        if entry[2]:
            self._free.put(entry[0])
            raise SampleError(entry[2])
        return self._hand_out(entry[0], len(indices))

    def _receive(self):
        while True:
            try:
                return self._queues["done"].get(timeout=1.0)
            except queue.Empty:  # check that the readers are alive while waiting
                dead = [p for p in self._procs if not p.is_alive()]
                if dead:
                    self.close()
                    raise RuntimeError(
                        f"a reader process died (exit code {dead[0].exitcode})"
                    ) from None

    def _hand_out(self, slot: _Slot, n: int) -> list[np.ndarray]:
        views = _views(slot.buf, self.shapes, n)
        slot.users = len(views)
        for v in views:
            weakref.finalize(v, self._release, slot)
        return views

    def _release(self, slot: _Slot) -> None:
        with self._lock:
            slot.users -= 1
            if slot.users == 0:
                self._free.put(slot)

    def close(self) -> None:
        """Stop the workers and remove the shared-memory files; views handed out stay valid.

        The loader starts again (new workers, new memory) if asked for another batch.
        """
        _shutdown(self._procs, self._queues, self._slots)
        self._pending = {}


@contextlib.contextmanager
def _main_hidden():
    """Keep spawned workers from importing the parent's ``__main__`` script.

    They need nothing from it (their task comes from this module), and a script that is not
    guarded by ``if __name__ == "__main__"``, or one that imports TensorFlow, would otherwise
    run again in every worker.
    """
    main = sys.modules["__main__"]
    saved = {k: main.__dict__[k] for k in ("__file__", "__spec__") if k in main.__dict__}
    main.__dict__.pop("__file__", None)
    main.__spec__ = None
    try:
        yield
    finally:
        main.__dict__.update(saved)
        if "__spec__" not in saved:
            main.__dict__.pop("__spec__", None)


def _shutdown(procs: list, queues: dict, slots: list) -> None:
    for _ in procs:
        queues["tasks"].put(None)
    for p in procs:
        p.join(timeout=5)
        if p.is_alive():
            p.terminate()
    procs.clear()
    queues.clear()
    for slot in slots:
        slot.close()
    slots.clear()
