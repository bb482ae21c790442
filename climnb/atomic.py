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
import uuid
from collections.abc import Iterator
from pathlib import Path

__all__ = ["atomic_path"]


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
