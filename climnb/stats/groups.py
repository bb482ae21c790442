"""Time groups (season, month, year, blocks of steps) and per-group class counts in one lazy pass.

:func:`group_index` gives each time step its group; :func:`class_counts` counts, per group,
class and grid point, the steps a point lies inside each class: one dask task per time chunk
reduces its chunk to small (group, class, lat, lon) counts, which are then summed in a tree,
so the masks are read once and memory stays that of a few chunks whatever the length. Works
with any calendar xarray decodes (``noleap`` CAM5 times are ``cftime`` objects).

Examples
--------
>>> from climnb.synthetic import make_dataset
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

    Returns a Dataset with ``count`` (group, class, lat, lon) int32 (dask; one task per time
    chunk of ``mask`` and a tree sum) and ``steps`` (group) int64, the steps in each group.
    """
    mask = mask.transpose("time", "lat", "lon")
    idx, labels = group_index(mask.time, by)
    data = (
        mask.data
        if isinstance(mask.data, da.Array)
        else da.from_array(mask.data, chunks=(1, -1, -1))
    )
    groups = da.from_array(idx.astype(np.int32), chunks=(data.chunks[0],))
    parts = da.blockwise(
        _count_block,
        "tgkyx",
        data,
        "tyx",
        groups,
        "t",
        new_axes={"g": len(labels), "k": len(classes)},
        adjust_chunks={"t": 1},
        dtype=np.int32,
        n_groups=len(labels),
        classes=tuple(classes),
        meta=np.empty((0, 0, 0, 0, 0), np.int32),
    )
    counts = parts.sum(axis=0, dtype=np.int32)
    dim = "group" if not isinstance(by, str) else by if by != "all" else "group"
    return xr.Dataset(
        {
            "count": ((dim, "class", "lat", "lon"), counts),
            "steps": ((dim,), np.bincount(idx, minlength=len(labels)).astype(np.int64)),
        },
        coords={
            dim: np.array(labels, object if isinstance(labels[0], str) else None),
            "class_id": ("class", np.array(classes, np.uint8)),
            "lat": mask.lat,
            "lon": mask.lon,
        },
    )


def _count_block(block: np.ndarray, groups: np.ndarray, n_groups: int, classes) -> np.ndarray:
    """(1, group, class, lat, lon) counts of one time chunk."""
    out = np.zeros((1, n_groups, len(classes), *block.shape[1:]), np.int32)
    present = np.unique(groups)
    for g in present:
        steps = block if present.size == 1 else block[groups == g]
        for j, k in enumerate(classes):
            np.add.reduce(steps == k, axis=0, dtype=np.int32, out=out[0, g, j])
    return out
