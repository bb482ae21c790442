"""The node-local folders a staging process writes: checked, claimed, cleared of a killed run.

Each folder is checked by the output rule (:func:`climnb.io.outputs.check_output`), then claimed
with a marker file per process: a folder that another process, or another node of this one,
would also write (a shared ``dest`` without ``{node}``) is refused on every rank. What a killed
run left there (temporary files, markers) is removed.
"""

from __future__ import annotations

import contextlib
import logging
import uuid
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from climnb.data.stageconfig import StagingConfig
from climnb.io.atomic import remove_leftovers
from climnb.io.outputs import OutputError, check_output

__all__ = ["claim_stores", "new_folders"]

log = logging.getLogger(__name__)


def new_folders(config: StagingConfig, mine) -> list[Path]:
    """The store folders (and their parents) of ``mine`` that do not exist yet, deepest
    first."""
    made = set()
    for n in mine:
        for d in config.stores(n):
            while not d.exists() and d != d.parent:
                made.add(d)
                d = d.parent
    return sorted(made, key=lambda d: len(d.parts), reverse=True)


def claim_stores(config, comm, mine) -> dict[tuple[int, Path], tuple[int, ...]]:
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
