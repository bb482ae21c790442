"""Stage a training set from the shared file system onto node-local storage.

Every local rank of every node trains on its own ``samples_per_rank`` files, drawn with
replacement from the shared directory with a seed (the paper used 250). A node stores each
file it needs once and lists, per local rank, the rank's files in shuffled order
(``files-rank{r}.txt``). Each file is read from the shared file system **at most once** across
the whole job: one process that needs it reads it and sends the bytes over MPI to the other
processes that need it, so the shared file system serves each byte once however many nodes
use it.

How the exchange runs: rank 0 lists the shared directory and broadcasts names and sizes; all
ranks derive the same plan; every process checks what it already has (resume) and the ranks
exchange what they still need; each file still needed gets one reader, the needing process
with the fewest bytes to read so far. The reads then proceed in rounds: in round ``k`` every
process reads its ``k``-th file (in parallel across nodes) and the round's files travel with
non-blocking point-to-point messages (raw bytes plus the SHA-256 digest the reader computed,
which the receivers check). Files are written atomically, each followed by a line in the
node's journal; a ``manifest.json`` with sizes and checksums closes the run. Running again
verifies the files the journal lists, skips those that are intact and stages the rest.

One MPI process per node is the expected layout (``mpirun -np NODES`` or one ipyparallel
engine per node); a process may also stand for several simulated nodes (``dest`` then must
contain ``{node}``), and without MPI one process stages all nodes.

Examples
--------
>>> import tempfile
>>> from pathlib import Path
>>> from climnb.synthetic import make_dataset
>>> from climnb.io.samples import write_samples
>>> shared, local = Path(tempfile.mkdtemp()), Path(tempfile.mkdtemp())
>>> ds, _ = make_dataset(n_time=6, seed=0)
>>> _ = write_samples(ds, ds.truth, shared)
>>> cfg = StagingConfig(source=str(shared), dest=str(local / "node{node}"), n_nodes=2,
...                     ranks_per_node=2, samples_per_rank=4, seed=1)
>>> report = stage(cfg)
>>> report.max_reads_per_file, report.bytes_read <= report.bytes_shared
(1, True)
>>> len(staged_files(local / "node0", 1))
4
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from climnb.atomic import atomic_path
from climnb.io.samples import SampleError, list_samples
from climnb.io.stats import STATS_NAME

__all__ = [
    "StagingConfig",
    "StagingPlan",
    "StagingReport",
    "plan_staging",
    "stage",
    "stage_on_engines",
    "staged_files",
]

log = logging.getLogger(__name__)

MANIFEST = "manifest.json"
JOURNAL = ".manifest.jsonl"
_DIGEST = 32  # bytes of a SHA-256 digest, sent after each file's bytes

Reader = Callable[[Path, np.ndarray], None]


@dataclass(frozen=True)
class StagingConfig:
    """Settings of a staging run.

    Attributes
    ----------
    source : the shared directory with the sample files (``data-*.h5``).
    dest : the node-local directory; ``{node}`` in it is replaced by the node number
        (needed when one machine simulates several nodes).
    n_nodes : nodes in the job (default: the number of MPI processes).
    ranks_per_node : training ranks (GPUs) per node.
    samples_per_rank : files drawn, with replacement, for each rank (the paper used 250).
    seed : seed of the draw.
    verify : on a re-run, check the checksums of files already staged (else sizes only).
    stats : a ``stats.h5`` to stage with the files (default: ``stats.h5`` in ``source`` or
        its parent, if there is one).
    """

    source: str
    dest: str
    n_nodes: int | None = None
    ranks_per_node: int = 1
    samples_per_rank: int = 250
    seed: int = 0
    verify: bool = True
    stats: str | None = None

    def node_dir(self, node: int) -> Path:
        """Local directory of ``node``."""
        return Path(self.dest.format(node=node))


@dataclass(frozen=True)
class StagingPlan:
    """Which files go where: the same on every rank for the same inputs.

    Attributes
    ----------
    names : file names in the shared directory (sorted); the extra ``stats.h5`` comes last.
    sizes : their sizes in bytes.
    rank_files : ``rank_files[node][local_rank]``: indices into ``names``, in training order.
    extra : indices of files every node gets (``stats.h5``).
    """

    names: tuple[str, ...]
    sizes: tuple[int, ...]
    rank_files: tuple[tuple[tuple[int, ...], ...], ...]
    extra: tuple[int, ...] = ()

    def needs(self, node: int) -> set[int]:
        """Indices of the files ``node`` stores."""
        return {i for files in self.rank_files[node] for i in files} | set(self.extra)


@dataclass(frozen=True)
class StagingReport:
    """What a staging run did, summed over all processes.

    Attributes
    ----------
    bytes_shared : size of everything in the shared directory that could be staged.
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


def plan_staging(
    names: Sequence[str],
    sizes: Sequence[int],
    *,
    n_nodes: int,
    ranks_per_node: int,
    samples_per_rank: int,
    seed: int = 0,
    extra: Sequence[tuple[str, int]] = (),
) -> StagingPlan:
    """Draw ``samples_per_rank`` files with replacement for every rank of every node.

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
        if v < 1:
            raise ValueError(f"{what} must be at least 1, got {v}")
    rng = np.random.default_rng(seed)
    rank_files = tuple(
        tuple(
            tuple(int(i) for i in rng.integers(0, len(names), samples_per_rank))
            for _ in range(ranks_per_node)
        )
        for _ in range(n_nodes)
    )
    n = len(names)
    return StagingPlan(
        names=tuple(names) + tuple(e[0] for e in extra),
        sizes=tuple(int(s) for s in sizes) + tuple(int(e[1]) for e in extra),
        rank_files=rank_files,
        extra=tuple(range(n, n + len(extra))),
    )


class _Serial:
    """The few communicator calls staging makes, for a run without MPI."""

    rank, size = 0, 1

    def bcast(self, obj, root=0):
        return obj

    def allgather(self, obj):
        return [obj]


def _read_shared(path: Path, out: np.ndarray) -> None:
    """Read a whole file from the shared file system into ``out`` (the only shared read)."""
    with open(path, "rb", buffering=0) as f:
        n = f.readinto(memoryview(out))
    if n != out.size:
        raise SampleError(f"{path}: read {n} bytes, expected {out.size} (changed while staging?)")


def stage(config: StagingConfig, comm=None, *, read: Reader = _read_shared) -> StagingReport:
    """Stage ``config.source`` onto the node-local directories; every rank gets the report.

    Parameters
    ----------
    config : :class:`StagingConfig`.
    comm : an mpi4py communicator (one process per node), or ``None`` to stage every node from
        this process.
    read : the function that reads a shared file into a byte buffer (tests count its calls).
    """
    comm = comm if comm is not None else _Serial()
    t0 = time.perf_counter()
    listing = _list_source(config) if comm.rank == 0 else None
    listing = comm.bcast(listing, root=0)
    if isinstance(listing, Exception):
        raise listing
    names, sizes, extra = listing
    n_nodes = config.n_nodes or comm.size
    mine = [n for n in range(n_nodes) if _owner(n, comm.size) == comm.rank]
    if len(mine) > 1 and "{node}" not in config.dest:
        raise ValueError(f"dest must contain {{node}} when a process stages {len(mine)} nodes")
    plan = plan_staging(
        names,
        sizes,
        n_nodes=n_nodes,
        ranks_per_node=config.ranks_per_node,
        samples_per_rank=config.samples_per_rank,
        seed=config.seed,
        extra=extra,
    )
    have = {n: _verified(config.node_dir(n), plan, config.verify) for n in mine}
    missing = {n: sorted(plan.needs(n) - have[n]) for n in mine}
    all_missing = {n: m for part in comm.allgather(missing) for n, m in part.items()}
    counts = _exchange(config, plan, comm, all_missing, read)
    for n in mine:
        _finish_node(config.node_dir(n), plan, n)
    counts["files_skipped"] = sum(len(have[n] & plan.needs(n)) for n in mine)
    counts["seconds"] = time.perf_counter() - t0
    return _total(comm.allgather(counts), plan, n_nodes)


def _list_source(config: StagingConfig):
    try:
        files = list_samples(config.source)
        stats = _stats_file(config)
        extra = [(STATS_NAME, stats.stat().st_size)] if stats else []
        return [f.name for f in files], [f.stat().st_size for f in files], extra
    except (SampleError, OSError) as err:  # every rank raises it, not only rank 0
        return err


def _stats_file(config: StagingConfig) -> Path | None:
    if config.stats:
        return Path(config.stats)
    for d in (Path(config.source), Path(config.source).parent):
        if (d / STATS_NAME).is_file():
            return d / STATS_NAME
    return None


def _source_path(config: StagingConfig, plan: StagingPlan, i: int) -> Path:
    if i in plan.extra:
        return _stats_file(config)
    return Path(config.source) / plan.names[i]


def _owner(node: int, size: int) -> int:
    return node % size


def _readers(plan: StagingPlan, missing: dict[int, list[int]], size: int) -> dict[int, int]:
    """File index -> process that reads it: among the processes that need it, the one with
    the fewest bytes to read so far (ties: lowest rank). Deterministic on every rank."""
    needed_by: dict[int, set[int]] = {}
    for node, files in missing.items():
        for i in files:
            needed_by.setdefault(i, set()).add(_owner(node, size))
    load = [0] * size
    readers = {}
    for i in sorted(needed_by):
        p = min(needed_by[i], key=lambda q: (load[q], q))
        readers[i] = p
        load[p] += plan.sizes[i]
    return readers


def _exchange(config, plan, comm, missing, read: Reader) -> dict[str, int]:
    """Read each missing file once, send it to the processes that need it, write it."""
    size = comm.size
    readers = _readers(plan, missing, size)
    targets: dict[int, list[int]] = {}  # file -> nodes that still need it
    for node, files in missing.items():
        for i in files:
            targets.setdefault(i, []).append(node)
    queues = [[i for i in sorted(readers) if readers[i] == p] for p in range(size)]
    counts = Counter(bytes_read=0, bytes_written=0, bytes_sent=0, files_written=0)
    counts["reads"] = {}
    for k in range(max(map(len, queues), default=0)):
        round_files = [q[k] for q in queues if k < len(q)]
        buffers = _run_round(config, plan, comm, round_files, readers, targets, read, counts)
        for i, buf in buffers.items():
            if readers[i] != comm.rank:  # the reader hashed these bytes itself just now
                _check_digest(buf, plan.names[i])
            for node in targets[i]:
                if _owner(node, size) == comm.rank:
                    _write_local(config.node_dir(node), plan.names[i], buf)
                    counts["bytes_written"] += plan.sizes[i]
                    counts["files_written"] += 1
    return counts


def _run_round(config, plan, comm, round_files, readers, targets, read, counts):
    """One round: this process reads its file (if any), posts its sends and receives."""
    me, size = comm.rank, comm.size
    buffers, requests = {}, []
    for i in round_files:
        procs = sorted({_owner(n, size) for n in targets[i]})
        if readers[i] == me:
            buf = np.empty(plan.sizes[i] + _DIGEST, np.uint8)
            read(_source_path(config, plan, i), buf[:-_DIGEST])
            buf[-_DIGEST:] = np.frombuffer(hashlib.sha256(buf[:-_DIGEST]).digest(), np.uint8)
            counts["bytes_read"] += plan.sizes[i]
            counts["reads"][plan.names[i]] = counts["reads"].get(plan.names[i], 0) + 1
            for p in procs:
                if p != me:
                    requests.append(comm.Isend(buf, dest=p, tag=1))
                    counts["bytes_sent"] += plan.sizes[i]
            buffers[i] = buf
        elif me in procs:
            buf = np.empty(plan.sizes[i] + _DIGEST, np.uint8)
            requests.append(comm.Irecv(buf, source=readers[i], tag=1))
            buffers[i] = buf
    if requests:
        from mpi4py import MPI

        MPI.Request.Waitall(requests)
    return buffers


def _check_digest(buf: np.ndarray, name: str) -> None:
    if hashlib.sha256(buf[:-_DIGEST]).digest() != buf[-_DIGEST:].tobytes():
        raise OSError(f"{name}: checksum mismatch after transfer")


def _write_local(node_dir: Path, name: str, buf: np.ndarray) -> None:
    with atomic_path(node_dir / name) as tmp, open(tmp, "wb") as f:
        f.write(memoryview(buf[:-_DIGEST]))
    entry = {
        "file": name,
        "bytes": int(buf.size - _DIGEST),
        "sha256": buf[-_DIGEST:].tobytes().hex(),
    }
    with open(node_dir / JOURNAL, "a") as f:
        f.write(json.dumps(entry) + "\n")


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 22):
            h.update(chunk)
    return h.hexdigest()


def _entries(node_dir: Path) -> dict[str, dict]:
    """Manifest entries of a node from an earlier run: the manifest, then the journal."""
    entries = {}
    if (node_dir / MANIFEST).is_file():
        try:
            entries.update(json.loads((node_dir / MANIFEST).read_text())["files"])
        except (ValueError, KeyError):
            log.warning("%s: unreadable manifest, ignored", node_dir / MANIFEST)
    if (node_dir / JOURNAL).is_file():
        for line in (node_dir / JOURNAL).read_text().splitlines():
            try:
                e = json.loads(line)
                entries[e["file"]] = {"bytes": e["bytes"], "sha256": e["sha256"]}
            except (ValueError, KeyError):  # a line cut short by an interruption
                continue
    return entries


def _verified(node_dir: Path, plan: StagingPlan, verify: bool) -> set[int]:
    """Indices of the plan's files already on the node, intact (by size and checksum)."""
    entries = _entries(node_dir)
    ok = set()
    for i, name in enumerate(plan.names):
        e, path = entries.get(name), node_dir / name
        if e is None or not path.is_file() or path.stat().st_size != e["bytes"]:
            continue
        if e["bytes"] != plan.sizes[i]:
            continue  # the shared copy changed since
        if verify and _sha256(path) != e["sha256"]:
            log.warning("%s: checksum mismatch, staging it again", path)
            continue
        ok.add(i)
    return ok


def _finish_node(node_dir: Path, plan: StagingPlan, node: int) -> None:
    """Write the per-rank file lists and the manifest of a node."""
    node_dir.mkdir(parents=True, exist_ok=True)
    entries = _entries(node_dir)
    for r, files in enumerate(plan.rank_files[node]):
        with atomic_path(node_dir / f"files-rank{r}.txt") as tmp:
            tmp.write_text("".join(plan.names[i] + "\n" for i in files))
    manifest = {
        "node": node,
        "files": {plan.names[i]: entries[plan.names[i]] for i in sorted(plan.needs(node))},
        "ranks": [[plan.names[i] for i in files] for files in plan.rank_files[node]],
    }
    with atomic_path(node_dir / MANIFEST) as tmp:
        tmp.write_text(json.dumps(manifest, indent=1))
    (node_dir / JOURNAL).unlink(missing_ok=True)  # the manifest now holds its entries


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


def staged_files(node_dir: str | os.PathLike, local_rank: int = 0) -> list[Path]:
    """The files staged for ``local_rank`` on a node, in training order (with repeats)."""
    node_dir = Path(node_dir)
    listing = node_dir / f"files-rank{local_rank}.txt"
    if not listing.is_file():
        raise SampleError(f"{listing}: no such file (was the node staged for this rank?)")
    return [node_dir / line for line in listing.read_text().split()]


def _stage_on_engine(config: StagingConfig) -> dict:
    from mpi4py import MPI

    return stage(config, MPI.COMM_WORLD).to_dict()


def stage_on_engines(view, config: StagingConfig) -> StagingReport:
    """Run :func:`stage` on ipyparallel MPI engines (one per node) and return the report.

    ``view`` is a view on all the engines, e.g. ``client[:]`` of
    ``ipyparallel.Cluster(engines="mpi", n=NODES).start_and_connect_sync()``.
    """
    results = view.apply_sync(_stage_on_engine, config)
    first = results[0]
    keep = {k: first[k] for k in StagingReport.__dataclass_fields__}
    return StagingReport(**keep)
