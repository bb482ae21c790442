"""The settings of a staging run (:class:`StagingConfig`) and what it did (:class:`StagingReport`).

:mod:`climnb.data.staging` describes the run; :func:`climnb.data.stagerun.stage` carries it out.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path

from climnb.data.stageplan import check_draw
from climnb.io.sampleset import resolve_folder

__all__ = ["StagingConfig", "StagingReport"]


@dataclass(frozen=True)
class StagingConfig:
    """Settings of a staging run.

    Attributes
    ----------
    source : the shared sample set: a set's root (its ``train/`` files are drawn from, its
        ``validation/`` files shared out) or a flat folder of ``data-*.h5`` (drawn from).
    dest : the node-local folder of the staged set; ``{node}`` is replaced by the node number
        (needed when one machine simulates several nodes) and ``{local_rank}`` by the local
        rank (a folder per rank, each with only that rank's files).
    n_nodes : nodes in the job (default: the number of MPI processes).
    ranks_per_node : training ranks (GPUs) per node.
    samples_per_rank : files drawn, with replacement, for each rank (the paper used 250);
        with ``draw="shard"`` the most any rank gets.
    seed : seed of the draw.
    draw : ``"replacement"`` (the paper's: each rank draws its files at random, so a file may
        go to several ranks and, with few draws, many files to none: 185 draws per rank
        from 370 files leave ~37 % of them out of 2 ranks' training) or ``"shard"`` (a seeded
        permutation of the files dealt out over all ranks: each file to one rank, once;
        every rank gets ``n // ranks`` or one more, at most ``samples_per_rank``).
    verify : on a re-run, hash the files already staged (else trust the journal's digests).
    stats : a ``stats.h5`` to stage with the files (default: the set's).
    """

    source: str
    dest: str
    n_nodes: int | None = None
    ranks_per_node: int = 1
    samples_per_rank: int = 250
    seed: int = 0
    verify: bool = True
    stats: str | None = None
    draw: str = "replacement"

    def __post_init__(self):
        check_draw(self.draw)

    def rank_dir(self, node: int, local_rank: int = 0) -> Path:
        """Local folder of ``local_rank`` on ``node``."""
        return resolve_folder(self.dest, node=node, local_rank=local_rank)

    def node_dir(self, node: int) -> Path:
        """Local folder of ``node`` (of its local rank 0 when ``dest`` has ``{local_rank}``)."""
        return self.rank_dir(node, 0)

    def stores(self, node: int) -> dict[Path, tuple[int, ...]]:
        """The folders of ``node`` and the local ranks each holds."""
        out: dict[Path, list[int]] = {}
        for r in range(self.ranks_per_node):
            out.setdefault(self.rank_dir(node, r), []).append(r)
        return {d: tuple(rs) for d, rs in out.items()}


@dataclass(frozen=True)
class StagingReport:
    """What a staging run did, summed over all processes.

    Attributes
    ----------
    bytes_shared : size of everything in the shared set that could be staged.
    bytes_needed : size of the distinct files the job needs.
    bytes_read : bytes read from the shared file system.
    bytes_written : bytes written to node-local storage.
    bytes_sent : bytes sent between processes over MPI.
    files_written, files_skipped : files written, and files found intact from a previous run.
    seconds : wall time (the slowest process).
    reads : how many times each file was read from the shared file system.
    """

    bytes_shared: int
    bytes_needed: int
    bytes_read: int
    bytes_written: int
    bytes_sent: int
    files_written: int
    files_skipped: int
    seconds: float
    reads: dict[str, int] = field(default_factory=dict)

    @property
    def max_reads_per_file(self) -> int:
        """The most times any one file was read from the shared file system (should be <= 1)."""
        return max(self.reads.values(), default=0)

    @property
    def throughput(self) -> float:
        """Bytes written locally per second."""
        return self.bytes_written / self.seconds if self.seconds > 0 else 0.0

    @property
    def summary(self) -> str:
        """One line for people."""
        mb = 1e6
        return (
            f"read {self.bytes_read / mb:.1f} MB from the shared FS (needed "
            f"{self.bytes_needed / mb:.1f} MB of {self.bytes_shared / mb:.1f} MB there; each file "
            f"read at most {self.max_reads_per_file}x), sent {self.bytes_sent / mb:.1f} MB over "
            f"MPI, wrote {self.bytes_written / mb:.1f} MB locally in {self.seconds:.2f} s "
            f"({self.throughput / mb:.0f} MB/s); {self.files_written} files written, "
            f"{self.files_skipped} already there"
        )

    def to_dict(self) -> dict:
        """A JSON-ready dict, with the derived figures."""
        return {
            **asdict(self),
            "max_reads_per_file": self.max_reads_per_file,
            "throughput": self.throughput,
            "summary": self.summary,
        }
