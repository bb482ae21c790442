"""Atomic file writes: write to a temporary name beside the target, then rename.

An interrupted run therefore never leaves a half-written file under its final name, and a
reader never sees one.

Temporary names carry the writer's process id (``.NAME.PID-XXXXXXXX.tmp``), so that the
clean-up of what killed runs left (:func:`remove_leftovers`) takes only the temporaries of
processes that are gone, never those of a run writing the same output at this moment; a
second run into an output that a live run is writing is refused (:class:`OutputBusy`).

A command takes the exclusive claim on each of its outputs before any work (:func:`claim`):
a file ``.NAME.claim`` beside the output, made atomically (a hard link of a complete
temporary file, which fails if the name exists), that records the process id and the host.
Of two runs started in the same millisecond, one gets it and the other is refused; the claim
goes when the run ends, and the claim of a process that is gone (killed) is taken over.

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
import json
import logging
import os
import re
import shutil
import socket
import uuid
from collections.abc import Iterable, Iterator
from pathlib import Path

__all__ = [
    "OutputBusy",
    "atomic_path",
    "claim",
    "claim_path",
    "claims",
    "owner_alive",
    "remove_leftovers",
    "temp_path",
]

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


def claim_path(path: str | os.PathLike) -> Path:
    """The name of the claim on the output ``path``: ``.NAME.claim`` beside it."""
    path = Path(path)
    return path.with_name(f".{path.name}.claim")


@contextlib.contextmanager
def claim(path: str | os.PathLike) -> Iterator[Path]:
    """Hold the exclusive claim on the output ``path`` while the block runs.

    The claim is the file :func:`claim_path` made atomically: a temporary file holding this
    process's id and host is hard-linked to the claim's name, which fails when the name
    exists, so of any number of runs started together exactly one gets it, and a reader never
    sees a half-written claim. A claim of a process of this host that is gone (killed) is
    taken over; one of a live process, or of another host, raises :class:`OutputBusy` with a
    line naming the output, the holder and the way forward. The claim is removed at the end.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> out = pathlib.Path(tempfile.mkdtemp()) / "labels.nc"
    >>> with claim(out) as held:
    ...     held.name, held.exists()
    ('.labels.nc.claim', True)
    >>> held.exists()
    False
    """
    path = Path(path)
    made = _make_parents(path.parent)
    held = claim_path(path)
    token = uuid.uuid4().hex
    record = {"pid": os.getpid(), "host": socket.gethostname(), "token": token}
    tmp = temp_path(held)
    try:
        tmp.write_text(json.dumps(record))
        for _ in range(100):  # each round either takes the claim or takes over a dead one
            if _link(tmp, held, record):
                break
            _take_over(path, held)
        else:  # pragma: no cover - a claim reappearing a hundred times over
            raise OutputBusy(f"{path}: another run keeps claiming it; choose another output")
    except OSError as err:  # a full disk fails a write that names no file: name the output
        _remove_folders(made, tmp)
        if err.filename is None and err.errno is not None:
            raise OSError(err.errno, err.strerror, str(path)) from err
        raise
    except BaseException:
        _remove_folders(made, tmp)
        raise
    finally:
        tmp.unlink(missing_ok=True)
    try:
        yield held
    finally:
        if _read_claim(held).get("token") == token:  # ours still: never another run's
            held.unlink(missing_ok=True)
        _remove_folders(made)


def _link(tmp: Path, held: Path, record: dict) -> bool:
    """Make the claim ``held`` (a hard link of the complete ``tmp``); whether it was free.
    Where the file system has no hard links, ``O_CREAT | O_EXCL`` makes it."""
    try:
        os.link(tmp, held)
        return True
    except FileExistsError:
        return False
    except OSError:  # no hard links here (some network and FUSE file systems)
        pass
    try:
        fd = os.open(held, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except FileExistsError:
        return False
    with os.fdopen(fd, "w") as f:
        f.write(json.dumps(record))
    return True


def _remove_folders(made: list[Path], tmp: Path | None = None) -> None:
    """Remove the folders a claim made for its output, those still empty (deepest first);
    ``tmp``, the claim's temporary file (a failed write may leave it), first."""
    if tmp is not None:
        with contextlib.suppress(OSError):
            tmp.unlink()
    for folder in made:
        with contextlib.suppress(OSError):
            folder.rmdir()


def _make_parents(folder: Path) -> list[Path]:
    """Make ``folder`` and its missing parents; those made, deepest first."""
    missing = []
    while not folder.exists() and folder != folder.parent:
        missing.append(folder)
        folder = folder.parent
    for f in reversed(missing):
        f.mkdir(exist_ok=True)
    return missing


@contextlib.contextmanager
def claims(paths: Iterable[str | os.PathLike]) -> Iterator[list[Path]]:
    """:func:`claim` on each of ``paths`` in turn (the first refused ends it: nobody waits,
    so two runs of the same outputs cannot hold one each and wait for the other); all
    released at the end."""
    with contextlib.ExitStack() as stack:
        ordered = dict.fromkeys(Path(os.path.abspath(p)) for p in paths)
        yield [stack.enter_context(claim(p)) for p in ordered]


def _read_claim(held: Path) -> dict:
    try:
        record = json.loads(held.read_text())
    except (OSError, ValueError):
        return {}
    return record if isinstance(record, dict) else {}


def _take_over(path: Path, held: Path) -> None:
    """Remove the claim ``held`` if its process is gone; else refuse (:class:`OutputBusy`)."""
    record = _read_claim(held)
    if not record and not held.exists():
        return  # released in the meantime: try again
    pid, host = record.get("pid"), record.get("host")
    here = socket.gethostname()
    if record and host == here and not owner_alive(pid if isinstance(pid, int) else None):
        stale = temp_path(held, ".old")
        try:  # renamed first: of two runs finding it stale, one removes it
            os.rename(held, stale)
        except FileNotFoundError:
            return
        if _read_claim(stale).get("token") != record.get("token"):  # a fresh claim: put back
            with contextlib.suppress(OSError):
                os.link(stale, held)
        stale.unlink(missing_ok=True)
        log.info("%s: took over the claim of process %s, which is gone", path, pid)
        return
    who = f"process {pid} on {host}" if record else "another run"
    where = "on another host: " if host not in (None, here) else ""
    raise OutputBusy(
        f"{path}: another run ({who}) is writing it now; wait for it to finish, stop it, or "
        f"choose another output ({where}remove {held} if no run is writing it)"
    )
