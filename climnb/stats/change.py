"""Change between two periods or runs, with significance that respects serial correlation.

Each period is cut into blocks of consecutive time steps (whole years by default, or a number
of steps): within a block, steps are strongly correlated; between blocks much less. The masks
are reduced once (:func:`climnb.stats.groups.class_counts` by block) and everything after works
on the small per-block counts:

* the change of frequency, ``B - A``, at each point and for each region (area-weighted);
* its p-value, by permutation of whole blocks between the two periods (two-sided; the
  smallest p-value is ``1 / (n_resamples + 1)``);
* its confidence interval, by a block bootstrap: blocks drawn with replacement within each
  period (percentiles ``alpha / 2`` and ``1 - alpha / 2``);
* across grid points, the false discovery rate of Benjamini and Hochberg at
  ``alpha_FDR = 2 alpha`` (Wilks 2016, BAMS 97, 2263-2273: this choice keeps the global
  test's level near ``alpha`` for spatially correlated fields). Maps stipple the points that
  pass.

:func:`compare` returns both the maps (a Dataset) and the headline table (one row per class
and region: A, B, change, interval, p-value, significant).

Examples
--------
>>> from climnb.data.synthetic import Future, make_dataset
>>> a, _ = make_dataset(n_time=48, seed=1, n_tc=0, n_ar=2)
>>> b, _ = make_dataset(n_time=48, seed=2, n_tc=0, n_ar=2, future=Future(more_rivers=3))
>>> result = compare(a.truth, b.truth, CompareConfig(block=8, n_resamples=199))
>>> row = result.table.set_index(["class_name", "region"]).loc[("atmospheric_river", "global")]
>>> bool(row.change > 0 and row.significant)
True
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

import dask
import numpy as np
import pandas as pd
import xarray as xr

from climnb.io.channels import CLASS_NAMES
from climnb.io.grid import cf_coords
from climnb.stats.groups import class_counts
from climnb.stats.masks import check_same_grid, mask_classes
from climnb.stats.regions import BUILTIN, Region, area_weights, region_masks

__all__ = ["CompareConfig", "Comparison", "compare", "fdr_mask", "HEADLINE_COLUMNS"]

log = logging.getLogger(__name__)

#: Columns of the headline table.
HEADLINE_COLUMNS = (
    "class_name",
    "region",
    "a",
    "b",
    "change",
    "ci_low",
    "ci_high",
    "p_value",
    "significant",
)


@dataclass(frozen=True)
class CompareConfig:
    """Settings of :func:`compare`.

    Attributes
    ----------
    block : ``"year"`` or a number of consecutive time steps: the unit resampled.
    alpha : level of each test and of the confidence intervals (``1 - alpha``).
    n_resamples : permutations and bootstrap draws.
    seed : seed of the resampling.
    chunk_points : at most this many grid points resampled at a time (and fewer for many
        resamples: about 16 MB of resampled values at a time).
    coarsen : test cells of ``coarsen x coarsen`` grid points (their mean frequency) rather
        than single points: fewer, less noisy tests, so that FDR can pass real changes on
        short or fine-grained series (the maps are then on the coarser grid).
    """

    block: str | int = "year"
    alpha: float = 0.05
    n_resamples: int = 999
    seed: int = 0
    chunk_points: int = 8192
    coarsen: int = 1

    def __post_init__(self):
        if self.coarsen < 1:
            raise ValueError(f"coarsen must be at least 1, got {self.coarsen}")
        if not 0 < self.alpha < 0.5:
            raise ValueError(f"alpha must be in (0, 0.5), got {self.alpha}")
        if self.n_resamples < 19:
            raise ValueError(f"n_resamples must be at least 19, got {self.n_resamples}")

    @property
    def alpha_fdr(self) -> float:
        """The FDR level, ``2 alpha`` (Wilks 2016)."""
        return 2.0 * self.alpha


@dataclass
class Comparison:
    """What :func:`compare` returns: ``maps`` (Dataset of ``a``, ``b``, ``change``,
    ``ci_low``, ``ci_high``, ``p_value``, ``significant`` (FDR), ``significant_local``
    (p < alpha), per class, lat, lon) and ``table`` (:data:`HEADLINE_COLUMNS`)."""

    maps: xr.Dataset
    table: pd.DataFrame
    config: CompareConfig = field(default_factory=CompareConfig)
    #: change of events and of attributed precipitation
    #: (:mod:`climnb.stats.change_tables`), where asked for
    events: pd.DataFrame | None = None
    precip: pd.DataFrame | None = None

    def headline(self) -> str:
        """The table as text, frequencies in percent of time steps."""
        t = self.table.copy()
        for c in ("a", "b", "change", "ci_low", "ci_high"):
            t[c] = 100.0 * t[c]
        t = t.rename(
            columns={
                "a": "A %",
                "b": "B %",
                "change": "change %",
                "ci_low": "CI low",
                "ci_high": "CI high",
            }
        )
        return t.to_string(index=False, float_format=lambda v: f"{v:.3f}")


def compare(
    a: xr.DataArray,
    b: xr.DataArray,
    config: CompareConfig | None = None,
    *,
    regions: list[Region] | None = None,
    names: tuple[str, str] = ("A", "B"),
) -> Comparison:
    """Compare the class frequencies of two masks (periods, runs, labels vs predictions).

    Parameters
    ----------
    a, b : class masks (:func:`climnb.stats.masks.class_mask`) on the same grid, made for the
        same classes; read once each (lazily, on the current dask scheduler).
    config : the settings.
    regions : the regions of the table (default: the whole globe).
    names : what to call ``a`` and ``b`` in messages (their paths).

    Raises
    ------
    ValueError
        Masks of different classes or grids, a period of fewer than two blocks, a region that
        covers no grid point.
    """
    config = config or CompareConfig()
    check_pair(a, b, names)
    regions = regions or [BUILTIN["global"]]
    masks = region_masks(regions, a.lat.values, a.lon.values, source=names[0])
    ca, cb = class_counts(a, config.block), class_counts(b, config.block)
    ca, cb = dask.compute(ca, cb)
    if config.coarsen > 1:
        ca, cb = _coarsen(ca, config.coarsen), _coarsen(cb, config.coarsen)
        masks = masks.coarsen(lat=config.coarsen, lon=config.coarsen, boundary="trim").max()
    for counts, mask, name in ((ca, a, names[0]), (cb, b, names[1])):
        _check_blocks(counts, mask, name, config.block)
    rng = np.random.default_rng(config.seed)
    maps = _maps(ca, cb, config, rng)
    table = _table(ca, cb, masks, config, rng)
    maps.attrs.update(
        {
            "title": f"change of class frequency from {names[0]} to {names[1]}",
            "source": "climnb.stats.change",
            "Conventions": "CF-1.8",
            "a": str(names[0]),
            "b": str(names[1]),
            "block": str(config.block),
            "alpha": config.alpha,
            "alpha_fdr": config.alpha_fdr,
            "n_resamples": config.n_resamples,
            "test": "permutation of whole blocks (two-sided); CI: block bootstrap; "
            "FDR: Benjamini-Hochberg at 2 alpha (Wilks 2016)",
        }
    )
    return Comparison(cf_coords(maps), table, config)


def _coarsen(counts: xr.Dataset, n: int) -> xr.Dataset:
    """Counts of cells of ``n x n`` points: summed, and the steps multiplied by ``n * n``, so
    that count / steps is the cells' mean frequency."""
    summed = counts["count"].coarsen(lat=n, lon=n, boundary="trim").sum()
    steps = counts.steps * n * n
    return xr.Dataset({"count": summed, "steps": steps}).assign_coords(class_id=counts.class_id)


def check_pair(a: xr.DataArray, b: xr.DataArray, names) -> None:
    ka, kb = mask_classes(a), mask_classes(b)
    if set(ka) != set(kb):
        raise ValueError(
            f"{names[1]}: masks of different classes: {' '.join(kb) or 'none'} against "
            f"{' '.join(ka) or 'none'} in {names[0]}; compare masks made for the same classes"
        )
    check_same_grid(a, b, names)


_check_pair = check_pair  # the old private name, for one release


def _check_blocks(counts: xr.Dataset, mask: xr.DataArray, name: str, block) -> None:
    n = counts.steps.size
    if n < 2:
        what = "one year" if block == "year" else f"{block} steps"
        raise ValueError(
            f"{name}: period of {mask.sizes['time']} steps is shorter than two bootstrap blocks "
            f"of {what}; give a longer period or a shorter --block"
        )


def _stacked(counts: xr.Dataset) -> tuple[np.ndarray, np.ndarray]:
    """(blocks, points) float64 counts and (blocks,) steps."""
    x = np.asarray(counts["count"].values, np.float64)
    return x.reshape(x.shape[0], -1), np.asarray(counts.steps.values, np.float64)


def _maps(ca: xr.Dataset, cb: xr.Dataset, config: CompareConfig, rng) -> xr.Dataset:
    xa, sa = _stacked(ca)
    xb, sb = _stacked(cb)
    stats = _resample(xa, sa, xb, sb, config, rng)
    shape = ca["count"].shape[1:]
    dims = ("class", "lat", "lon")
    names = [CLASS_NAMES[int(k)] for k in ca.class_id.values]
    coords = {
        "class": np.array(names, object),
        "class_id": ca.class_id,
        "lat": ca.lat,
        "lon": ca.lon,
    }
    out = xr.Dataset(
        {k: (dims, v.reshape(shape).astype(np.float32)) for k, v in stats.items()},
        coords=coords,
    )
    out["significant_local"] = out.p_value < config.alpha
    sig = np.stack([fdr_mask(p, config.alpha_fdr) for p in out.p_value.values])
    out["significant"] = (dims, sig)
    for k in ("a", "b"):
        out[k].attrs = {
            "long_name": f"frequency in {k.upper()}",
            "units": "1",
            "cell_methods": "time: mean",
        }
    out["change"].attrs = {"long_name": "change of frequency, B - A", "units": "1"}
    out["p_value"].attrs = {"long_name": "p-value of the change (block permutation)"}
    out["significant"].attrs = {
        "long_name": f"change significant after FDR at alpha_FDR = {config.alpha_fdr:g}"
    }
    return out


def _resample(xa, sa, xb, sb, config: CompareConfig, rng) -> dict[str, np.ndarray]:
    """Frequencies, change, permutation p-value and bootstrap interval of each column."""
    n = config.n_resamples
    perm = _permutation_weights(sa, sb, n, rng)
    boot_a, boot_b = _bootstrap_weights(sa, n, rng), _bootstrap_weights(sb, n, rng)
    fa, fb = xa.sum(0) / sa.sum(), xb.sum(0) / sb.sum()
    change = fb - fa
    p = np.empty_like(change)
    lo, hi = np.empty_like(change), np.empty_like(change)
    pooled = np.concatenate([xa, xb])
    q = (100 * config.alpha / 2, 100 * (1 - config.alpha / 2))
    # about 16 MB of resampled values at a time: the loop holds two such arrays and
    # np.percentile a copy of one, whatever n_resamples is
    step = max(64, min(config.chunk_points, int(2e6 // n)))
    for s in range(0, change.size, step):
        cols = slice(s, s + step)
        null = perm @ pooled[:, cols]
        np.abs(null, out=null)
        tol = 1e-12 * np.maximum(np.abs(change[cols]), 1e-12)
        p[cols] = (1 + (null >= np.abs(change[cols]) - tol).sum(0)) / (n + 1)
        del null
        boot = boot_b @ xb[:, cols]
        boot -= boot_a @ xa[:, cols]
        lo[cols], hi[cols] = np.percentile(boot, q, axis=0)
    return {"a": fa, "b": fb, "change": change, "ci_low": lo, "ci_high": hi, "p_value": p}


def _permutation_weights(sa, sb, n, rng) -> np.ndarray:
    """(n, blocks of A + B) weights: each row a random split of the pooled blocks into sets
    of A's and B's sizes, giving its B mean minus its A mean."""
    s = np.concatenate([sa, sb])
    w = np.empty((n, s.size))
    for i in range(n):
        order = rng.permutation(s.size)
        in_b = np.zeros(s.size, bool)
        in_b[order[: sb.size]] = True
        w[i] = np.where(in_b, 1.0 / s[in_b].sum(), -1.0 / s[~in_b].sum())
    return w


def _bootstrap_weights(s, n, rng) -> np.ndarray:
    """(n, blocks) weights of block-bootstrap means: draws with replacement, by steps."""
    draws = rng.integers(0, s.size, size=(n, s.size))
    times = np.stack([np.bincount(d, minlength=s.size) for d in draws]).astype(float)
    return times / (times @ s)[:, None]


def fdr_mask(p: np.ndarray, q: float) -> np.ndarray:
    """Benjamini-Hochberg: which of the p-values ``p`` (any shape) pass at false discovery
    rate ``q``; NaN never passes."""
    flat = np.asarray(p, float).ravel()
    ok = np.isfinite(flat)
    m = int(ok.sum())
    out = np.zeros(flat.size, bool)
    if m == 0:
        return out.reshape(np.shape(p))
    order = np.argsort(flat[ok])
    ranked = flat[ok][order]
    passing = np.flatnonzero(ranked <= q * np.arange(1, m + 1) / m)
    if passing.size:
        cut = ranked[passing[-1]]
        out[ok] = flat[ok] <= cut
    return out.reshape(np.shape(p))


def _table(ca, cb, masks: xr.DataArray, config: CompareConfig, rng) -> pd.DataFrame:
    """Headline rows: per class and region, from area-weighted region sums of the counts."""
    w = area_weights(masks).values.reshape(masks.sizes["region"], -1)  # (region, points)
    rows = []
    for j, k in enumerate(ca.class_id.values):
        xa = ca["count"].values[:, j].reshape(ca.steps.size, -1) @ w.T  # (blocks, region)
        xb = cb["count"].values[:, j].reshape(cb.steps.size, -1) @ w.T
        s = _resample(
            xa, ca.steps.values.astype(float), xb, cb.steps.values.astype(float), config, rng
        )
        for r, region in enumerate(masks.region.values):
            rows.append(
                {
                    "class_name": CLASS_NAMES[int(k)],
                    "region": str(region),
                    **{
                        c: float(s[c][r])
                        for c in ("a", "b", "change", "ci_low", "ci_high", "p_value")
                    },
                    "significant": bool(s["p_value"][r] < config.alpha),
                }
            )
    return pd.DataFrame(rows, columns=list(HEADLINE_COLUMNS))
