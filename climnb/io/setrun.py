"""A run writing a sample set: the key of its inputs and options, the folder beside the
output that it writes into (a rerun with the same key resumes there), the swap that puts the
finished set in place, and what killed runs left beside it.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import shutil
import uuid
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from climnb.io.atomic import OutputBusy, owner_alive, remove_leftovers, temp_path
from climnb.io.samples import SampleError

__all__ = [
    "RUN_RECORD",
    "clean_leftovers",
    "partial_folder",
    "recorded_key",
    "run_key",
    "swap_in",
]

log = logging.getLogger(__name__)

#: In the folder beside OUT while a run writes it: the run's key, output and process id.
RUN_RECORD = ".run.json"


def run_key(
    ds, labels, label_name, parts, *, run: int, channels: Sequence[str], extra=()
) -> str | None:
    """SHA-256 identifying what a run writes (inputs and options), or ``None`` when the data
    have no deterministic token (then a killed run is never resumed, only redone)."""
    import dask
    from dask.base import tokenize

    def token(var) -> str:
        if var.chunks is not None or getattr(var.variable, "_in_memory", True):
            return tokenize(var)  # dask: names from path + mtime; in memory: the values
        # lazily read from a file without dask: tokenize would read it all; its identity
        source = var.encoding.get("source")
        if not source:
            raise ValueError(f"{var.name}: lazily read from an unknown file")
        st = os.stat(source)
        return tokenize(var.name, var.shape, str(var.dtype), source, st.st_size, st.st_mtime_ns)

    try:
        with dask.config.set({"tokenize.ensure-deterministic": True}):
            tokens = [token(ds[c]) for c in channels] + [
                token(labels),
                tokenize(ds.coords.to_dataset()),
            ]
            names, soft, expert = (*extra, None, None, None)[:3]
            tokens += [tokenize(names, expert)] + ([token(soft)] if soft is not None else [])
    except (OSError, RuntimeError, TypeError, ValueError) as err:
        log.warning("inputs have no deterministic token (%s): a killed run will start over", err)
        return None
    h = hashlib.sha256()
    h.update(json.dumps([tokens, str(label_name), run, list(channels)]).encode())
    for idx in parts:
        h.update(np.asarray(idx, np.int64).tobytes() + b"|")
    return h.hexdigest()


def partial_folder(out: Path, key: str | None, *, overwrite: bool) -> Path:
    """The folder beside ``out`` a run with ``key`` writes into; what runs with other keys
    left there is refused, or removed with ``overwrite``."""
    out.parent.mkdir(parents=True, exist_ok=True)
    mine = out.with_name(f".{out.name}.{key[:16] if key else uuid.uuid4().hex}.partial")
    for p in out.parent.glob(f".{out.name}.*.partial"):  # never touch a live run's folder
        pid = recorded(p, "pid")
        if pid != os.getpid() and owner_alive(pid):
            raise OutputBusy(
                f"{out}: another run (process {pid}) is writing this sample set now ({p.name}); "
                "wait for it to finish, stop it, or choose another --out"
            )
    if mine.is_dir() and recorded_key(mine) not in (key, None):
        shutil.rmtree(mine)  # a 64-bit prefix clash: never mix
    others = [p for p in out.parent.glob(f".{out.name}.*.partial") if p != mine]
    if others and not overwrite:
        raise SampleError(
            f"{others[0]}: left by an interrupted run with other inputs or options; rerun "
            "that command to finish it, or use overwrite=True (climnb samples --overwrite) "
            "to discard it"
        )
    for p in others:
        log.warning("%s: discarding an interrupted run with other inputs or options", p)
        shutil.rmtree(p)
    return mine


def recorded_key(folder: Path) -> str | None:
    return recorded(folder, "key")


def recorded(folder: Path, field: str):
    try:
        return json.loads((folder / RUN_RECORD).read_text())[field]
    except (OSError, ValueError, KeyError, TypeError):
        return None  # removed just before the swap, or cut short: the name identifies it


def swap_in(new: Path, out: Path) -> None:
    """Put folder ``new`` in place of ``out`` (two renames; the old set goes last)."""
    old = temp_path(out, ".old")
    if out.exists():
        os.replace(out, old)
    os.replace(new, out)
    shutil.rmtree(old, ignore_errors=True)


def clean_leftovers(out: Path) -> None:
    """Remove what a killed run left beside ``out``; put back a set moved aside mid-swap."""
    if not out.parent.is_dir():
        return
    olds = sorted(out.parent.glob(f".{out.name}.*.old"))
    if olds and not out.exists():
        log.warning("%s: restoring the set moved aside by an interrupted run", out)
        os.replace(olds.pop(), out)
    for p in olds:
        with contextlib.suppress(OSError):
            shutil.rmtree(p)
    remove_leftovers(out.parent, out.name)  # dead runs' temporaries; a live run: refused
