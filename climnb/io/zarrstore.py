"""Zarr stores as they come: is a path one, and is it whole.

Zarr reads a chunk that is not in the store as the array's fill value, and xarray skips a
folder without array metadata: a store that lost a chunk or a variable's ``zarr.json``
(``.zarray``/``.zattrs`` in Zarr format 2) would be read without a word, a quarter of the globe
as missing data or a whole class of variables gone. :func:`check_store` refuses such a store,
naming it, the variable and what is missing:

* a variable's folder without its metadata: refused;
* an absent chunk of a floating-point variable (a field: no climnb channel has a chunk of
  fill values only) or of a coordinate: refused;
* an absent chunk of an integer or boolean variable (a mask): read as the fill value (0,
  background), with a warning naming the chunk. Zarr and xarray leave out chunks holding only
  the fill value by default (``write_empty_chunks=False``), so a mask store written that way
  has them legitimately; refusing would refuse every such store.

climnb's own writer (:func:`climnb.store.write`) writes every chunk, fill values too.

Only stores on a local (or mounted) file system are checked; other stores (``s3://``) are
read as they are.

Examples
--------
>>> import tempfile, pathlib
>>> import numpy as np, xarray as xr
>>> path = pathlib.Path(tempfile.mkdtemp()) / "f.zarr"
>>> _ = xr.Dataset({"TMQ": (("time", "lat"), np.ones((2, 3)))}).chunk({"time": 1}).to_zarr(
...     path, zarr_format=3, consolidated=False)
>>> check_store(path)
>>> (path / "TMQ" / "c" / "1" / "0").unlink()
>>> check_store(path)
Traceback (most recent call last):
...
climnb.io.zarrstore.ZarrStoreError: ...f.zarr: variable TMQ lacks chunk c/1/0 (1 of 2 ...
"""

from __future__ import annotations

import itertools
import logging
import math
import os
from pathlib import Path

import numpy as np

__all__ = ["ZarrStoreError", "is_zarr", "check_store"]

log = logging.getLogger(__name__)

_MARKERS = ("zarr.json", ".zgroup", ".zarray")
_ARRAY_V2 = (".zarray", ".zattrs")


class ZarrStoreError(ValueError):
    """A Zarr store that lacks a chunk or a variable's metadata."""


def is_zarr(path: str | os.PathLike) -> bool:
    """A Zarr store: a ``*.zarr`` path, or a directory holding Zarr metadata."""
    p = str(path)
    return p.rstrip("/").endswith(".zarr") or (
        os.path.isdir(p) and any(os.path.exists(os.path.join(p, m)) for m in _MARKERS)
    )


def check_store(path: str | os.PathLike) -> None:
    """Refuse a Zarr store on disk that lacks a variable's metadata or a chunk of an array.

    Raises
    ------
    ZarrStoreError
        Naming the store, the variable and the missing file or chunk (the first one, with the
        number missing).
    """
    root = Path(path)
    if not root.is_dir():
        return
    if not any((root / m).exists() for m in _MARKERS):
        raise ZarrStoreError(
            f"{root}: holds no Zarr metadata (zarr.json, or .zgroup in Zarr format 2): an empty "
            "or incomplete copy of a store, or not a store"
        )
    _check_metadata(root)
    import zarr

    group = zarr.open_group(str(root), mode="r")
    for name, array in sorted(group.arrays()):
        _check_chunks(root, name, array)


def _check_metadata(root: Path) -> None:
    """Every folder of the store's top level is an array or a group with its metadata."""
    v2 = (root / ".zgroup").exists()
    for sub in sorted(root.iterdir()):
        if not sub.is_dir() or sub.name.startswith("."):
            continue
        if (sub / "zarr.json").exists() or (sub / ".zgroup").exists():
            continue
        missing = [m for m in _ARRAY_V2 if not (sub / m).exists()] if v2 else ["zarr.json"]
        if not v2 or missing:
            what = " and ".join(missing)
            raise ZarrStoreError(
                f"{root}: variable {sub.name} has no {what} (its Zarr metadata: shape, type, "
                "dimensions); the store is incomplete: copy it again or rewrite it"
            )


def _check_chunks(root: Path, name: str, array) -> None:
    """Every chunk (every shard, for a sharded array) of ``array`` is a file in the store; a
    mask's absent chunks are taken as its fill value, with a warning (see :func:`_sparse`)."""
    grid = array.shards or array.chunks
    counts = [math.ceil(s / c) for s, c in zip(array.shape, grid, strict=True)]
    total = math.prod(counts)
    folder = root / name
    sizes = {
        Path(dirpath, f).relative_to(folder).as_posix(): os.path.getsize(Path(dirpath, f))
        for dirpath, _, files in os.walk(folder)
        for f in files
    }
    empty = sorted(k for k, n in sizes.items() if n == 0 and not k.startswith("."))
    if empty:  # no codec writes a chunk of no bytes: a copy cut short
        raise ZarrStoreError(
            f"{root}: variable {name} has an empty chunk file {empty[0]} ({len(empty)} empty): "
            "the store is incomplete: copy it again or rewrite it"
        )
    present = set(sizes)
    keys = (array.metadata.encode_chunk_key(c) for c in itertools.product(*map(range, counts)))
    missing = [k for k in keys if k not in present]
    if not missing:
        return
    what = f"{root}: variable {name} lacks chunk {missing[0]} ({len(missing)} of {total} missing"
    if _sparse(name, array):
        log.warning(
            "%s; read as the fill value %s, as Zarr does for chunks written without their "
            "empty ones): if the store was damaged, copy it again",
            what,
            array.fill_value,
        )
        return
    raise ZarrStoreError(
        f"{what}; Zarr would read them as the fill value {array.fill_value}); copy the store "
        "again, or rewrite it with every chunk (write_empty_chunks=True)"
    )


def _sparse(name: str, array) -> bool:
    """Whether absent chunks of ``array`` may mean its fill value: an integer or boolean data
    variable (a mask: xarray and Zarr leave out its chunks of background by default). A
    floating-point field (no climnb channel has a chunk of fill values only) or a coordinate
    with an absent chunk is damaged."""
    dims = getattr(array.metadata, "dimension_names", None) or array.attrs.get("_ARRAY_DIMENSIONS")
    coordinate = list(dims or []) == [name]
    return not coordinate and (
        np.issubdtype(array.dtype, np.integer) or np.issubdtype(array.dtype, np.bool_)
    )
