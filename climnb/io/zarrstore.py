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

climnb's own writer (:func:`climnb.io.files.write`) writes every chunk, fill values too.

Only stores on a local (or mounted) file system are checked; other stores (``s3://``) are
read as they are.

A chunk that is there but whose bytes are damaged (a bad copy, flipped bits) can only be seen
when it is read: :func:`guard_reads` makes every read of a Dataset opened from a store raise
:class:`ZarrStoreError` naming the store, the variable and the chunk, instead of the codec's
own error (``RuntimeError: error during zstd decompression`` from numcodecs, naming nothing).

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

__all__ = ["ZarrStoreError", "is_zarr", "check_store", "guard_reads"]

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


# ---------------------------------------------------------------------------------------------
# Reads: a chunk whose bytes cannot be decoded is named
# ---------------------------------------------------------------------------------------------


def guard_reads(ds, store: str | os.PathLike):
    """Make every read of ``ds`` (opened by ``xr.open_zarr`` from ``store``, lazily or with
    dask) raise :class:`ZarrStoreError` naming ``store``, the variable and the first chunk that
    cannot be read, when a chunk's bytes are damaged. Returns ``ds`` (changed in place: its
    arrays' readers are wrapped; dask graphs and their names stay as they are)."""
    from xarray.backends.zarr import ZarrArrayWrapper

    for name, var in ds.variables.items():
        for root in _roots(var):
            _wrap(root, ZarrArrayWrapper, str(store), str(name))
    return ds


def _roots(var):
    """The objects a variable's values are read through: its lazy array, or the arrays its
    dask graph reads from."""
    data = var._data  # noqa: SLF001 - the lazily indexed array (xarray has no public name)
    graph = getattr(data, "dask", None)
    if graph is None:
        return [data]
    roots = []
    for key, value in dict(graph).items():
        if isinstance(key, str) and key.startswith("original-"):
            roots.append(getattr(value, "value", value))  # a dask DataNode holds the object
    return roots


def _wrap(obj, wrapper_type, store: str, name: str) -> None:
    """Replace the :class:`ZarrArrayWrapper` under ``obj`` (through ``.array`` links) by a
    :class:`_GuardedArray`."""
    for _ in range(32):  # the chain is short: adapters, copy-on-write, lazy indexing, decoding
        child = getattr(obj, "array", None)
        if child is None or isinstance(child, _GuardedArray):
            return
        if isinstance(child, wrapper_type):
            obj.array = _guarded_type(wrapper_type)(child, store, name)
            return
        obj = child


_GUARDED: dict[type, type] = {}


def _guarded_type(wrapper_type: type) -> type:
    if wrapper_type not in _GUARDED:
        _GUARDED[wrapper_type] = type(
            "GuardedZarrArray", (_GuardedArray, wrapper_type), {"__slots__": ("_store", "_name")}
        )
    return _GUARDED[wrapper_type]


class _GuardedArray:
    """Mixed into xarray's ``ZarrArrayWrapper``: a failed read names the store, the variable
    and the chunk."""

    __slots__ = ()  # the combined type holds ``_store`` and ``_name``

    def __init__(self, inner, store: str, name: str):
        super().__init__(inner.get_array())
        self._store, self._name = store, name

    def __reduce__(self):  # for dask's distributed workers
        return _rebuild, (self.get_array(), self._store, self._name)

    def __getitem__(self, key):
        try:
            return super().__getitem__(key)
        except (ZarrStoreError, MemoryError, KeyboardInterrupt):
            raise
        except Exception as err:  # noqa: BLE001 - codecs raise many kinds (RuntimeError, ...)
            raise damaged_chunk(self._store, self._name, self.get_array(), key, err) from None


def _rebuild(array, store: str, name: str):
    from xarray.backends.zarr import ZarrArrayWrapper

    return _guarded_type(ZarrArrayWrapper)(ZarrArrayWrapper(array), store, name)


def damaged_chunk(store: str, name: str, array, key, err: BaseException) -> ZarrStoreError:
    """The error for a read of ``array[key]`` that failed with ``err``: the first chunk in the
    selection that cannot be read on its own is named."""
    chunk = _first_bad_chunk(array, getattr(key, "tuple", key))
    where = f"chunk {chunk}" if chunk else "a chunk"
    gist = str(err).strip().splitlines()[0][:160] if str(err).strip() else ""
    return ZarrStoreError(
        f"{store}: variable {name}: {where} cannot be read ({type(err).__name__}"
        + (f": {gist}" if gist else "")
        + "): its bytes are damaged; copy the store again or rewrite it"
    )


def _first_bad_chunk(array, key) -> str | None:
    """The key (``c/1/0``, as in the store) of the first chunk within ``key``'s bounding box
    that cannot be read alone, or None."""
    try:
        ranges = []
        for size, chunk, k in zip(
            array.shape, array.chunks, _expand(key, len(array.shape)), strict=True
        ):
            lo, hi = _bounds(k, size)
            ranges.append(range(lo // chunk, max(hi - 1, lo) // chunk + 1))
        for coords in itertools.product(*ranges):
            try:
                array.get_block_selection(coords)
            except Exception:  # noqa: BLE001 - this is the one
                return _chunk_key(array, coords)
    except Exception:  # noqa: BLE001 - naming the chunk is a kindness; the store is named anyway
        return None
    return None


def _expand(key, ndim: int) -> tuple:
    key = key if isinstance(key, tuple) else (key,)
    return tuple(key) + (slice(None),) * (ndim - len(key))


def _bounds(k, size: int) -> tuple[int, int]:
    if isinstance(k, slice):
        start, stop, step = k.indices(size)
        return (start, stop) if step > 0 else (stop + 1, start + 1)
    values = np.asarray(k)
    if values.dtype == bool:
        values = np.flatnonzero(values)
    if values.size == 0:
        return 0, 0
    values = np.where(values < 0, values + size, values)
    return int(values.min()), int(values.max()) + 1


def _chunk_key(array, coords: tuple[int, ...]) -> str:
    """The chunk's name in the store; for a sharded array, the shard file holding it."""
    if array.shards:
        per = [s // c for s, c in zip(array.shards, array.chunks, strict=True)]
        shard = tuple(c // p for c, p in zip(coords, per, strict=True))
        return f"{array.metadata.encode_chunk_key(shard)} (shard; chunk {coords})"
    return array.metadata.encode_chunk_key(coords)
