"""A sample set on disk, read: its files, splits, manifests, digests and statistics.

:class:`SampleSet` opens a split set (``train/``, ``validation/``, ``test/``) or a flat folder
of ``data-*.h5``; the layout is described in :mod:`climnb.io.sampleset`, which writes it.

Examples
--------
>>> import tempfile, pathlib
>>> from climnb.data.synthetic import make_dataset
>>> from climnb.io.samples import write_samples
>>> folder = pathlib.Path(tempfile.mkdtemp())
>>> ds, _ = make_dataset(n_time=3, seed=0)
>>> _ = write_samples(ds, "truth", folder)
>>> ss = SampleSet.open(folder)
>>> ss.splits, len(ss.files()), ss.grid
((), 3, (96, 144))
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from climnb.io.manifest import MANIFEST_NAME, Manifest, ManifestError
from climnb.io.samples import SAMPLE_GLOB, SampleError, inspect_sample
from climnb.io.split import SPLITS, Split, split_files, split_steps
from climnb.io.stats import STATS_NAME, Stats, read_stats

__all__ = ["SampleSet"]

log = logging.getLogger(__name__)

PathLike = str | os.PathLike


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
