"""A staged folder's manifest: what a rerun keeps, the manifest that closes a run, and the
training files it lists.

A staged file is kept (:func:`verified_files`) only when the folder's manifest or journal
records the shared file's current content and the file has its recorded size (and, with
``verify``, still hashes to its recorded digest). :func:`finish_store` writes the manifest:
every file's SHA-256, each local rank's files in training order and the source it came from
(:class:`climnb.io.sampleset.StagedSet` reads it).
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from climnb.data.stageplan import StagingPlan
from climnb.io.manifest import MANIFEST_NAME, Entry, Manifest, sha256_file
from climnb.io.samples import SAMPLE_GLOB
from climnb.io.sampleset import STATS_NAME, StagedSet

__all__ = ["finish_store", "staged_files", "verified_files"]

log = logging.getLogger(__name__)


def verified_files(
    folder: Path, plan: StagingPlan, rows, needed: set[int], verify: bool
) -> set[int]:
    """Indices of the needed files already in ``folder``, copies of the current shared ones."""
    try:
        m = Manifest.read(folder)
    except ValueError:
        log.warning("%s: unreadable manifest, staging again", folder)
        # gone, so that the folder's manifest is written afresh from what this run stages
        (folder / MANIFEST_NAME).unlink(missing_ok=True)
        return set()
    if m is None:
        return set()
    entries = _staged_entries(m)
    ok = set()
    for i in needed:
        e, path = entries.get(plan.names[i]), folder / plan.names[i]
        if e is None or e.source != rows[i][4]:  # not there, or the shared file changed since
            continue
        if not path.is_file() or path.stat().st_size != e.bytes:
            continue
        if verify and sha256_file(path) != e.sha256:
            log.warning("%s: checksum mismatch, staging it again", path)
            continue
        ok.add(i)
    return ok


def _staged_entries(m: Manifest) -> dict[str, Entry]:
    """A staged folder's entries, ``stats.h5`` included (kept under ``stats`` once finished)."""
    return {**({STATS_NAME: m.stats[1]} if m.stats else {}), **m.files}  # the journal is newer


def finish_store(folder: Path, plan: StagingPlan, node: int, ranks, source, config) -> None:
    """Write the manifest of a staged folder; remove sample files no rank of it needs."""
    entries = _staged_entries(Manifest.read(folder) or Manifest())
    needed = {plan.names[i] for i in plan.needs(node, ranks)}
    for p in folder.glob(SAMPLE_GLOB):
        if p.name not in needed:
            p.unlink()
    files = {n: entries[n] for n in sorted(needed) if n != STATS_NAME}
    stats = (STATS_NAME, entries[STATS_NAME]) if STATS_NAME in needed else None

    def names(lists):
        return {str(r): [plan.names[i] for i in lists[node][r]] for r in ranks} if lists else {}

    Manifest(
        files=files,
        channels=source.channels,
        grid=source.grid,
        stats=stats,
        extra={
            "node": node,
            "ranks_per_node": config.ranks_per_node,
            "ranks": {"train": names(plan.rank_files), "validation": names(plan.rank_validation)},
            "source": {"root": str(config.source), "train_digest": source.train_digest},
        },
    ).write(folder)


def staged_files(node_dir: str | os.PathLike, local_rank: int = 0) -> list[Path]:
    """The training files staged for ``local_rank`` in ``node_dir``, in training order (with
    repeats); see :class:`climnb.io.sampleset.StagedSet` for the rest."""
    return StagedSet(node_dir, local_rank=local_rank).files("train")
