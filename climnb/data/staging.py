"""Stage a sample set from the shared file system onto node-local storage: a staged set per node.

Every local rank of every node trains on its own ``samples_per_rank`` files, drawn with
replacement from the set's training files with a seed (the paper used 250; ``draw="shard"``
deals the files out instead, each to one rank, so that every file is trained on), and validates on
its share of the validation files (``validation[rank::ranks]``, when the source has them). A
node stores each file it needs once, with ``stats.h5``, and a manifest listing every file's
SHA-256 and each local rank's files in training order: a
:class:`climnb.io.sampleset.StagedSet`, which training opens from a folder pattern with
``{node}`` / ``{local_rank}`` placeholders and never looks beyond. Each file is read from the
shared file system **at most once** across the whole job: one process that needs it reads it
and sends the bytes over MPI to the other processes that need it.

How the exchange runs: rank 0 opens the source :class:`~climnb.io.sampleset.SampleSet` and
broadcasts names, sizes and content digests (from the source manifests); all ranks derive the
same plan (:mod:`climnb.data.stageplan`); every process checks what it already has (resume) and
the ranks exchange what they still need (:mod:`climnb.data.exchange`); each file still needed
gets one reader, the needing process with the fewest bytes to read so far. The reads then
proceed in rounds: in round ``k`` every process reads its ``k``-th file and the round's files
travel with non-blocking point-to-point messages (raw bytes plus the SHA-256 the reader
computed). Every holder checks the digest against the source manifest's, so a shared file that
changed or rotted since it was written is refused, naming it, on every rank. Files are written
atomically, each followed by a line in the node's journal; the manifest closes the run. A rerun
skips a staged file only when its recorded digest equals the source manifest's (sizes are never
trusted) and, with ``verify``, the local bytes still hash to it; a changed ``stats.h5`` is
restaged too. Temporary files of a killed run are removed on the next.

One MPI process per node is the expected layout (``mpirun -np NODES`` or one ipyparallel
engine per node); :func:`stage_on_engines` also takes several engines per node (the training
engines, one per GPU: the first engine of each node stages it). A process may also stand for
several simulated nodes (``dest`` then must contain ``{node}``), and without MPI one process
stages all nodes. Processes whose ``dest`` is
the same directory (a shared file system, no ``{node}``) are detected and refused.

Examples
--------
>>> import tempfile
>>> from pathlib import Path
>>> from climnb.data.synthetic import make_dataset
>>> from climnb.io.samples import write_samples
>>> from climnb.io.sampleset import StagedSet
>>> shared, local = Path(tempfile.mkdtemp()), Path(tempfile.mkdtemp())
>>> ds, _ = make_dataset(n_time=6, seed=0)
>>> _ = write_samples(ds, ds.truth, shared)
>>> cfg = StagingConfig(source=str(shared), dest=str(local / "node{node}"), n_nodes=2,
...                     ranks_per_node=2, samples_per_rank=4, seed=1)
>>> report = stage(cfg)
>>> report.max_reads_per_file, report.bytes_read <= report.bytes_shared
(1, True)
>>> len(StagedSet.open(local / "node{node}", node=0, local_rank=1).files("train"))
4
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
import uuid
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

from climnb.data.exchange import Reader, SerialComm, exchange, owner, read_shared
from climnb.data.stageplan import DRAWS, StagingPlan, check_draw, files_per_rank, plan_staging
from climnb.io.atomic import remove_leftovers
from climnb.io.manifest import MANIFEST_NAME, Entry, Manifest, sha256_file
from climnb.io.outputs import OutputError, check_output
from climnb.io.samples import SAMPLE_GLOB, SampleError
from climnb.io.sampleset import STATS_NAME, SampleSet, StagedSet, resolve_folder
from climnb.io.stats import read_stats

__all__ = [
    "DRAWS",
    "StagingConfig",
    "StagingPlan",
    "StagingReport",
    "check_draw",
    "files_per_rank",
    "plan_staging",
    "stage",
    "stage_on_engines",
    "staged_files",
]

log = logging.getLogger(__name__)


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


@dataclass(frozen=True)
class _Source:
    """The shared set as rank 0 saw it: what every rank needs to plan and check."""

    train: list  # (name, path, size, sha256 or None, identity)
    validation: list
    extra: list
    channels: tuple[str, ...] | None
    grid: tuple[int, int] | None
    train_digest: str | None

    def rows(self) -> list:
        return [*self.train, *self.validation, *self.extra]


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
    source = _list_source(config) if comm.rank == 0 else None
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
    made = _new_folders(config, mine)
    try:
        counts = _stage_stores(config, comm, mine, plan, source, read, progress)
    except BaseException:  # a full disk, bad bytes, ...: no empty folder of ours stays behind
        for d in made:
            with contextlib.suppress(OSError):
                d.rmdir()  # only when empty: files staged before stay for the rerun
        raise
    counts["seconds"] = time.perf_counter() - t0
    return _total(comm.allgather(counts), plan, n_nodes)


def _new_folders(config: StagingConfig, mine) -> list[Path]:
    """The store folders (and their parents) of ``mine`` that do not exist yet, deepest
    first."""
    made = set()
    for n in mine:
        for d in config.stores(n):
            while not d.exists() and d != d.parent:
                made.add(d)
                d = d.parent
    return sorted(made, key=lambda d: len(d.parts), reverse=True)


def _stage_stores(config, comm, mine, plan, source, read, progress) -> dict:
    stores = _claim_stores(config, comm, mine)
    rows = source.rows()
    have = {
        (n, d): _verified(d, plan, rows, plan.needs(n, rs), config.verify)
        for n in mine
        for d, rs in config.stores(n).items()
    }
    missing = {key: sorted(plan.needs(key[0], stores[key]) - have[key]) for key in have}
    all_missing = {k: m for part in comm.allgather(missing) for k, m in part.items()}
    if progress is not None:
        progress(sum(len(plan.needs(k[0], stores[k]) & v) for k, v in have.items()))
    counts = exchange(plan, rows, comm, all_missing, read, progress)
    for (n, d), ranks in stores.items():
        _finish_store(d, plan, n, ranks, source, config)
    counts["files_skipped"] = sum(len(have[k] & plan.needs(k[0], stores[k])) for k in have)
    return counts


def _list_source(config: StagingConfig) -> _Source | Exception:
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
        return _Source(
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


def _claim_stores(config, comm, mine) -> dict[tuple[int, Path], tuple[int, ...]]:
    """This process's (node, folder) -> local ranks; refuse folders that another process or
    another node also writes (a shared ``dest`` without ``{node}``); clean a killed run's
    temporary files."""
    stores = {(n, d): rs for n in mine for d, rs in config.stores(n).items()}
    dirs = Counter(d for _, d in stores)
    clash = [d for d, k in dirs.items() if k > 1]
    if clash:
        raise ValueError(
            f"dest must contain {{node}} when a process stages {len(mine)} nodes "
            f"({clash[0]} would be written for several nodes)"
        )
    bad = _check_dest(config, [d for _, d in stores])
    bad = next((b for part in comm.allgather(bad) for b in part), None)
    if bad:  # on every rank: none waits for another that gave up
        raise OutputError(bad)
    token = comm.bcast(uuid.uuid4().hex[:12] if comm.rank == 0 else None, root=0)
    for _, d in stores:
        d.mkdir(parents=True, exist_ok=True)
        (d / f".stage-{token}-rank{comm.rank}").touch()
    comm.allgather(None)  # every marker is there before anyone looks
    shared = []
    for _, d in stores:
        others = {p.name for p in d.glob(f".stage-{token}-rank*")} - {
            f".stage-{token}-rank{comm.rank}"
        }
        if others:
            ranks = sorted(int(o.rsplit("rank", 1)[1]) for o in others)
            shared.append(f"{d} (also MPI rank(s) {', '.join(map(str, ranks))})")
    problems = [p for part in comm.allgather(shared) for p in part]
    for _, d in stores:
        (d / f".stage-{token}-rank{comm.rank}").unlink(missing_ok=True)
    if problems:
        raise ValueError(
            f"dest {config.dest} is one folder shared by several MPI processes: "
            f"{'; '.join(problems)}. Put {{node}} in --dest (e.g. {config.dest}/{{node}}) or "
            "point it at node-local storage"
        )
    for _, d in stores:
        for p in remove_leftovers(d):  # dead runs' temporaries only
            log.info("%s: removed what a killed run left", p)
        for p in d.glob(".stage-*-rank*"):
            with contextlib.suppress(OSError):
                p.unlink()
                log.info("%s: removed what a killed run left", p)
    return stores


def _check_dest(config: StagingConfig, folders: Sequence[Path]) -> list[str]:
    """The first problem with this process's staged folders, by the output rule of
    :func:`climnb.io.outputs.check_output` (a folder, never the source, in it or holding it; a
    staged folder is resumed: what it holds is kept or replaced)."""
    for d in folders:
        try:
            check_output(d, [config.source], kind="folder", option="--dest", overwrite=True)
        except OutputError as err:
            return [str(err)]
    return []


def _verified(folder: Path, plan: StagingPlan, rows, needed: set[int], verify: bool) -> set[int]:
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


def _finish_store(folder: Path, plan: StagingPlan, node: int, ranks, source, config) -> None:
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
    """The training files staged for ``local_rank`` in ``node_dir``, in training order (with
    repeats); see :class:`climnb.io.sampleset.StagedSet` for the rest."""
    return StagedSet(node_dir, local_rank=local_rank).files("train")


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
