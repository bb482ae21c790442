"""The on-disk sample set: one owner of its layout, names, split folders, stats and manifests.

Layout of a sample set (what ``climnb samples`` writes; DeepCAM's layout plus manifests)::

    ROOT/stats.h5                    statistics of the training files (climnb.io.stats)
    ROOT/train/data-*.h5             one file per time step (climnb.io.samples)
    ROOT/train/manifest.json         size, SHA-256, time, class counts of each file; channels,
                                     grid; the digest of ROOT/stats.h5 (climnb.io.manifest)
    ROOT/validation/...              the same
    ROOT/test/...                    the same

A *flat* set is one folder of ``data-*.h5`` (a DeepCAM download, or a split folder on its own),
with ``stats.h5`` in it or in its parent and a manifest where climnb wrote it. Foreign folders
without a manifest open too: their digests are then unknown and verification says so.

A *staged* set (:class:`StagedSet`) is what :mod:`climnb.data.staging` writes on a node: the files
the node's ranks train and validate on, ``stats.h5`` and a manifest whose ``ranks`` lists each
local rank's training files (drawn with replacement, in training order) and its share of the
validation files. Training opens it from a folder pattern with ``{node}`` and ``{local_rank}``
placeholders, resolved per rank, and reads nothing else.

API (stable; used by staging, the pipeline, training, predict, the demo and notebook 02):

* ``SampleSet.open(folder)``; ``.files(split)``, ``.split(...)``, ``.splits``,
  ``.stats_path``, ``.stats()`` (checked: channel order, finite values, the files summarised),
  ``.channels``, ``.grid``, ``.class_counts(split)``, ``.manifest(split)``, ``.digest(split)``,
  ``.verify(split)`` (SHA-256 of every file against its manifest);
* ``write_sample_set(ds, labels, out, ...)``: write a whole split set atomically (into a folder
  beside ``out``, then swapped in; a non-empty ``out`` only with ``overwrite=True``);
* ``StagedSet.open(pattern, node=, local_rank=)`` or ``StagedSet.for_rank(pattern, rank=,
  local_size=)`` (both hash what the rank reads unless ``verify=False``); ``.files("train")`` /
  ``.files("validation")`` (this rank's, in order), ``.stats()``, ``.class_counts()``,
  ``.verify()``, ``.verify_reads()``; ``resolve_folder(pattern, node=, local_rank=)``.

Examples
--------
>>> import tempfile, pathlib
>>> from climnb.data.synthetic import make_dataset
>>> ds, _ = make_dataset(n_time=40, seed=0)
>>> out = pathlib.Path(tempfile.mkdtemp()) / "samples"
>>> ss = write_sample_set(ds, "truth", out)
>>> ss.splits, [len(ss.files(s)) for s in ss.splits]
(('train', 'validation', 'test'), [18, 4, 4])
>>> ss.grid, len(ss.channels), ss.stats().channels == ss.channels
((96, 144), 16, True)
>>> ss.verify()  # every file's SHA-256 matches its manifest
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import time
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from climnb.io.atomic import atomic_path
from climnb.io.channels import CHANNEL_NAMES
from climnb.io.manifest import MANIFEST_NAME, Entry, Manifest, ManifestError, sha256_file
from climnb.io.outputs import OutputError, check_output
from climnb.io.samples import (
    SAMPLE_GLOB,
    SampleError,
    has_dates,
    inspect_sample,
    sample_names,
    source_of,
    write_samples,
)
from climnb.io.setinputs import open_inputs
from climnb.io.setrun import RUN_RECORD, clean_leftovers, partial_folder, run_key, swap_in
from climnb.io.split import SPLITS, Split, split_files, split_steps
from climnb.io.stats import STATS_NAME, Stats, compute_stats, read_stats, write_stats

__all__ = [
    "MANIFEST_NAME",
    "SAMPLE_GLOB",
    "SPLITS",
    "STATS_NAME",
    "SampleSet",
    "StagedSet",
    "check_sample_folder",
    "open_inputs",
    "resolve_folder",
    "write_heldout",
    "write_sample_set",
]

log = logging.getLogger(__name__)

PathLike = str | os.PathLike
Progress = Callable[[int], None]


class SampleSet:
    """A sample set on disk (see the module docstring for the layout).

    Open one with :meth:`open`; the constructor takes the folder as it is.
    """

    def __init__(self, root: PathLike):
        self.root = Path(root)
        self.splits: tuple[str, ...] = tuple(s for s in SPLITS if (self.root / s).is_dir())
        self._manifests: dict[str | None, Manifest | None] = {}

    @classmethod
    def open(cls, folder: PathLike) -> SampleSet:
        """Open a split set (``train/`` etc.) or a flat folder of ``data-*.h5``."""
        folder = Path(folder)
        if not folder.is_dir():
            raise SampleError(f"{folder}: not a directory (expected a sample set)")
        ss = cls(folder)
        if not ss.splits and not any(folder.glob(SAMPLE_GLOB)):
            raise SampleError(
                f"{folder}: no sample files ({SAMPLE_GLOB}) and no train/ folder: not a sample set"
            )
        return ss

    def __repr__(self) -> str:
        parts = ", ".join(f"{s} {len(self.files(s))}" for s in self.splits) or (
            f"{len(self.files())} files"
        )
        return f"{type(self).__name__}({str(self.root)!r}: {parts})"

    # --- files --------------------------------------------------------------------------------

    def folder(self, split: str | None = None) -> Path:
        """The folder holding the files of ``split`` (the root itself for a flat set)."""
        if split is None or not self.splits:
            return self.root
        if split not in SPLITS:
            raise ValueError(f"split must be one of {', '.join(SPLITS)}, got {split!r}")
        return self.root / split

    def files(self, split: str | None = None) -> list[Path]:
        """Sorted sample files of ``split`` (a flat set: all its files, whatever ``split``).

        ``None`` on a split set: the files of every split.
        """
        if split is None and self.splits:
            return [f for s in self.splits for f in self.files(s)]
        folder = self.folder(split)
        return sorted(folder.glob(SAMPLE_GLOB)) if folder.is_dir() else []

    def split(
        self,
        *,
        fractions: tuple[float, float, float] = (0.8, 0.1, 0.1),
        seed: int = 0,
        method: str = "blocks",
        gap_hours: float = 24.0,
    ) -> Split:
        """Train, validation and test files: the split folders, or for a flat set a split made
        here (by time blocks, from the manifest's times; ``"random"`` on request)."""
        if self.splits:
            return Split(*(tuple(self.files(s)) for s in SPLITS))
        files = self.files()
        if method == "random":
            return split_files(files, fractions=fractions, seed=seed)
        times = self._times(files)
        idx = split_steps(
            times, n=len(files), fractions=fractions, gap_hours=gap_hours, method=method
        )
        return Split(*(tuple(files[i] for i in part) for part in idx))

    def _times(self, files: Sequence[Path]) -> np.ndarray | None:
        m = self.manifest()
        times = [m.files[f.name].time if m and f.name in m.files else None for f in files]
        if None in times:
            times = [inspect_sample(f).time for f in files]
        if None in times:
            return None
        try:
            return np.array(times, "datetime64[s]")
        except ValueError:  # a model calendar's date (2000-02-30): split by position
            log.warning("%s: times of a model calendar; split by position", self.root)
            return None

    def times(self, split: str | None = None) -> np.ndarray | None:
        """The time steps of ``split``'s files, sorted, each once (several labellers' samples
        of a step share it); ``None`` where a file has no time."""
        times = self._times(self.files(split))
        return None if times is None else np.unique(times)

    # --- manifest, digests, verification ------------------------------------------------------

    def manifest(self, split: str | None = None) -> Manifest | None:
        """The manifest of ``split``'s folder (``None``: a foreign folder without one)."""
        key = split if self.splits else None
        if key not in self._manifests:
            self._manifests[key] = Manifest.read(self.folder(key))
        return self._manifests[key]

    def digest(self, split: str | None = "train") -> str | None:
        """Digest of the files of ``split`` (``None`` when any lacks a manifest entry)."""
        m, files = self.manifest(split), self.files(split)
        if m is None or any(f.name not in m.files for f in files):
            return None
        return m.digest([f.name for f in files])

    def verify(self, split: str | None = None, files: Sequence[PathLike] | None = None) -> None:
        """Hash files (default: all of ``split``, or of every split) and compare with the
        manifest; raise :class:`SampleError` naming the first that differs or is unlisted."""
        splits = [split] if split or not self.splits else list(self.splits)
        for s in splits:
            m = self.manifest(s)
            todo = self.files(s) if files is None else [Path(f) for f in files]
            if m is None:
                raise SampleError(f"{self.folder(s)}: no {MANIFEST_NAME}: cannot verify digests")
            for f in todo:
                try:
                    m.check(f)
                except ManifestError as err:
                    raise SampleError(str(err)) from None

    def check_complete(self, split: str | None = None) -> None:
        """A manifest is a promise: refuse a set whose manifest lists a file that is not
        there (deleted, renamed, moved away), naming the folder and the first missing file,
        and a set holding a sample file its manifest does not list (a stray, named before any
        check reads it: a stray of another grid would otherwise make a good file look wrong).
        ``split=None``: every split."""
        splits = [split] if split or not self.splits else list(self.splits)
        for s in splits:
            m = self.manifest(s)
            if m is None:
                continue
            present = {f.name for f in self.files(s)}
            stray = sorted(present - set(m.files))
            if stray:
                raise SampleError(
                    f"{self.folder(s) / stray[0]}: not listed in the {MANIFEST_NAME} of its "
                    f"folder ({len(stray)} such file(s)): a stray file, not of this set; move "
                    "it out of the folder or write the set again"
                )
            gone = [n for n in m.files if n not in present]
            if gone:
                raise SampleError(
                    f"{self.folder(s)}: {len(gone)} file(s) its {MANIFEST_NAME} lists are "
                    f"missing, e.g. {gone[0]}: the set is incomplete; restore them or write "
                    "the set again"
                )

    def check_disjoint(self) -> None:
        """Refuse a split set whose splits share a file name or a time step (leakage between
        training and evaluation), naming both splits and the first shared one."""
        seen: dict[str, str] = {}
        for s in self.splits:
            m = self.manifest(s)
            for f in self.files(s):
                entry = m.files.get(f.name) if m is not None else None
                keys = [f"file name {f.name}"]
                if entry is not None and entry.time:
                    keys.append(f"time {entry.time}")
                for key in keys:
                    if key in seen and seen[key] != s:
                        raise SampleError(
                            f"{self.root}: {key} is in both {seen[key]}/ and {s}/: the splits "
                            "must not share time steps (leakage); write the set again"
                        )
                    seen[key] = s

    # --- description ----------------------------------------------------------------------------

    @property
    def channels(self) -> tuple[str, ...]:
        """Channel names of the files, in order."""
        m = self.manifest(self._first_split())
        if m is not None and m.channels:
            return tuple(m.channels)
        return inspect_sample(self._first_file()).channels

    @property
    def grid(self) -> tuple[int, int]:
        """(H, W) of the files."""
        m = self.manifest(self._first_split())
        if m is not None and m.grid:
            return tuple(m.grid)
        return inspect_sample(self._first_file()).shape

    def class_counts(self, split: str | None = "train") -> np.ndarray | None:
        """Pixels of each class over ``split``'s files (from the manifest, else ``stats.h5``
        for the training split; ``None`` when neither has them)."""
        m, files = self.manifest(split), self.files(split)
        if m is not None and all(f.name in m.files and m.files[f.name].class_counts for f in files):
            return np.sum([m.files[f.name].class_counts for f in files], axis=0).astype(np.int64)
        if split in ("train", None) and self.stats_path.is_file():
            return self.stats().class_counts
        return None

    def _first_split(self) -> str | None:
        return next((s for s in self.splits if self.files(s)), None)

    def _first_file(self) -> Path:
        files = self.files(self._first_split())
        if not files:
            raise SampleError(f"{self.root}: no sample files ({SAMPLE_GLOB})")
        return files[0]

    # --- statistics ---------------------------------------------------------------------------

    @property
    def stats_path(self) -> Path:
        """``stats.h5`` of the set: in the root; for a flat folder, in it or its parent."""
        here = self.root / STATS_NAME
        if self.splits or here.is_file():
            return here
        parent = self.root.parent / STATS_NAME
        return parent if parent.is_file() else here

    def stats(self) -> Stats:
        """The statistics, checked: finite, of these channels in this order, and of these
        training files (when both record a digest)."""
        path = self.stats_path
        stats = read_stats(path)
        stats.check_channels(self.channels, where=str(path))
        expected = self._summarised_digest()
        if stats.summarises and expected and stats.summarises != expected:
            raise SampleError(
                f"{path}: summarises other files than {self.folder('train')} (digest "
                f"{stats.summarises[:12]}..., the files' {expected[:12]}...): recompute it"
            )
        return stats

    def _summarised_digest(self) -> str | None:
        return self.digest("train")


class StagedSet(SampleSet):
    """A node's staged copy of a sample set (written by :mod:`climnb.data.staging`).

    ``files("train")`` and ``files("validation")`` give ``local_rank``'s files in training
    order (training files repeat: they are drawn with replacement); nothing outside the node
    folder is opened.
    """

    def __init__(self, root: PathLike, *, local_rank: int = 0):
        super().__init__(root)
        self.splits = ()
        self.local_rank = local_rank
        m = self.manifest()
        if m is None or "ranks" not in m.extra:
            raise SampleError(
                f"{self.root}: no staged {MANIFEST_NAME} with rank lists (was this node staged? "
                "run `climnb stage` first)"
            )
        self.node = m.extra.get("node")
        self.ranks: dict = m.extra["ranks"]
        self.ranks_per_node = int(m.extra.get("ranks_per_node", len(self.ranks["train"])))
        if str(local_rank) not in self.ranks["train"]:
            raise SampleError(
                f"{self.root}: staged for local ranks {', '.join(sorted(self.ranks['train']))}, "
                f"not {local_rank}"
            )

    @classmethod
    def open(
        cls, pattern: PathLike, *, node: int = 0, local_rank: int = 0, verify: bool = True
    ) -> StagedSet:
        """The staged set of ``node`` for ``local_rank``; ``pattern`` may hold ``{node}`` and
        ``{local_rank}`` (e.g. ``/local/scratch/{node}``).

        ``verify`` (default): before anything is read for training, hash what this rank will
        read (its distinct training and validation files and ``stats.h5``) and compare with
        the staged manifest, so a copy damaged on node-local storage (flipped bytes, a file
        rewritten) is refused here, naming the file, and not trained on. The cost: one read
        of those bytes and SHA-256 over them, once per job: 0.2 s per full-size 57 MB file at
        the 0.28 GB/s measured on a loaded 2-core machine (``hashlib``, in memory; an idle core
        with SHA extensions does several times more; ``benchmarks/bench_pipeline.py`` measures
        it), so ~2.5 min for a rank's 750 distinct full-size files there, seconds at toy size.
        ``verify=False`` skips it.
        """
        folder = resolve_folder(pattern, node=node, local_rank=local_rank)
        if not folder.is_dir():
            raise SampleError(f"{folder}: no staged set here (pattern {pattern}, node {node})")
        staged = cls(folder, local_rank=local_rank)
        if verify:
            staged.verify_reads()
        return staged

    @classmethod
    def for_rank(
        cls,
        pattern: PathLike,
        *,
        rank: int,
        local_size: int,
        local_rank: int | None = None,
        verify: bool = True,
    ) -> StagedSet:
        """The staged set of global ``rank`` when each node runs ``local_size`` ranks in
        order (node = rank // local_size), as mpirun and srun place them by default.

        ``local_size`` is the ranks per node the set was staged for: ``hvd.local_size()`` on
        real nodes; where one machine simulates several nodes, the staging's
        ``ranks_per_node`` (then ``local_rank`` defaults to ``rank % local_size`` too).
        ``verify``: as in :meth:`open`.
        """
        local_rank = rank % local_size if local_rank is None else local_rank
        staged = cls.open(pattern, node=rank // local_size, local_rank=local_rank, verify=False)
        if staged.ranks_per_node != local_size:
            raise SampleError(
                f"{staged.root}: staged for {staged.ranks_per_node} ranks per node, the job runs "
                f"{local_size}: stage again with --ranks-per-node {local_size}"
            )
        if verify:
            staged.verify_reads()
        return staged

    def __repr__(self) -> str:
        return (
            f"StagedSet({str(self.root)!r}: node {self.node}, local rank {self.local_rank}, "
            f"train {len(self.files('train'))}, validation {len(self.files('validation'))})"
        )

    def files(self, split: str | None = "train") -> list[Path]:
        """This rank's files of ``split`` in training order (``None``: every file staged)."""
        if split is None:
            return sorted(self.root / n for n in self.manifest().files)
        names = self.ranks.get(split, {}).get(str(self.local_rank), [])
        return [self.root / n for n in names]

    def split(self, **_) -> Split:
        """This rank's files: train and validation (test is never staged)."""
        return Split(tuple(self.files("train")), tuple(self.files("validation")), ())

    def digest(self, split: str | None = "train") -> str | None:
        return None  # a node holds a draw of the files, not the set

    def verify(self, split: str | None = "train", files=None) -> None:
        """Hash this rank's files of ``split`` (``None``: all staged) against the manifest
        (each file once, though training draws repeat)."""
        m = self.manifest()
        for f in dict.fromkeys(self.files(split) if files is None else files):
            try:
                m.check(f)
            except ManifestError as err:
                raise SampleError(str(err)) from None

    def verify_reads(self) -> None:
        """Hash everything this rank reads (its training and validation files, each once,
        and ``stats.h5``) against the staged manifest; raise :class:`SampleError` naming the
        first file that differs."""
        start = time.perf_counter()
        files = list(dict.fromkeys(self.files("train") + self.files("validation")))
        self.verify(files=files)
        m, nbytes = self.manifest(), sum(f.stat().st_size for f in files)
        if m.stats is not None:
            entry, path = m.stats[1], self.stats_path
            got = sha256_file(path) if path.is_file() else "missing"
            if got != entry.sha256:
                raise SampleError(
                    f"{path}: content differs from the staged manifest (SHA-256 {got[:12]}..., "
                    f"manifest {entry.sha256[:12]}...): stage again"
                )
            nbytes += path.stat().st_size
        log.info(
            "%s: verified %d files (%.1f MB) of local rank %d in %.2f s",
            self.root,
            len(files),
            nbytes / 1e6,
            self.local_rank,
            time.perf_counter() - start,
        )

    @property
    def stats_path(self) -> Path:
        return self.root / STATS_NAME

    def class_counts(self, split: str | None = "train") -> np.ndarray | None:
        """Pixels of each class over the whole source training set (from ``stats.h5``)."""
        return self.stats().class_counts if self.stats_path.is_file() else None

    def _summarised_digest(self) -> str | None:
        return self.manifest().extra.get("source", {}).get("train_digest")

    def _first_file(self) -> Path:
        files = self.files(None)
        if not files:
            raise SampleError(f"{self.root}: no staged sample files")
        return files[0]

    def _first_split(self) -> None:
        return None


def resolve_folder(pattern: PathLike, *, node: int = 0, local_rank: int = 0) -> Path:
    """``pattern`` with ``{node}`` and ``{local_rank}`` filled in.

    >>> resolve_folder("/local/{node}/gpu{local_rank}", node=3, local_rank=1).as_posix()
    '/local/3/gpu1'
    """
    try:
        return Path(str(pattern).format(node=node, local_rank=local_rank))
    except (KeyError, IndexError, ValueError) as err:
        raise ValueError(
            f"{pattern}: only {{node}} and {{local_rank}} may appear in braces ({err!r})"
        ) from None


# --- writing ------------------------------------------------------------------------------------


def write_sample_set(
    ds,
    labels,
    out: PathLike,
    *,
    fractions: tuple[float, float, float] = (0.8, 0.1, 0.1),
    method: str = "blocks",
    gap_hours: float = 24.0,
    seed: int = 0,
    run: int = 1,
    channels: Sequence[str] = CHANNEL_NAMES,
    overwrite: bool = False,
    progress: Progress | None = None,
    names: Sequence[str] | None = None,
    soft=None,
    expert: Sequence[dict] | None = None,
) -> SampleSet:
    """Write ``ds`` as a split sample set in ``out``: the files, their manifests and stats.h5.

    Parameters
    ----------
    ds : xarray.Dataset with the channels on (time, lat, lon) (may be lazy). Its ``time``
        may repeat (one sample per labeller of a step, :mod:`climnb.labels.expert`): the
        split works on the distinct times, so all samples of a step go to one set.
    labels : (time, lat, lon) class indices, or the name of a variable of ``ds``. Its
        attribute ``climnb_config`` (the labeller's settings as JSON, which
        :func:`climnb.labels.label_dataset` sets) is recorded in ``stats.h5``, whence training
        copies it into the model bundle.
    out : the set's folder. A non-empty ``out`` is refused unless ``overwrite``; either way the
        set is written into a folder beside it and swapped in at the end, so a reader never
        sees a half-written or mixed set, and an interrupted run leaves ``out`` as it was.
    overwrite : replace a set in ``out``, and discard what an interrupted run with other
        inputs or options left beside ``out``.

    Resuming: the folder beside ``out`` is named by a digest of the inputs and options (the
    data's dask token, which covers each input file's path and modification time, or the
    values of in-memory data; the steps of each split; run; channels; labels). A rerun with
    the same ones continues in it (:func:`climnb.io.samples.write_samples` with
    ``resume=True``: files written before the kill are kept once their SHA-256 matches the
    journal, the rest written; statistics are computed again), then swaps. What a run with
    other inputs or options left is never mixed in: it is refused, or with ``overwrite``
    removed.
    fractions, method, gap_hours, seed : the split (:func:`climnb.io.split.split_steps`):
        contiguous time blocks with >= ``gap_hours`` between sets by default.
    run : the ``N`` of the file names.
    channels : channels to write, in order.
    progress : called with 1 after each file written and each file summarised.
    names : the samples' file names (default :func:`climnb.io.samples.sample_names`, one per
        time); given names must be unique.
    soft : (time, class_id, lat, lon) per-class shares, a soft target stored beside
        ``labels`` (:func:`climnb.io.samples.write_samples`).
    expert : per sample, where its target came from, for the manifests (``labeller``, or
        ``labellers`` and ``consensus``).
    """
    out = Path(out)
    labels, label_name, names = _checked_inputs(
        ds, labels, out, run=run, channels=channels, names=names, overwrite=overwrite
    )
    parts = split_steps(
        ds.time.values if has_dates(ds) else None,
        n=ds.sizes["time"],
        fractions=fractions,
        method=method,
        gap_hours=gap_hours,
        seed=seed,
    )
    key = run_key(
        ds, labels, label_name, parts, run=run, channels=channels, extra=(names, soft, expert)
    )
    tmp = partial_folder(out, key, overwrite=overwrite)
    resume = tmp.is_dir()
    if resume:
        log.warning("%s: resuming the interrupted run in %s", out, tmp)
    record = {"key": key, "out": str(out), "pid": os.getpid()}
    samples = {"run": run, "channels": channels, "progress": progress, "resume": resume}
    _write_into(tmp, record, ds, labels, parts, names=names, soft=soft, expert=expert, **samples)
    # a kill or Ctrl-C (and a full disk once files are written) leaves ``tmp`` to resume
    (tmp / RUN_RECORD).unlink()
    swap_in(tmp, out)
    ss = SampleSet.open(out)
    log.info("wrote %r", ss)
    return ss


def _write_into(tmp: Path, record: dict, ds, labels, parts, **samples) -> None:
    """The whole set in the folder ``tmp`` beside the output: the run's record, the splits'
    files (:func:`_write_splits`), a check that no step is in two sets, and the statistics.
    Bad input removes ``tmp``; an ``OSError`` keeps the files finished, for the rerun."""
    try:
        tmp.mkdir(parents=True, exist_ok=True)
        (tmp / RUN_RECORD).write_text(json.dumps(record))
        _write_splits(tmp, ds, labels, parts, **samples)
        written = SampleSet(tmp)
        written.check_disjoint()  # no step in two sets, whatever the options
        _write_stats(written, samples["progress"], _label_config(labels))
    except ValueError:  # bad input (SampleError, a damaged Zarr chunk, ...): a rerun cannot
        # succeed with it, nothing worth keeping
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    except OSError as err:  # a full disk, ...: keep finished files for the rerun, if any
        if not any(tmp.glob(f"*/{SAMPLE_GLOB}")):
            shutil.rmtree(tmp, ignore_errors=True)
        if err.filename is None:  # a failed write does not name its file
            raise OSError(err.errno, err.strerror, str(tmp)) from err
        raise


def _checked_inputs(ds, labels, out: Path, *, run, channels, names, overwrite):
    """``(labels as a DataArray, its name, the samples' file names)``, once what killed runs
    left beside ``out`` is gone and ``out``, the labels, channels and names are checked."""
    if run < 0:
        raise SampleError(f"run must be >= 0 (the N of data-...-N.h5), got {run}")
    clean_leftovers(out)
    check_sample_folder(out, overwrite=overwrite)
    label_name = labels if isinstance(labels, str) else labels.name
    if isinstance(labels, str):
        if labels not in ds:
            raise SampleError(f"data set has no label variable {labels!r}")
        labels = ds[labels]
    missing = [c for c in channels if c not in ds]
    if missing:
        raise SampleError(f"{source_of(labels)}: lacks channel(s) {', '.join(missing)}")
    if ds.sizes.get("time", 0) == 0:
        raise SampleError("the data have no time steps: nothing to write")
    if names is None:
        return labels, label_name, sample_names(ds, run)  # clashing names refused before work
    names = list(names)
    twice = next((n for i, n in enumerate(names) if n in names[:i]), None)
    if len(names) != ds.sizes["time"] or twice:
        raise SampleError(
            f"{out}: {len(names)} sample names for {ds.sizes['time']} samples"
            + (f", {twice} twice" if twice else "")
        )
    return labels, label_name, names


def _write_splits(folder: Path, ds, labels, parts, *, names, soft, expert, **samples) -> None:
    """The sample files of each split in its folder under ``folder`` (``samples``:
    :func:`climnb.io.samples.write_samples`'s ``run``, ``channels``, ``progress``, ``resume``)."""
    for split, idx in zip(SPLITS, parts, strict=True):
        (folder / split).mkdir(exist_ok=True)
        if len(idx):
            sel = {"time": idx}
            write_samples(
                ds.isel(sel),
                labels.isel(sel),
                folder / split,
                names=[names[i] for i in idx],  # unique across the splits
                soft=None if soft is None else soft.isel(sel),
                expert=None if expert is None else [expert[i] for i in idx],
                **samples,
            )


def check_sample_folder(
    out: PathLike,
    *,
    overwrite: bool = False,
    inputs: PathLike | Sequence[PathLike] = (),
    option: str = "out",
) -> None:
    """Refuse ``out`` for a new sample set before any work, by the output rule of
    :func:`climnb.io.outputs.check_output` for a folder: a file; a non-empty folder unless
    ``overwrite``; and, even then, a folder holding anything but a sample set (an input
    file, say), which replacing the set would delete. Raises :class:`SampleError`."""
    try:
        check_output(
            out,
            inputs,
            kind="folder",
            option=option,
            overwrite=overwrite,
            contents=(*SPLITS, STATS_NAME),
            what="a sample set",
        )
    except OutputError as err:
        raise SampleError(str(err)) from None


def _label_config(labels) -> dict | None:
    """The labeller's settings recorded on ``labels`` (attribute ``climnb_config``), if any."""
    text = labels.attrs.get("climnb_config")
    try:
        config = json.loads(text) if isinstance(text, str) else None
    except ValueError:
        log.warning("%s: attribute climnb_config is not JSON: not recorded", source_of(labels))
        return None
    return config if isinstance(config, dict) else None


def _write_stats(ss: SampleSet, progress: Progress | None, label_config=None) -> None:
    files = ss.files("train")
    if not files:
        raise SampleError(f"{ss.root}: no training files to compute statistics from")
    digest = ss.digest("train")
    stats = compute_stats(files, progress=progress)
    path = write_stats(stats, ss.stats_path, summarises=digest, label_config=label_config)
    m = ss.manifest("train")
    entry = Entry(bytes=path.stat().st_size, sha256=sha256_file(path))
    m.with_files({}, stats=(f"../{STATS_NAME}", entry)).write(ss.folder("train"))


def write_heldout(
    sample_set: PathLike | SampleSet,
    fields: PathLike,
    out: PathLike,
    *,
    split: str = "test",
    labels_out: PathLike | None = None,
) -> Path:
    """Write the steps of ``fields`` that form ``split`` of a sample set to ``out`` (NetCDF).

    The held-out block of an honest evaluation: a split set's ``test`` steps are a time block
    that training and validation never saw, at least the split's gap away from them
    (:func:`climnb.io.split.split_steps`). ``fields`` is the file the set was written from
    (with ``truth`` where it has one). ``labels_out``: also write its ``labels`` (the teacher's
    masks) of those steps there.

    Raises
    ------
    ValueError
        When the set has no such split, its files carry no times, or ``fields`` lacks some of
        its steps.
    """
    import xarray as xr

    ss = sample_set if isinstance(sample_set, SampleSet) else SampleSet.open(sample_set)
    if split not in ss.splits or not ss.files(split):
        raise ValueError(f"{ss.root}: no {split!r} split to hold out")
    times = ss.times(split)
    if times is None:
        raise ValueError(f"{ss.folder(split)}: sample files without times: cannot find the steps")
    with xr.open_dataset(fields) as ds:
        have = np.isin(times, ds.time.values.astype("datetime64[s]"))
        if not have.all():
            raise ValueError(
                f"{fields} lacks {int((~have).sum())} of the {times.size} {split} steps of "
                f"{ss.root}, e.g. {times[~have][0]}: not the fields the set was written from"
            )
        block = ds.sel(time=times.astype(ds.time.dtype)).load()
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(out) as tmp:
        block.drop_vars("labels", errors="ignore").to_netcdf(tmp)
    if labels_out is not None and "labels" in block:
        with atomic_path(Path(labels_out)) as tmp:
            block[["labels"]].to_netcdf(tmp)
    log.info("wrote the %d %s steps of %s to %s", times.size, split, ss.root, out)
    return out


def __getattr__(name: str):
    if name == "check_output":  # the name before climnb.io.files.check_output was the one rule
        warnings.warn(
            "climnb.io.sampleset.check_output is now check_sample_folder; import that",
            DeprecationWarning,
            stacklevel=2,
        )
        return check_sample_folder
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
