"""The staging plan: which training and validation files each rank of each node gets.

The same on every rank for the same inputs (a seeded draw): ``draw="replacement"`` (the
paper's: each rank draws ``samples_per_rank`` files at random) or ``"shard"`` (a seeded
permutation dealt out over the ranks, each file to one rank); the validation files are shared
out over the ranks. :mod:`climnb.data.staging` carries the plan out.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from climnb.io.samples import SampleError

__all__ = ["DRAWS", "StagingPlan", "check_draw", "files_per_rank", "plan_staging"]


#: How staging gives each rank its training files (:class:`StagingConfig` ``draw``).
DRAWS = ("replacement", "shard")


def check_draw(draw: str) -> str:
    """``draw`` if it is one of :data:`DRAWS`, else a ValueError naming them."""
    if draw not in DRAWS:
        raise ValueError(
            f"draw (--draw) must be one of {', '.join(map(repr, DRAWS))}, got {draw!r}"
        )
    return draw


def files_per_rank(n_files: int, ranks: int, samples_per_rank: int, draw: str) -> list[int]:
    """How many training files each of ``ranks`` ranks gets from ``n_files``.

    >>> files_per_rank(370, 2, 250, "shard"), files_per_rank(5, 2, 250, "shard")
    ([185, 185], [3, 2])
    >>> files_per_rank(370, 2, 250, "replacement")
    [250, 250]
    """
    if check_draw(draw) == "replacement":
        return [samples_per_rank] * ranks
    return [min(samples_per_rank, len(range(g, n_files, ranks))) for g in range(ranks)]


@dataclass(frozen=True)
class StagingPlan:
    """Which files go where: the same on every rank for the same inputs.

    Attributes
    ----------
    names : file names: the training files (sorted), the validation files, then the extra
        ``stats.h5``.
    sizes : their sizes in bytes.
    rank_files : ``rank_files[node][local_rank]``: indices into ``names``, in training order.
    extra : indices of files every node gets (``stats.h5``).
    rank_validation : ``rank_validation[node][local_rank]``: the rank's validation files.
    """

    names: tuple[str, ...]
    sizes: tuple[int, ...]
    rank_files: tuple[tuple[tuple[int, ...], ...], ...]
    extra: tuple[int, ...] = ()
    rank_validation: tuple[tuple[tuple[int, ...], ...], ...] = ()

    def needs(self, node: int, ranks: Sequence[int] | None = None) -> set[int]:
        """Indices of the files ``node`` stores (for ``ranks``: the files of those ranks)."""
        ranks = range(len(self.rank_files[node])) if ranks is None else ranks
        files = {i for r in ranks for i in self.rank_files[node][r]}
        if self.rank_validation:
            files |= {i for r in ranks for i in self.rank_validation[node][r]}
        return files | set(self.extra)


def plan_staging(
    names: Sequence[str],
    sizes: Sequence[int],
    *,
    n_nodes: int,
    ranks_per_node: int,
    samples_per_rank: int,
    seed: int = 0,
    extra: Sequence[tuple[str, int]] = (),
    validation: Sequence[tuple[str, int]] = (),
    draw: str = "replacement",
) -> StagingPlan:
    """Draw ``samples_per_rank`` files with replacement for every rank of every node (with
    ``draw="shard"``: deal a seeded permutation of the files out over the ranks, global rank
    ``g`` taking its ``g``-th, ``g + ranks``-th, ... up to ``samples_per_rank`` of them); share
    the ``validation`` files out over the ranks (global rank ``g`` gets ``validation[g::n]``).

    >>> plan = plan_staging(["a", "b", "c"], [1, 1, 1], n_nodes=2, ranks_per_node=1,
    ...                     samples_per_rank=2, seed=0)
    >>> [len(r) for node in plan.rank_files for r in node]
    [2, 2]
    """
    if not names:
        raise SampleError("nothing to stage: the file list is empty")
    for what, v in (
        ("n_nodes", n_nodes),
        ("ranks_per_node", ranks_per_node),
        ("samples_per_rank", samples_per_rank),
    ):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
            flag = "--" + what.replace("_", "-").replace("n-nodes", "nodes")
            raise ValueError(f"{what} must be at least 1 (a whole number; {flag}), got {v!r}")
    n, n_val, world = len(names), len(validation), n_nodes * ranks_per_node
    rank_files = _draw(n, n_nodes, ranks_per_node, samples_per_rank, seed, check_draw(draw))
    rank_validation = (
        tuple(
            tuple(
                tuple(range(n + node * ranks_per_node + r, n + n_val, world))
                for r in range(ranks_per_node)
            )
            for node in range(n_nodes)
        )
        if n_val
        else ()
    )
    everything = [*zip(names, sizes, strict=True), *validation, *extra]
    return StagingPlan(
        names=tuple(e[0] for e in everything),
        sizes=tuple(int(e[1]) for e in everything),
        rank_files=rank_files,
        extra=tuple(range(n + n_val, len(everything))),
        rank_validation=rank_validation,
    )


def _draw(n: int, n_nodes: int, per_node: int, samples: int, seed: int, draw: str):
    """``rank_files`` of :func:`plan_staging`: indices into ``n`` files per node and local rank."""
    rng = np.random.default_rng(seed)
    if draw == "shard":
        order = rng.permutation(n)
        world = n_nodes * per_node
        return tuple(
            tuple(
                tuple(int(i) for i in order[node * per_node + r :: world][:samples])
                for r in range(per_node)
            )
            for node in range(n_nodes)
        )
    return tuple(
        tuple(tuple(int(i) for i in rng.integers(0, n, samples)) for _ in range(per_node))
        for _ in range(n_nodes)
    )
