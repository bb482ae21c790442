"""The shared sample set as staging reads it, on rank 0, before anything is staged.

:func:`list_source` opens the set and lists each file to stage with its size and content digest
(from the set's manifests): the training files (or a flat folder's), the validation files and
``stats.h5``. An incomplete set, splits that share a time step, a file whose size is not its
manifest's, a ``stats.h5`` of other channels or an absurd ``samples_per_rank`` is refused here;
the error is returned, not raised, so that every rank raises it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from climnb.data.stageconfig import StagingConfig
from climnb.io.samples import SampleError
from climnb.io.sampleset import STATS_NAME, SampleSet
from climnb.io.stats import read_stats

__all__ = ["MAX_DRAWS_PER_FILE", "Source", "list_source"]


@dataclass(frozen=True)
class Source:
    """The shared set as rank 0 saw it: what every rank needs to plan and check."""

    train: list  # (name, path, size, sha256 or None, identity)
    validation: list
    extra: list
    channels: tuple[str, ...] | None
    grid: tuple[int, int] | None
    train_digest: str | None

    def rows(self) -> list:
        return [*self.train, *self.validation, *self.extra]


def list_source(config: StagingConfig) -> Source | Exception:
    """The shared set of ``config``, checked; the error instead when it is refused."""
    try:
        ss = SampleSet.open(config.source)
        ss.check_complete()  # the files its manifest lists, all there, and no stray
        ss.check_disjoint()  # no split shares a file name or a time step with another
        pool = "train" if ss.splits else None
        train = _rows(ss, pool)
        if not train:
            raise SampleError(f"{ss.folder(pool)}: no sample files to stage")
        _check_draws(config, len(train), ss.folder(pool))
        validation = _rows(ss, "validation") if "validation" in ss.splits else []
        stats = Path(config.stats) if config.stats else ss.stats_path
        extra = []
        if config.stats or stats.is_file():  # a stats file given must be there and readable
            read_stats(stats).check_channels(ss.channels, where=str(stats))
            m = ss.manifest(pool)
            known = m.stats[1].sha256 if m and m.stats and not config.stats else None
            extra = [(STATS_NAME, str(stats), stats.stat().st_size, known, _identity(stats, known))]
        return Source(
            train,
            validation,
            extra,
            ss.channels,
            ss.grid,
            ss.digest(pool) if pool else ss.digest(None),
        )
    except (SampleError, OSError, ValueError) as err:  # every rank raises it, not only rank 0
        return err


MAX_DRAWS_PER_FILE = 1000  # a rank drawing each file this often more is surely a typo


def _check_draws(config: StagingConfig, n_files: int, folder: Path) -> None:
    """Refuse an absurd ``samples_per_rank`` before planning (10 million names would make a
    manifest of hundreds of MB): more than :data:`MAX_DRAWS_PER_FILE` draws of each file."""
    limit = MAX_DRAWS_PER_FILE * n_files
    if config.samples_per_rank > limit:
        raise ValueError(
            f"--samples-per-rank (samples_per_rank) {config.samples_per_rank} draws each of the "
            f"{n_files} training files of {folder} about "
            f"{config.samples_per_rank // n_files} times per rank; at most {limit} "
            f"({MAX_DRAWS_PER_FILE} per file) is allowed (the paper used 250)"
        )


def _rows(ss: SampleSet, split: str | None) -> list:
    """(name, path, size, sha256, identity, expert fields) of each file of ``split``; a file
    whose size is not its manifest's (truncated or rewritten) is refused before anything is
    staged. The expert fields (the labeller of the sample, or the labellers and consensus
    rule) travel into the staged manifest."""
    m = ss.manifest(split)
    rows = []
    for f in ss.files(split):
        entry = m.files.get(f.name) if m else None
        sha = entry.sha256 if entry else None
        size = f.stat().st_size
        if entry and size != entry.bytes:
            raise SampleError(
                f"{f}: {size} bytes, its manifest says {entry.bytes}: truncated or changed "
                "since it was written; not staged"
            )
        expert = entry.expert_fields() if entry else {}
        rows.append((f.name, str(f), size, sha, _identity(f, sha), expert))
    return rows


def _identity(path: Path, sha: str | None) -> str:
    """What names a shared file's content: its manifest digest; for a foreign file without a
    manifest, its size and modification time (weaker: a same-size rewrite within the clock's
    resolution would pass)."""
    if sha:
        return sha
    st = path.stat()
    return f"size={st.st_size},mtime_ns={st.st_mtime_ns}"
