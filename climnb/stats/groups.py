"""Time groups (season, month, year, blocks of steps) and per-group class counts in one lazy pass.

:func:`group_index` gives each time step its group; :func:`class_counts` counts, per group,
class and grid point, the steps a point lies inside each class: one dask task per time chunk
reduces its chunk to small (group, class, lat, lon) counts, which are then summed in a tree,
so the masks are read once and memory stays that of a few chunks whatever the length. Works
with any calendar xarray decodes (``noleap`` CAM5 times are ``cftime`` objects).

Examples
--------
>>> from climnb.data.synthetic import make_dataset
>>> ds, _ = make_dataset(n_time=4, seed=0)
>>> idx, labels = group_index(ds.time, "season")
>>> labels, idx.tolist()
(('DJF', 'MAM', 'JJA', 'SON'), [0, 0, 0, 0])
"""

from __future__ import annotations

import dask.array as da
import numpy as np
import xarray as xr

__all__ = ["GROUPINGS", "SEASONS", "group_index", "class_counts", "CLASS_IDS"]

#: How time steps can be grouped.
GROUPINGS = ("all", "season", "month", "year")
SEASONS = ("DJF", "MAM", "JJA", "SON")
#: The classes counted (tropical cyclone, atmospheric river).
CLASS_IDS = (1, 2)


def group_index(time: xr.DataArray, by: str | int) -> tuple[np.ndarray, tuple]:
    """Group of each step of ``time`` and the groups' labels.

    ``by``: ``"all"`` (one group), ``"season"`` (DJF, MAM, JJA, SON; December with the
    following winter's months, as a climatological season), ``"month"`` (1..12), ``"year"``
    (the years present) or a positive number of consecutive steps (blocks for resampling; the
    last block may be shorter).
    """
    n = time.size
    if isinstance(by, (int, np.integer)) and not isinstance(by, bool):
        if by < 1:
            raise ValueError(f"a block must hold at least one step, got {by}")
        idx = np.arange(n) // int(by)
        return idx, tuple(range(int(idx.max()) + 1 if n else 0))
    if by == "all":
        return np.zeros(n, int), ("all",)
    if by == "season":
        return (time.dt.month.values.astype(int) % 12) // 3, SEASONS
    if by == "month":
        return time.dt.month.values.astype(int) - 1, tuple(range(1, 13))
    if by == "year":
        years = time.dt.year.values.astype(int)
        labels = tuple(int(y) for y in np.unique(years))
        return np.searchsorted(np.array(labels), years), labels
    raise ValueError(f"group by one of {', '.join(GROUPINGS)} or a number of steps, got {by!r}")


def class_counts(
    mask: xr.DataArray, by: str | int = "all", classes: tuple[int, ...] = CLASS_IDS
) -> xr.Dataset:
    """Lazy counts of the steps each grid point lies in each class, per group of ``by``.

    The time chunks are first made to hold one group each (cut where the group changes) and
    about :data:`TASK_BYTES` of mask (several file chunks joined); each is reduced to
    (class, lat, lon) counts, and each group's counts are summed in a tree.

    Returns a Dataset with ``count`` (group, class, lat, lon) int32 (dask) and ``steps``
    (group) int64, the steps in each group.
    """
    mask = mask.transpose("time", "lat", "lon")
    idx, labels = group_index(mask.time, by)
    data = (
        mask.data
        if isinstance(mask.data, da.Array)
        else da.from_array(mask.data, chunks=(1, -1, -1))
    )
    data = data.rechunk({0: _group_chunks(idx, data)})
    parts = data.map_blocks(
        _count_block,
        classes=tuple(classes),
        new_axis=1,
        chunks=((1,) * data.numblocks[0], (len(classes),), *data.chunks[1:]),
        dtype=np.int32,
        meta=np.empty((0, 0, 0, 0), np.int32),
    )
    first = np.cumsum((0,) + data.chunks[0][:-1])  # each chunk's first step
    owner = idx[first] if idx.size else np.zeros(0, int)
    shape = (len(classes), *data.shape[1:])
    sums = [
        parts[np.flatnonzero(owner == g)].sum(axis=0, dtype=np.int32)
        if (owner == g).any()
        else da.zeros(shape, np.int32, chunks=parts.chunks[1:])
        for g in range(len(labels))
    ]
    counts = da.stack(sums) if sums else da.zeros((0, *shape), np.int32)
    dim = "group" if not isinstance(by, str) else by if by != "all" else "group"
    return xr.Dataset(
        {
            "count": ((dim, "class", "lat", "lon"), counts),
            "steps": ((dim,), np.bincount(idx, minlength=len(labels)).astype(np.int64)),
        },
        coords={
            dim: np.array(labels, object if labels and isinstance(labels[0], str) else None),
            "class_id": ("class", np.array(classes, np.uint8)),
            "lat": mask.lat,
            "lon": mask.lon,
        },
    )


#: Bytes of mask per counting task (several file chunks are joined up to this).
TASK_BYTES = 64 * 2**20


def _group_chunks(idx: np.ndarray, data: da.Array) -> tuple[int, ...]:
    """Time chunks that never span two groups and hold about :data:`TASK_BYTES` (at least
    the input's own chunks, cut where the group changes)."""
    step_bytes = max(int(np.prod(data.shape[1:])) * data.dtype.itemsize, 1)
    target = max(max(data.chunks[0], default=1), TASK_BYTES // step_bytes, 1)
    cuts = set(np.flatnonzero(np.diff(idx)) + 1)
    chunks, size = [], 0
    for t in range(idx.size):
        if size and (t in cuts or size >= target):
            chunks.append(size)
            size = 0
        size += 1
    if size:
        chunks.append(size)
    return tuple(chunks)


def _count_block(block: np.ndarray, classes) -> np.ndarray:
    """(1, class, lat, lon) counts of one time chunk, added one step at a time into small
    accumulators (uint16 while they cannot overflow): several times faster than reducing
    boolean blocks along time."""
    acc = np.zeros(
        (len(classes), *block.shape[1:]), np.uint16 if block.shape[0] < 2**16 else np.int32
    )
    for step in block:
        for j, k in enumerate(classes):
            acc[j] += step == k
    return acc.astype(np.int32)[None]
