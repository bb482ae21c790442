"""The exchange of staged files between ranks: each file of the shared set is read once, by
one rank, sent to the nodes that need it, checked against its digest there and written
atomically (:func:`exchange`); :class:`SerialComm` stands in for MPI in a run of one process.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import numpy as np

from climnb.data.stageplan import StagingPlan
from climnb.io.atomic import atomic_path
from climnb.io.manifest import Entry, Manifest
from climnb.io.samples import SampleError

__all__ = ["DIGEST_BYTES", "Reader", "SerialComm", "exchange", "owner", "read_shared"]

DIGEST_BYTES = 32  # bytes of a SHA-256 digest, sent after each file's bytes

Reader = Callable[[Path, np.ndarray], None]


class SerialComm:
    """The few communicator calls staging makes, for a run without MPI."""

    rank, size = 0, 1

    def bcast(self, obj, root=0):
        return obj

    def allgather(self, obj):
        return [obj]


def read_shared(path: Path, out: np.ndarray) -> None:
    """Read a whole file from the shared file system into ``out`` (the only shared read)."""
    with open(path, "rb", buffering=0) as f:
        n = f.readinto(memoryview(out))
    if n != out.size:
        raise SampleError(f"{path}: read {n} bytes, expected {out.size} (changed while staging?)")


def owner(node: int, size: int) -> int:
    """The rank (of ``size``) that writes node ``node``'s staged set."""
    return node % size


def _readers(plan: StagingPlan, missing: dict, size: int) -> dict[int, int]:
    """File index -> process that reads it: among the processes that need it, the one with
    the fewest bytes to read so far (ties: lowest rank). Deterministic on every rank."""
    needed_by: dict[int, set[int]] = {}
    for (node, _), files in missing.items():
        for i in files:
            needed_by.setdefault(i, set()).add(owner(node, size))
    load = [0] * size
    readers = {}
    for i in sorted(needed_by):
        p = min(needed_by[i], key=lambda q: (load[q], q))
        readers[i] = p
        load[p] += plan.sizes[i]
    return readers


def exchange(plan, rows, comm, missing, read: Reader, progress=None) -> dict:
    """Read each missing file once, send it to the processes that need it, write it."""
    size = comm.size
    readers = _readers(plan, missing, size)
    targets: dict[int, list] = {}  # file -> (node, folder) that still need it
    for key, files in missing.items():
        for i in files:
            targets.setdefault(i, []).append(key)
    queues = [[i for i in sorted(readers) if readers[i] == p] for p in range(size)]
    counts = Counter(bytes_read=0, bytes_written=0, bytes_sent=0, files_written=0)
    counts["reads"] = {}
    for k in range(max(map(len, queues), default=0)):
        round_files = [q[k] for q in queues if k < len(q)]
        buffers, error = _run_round(plan, rows, comm, round_files, readers, targets, read, counts)
        for i, buf in buffers.items():
            error = error or _check_digest(buf, rows[i])
        errors = [e for e in comm.allgather(error) if e]
        if errors:  # on every rank, so none waits for ever
            raise SampleError(errors[0])
        for i, buf in buffers.items():
            for node, d in targets[i]:
                if owner(node, size) == comm.rank:
                    _write_local(d, plan.names[i], buf, rows[i])
                    counts["bytes_written"] += plan.sizes[i]
                    counts["files_written"] += 1
                    if progress is not None:
                        progress(1)
    return counts


def _run_round(plan, rows, comm, round_files, readers, targets, read, counts):
    """One round: this process reads its file (if any), posts its sends and receives."""
    me, size = comm.rank, comm.size
    buffers, requests, error = {}, [], None
    for i in round_files:
        procs = sorted({owner(n, size) for n, _ in targets[i]})
        if readers[i] == me:
            buf = np.zeros(plan.sizes[i] + DIGEST_BYTES, np.uint8)
            data = buf[:-DIGEST_BYTES]
            try:
                read(Path(rows[i][1]), data)
            except (OSError, SampleError) as err:  # sent anyway: the receivers must not wait
                error = f"{rows[i][1]}: cannot read: {err}"
            buf[-DIGEST_BYTES:] = np.frombuffer(
                hashlib.sha256(buf[:-DIGEST_BYTES]).digest(), np.uint8
            )
            counts["bytes_read"] += plan.sizes[i]
            counts["reads"][plan.names[i]] = counts["reads"].get(plan.names[i], 0) + 1
            for p in procs:
                if p != me:
                    requests.append(comm.Isend(buf, dest=p, tag=1))
                    counts["bytes_sent"] += plan.sizes[i]
            buffers[i] = buf
        elif me in procs:
            buf = np.empty(plan.sizes[i] + DIGEST_BYTES, np.uint8)
            requests.append(comm.Irecv(buf, source=readers[i], tag=1))
            buffers[i] = buf
    if requests:
        from mpi4py import MPI

        MPI.Request.Waitall(requests)
    return buffers, error


def _check_digest(buf: np.ndarray, row) -> str | None:
    """Bytes as sent (the reader's digest) and as the source manifest says they should be."""
    got = hashlib.sha256(buf[:-DIGEST_BYTES]).hexdigest()
    if got != buf[-DIGEST_BYTES:].tobytes().hex():
        return f"{row[0]}: checksum mismatch after transfer"
    if row[3] and got != row[3]:
        return (
            f"{row[1]}: content differs from its manifest (SHA-256 {got[:12]}..., manifest "
            f"{row[3][:12]}...): corrupt or changed since it was written; not staged"
        )
    return None


def _write_local(folder: Path, name: str, buf: np.ndarray, row) -> None:
    try:
        data = buf[:-DIGEST_BYTES]
        with atomic_path(folder / name) as tmp, open(tmp, "wb") as f:
            f.write(memoryview(data))
    except OSError as err:  # a full disk: name the file (a failed write does not)
        if err.filename is None:
            raise OSError(err.errno, err.strerror, str(folder / name)) from err
        raise
    digest = buf[-DIGEST_BYTES:].tobytes().hex()
    expert = row[5] if len(row) > 5 else {}  # stats.h5's row has none
    Manifest.append(
        folder, name, Entry(int(buf.size - DIGEST_BYTES), digest, source=row[4], **expert)
    )
