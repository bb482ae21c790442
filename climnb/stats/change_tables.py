"""Change of events and attributed precipitation between two periods or runs, with significance.

The tables of :mod:`climnb.stats.events` and :mod:`climnb.stats.precip`, compared the way
:mod:`climnb.stats.change` compares frequency maps. Each period is cut into blocks (whole years
by default, or a number of steps) and every quantity is a ratio of per-block sums:

* ``events_per_year``: events (by the block of their genesis) over the years the blocks cover;
  ``landfalls_per_year``: the same for the events that make landfall in each region;
* ``mean_lifetime_h``, ``mean_max_wind``, ``mean_min_psl`` (storms), ``mean_max_ivt``
  (rivers): the sum over the block's events over their number;
* ``share_of_total``, ``share_of_above_p95``, ...: precipitation inside the class's mask over
  all precipitation of the region (area-weighted); extremes are above each point's own
  percentile of both periods pooled, the same thresholds for both (so that a wetter ``B``
  shows as more extreme precipitation, and the periods stay exchangeable under the
  permutation: thresholds of ``A`` alone would give ``A`` exactly the percentile's share of
  exceedances and ``B`` a noisy one); ``mean_mm_day`` (class ``all``): the region's mean
  precipitation rate.

The p-value comes from permutations of whole blocks between the periods (two-sided), the
confidence interval from a block bootstrap within each period, and, across the rows of a
table, Benjamini-Hochberg at ``alpha_FDR = 2 alpha`` (Wilks 2016) gives ``significant_fdr``.

Examples
--------
>>> from climnb.stats import class_mask
>>> from climnb.data.synthetic import Future, make_dataset
>>> a, _ = make_dataset(n_time=64, seed=1, n_tc=1, n_ar=2)
>>> b, _ = make_dataset(n_time=64, seed=2, n_tc=1, n_ar=2, future=Future(more_rivers=3))
>>> table = compare_events(class_mask(a), class_mask(b), CompareConfig(block=8, n_resamples=199))
>>> row = table.set_index(["quantity", "class_name", "region"]).loc[
...     ("events_per_year", "atmospheric_river", "global")]
>>> bool(row.change > 0 and row.significant)
True
"""

from __future__ import annotations

import logging

import dask
import numpy as np
import pandas as pd
import xarray as xr

from climnb.io.channels import CLASS_NAMES
from climnb.stats.change import HEADLINE_COLUMNS, CompareConfig, check_pair, fdr_mask
from climnb.stats.events import event_steps, event_table
from climnb.stats.groups import CLASS_IDS, group_index
from climnb.stats.masks import check_same_grid
from climnb.stats.precip import MM_DAY, percentile_thresholds, precip_sums
from climnb.stats.regions import BUILTIN, Region
from climnb.tracks import track_times

__all__ = ["CHANGE_COLUMNS", "compare_events", "compare_precip", "ratio_change", "change_text"]

log = logging.getLogger(__name__)

#: Columns of :func:`compare_events` and :func:`compare_precip`: the headline's, with FDR.
CHANGE_COLUMNS = ("quantity", *HEADLINE_COLUMNS, "significant_fdr")
_DAYS_PER_YEAR = {"noleap": 365.0, "365_day": 365.0, "360_day": 360.0, "all_leap": 366.0}


def ratio_change(num_a, den_a, num_b, den_b, config: CompareConfig, rng) -> dict[str, np.ndarray]:
    """Change of ratio statistics ``sum(num) / sum(den)`` between two sets of blocks.

    Parameters
    ----------
    num_a, den_a, num_b, den_b : (blocks, columns) per-block numerators and denominators.
    config : alpha and number of resamples.
    rng : a numpy Generator.

    Returns
    -------
    dict
        ``a``, ``b``, ``change`` (``b - a``), ``p_value`` (permutation of whole blocks between
        the periods, two-sided; NaN where the change is), ``ci_low``, ``ci_high`` (block
        bootstrap within each period), one value per column.
    """
    num_a, den_a, num_b, den_b = (np.asarray(x, np.float64) for x in (num_a, den_a, num_b, den_b))
    na, nb, n = num_a.shape[0], num_b.shape[0], config.n_resamples
    a, b = _div(num_a.sum(0), den_a.sum(0)), _div(num_b.sum(0), den_b.sum(0))
    change = b - a
    num, den = np.concatenate([num_a, num_b]), np.concatenate([den_a, den_b])
    in_b = np.zeros((n, na + nb))
    for i in range(n):
        in_b[i, rng.permutation(na + nb)[:nb]] = 1.0
    pb, qb = in_b @ num, in_b @ den
    null = _div(pb, qb) - _div(num.sum(0) - pb, den.sum(0) - qb)
    valid = np.isfinite(null)
    tol = 1e-12 * np.maximum(np.abs(change), 1e-12)
    extreme = valid & (np.abs(np.nan_to_num(null)) >= np.abs(change) - tol)
    p = np.where(np.isfinite(change), (1 + extreme.sum(0)) / (1 + valid.sum(0)), np.nan)
    ta, tb = _draws(na, n, rng), _draws(nb, n, rng)
    boot = _div(tb @ num_b, tb @ den_b) - _div(ta @ num_a, ta @ den_a)
    q = (100 * config.alpha / 2, 100 * (1 - config.alpha / 2))
    with np.errstate(all="ignore"):
        lo, hi = (
            np.nanpercentile(boot, q, axis=0)
            if np.isfinite(boot).any(0).all()
            else _nan_percentiles(boot, q)
        )
    return {"a": a, "b": b, "change": change, "ci_low": lo, "ci_high": hi, "p_value": p}


def _div(x, y):
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(y > 0, x / np.where(y > 0, y, 1.0), np.nan)


def _draws(n_blocks: int, n: int, rng) -> np.ndarray:
    """(n, blocks) times each block is drawn in ``n`` bootstrap samples with replacement."""
    draws = rng.integers(0, n_blocks, size=(n, n_blocks))
    return np.stack([np.bincount(d, minlength=n_blocks) for d in draws]).astype(float)


def _nan_percentiles(boot, q):
    out = np.full((2, boot.shape[1]), np.nan)
    for j in range(boot.shape[1]):
        col = boot[:, j][np.isfinite(boot[:, j])]
        if col.size:
            out[:, j] = np.percentile(col, q)
    return out[0], out[1]


def _blocks(time: xr.DataArray, block, name: str) -> tuple[np.ndarray, np.ndarray]:
    """Block of each step and the years each block covers; refuses fewer than two blocks."""
    idx, labels = group_index(time, block)
    if len(labels) < 2:
        what = "one year" if block == "year" else f"{block} steps"
        raise ValueError(
            f"{name}: period of {time.size} steps is shorter than two bootstrap blocks of "
            f"{what}; give a longer period or a shorter --block"
        )
    return idx, np.bincount(idx, minlength=len(labels)) * _years_per_step(time)


def _years_per_step(time: xr.DataArray) -> float:
    """The length of one step in years of the calendar (365 days for ``noleap``)."""
    calendar = getattr(time.values[0], "calendar", None) or time.encoding.get("calendar", "")
    days = _DAYS_PER_YEAR.get(str(calendar), 365.2425)
    if time.size < 2:
        return 1.0 / days
    step = pd.to_timedelta(pd.Series(np.diff(time.values))).median()
    return step / pd.Timedelta(days=1) / days


def _step_of(time: xr.DataArray, starts) -> np.ndarray:
    """The index in ``time`` of each of ``starts`` (events' first times, in ``time``'s own
    calendar: :func:`climnb.stats.events.event_steps`)."""
    where = {t: i for i, t in enumerate(track_times(time.values))}
    return np.array([where[t] for t in track_times(np.asarray(list(starts), object))], int)


def compare_events(
    a: xr.DataArray,
    b: xr.DataArray,
    config: CompareConfig | None = None,
    *,
    fields: tuple[xr.Dataset | None, xr.Dataset | None] = (None, None),
    tracks: tuple[pd.DataFrame | None, pd.DataFrame | None] = (None, None),
    regions: list[Region] | None = None,
    names: tuple[str, str] = ("A", "B"),
) -> pd.DataFrame:
    """Change of event counts, landfalls and intensities between two class masks.

    Parameters
    ----------
    a, b : class masks (:func:`climnb.stats.masks.class_mask`) on the same grid and classes.
    config : block, alpha, resamples, seed (as :func:`climnb.stats.change.compare`).
    fields : the fields of each mask (winds, ``PSL``, IVT) for the intensities; rows whose
        fields are missing in either period are left out.
    tracks : the tracks of each mask (:func:`climnb.tracks.read_tracks`); tracked here when
        None.
    regions : regions of landfall (default the globe: landfall on any land).
    names : what to call ``a`` and ``b`` in messages.

    Returns
    -------
    pandas.DataFrame
        :data:`CHANGE_COLUMNS`, one row per quantity, class and region.
    """
    config = config or CompareConfig()
    check_pair(a, b, names)
    regions = list(regions or [BUILTIN["global"]])
    blocks = [_blocks(m.time, config.block, n) for m, n in ((a, names[0]), (b, names[1]))]
    per_block = []
    for m, f, t, n, (idx, years) in zip((a, b), fields, tracks, names, blocks, strict=True):
        steps = event_steps(m, t, fields=f, regions=regions, source=n)
        per_block.append(_event_blocks(steps, event_table(steps), m, idx, years, regions))
    rng = np.random.default_rng(config.seed)
    rows = []
    for key in per_block[0]:
        (na, da_), (nb, db) = per_block[0][key], per_block[1][key]
        if not (np.isfinite(na).all() and np.isfinite(nb).all()):
            log.info("%s of %s in %s: values missing in a period, left out", *key)
            continue
        s = ratio_change(na[:, None], da_[:, None], nb[:, None], db[:, None], config, rng)
        rows.append({"quantity": key[0], "class_name": key[1], "region": key[2], **_row(s)})
    return _finish(rows, config)


def _event_blocks(steps, table, mask, idx, years, regions) -> dict:
    """``(quantity, class, region) -> (numerator, denominator)`` per block of one period."""
    n_blocks = years.size
    start = _step_of(mask.time, table.start) if len(table) else np.zeros(0, int)
    table = table.assign(block=idx[start])
    fallen = steps.landfalls.drop_duplicates(["track_id", "region"])
    out = {}
    for k in CLASS_IDS:
        name = CLASS_NAMES[k]
        ev = table[table.class_name == name]
        count = np.bincount(ev.block, minlength=n_blocks).astype(float)
        out[("events_per_year", name, "global")] = (count, years)
        for r in regions:
            ids = set(fallen.track_id[(fallen.region == r.name) & (fallen.class_name == name)])
            hit = ev[ev.track_id.isin(ids)]
            landed = np.bincount(hit.block, minlength=n_blocks).astype(float)
            out[("landfalls_per_year", name, r.name)] = (landed, years)
        columns = ("lifetime_h", "max_wind", "min_psl") if k == 1 else ("lifetime_h", "max_ivt")
        for c in columns:
            values = ev[c].astype(float).to_numpy()
            total = np.bincount(ev.block, weights=values, minlength=n_blocks)
            out[(f"mean_{c}", name, "global")] = (total, count)
    return out


def _row(s: dict) -> dict:
    keys = ("a", "b", "change", "ci_low", "ci_high", "p_value")
    return {k: float(np.asarray(s[k]).ravel()[0]) for k in keys}


def _finish(rows: list[dict], config: CompareConfig) -> pd.DataFrame:
    out = pd.DataFrame(rows, columns=list(CHANGE_COLUMNS))
    p = out.p_value.to_numpy(float)
    out["significant"] = np.nan_to_num(p, nan=1.0) < config.alpha
    out["significant_fdr"] = fdr_mask(p, config.alpha_fdr) if len(out) else []
    return out


def compare_precip(
    a: xr.DataArray,
    precip_a: xr.DataArray,
    b: xr.DataArray,
    precip_b: xr.DataArray,
    config: CompareConfig | None = None,
    *,
    regions: list[Region] | None = None,
    percentiles: tuple[float, ...] = (95.0, 99.0),
    names: tuple[str, str] = ("A", "B"),
) -> pd.DataFrame:
    """Change of the precipitation attributed to each class between two periods or runs.

    Parameters
    ----------
    a, b : class masks on the same grid and classes.
    precip_a, precip_b : their precipitation rates (m s-1,
        :func:`climnb.stats.precip.precipitation`), over at least the masks' times.
    config : block, alpha, resamples, seed.
    regions : default the globe.
    percentiles : extremes: above each point's own percentiles of both periods pooled.
    names : what to call ``a`` and ``b`` in messages.

    Returns
    -------
    pandas.DataFrame
        :data:`CHANGE_COLUMNS`: ``share_of_total``, ``share_of_above_pNN`` per class and
        region (fractions), and ``mean_mm_day`` (class ``all``) per region.
    """
    config = config or CompareConfig()
    check_pair(a, b, names)
    regions = list(regions or [BUILTIN["global"]])
    for m, n in ((a, names[0]), (b, names[1])):
        _blocks(m.time, config.block, n)
    check_same_grid(a, precip_a, (names[0], "the precipitation"))
    check_same_grid(a, precip_b, (names[0], f"{names[1]}'s precipitation"))
    pooled = xr.concat(
        [precip_a.sel(time=a.time).drop_vars("time"), precip_b.sel(time=b.time).drop_vars("time")],
        "time",
    )
    (thresholds,) = dask.compute(percentile_thresholds(pooled, percentiles))
    sa, sb = (
        precip_sums(
            m,
            p,
            regions=regions,
            by=config.block,
            percentiles=percentiles,
            thresholds=thresholds,
            source=n,
        )
        for m, p, n in ((a, precip_a, names[0]), (b, precip_b, names[1]))
    )
    area = sa.weights.sum(("lat", "lon")).values
    measures = ["total"] + [f"above_p{v:g}" for v in percentiles]
    rng = np.random.default_rng(config.seed)
    rows = []
    for r, region in enumerate(regions):
        rate = [MM_DAY * s.sums[:, 0, 0, r] / area[r] for s in (sa, sb)]
        s = ratio_change(
            rate[0][:, None], sa.steps[:, None], rate[1][:, None], sb.steps[:, None], config, rng
        )
        rows.append({"quantity": "mean_mm_day", "class_name": "all", "region": region.name})
        rows[-1].update(_row(s))
        for v, measure in enumerate(measures):
            num = [s.sums[:, 1:, v, r] for s in (sa, sb)]
            den = [np.repeat(s.sums[:, :1, v, r], len(CLASS_IDS), axis=1) for s in (sa, sb)]
            res = ratio_change(num[0], den[0], num[1], den[1], config, rng)
            for c, k in enumerate(CLASS_IDS):
                rows.append(
                    {
                        "quantity": f"share_of_{measure}",
                        "class_name": CLASS_NAMES[k],
                        "region": region.name,
                        **{key: float(val[c]) for key, val in res.items()},
                    }
                )
    return _finish(rows, config)


def change_text(table: pd.DataFrame) -> str:
    """A change table as text: shares in percent, other quantities in their own units."""
    t = table.copy()
    share = t.quantity.str.startswith("share_of")
    for c in ("a", "b", "change", "ci_low", "ci_high"):
        t.loc[share, c] = 100.0 * t.loc[share, c]
    t.loc[share, "quantity"] = t.loc[share, "quantity"] + " %"
    t = t.rename(columns={"significant_fdr": "FDR"})
    return t.to_string(index=False, float_format=lambda v: f"{v:.3g}")
