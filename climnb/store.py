"""Moved to :mod:`climnb.io.files`: this path warns, and works for one release.

Two names changed on the way: ``input_grid(paths)`` is :func:`climnb.io.files.read_grid`
(``climnb.io.files.input_grid`` takes a Dataset), and ``expand(paths)`` is
:func:`climnb.io.files.expand_paths` (which gives strings).
"""

import importlib
import warnings
from pathlib import Path

_new = importlib.import_module("climnb.io.files")
globals().update({k: v for k, v in vars(_new).items() if not k.startswith("__")})
input_grid = _new.read_grid
OutputError, check_output, is_zarr = _new.OutputError, _new.check_output, _new.is_zarr
open_fields, write = _new.open_fields, _new.write
__all__ = ["OutputError", "is_zarr", "expand", "open_fields", "input_grid", "check_output", "write"]


def expand(paths) -> list[Path]:
    """Input paths with globs expanded (sorted), as paths."""
    return [Path(p) for p in _new.expand_paths(paths)]


warnings.warn(
    "climnb.store moved to climnb.io.files; import it from there",
    DeprecationWarning,
    stacklevel=2,
)
