"""Staging on ipyparallel MPI engines (:func:`stage_on_engines`).

The engines fill the nodes in rank order, as training places its ranks; the first engine of
each node stages it (:func:`climnb.data.stagerun.stage` over a communicator of those engines),
so several engines per node (one per GPU) are fine.
"""

from __future__ import annotations

from climnb.data.stageconfig import StagingConfig, StagingReport
from climnb.data.stagerun import stage

__all__ = ["stage_on_engines"]


def _stage_on_engine(config: StagingConfig) -> dict | None:
    """On every engine: the first engine of each node stages it; the others return ``None``."""
    import dataclasses

    from mpi4py import MPI

    world = MPI.COMM_WORLD
    per_node, n_nodes = _engines_per_node(world, config.n_nodes)
    heads = world.Split(0 if world.rank % per_node == 0 else MPI.UNDEFINED, world.rank)
    if heads == MPI.COMM_NULL:
        return None
    try:
        report = stage(dataclasses.replace(config, n_nodes=n_nodes), heads)
    finally:
        heads.Free()
    return report.to_dict()


def _engines_per_node(world, n_nodes: int | None) -> tuple[int, int]:
    """(engines per node, nodes): ``n_nodes`` nodes (default: the engines' hosts) filled by
    the engines in rank order, as training places its ranks. Refused on every engine when the
    engines do not make whole nodes, or one node's engines run on several hosts."""
    import socket

    hosts = world.allgather(socket.gethostname())
    n_nodes = n_nodes or len(set(hosts))
    if world.size <= n_nodes:  # an engine per node, or one standing for several nodes
        return 1, n_nodes
    if world.size % n_nodes:
        raise ValueError(
            f"{world.size} engines do not make {n_nodes} nodes of equal size: start a "
            "multiple of the nodes' number of engines"
        )
    per_node = world.size // n_nodes
    for n in range(n_nodes):
        mine = sorted(set(hosts[n * per_node : (n + 1) * per_node]))
        if len(mine) > 1:
            raise ValueError(
                f"node {n} (engines of MPI ranks {n * per_node}..{(n + 1) * per_node - 1}) "
                f"runs on several hosts ({', '.join(mine)}): place {per_node} engines per "
                "host, in rank order"
            )
    return per_node, n_nodes


def stage_on_engines(view, config: StagingConfig) -> StagingReport:
    """Run :func:`stage` on ipyparallel MPI engines and return the report.

    One engine per node stages it: the engines fill ``config.n_nodes`` nodes (default: one
    per host the engines run on) in rank order, as training places its ranks, and the first
    engine of each node (its local rank 0) stages it, so several engines per node (one per
    GPU) are fine. ``view`` is a view on all the engines, e.g. ``client[:]`` of
    ``ipyparallel.Cluster(engines="mpi", n=ENGINES).start_and_connect_sync()``.
    """
    results = [r for r in view.apply_sync(_stage_on_engine, config) if r is not None]
    first = results[0]
    keep = {k: first[k] for k in StagingReport.__dataclass_fields__}
    return StagingReport(**keep)
