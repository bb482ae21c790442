"""Input paths as given on a command line: globs expanded, each path checked
(:func:`expand_paths`). Imports nothing heavy, so that a command can check its inputs and
outputs before it loads xarray and dask.

Examples
--------
>>> expand_paths("/no/such/file.nc")
Traceback (most recent call last):
...
FileNotFoundError: no such file: /no/such/file.nc
"""

from __future__ import annotations

import errno
import glob
import os
from collections.abc import Sequence

__all__ = ["expand_paths"]


def expand_paths(paths: str | os.PathLike | Sequence[str | os.PathLike]) -> list[str]:
    """Input paths with globs expanded (sorted).

    Raises
    ------
    FileNotFoundError
        Naming a path that does not exist, a glob that matches nothing, a broken symbolic
        link (and where it points) or a loop of symbolic links.
    """
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    out = []
    for p in map(str, paths):
        matches = sorted(glob.glob(p)) if glob.has_magic(p) else [p]
        if not matches:
            raise FileNotFoundError(f"no such file: {p}")
        for m in matches:
            _check_exists(m)
        out += matches
    if not out:
        raise FileNotFoundError("no input files given")
    return out


def _check_exists(path: str) -> None:
    """Refuse a path that cannot be opened, saying why: missing, a broken link, a loop."""
    try:
        os.stat(path)
    except OSError as err:
        if err.errno == errno.ELOOP:
            raise FileNotFoundError(
                f"{path}: a loop of symbolic links (it never reaches a file); fix the link"
            ) from None
        if os.path.islink(path):
            raise FileNotFoundError(
                f"{path}: a broken symbolic link (to {os.readlink(path)}, which does not exist)"
            ) from None
        if err.errno == errno.ENOENT:
            raise FileNotFoundError(f"no such file: {path}") from None
        raise OSError(err.errno, err.strerror, path) from None
