"""Precipitation attributed to events: the share that falls inside cyclone and river masks.

ClimateNet's analysis, per region and season: of all precipitation that fell in a region
(area-weighted), the share that fell at points and steps inside each class's mask; and the
same share for extreme precipitation, the part of each point's series above that point's own
95th and 99th percentile.

Precipitation is read through climnb's variable and unit handling
(:func:`climnb.io.netcdf.normalize`: ``PRECT``, ``tp``, ``PRECTOT``, ``pr``, ... in m s-1).
The percentiles need each point's whole series (a second pass, with the time axis in one
chunk and few latitudes per chunk); the shares are one lazy pass over mask and precipitation.

Examples
--------
>>> from climnb.data.synthetic import make_dataset
>>> ds, _ = make_dataset(n_time=8, seed=0)
>>> table = attributed_precipitation(ds.truth, ds.PRECT)
>>> sorted(table.measure.unique())
['above_p95', 'above_p99', 'total']
>>> bool(((table.share >= 0) & (table.share <= 1)).all())
True
"""

from __future__ import annotations

from dataclasses import dataclass

import dask
import dask.array as da
import numpy as np
import pandas as pd
import xarray as xr

from climnb.io.channels import CLASS_NAMES
from climnb.io.netcdf import normalize
from climnb.io.plausible import check_plausible
from climnb.stats.groups import CLASS_IDS, group_index
from climnb.stats.masks import MISSING, check_missing, check_same_grid
from climnb.stats.regions import BUILTIN, Region, region_masks

__all__ = [
    "attributed_precipitation",
    "precip_sums",
    "PrecipSums",
    "precipitation",
    "PRECIP_COLUMNS",
]

#: Columns of :func:`attributed_precipitation`.
PRECIP_COLUMNS = ("region", "season", "class_name", "measure", "mean_mm_day", "share")
MM_DAY = 1000.0 * 86400.0  # m s-1 -> mm day-1
_MM_DAY = MM_DAY  # the old private name, for one release
_CHUNK_BYTES = 128 * 2**20


def precipitation(ds: xr.Dataset, *, source: str = "fields") -> xr.DataArray:
    """The precipitation rate of ``ds`` as ``PRECT`` (m s-1) on the canonical grid, through
    the same names and units as labelling (``tp``, ``PRECTOT``, ``pr``, ... converted).

    Raises
    ------
    ValueError
        Naming ``source``: no precipitation, units that do not convert to m s-1, or a rate
        outside 0..2000 mm/day after them (:func:`climnb.io.plausible.check_plausible`).
    """
    try:
        rain = normalize(ds, required=["PRECT"]).PRECT
    except ValueError as err:
        raise ValueError(f"{source}: {err}") from None
    check_plausible(rain, source=source)  # 0..2000 mm/day: else the units are wrong
    return rain


def attributed_precipitation(
    mask: xr.DataArray,
    precip: xr.DataArray,
    *,
    regions: list[Region] | None = None,
    by: str = "season",
    percentiles: tuple[float, ...] = (95.0, 99.0),
    source: str = "mask",
) -> pd.DataFrame:
    """Share of total and extreme precipitation inside each class, per region and ``by`` group.

    Parameters
    ----------
    mask : a class mask (time, lat, lon).
    precip : precipitation rate (m s-1, :func:`precipitation`) on the same grid, over at least
        the mask's times.
    regions : default the whole globe.
    by : ``"season"``, ``"month"``, ``"year"`` or ``"all"``.
    percentiles : each point's own thresholds of extreme precipitation.

    Returns
    -------
    pandas.DataFrame
        :data:`PRECIP_COLUMNS`: ``measure`` is ``total`` or ``above_pNN``; ``mean_mm_day`` the
        area-weighted mean rate of that measure over the region and group (mm day-1);
        ``share`` the fraction of it inside the class's mask (NaN where none fell). Missing
        values (NaN rain, a missing value of the mask) are left out of both, never taken as
        no rain; ``attrs["missing"]`` says how many there were, and more than
        :data:`climnb.stats.masks.MISSING_LIMIT` of the values is refused (``ValueError``).
    """
    regions = regions or [BUILTIN["global"]]
    sums = precip_sums(mask, precip, regions=regions, by=by, percentiles=percentiles, source=source)
    table = _table(sums, percentiles, regions)
    table.attrs["missing"] = sums.note  # how many values were missing and left out
    return table


@dataclass
class PrecipSums:
    """What :func:`precip_sums` returns: ``sums`` (group, class (all, TC, AR), measure (total,
    above each threshold), region) of area-weighted precipitation (m s-1 times weights),
    ``steps`` per group, the group ``labels``, the region ``weights`` (region, lat, lon) and
    the ``thresholds`` (percentile, lat, lon, m s-1) used."""

    sums: np.ndarray
    steps: np.ndarray
    labels: tuple
    weights: xr.DataArray
    thresholds: np.ndarray
    valid: np.ndarray | None = None  # (group, region): the weights of the valid values summed
    missing: np.ndarray | None = None  # (time,): missing values (NaN) of each step
    note: str = ""  # how many values were missing (none: empty)


def precip_sums(
    mask: xr.DataArray,
    precip: xr.DataArray,
    *,
    regions: list[Region],
    by: str | int = "season",
    percentiles: tuple[float, ...] = (95.0, 99.0),
    thresholds: np.ndarray | None = None,
    source: str = "mask",
) -> PrecipSums:
    """Per-group sums of total and extreme precipitation, overall and inside each class.

    ``by`` is any grouping of :func:`climnb.stats.groups.group_index` (a season, month, year,
    or blocks of steps for resampling). ``thresholds`` (percentile, lat, lon) replace each
    point's own percentiles over this period: :mod:`climnb.stats.change_tables` passes a
    baseline period's to the other period. One lazy pass over mask and precipitation (and one
    more for the percentiles when none are given).
    """
    check_same_grid(mask, precip, (source, "the precipitation"))
    precip = precip.sel(time=mask.time).transpose("time", "lat", "lon")
    mask = mask.transpose("time", "lat", "lon")
    lat, lon = mask.lat.values, mask.lon.values
    weights = region_masks(regions, lat, lon, source=source) * np.cos(np.radians(lat))[:, None]
    idx, labels = group_index(mask.time, by)
    if thresholds is None:
        (thresholds,) = dask.compute(percentile_thresholds(precip, percentiles))
    thresholds = np.asarray(thresholds, np.float64)
    m, p = _dask(mask.data, precip.data)
    p = p.rechunk(m.chunks)
    w = da.from_array(weights.values.astype(np.float64), chunks=(-1, m.chunks[1], m.chunks[2]))
    q = da.from_array(thresholds, chunks=(-1, m.chunks[1], m.chunks[2]))
    g = da.from_array(idx.astype(np.int32), chunks=(m.chunks[0],))
    nq = thresholds.shape[0]
    parts = da.blockwise(
        _sums_block,
        "tgcvr",
        m,
        "tyx",
        p,
        "tyx",
        g,
        "t",
        q,
        "qyx",
        w,
        "ryx",
        new_axes={"g": len(labels), "c": 1 + len(CLASS_IDS), "v": 2 + nq},
        adjust_chunks={"t": 1},
        concatenate=True,
        dtype=np.float64,
        n_groups=len(labels),
        meta=np.empty((0,) * 5, np.float64),
    )
    # missing: NaN rain, or a step and point the mask lacks (never zero rain or background)
    bad = da.isnan(p) | (m == MISSING)
    sums, missing = dask.compute(parts.sum(axis=0), bad.sum(axis=(1, 2)))
    steps = np.bincount(idx, minlength=len(labels))
    values = precip.rename(precip.name or "precipitation")
    note = check_missing(values, source=source, missing=missing)
    valid = sums[:, 0, -1, :]
    return PrecipSums(
        sums[:, :, :-1], steps, tuple(labels), weights, thresholds, valid, missing, note
    )


def _dask(*arrays):
    return [a if isinstance(a, da.Array) else da.from_array(a, chunks=(1, -1, -1)) for a in arrays]


def percentile_thresholds(precip: xr.DataArray, percentiles) -> da.Array:
    """(percentile, lat, lon) thresholds, each point's own over the period (lazy)."""
    nt, _, nx = precip.shape
    rows = max(1, int(_CHUNK_BYTES // max(nt * nx * 8, 1)))
    series = precip.chunk({"time": -1, "lat": rows, "lon": -1})
    q = series.quantile([v / 100.0 for v in percentiles], dim="time")
    return q.data if isinstance(q.data, da.Array) else da.from_array(q.data)


_thresholds = percentile_thresholds  # the old private name, for one release


def _sums_block(m, p, g, q, w, n_groups):
    """(1, group, class (all, TC, AR), measure (total, above each threshold), region) sums
    of precipitation times the region weights in one chunk; the blockwise pass calls it with
    the chunk's mask ``m``, rate ``p``, groups ``g``, thresholds ``q`` and weights ``w``."""
    p = np.asarray(p, np.float64)
    ok = np.isfinite(p) & (m != MISSING)  # a missing value is left out, not taken as 0
    p = np.where(ok, p, 0.0)
    out = np.zeros((1, n_groups, 1 + len(CLASS_IDS), 2 + q.shape[0], w.shape[0]))
    measures = [p] + [np.where(p > q[i], p, 0.0) for i in range(q.shape[0])] + [ok * 1.0]
    flat_w = w.reshape(w.shape[0], -1)
    for group in np.unique(g):
        sel = g == group
        for v, x in enumerate(measures):
            xs = x[sel]
            out[0, group, 0, v] = flat_w @ xs.sum(0).ravel()
            for c, k in enumerate(CLASS_IDS, start=1):
                inside = np.where(m[sel] == k, xs, 0.0).sum(0).ravel()
                out[0, group, c, v] = flat_w @ inside
    return out


def _table(ps: PrecipSums, percentiles, regions) -> pd.DataFrame:
    sums, steps, labels = ps.sums, ps.steps, ps.labels
    area = ps.weights.sum(("lat", "lon")).values  # (region,)
    valid = ps.valid if ps.valid is not None else area[None, :] * steps[:, None]
    measures = ["total"] + [f"above_p{v:g}" for v in percentiles]
    rows = []
    for gi, group in enumerate(labels):
        if steps[gi] == 0:
            continue
        for v, measure in enumerate(measures):
            for r, region in enumerate(regions):
                total = sums[gi, 0, v, r]
                for c, k in enumerate(CLASS_IDS, start=1):
                    rows.append(
                        {
                            "region": region.name,
                            "season": group,
                            "class_name": CLASS_NAMES[k],
                            "measure": measure,
                            "mean_mm_day": MM_DAY * total / valid[gi, r]
                            if valid[gi, r] > 0
                            else np.nan,
                            "share": sums[gi, c, v, r] / total if total > 0 else np.nan,
                        }
                    )
    return pd.DataFrame(rows, columns=list(PRECIP_COLUMNS))
