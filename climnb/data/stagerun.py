"""A staging run, on every process (:func:`stage`).

Rank 0 lists the shared set (:mod:`climnb.data.stagesource`) and broadcasts it; every rank
derives the same plan (:mod:`climnb.data.stageplan`), claims its node-local folders
(:mod:`climnb.data.stagedest`), keeps what a previous run staged intact
(:mod:`climnb.data.stagemanifest`), exchanges the rest (:mod:`climnb.data.exchange`) and writes
each folder's manifest; the counts of every process make one :class:`StagingReport`.
"""

from __future__ import annotations

import contextlib
import time
from collections import Counter
from collections.abc import Callable

from climnb.data.exchange import Reader, SerialComm, exchange, owner, read_shared
from climnb.data.stageconfig import StagingConfig, StagingReport
from climnb.data.stagedest import claim_stores, new_folders
from climnb.data.stagemanifest import finish_store, verified_files
from climnb.data.stageplan import StagingPlan, plan_staging
from climnb.data.stagesource import list_source

__all__ = ["stage"]


def stage(
    config: StagingConfig,
    comm=None,
    *,
    read: Reader = read_shared,
    progress: Callable[[int], None] | None = None,
) -> StagingReport:
    """Stage ``config.source`` onto the node-local folders; every rank gets the report.

    Parameters
    ----------
    config : :class:`StagingConfig`.
    comm : an mpi4py communicator (one process per node), or ``None`` to stage every node from
        this process.
    read : the function that reads a shared file into a byte buffer (tests count its calls).
    progress : called with 1 after each file this process writes or finds intact.
    """
    comm = comm if comm is not None else SerialComm()
    t0 = time.perf_counter()
    source = list_source(config) if comm.rank == 0 else None
    source = comm.bcast(source, root=0)
    if isinstance(source, Exception):
        raise source
    n_nodes = comm.size if config.n_nodes is None else config.n_nodes
    mine = [n for n in range(n_nodes) if owner(n, comm.size) == comm.rank]
    plan = plan_staging(
        [r[0] for r in source.train],
        [r[2] for r in source.train],
        n_nodes=n_nodes,
        ranks_per_node=config.ranks_per_node,
        samples_per_rank=config.samples_per_rank,
        seed=config.seed,
        extra=[r[0:3:2] for r in source.extra],
        draw=config.draw,
        validation=[r[0:3:2] for r in source.validation],
    )
    made = new_folders(config, mine)
    try:
        counts = _stage_stores(config, comm, mine, plan, source, read, progress)
    except BaseException:  # a full disk, bad bytes, ...: no empty folder of ours stays behind
        for d in made:
            with contextlib.suppress(OSError):
                d.rmdir()  # only when empty: files staged before stay for the rerun
        raise
    counts["seconds"] = time.perf_counter() - t0
    return _total(comm.allgather(counts), plan, n_nodes)


def _stage_stores(config, comm, mine, plan, source, read, progress) -> dict:
    stores = claim_stores(config, comm, mine)
    rows = source.rows()
    have = {
        (n, d): verified_files(d, plan, rows, plan.needs(n, rs), config.verify)
        for n in mine
        for d, rs in config.stores(n).items()
    }
    missing = {key: sorted(plan.needs(key[0], stores[key]) - have[key]) for key in have}
    all_missing = {k: m for part in comm.allgather(missing) for k, m in part.items()}
    if progress is not None:
        progress(sum(len(plan.needs(k[0], stores[k]) & v) for k, v in have.items()))
    counts = exchange(plan, rows, comm, all_missing, read, progress)
    for (n, d), ranks in stores.items():
        finish_store(d, plan, n, ranks, source, config)
    counts["files_skipped"] = sum(len(have[k] & plan.needs(k[0], stores[k])) for k in have)
    return counts


def _total(parts: list[dict], plan: StagingPlan, n_nodes: int) -> StagingReport:
    reads: Counter = Counter()
    for p in parts:
        reads.update(p["reads"])
    needed = set().union(*(plan.needs(n) for n in range(n_nodes)))
    return StagingReport(
        bytes_shared=sum(plan.sizes),
        bytes_needed=sum(plan.sizes[i] for i in needed),
        bytes_read=sum(p["bytes_read"] for p in parts),
        bytes_written=sum(p["bytes_written"] for p in parts),
        bytes_sent=sum(p["bytes_sent"] for p in parts),
        files_written=sum(p["files_written"] for p in parts),
        files_skipped=sum(p["files_skipped"] for p in parts),
        seconds=max(p["seconds"] for p in parts),
        reads=dict(sorted(reads.items())),
    )
