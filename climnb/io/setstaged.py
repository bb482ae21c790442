"""A node's staged copy of a sample set: the files its local ranks read, and nothing else.

:class:`StagedSet` is what :mod:`climnb.data.staging` writes on a node (the layout is described
in :mod:`climnb.io.sampleset`); training opens it from a folder pattern with ``{node}`` and
``{local_rank}`` placeholders (:func:`resolve_folder`), resolved per rank.
"""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path

import numpy as np

from climnb.io.manifest import MANIFEST_NAME, ManifestError, sha256_file
from climnb.io.samples import SampleError
from climnb.io.setread import SampleSet
from climnb.io.split import Split
from climnb.io.stats import STATS_NAME

__all__ = ["StagedSet", "resolve_folder"]

log = logging.getLogger(__name__)

PathLike = str | os.PathLike


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
