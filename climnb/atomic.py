"""Atomic file writes: write to a temporary name beside the target, then rename.

An interrupted run therefore never leaves a half-written file under its final name, and a
reader never sees one.

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
import os
import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path

__all__ = ["atomic_path", "remove_leftovers"]


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; on success rename it to ``path``.

    On any exception the temporary file is removed and ``path`` is left as it was. The
    temporary name starts with ``.`` and ends in ``.tmp`` so that globs for ``*.h5`` or
    ``*.nc`` never pick it up.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex[:8]}.tmp")
    try:
        yield tmp
        os.replace(tmp, path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()


def remove_leftovers(folder: str | os.PathLike, name: str | None = None) -> list[Path]:
    """Remove what writes killed in ``folder`` left behind; returns what was removed.

    That is the temporary files of :func:`atomic_path` (``.NAME.XXXXXXXX.tmp``) and the
    temporary or displaced directories of a directory swap (``.NAME.XXXXXXXX.tmp`` /
    ``.old``). With ``name``, only those of the output ``NAME`` (what a command about to write
    ``folder/NAME`` may remove: another run may be writing other outputs in the same folder);
    without it, all of them: call it so only where no other process writes into ``folder``.
    """
    folder = Path(folder)
    if not folder.is_dir():
        return []
    prefix = f".{name}." if name is not None else "."
    removed = []
    for p in folder.iterdir():
        if p.name.startswith(prefix) and p.suffix in (".tmp", ".old"):
            if p.is_dir() and not p.is_symlink():
                shutil.rmtree(p, ignore_errors=True)
            else:
                p.unlink(missing_ok=True)
            removed.append(p)
    return removed
