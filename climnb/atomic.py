"""Atomic file writes: write to a temporary name beside the target, then rename.

An interrupted run therefore never leaves a half-written file under its final name, and a
reader never sees one.

Temporary names carry the writer's process id (``.NAME.PID-XXXXXXXX.tmp``), so that the
clean-up of what killed runs left (:func:`remove_leftovers`) takes only the temporaries of
processes that are gone, never those of a run writing the same output at this moment; a
second run into an output that a live run is writing is refused (:class:`OutputBusy`).

Examples
--------
>>> import tempfile, pathlib
>>> target = pathlib.Path(tempfile.mkdtemp()) / "out.txt"
>>> with atomic_path(target) as tmp:
...     _ = tmp.write_text("done")
>>> target.read_text()
'done'
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path

__all__ = ["OutputBusy", "atomic_path", "owner_alive", "remove_leftovers", "temp_path"]

log = logging.getLogger(__name__)


class OutputBusy(ValueError):
    """Another live process is writing the same output now."""


def temp_path(path: str | os.PathLike, suffix: str = ".tmp") -> Path:
    """A hidden temporary name beside ``path`` that records this process's id:
    ``.NAME.PID-XXXXXXXX.tmp`` (``suffix`` ``.old`` for a displaced folder)."""
    path = Path(path)
    return path.with_name(f".{path.name}.{os.getpid()}-{uuid.uuid4().hex[:8]}{suffix}")


_OWNED = re.compile(r"\.(\d+)-[0-9a-f]{8}\.(tmp|old)$")
_TEMP = re.compile(r"^\.(?P<name>.+)\.(?:\d+-)?[0-9a-f]{8}\.(?P<kind>tmp|old)$")


def _owner(p: Path) -> int | None:
    """The process id a temporary name records (``None``: an old name without one)."""
    m = _OWNED.search(p.name)
    return int(m.group(1)) if m else None


def owner_alive(pid: int | None) -> bool:
    """Whether process ``pid`` runs on this machine (``None``: unknown, taken as gone)."""
    if pid is None or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's live process
        return True
    return True


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; on success rename it to ``path``.

    On any exception the temporary file is removed and ``path`` is left as it was. The
    temporary name starts with ``.`` and ends in ``.tmp`` so that globs for ``*.h5`` or
    ``*.nc`` never pick it up.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = temp_path(path)
    try:
        yield tmp
        os.replace(tmp, path)
    except OSError as err:  # a full disk fails a write that names no file: name the output
        if err.filename is None and err.errno is not None:
            raise OSError(err.errno, err.strerror, str(path)) from err
        raise
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()


def remove_leftovers(folder: str | os.PathLike, name: str | None = None) -> list[Path]:
    """Remove what writes killed in ``folder`` left behind; returns what was removed.

    That is the temporary files of :func:`atomic_path` (``.NAME.PID-XXXXXXXX.tmp``) and the
    temporary or displaced directories of a directory swap (``.tmp`` / ``.old``) whose
    owner process is gone (names without a process id, of older versions, count as gone).
    A displaced ``.old`` whose ``NAME`` is missing (the run was killed between the two
    renames of its swap) is the last finished output: it is put back, not removed.
    With ``name``, only those of the output ``NAME`` (what a command about to write
    ``folder/NAME`` may remove), and a temporary of ``NAME`` that another *live* process
    owns raises :class:`OutputBusy`: two runs must not write one output at once. Without
    ``name``, every dead run's temporaries in ``folder``; live ones are left alone.
    """
    folder = Path(folder)
    if not folder.is_dir():
        return []
    prefix = f".{name}." if name is not None else "."
    removed = []
    for p in sorted(folder.iterdir()):
        if not (p.name.startswith(prefix) and p.suffix in (".tmp", ".old")):
            continue
        pid = _owner(p)
        if owner_alive(pid):
            if name is not None and pid != os.getpid():
                raise OutputBusy(
                    f"{folder / name}: another run (process {pid}) is writing it now "
                    f"({p.name}); wait for it to finish, stop it, or choose another output"
                )
            continue
        if _restore(p):
            continue
        if p.is_dir() and not p.is_symlink():
            shutil.rmtree(p, ignore_errors=True)
        else:
            p.unlink(missing_ok=True)
        removed.append(p)
    return removed


def _restore(p: Path) -> bool:
    """Put a dead run's displaced output ``.NAME.PID-X.old`` back as ``NAME`` if that is
    missing; whether it did."""
    m = _TEMP.match(p.name)
    if m is None or m["kind"] != "old":
        return False
    target = p.with_name(m["name"])
    if target.exists() or target.is_symlink():
        return False
    os.replace(p, target)
    log.warning("%s: put back the finished output that a killed run had moved aside", target)
    return True
