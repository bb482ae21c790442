"""Tropical cyclones: TECA-style storm centres, then a mask of each storm's rain and moisture.

Centres (one time step), following TECA's ``tc_candidates`` defaults:

1. 850 hPa relative vorticity, sign flipped in the southern hemisphere so that cyclones are
   positive; local maxima within a window of ``vorticity_window_deg`` above ``min_vorticity``;
2. the sea-level pressure minimum within ``psl_search_deg`` of each maximum is the centre;
3. pressure rises by ``pressure_rise_pa`` within ``pressure_rise_deg`` in every direction,
   ``(T200 + T500) / 2`` near the centre exceeds its mean on the ring at ``warm_core_deg`` by
   ``warm_core_k`` (a warm core), optionally the thickness ``Z200 - Z1000`` likewise by
   ``thickness_rise_m`` on the ring at ``thickness_deg``;
   temperature and thickness are taken relative to the median of their latitude row, so that
   the equator-to-pole gradient (about 1 K per 5 degrees in the subtropics) cannot hide a weak
   warm core on its equatorward side;
4. the latitude limit; candidates closer than ``merge_deg`` are one storm (the deepest).

Masks: a box of ``box_radius_km`` plus ``box_margin_deg`` around each centre (columns wrap at the
seam); each of ``mask_fields`` thresholded within the box, the connected piece holding the centre
kept (the largest when none does), their union is the storm's own mask. Storms keep separate
masks (:class:`Storm`), so an earlier storm never overwrites a later one.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import ndimage

from climnb.labels.components import label_components
from climnb.labels.config import TCConfig
from climnb.labels.dynamics import _vorticity_rows
from climnb.labels.sphere import EARTH_RADIUS_KM, cell_area_km2, great_circle_km

__all__ = [
    "Storm",
    "find_centres",
    "cyclonic_vorticity",
    "wind_fields",
    "max_wind_near",
    "storm_mask",
    "detect_storms",
]

log = logging.getLogger(__name__)

_KM_PER_DEG = np.pi * EARTH_RADIUS_KM / 180.0


@dataclass(frozen=True)
class Storm:
    """One detected storm: its centre and its own mask (row and column indices)."""

    lat: float
    lon: float
    row: int
    col: int
    vorticity: float
    min_psl: float
    rows: np.ndarray
    cols: np.ndarray


class _Grid:
    """Index arithmetic on an ascending, evenly spaced lat/lon grid."""

    def __init__(self, lat, lon, periodic):
        self.lat, self.lon, self.periodic = np.asarray(lat, float), np.asarray(lon, float), periodic
        self.dlat = abs(self.lat[1] - self.lat[0])
        self.dlon = abs(self.lon[1] - self.lon[0])
        self.shape = (self.lat.size, self.lon.size)

    def cells(self, deg: float, row: int | None = None) -> tuple[int, int]:
        """Half widths (rows, cols) of a box of ``deg`` degrees of arc at ``row``'s latitude."""
        coslat = 1.0 if row is None else max(np.cos(np.radians(self.lat[row])), 0.05)
        return max(int(round(deg / self.dlat)), 1), max(int(round(deg / (self.dlon * coslat))), 1)

    def box(self, row: int, col: int, half_rows: int, half_cols: int):
        rows = np.arange(max(row - half_rows, 0), min(row + half_rows + 1, self.shape[0]))
        cols = np.arange(col - half_cols, col + half_cols + 1)
        if self.periodic:
            cols = cols[: self.shape[1]] % self.shape[1]
        else:
            cols = cols[(cols >= 0) & (cols < self.shape[1])]
        return rows, cols

    def rays(self, row: int, col: int, deg: float, n_dir: int):
        """Indices ``(n_dir, n_steps)`` of points along rays out to ``deg`` from a centre."""
        n_steps = max(int(np.ceil(deg / self.dlat)), 1)
        steps = np.linspace(deg / n_steps, deg, n_steps)
        theta = np.linspace(0.0, 2 * np.pi, n_dir, endpoint=False)[:, None]
        coslat = max(np.cos(np.radians(self.lat[row])), 0.05)
        r = np.clip(np.rint(row + steps * np.sin(theta) / self.dlat), 0, self.shape[0] - 1)
        c = np.rint(col + steps * np.cos(theta) / (self.dlon * coslat))
        c = c % self.shape[1] if self.periodic else np.clip(c, 0, self.shape[1] - 1)
        return r.astype(int), c.astype(int)


def find_centres(
    fields: Mapping[str, np.ndarray],
    lat: np.ndarray,
    lon: np.ndarray,
    config: TCConfig,
    *,
    periodic: bool = True,
    zeta: np.ndarray | None = None,
) -> list[tuple[int, int, float, float]]:
    """Storm centres ``(row, col, vorticity, min_psl)`` that pass every TECA-style check.

    ``zeta``: the cyclonic vorticity (:func:`cyclonic_vorticity`) if already computed.
    """
    grid = _Grid(lat, lon, periodic)
    if zeta is None:  # only the rows the centres are looked for in, and their windows
        zeta = _cyclonic(fields, lat, lon, *_searched_rows(fields, grid, config))
    checks = _Checks(fields, grid, config)
    rows, cols = _vorticity_maxima(zeta, grid, config, checks.max_abs_lat)
    centres: list[tuple[int, int, float, float]] = []
    for i, j in zip(rows, cols, strict=True):
        r, c = _pressure_minimum(fields["PSL"], grid, i, j, config.psl_search_deg)
        if _close(grid, r, c, centres, config.merge_deg) or not checks(r, c):
            continue
        centres.append((int(r), int(c), float(zeta[i, j]), float(fields["PSL"][r, c])))
    log.debug("%d vorticity maxima, %d storms", rows.size, len(centres))
    return centres


def cyclonic_vorticity(fields: Mapping[str, np.ndarray], lat, lon) -> np.ndarray:
    """850 hPa relative vorticity, sign flipped in the southern hemisphere (cyclones positive),
    NaN made 0: ``VORT850`` when given, else computed from ``U850`` and ``V850``."""
    return _cyclonic(fields, lat, lon, 0, np.size(lat))


def _cyclonic(fields, lat, lon, lo: int, hi: int) -> np.ndarray:
    """:func:`cyclonic_vorticity` in the rows ``lo`` to ``hi - 1`` (0 in the others)."""
    south = np.asarray(lat) < 0
    if hi <= lo:  # no row is searched
        names = ("VORT850",) if "VORT850" in fields else ("U850", "V850")
        dtype = np.float32 if "VORT850" in fields else np.result_type(*map(fields.get, names))
        return np.zeros(np.shape(fields[names[0]]), np.result_type(dtype, np.float32))
    if "VORT850" in fields:
        part = np.array(np.asarray(fields["VORT850"])[lo:hi], dtype=np.float32)
        part *= np.where(south[lo:hi], -1.0, 1.0).astype(part.dtype)[:, None]
        if (lo, hi) != (0, np.size(lat)):
            zeta = np.zeros((np.size(lat), part.shape[1]), part.dtype)
            zeta[lo:hi] = part
            part = zeta[lo:hi]
        else:
            zeta = part
    else:  # computed into its rows, the sign changed with the divisor's
        u, v = fields["U850"], fields["V850"]
        dtype = np.result_type(u, v, np.float32)
        zeta = np.zeros(np.shape(u), dtype)
        part = _vorticity_rows(u, v, lat, lon, lo, hi, flip=south, out=zeta[lo:hi])
    bad = ~np.isfinite(part).all(axis=1)  # NaN in the rows at the poles
    if bad.any():
        part[bad] = np.nan_to_num(part[bad], nan=0.0)
    return zeta


def wind_fields(fields: Mapping[str, np.ndarray]) -> tuple[str, str] | None:
    """The winds that give a storm's maximum wind: 850 hPa, else the lowest level (10 m)."""
    for pair in (("U850", "V850"), ("UBOT", "VBOT")):
        if all(n in fields for n in pair):
            return pair
    return None


def max_wind_near(
    fields: Mapping[str, np.ndarray], lat, lon, row: int, col: int, deg: float, *, periodic=True
) -> float:
    """The strongest wind (:func:`wind_fields`) within a box of ``deg`` degrees of arc around
    ``(row, col)``; NaN without winds (TempestExtremes' ``_VECMAG(U,V),max,deg`` output)."""
    pair = wind_fields(fields)
    if pair is None:
        return float("nan")
    grid = _Grid(lat, lon, periodic)
    idx = np.ix_(*grid.box(row, col, *grid.cells(deg, row)))
    return float(np.hypot(fields[pair[0]][idx], fields[pair[1]][idx]).max())


def _vorticity_maxima(zeta, grid: _Grid, config: TCConfig, max_abs_lat: float | None = None):
    """Rows and columns of local maxima above the threshold, strongest first.

    A pixel is a maximum when no pixel of its window (``vorticity_window_deg``; rows clipped
    at the poles, columns wrapped on a global grid) is larger: what comparing ``zeta`` with
    its ``maximum_filter`` gives. Only pixels above ``min_vorticity`` can be maxima (about
    0.3 % of the synthetic full-size grid), and only those that are also the largest of
    their 3 x 3 neighbours (a few dozen), so only their windows are looked at, instead of
    filtering the whole grid.
    """
    hr, hc = grid.cells(config.vorticity_window_deg / 2)
    n_row, n_col = zeta.shape
    near = np.abs(grid.lat) <= (config.max_abs_lat if max_abs_lat is None else max_abs_lat)
    # only the rows from the first to the last within the latitude limit are looked at
    band = np.flatnonzero(near)
    lo, hi = (int(band[0]), int(band[-1]) + 1) if band.size else (0, 0)
    rows, cols = np.divmod(np.flatnonzero(zeta[lo:hi] >= config.min_vorticity), n_col)
    rows += lo
    keep = near[rows]
    rows, cols = rows[keep], cols[keep]
    values = zeta[rows, cols]
    for dr in (-1, 0, 1):  # the largest of their 3 x 3 neighbours
        for dc in (-1, 0, 1):
            r = np.clip(rows + dr, 0, n_row - 1)
            c = (cols + dc) % n_col if grid.periodic else np.clip(cols + dc, 0, n_col - 1)
            keep = values >= zeta[r, c]
            rows, cols, values = rows[keep], cols[keep], values[keep]
    # and of their window, all windows gathered at once (rows clipped at the poles repeat a
    # row of the window, which leaves its maximum as it is; so do clipped columns)
    r = np.clip(rows[:, None] + np.arange(-hr, hr + 1), 0, n_row - 1)
    c = cols[:, None] + np.arange(-hc, hc + 1)
    c = c % n_col if grid.periodic else np.clip(c, 0, n_col - 1)
    keep = values >= zeta[r[:, :, None], c[:, None, :]].max(axis=(1, 2), initial=-np.inf)
    rows, cols = rows[keep], cols[keep]  # row-major order, as np.nonzero gives
    order = np.argsort(-zeta[rows, cols])
    return rows[order], cols[order]


class _Checks:
    """The checks of a candidate centre: latitude, closed low, warm core, thickness.

    The warm core is checked when ``T200`` and ``T500`` are among the fields, the thickness
    when ``config.thickness_rise_m`` is set and ``Z200`` and ``Z1000`` are; without a warm-core
    check, centres are looked for only within ``config.max_abs_lat_no_warm_core``.
    """

    def __init__(self, fields, grid: _Grid, config: TCConfig):
        self.psl, self.grid, self.config = fields["PSL"], grid, config
        self.tavg = self.thick = None
        self.max_abs_lat = config.max_abs_lat
        if "T200" in fields and "T500" in fields:
            self.tavg = _ZonalAnomaly(lambda k: (fields["T200"][k] + fields["T500"][k]) / 2)
        else:
            self.max_abs_lat = min(config.max_abs_lat, config.max_abs_lat_no_warm_core)
        if config.thickness_rise_m is not None and "Z200" in fields and "Z1000" in fields:
            self.thick = _ZonalAnomaly(lambda k: fields["Z200"][k] - fields["Z1000"][k])

    def __call__(self, r: int, c: int) -> bool:
        grid, cfg = self.grid, self.config
        if abs(grid.lat[r]) > self.max_abs_lat:
            return False
        if not _closed(self.psl, grid, r, c, cfg.pressure_rise_pa, cfg.pressure_rise_deg):
            return False
        core = grid.box(r, c, *grid.cells(cfg.psl_search_deg, r))
        if self.tavg is not None and not _core_above_ring(
            self.tavg, grid, r, c, cfg.warm_core_k, cfg.warm_core_deg, core
        ):
            return False
        return self.thick is None or _core_above_ring(
            self.thick, grid, r, c, cfg.thickness_rise_m, cfg.thickness_deg, core
        )


def _zonal_anomaly(field: np.ndarray) -> np.ndarray:
    """``field`` minus the median of its latitude row: removes the equator-to-pole gradient."""
    return field - np.median(field, axis=1, keepdims=True)


class _ZonalAnomaly:
    """:func:`_zonal_anomaly` of ``field(index)``, computed only where it is indexed.

    The checks look at a few boxes and rings around candidate centres, so the row medians
    are computed for the rows they touch (and kept), not for the whole grid.
    """

    def __init__(self, field):
        self.field, self.median, self.known = field, None, None

    def __getitem__(self, key):
        rows = np.broadcast_to(np.asarray(key[0]), np.broadcast_shapes(*map(np.shape, key)))
        values = self.field(key)
        if self.median is None:
            n_row = int(np.shape(self.field(np.s_[:, 0]))[0])
            self.median = np.zeros(n_row, values.dtype)
            self.known = np.zeros(n_row, bool)
        new = np.unique(rows)
        new = new[~self.known[new]]
        if new.size:  # the medians of the rows not seen yet, at once
            self.median[new] = np.median(self.field(new), axis=1)
            self.known[new] = True
        return values - self.median[rows]


def _pressure_minimum(psl, grid: _Grid, i: int, j: int, deg: float) -> tuple[int, int]:
    rows, cols = grid.box(i, j, *grid.cells(deg, i))
    sub = psl[np.ix_(rows, cols)]
    a, b = np.unravel_index(np.argmin(sub), sub.shape)
    return int(rows[a]), int(cols[b])


def _closed(field, grid: _Grid, r, c, delta, deg) -> bool:
    """True if ``field`` has a closed contour ``delta`` above its value at ``(r, c)`` within
    ``deg`` degrees of great-circle distance: every path of neighbouring cells from the centre
    to that distance climbs by at least ``delta`` somewhere (TempestExtremes'
    ``--closedcontourcmd``, Ullrich & Zarzycki 2017). The cells below ``field[r, c] + delta``
    connected to the centre must all lie within ``deg``.
    """
    reach = deg + grid.dlat
    poleward = min(abs(grid.lat[r]) + reach, 87.0)  # the disc is widest on its poleward side
    half_cols = int(np.ceil(reach / (grid.dlon * np.cos(np.radians(poleward)))))
    rows, cols = grid.box(r, c, int(np.ceil(reach / grid.dlat)), half_cols)
    sub = field[np.ix_(rows, cols)]
    dist = _arc_deg(grid.lat[r], grid.lon[c], grid.lat[rows][:, None], grid.lon[cols][None, :])
    below = sub < field[r, c] + delta
    pieces, _ = ndimage.label(below, structure=np.ones((3, 3), bool))
    centre = pieces[int(np.searchsorted(rows, r)), int(np.flatnonzero(cols == c)[0])]
    escapes = (pieces == centre) & (dist > deg)
    if escapes.any():
        return False
    # the piece must not reach the edge of the box where the box was cut (a pole, a border)
    edge = np.zeros_like(below)
    edge[[0, -1], :] = edge[:, [0, -1]] = True
    return not ((pieces == centre) & edge & (dist <= deg)).any()


def _arc_deg(lat1, lon1, lat2, lon2):
    """Great-circle distance in degrees of arc."""
    return great_circle_km(lat1, lon1, lat2, lon2) / _KM_PER_DEG


def _core_above_ring(field, grid: _Grid, r, c, delta, deg, core, n_dir: int = 16) -> bool:
    """True if the field's maximum in ``core`` exceeds its mean on the ring at ``deg`` by delta.

    The ring mean (not the lowest value on each ray) is the storm's surroundings: a large-scale
    gradient across the storm cancels in it.
    """
    rr, cc = grid.rays(r, c, deg, n_dir)
    return bool(field[np.ix_(*core)].max() - field[rr[:, -1], cc[:, -1]].mean() >= delta)


def _close(grid: _Grid, r, c, centres, deg) -> bool:
    for r2, c2, *_ in centres:
        dcol = abs(c - c2)
        if grid.periodic:
            dcol = min(dcol, grid.shape[1] - dcol)
        coslat = np.cos(np.radians(grid.lat[r]))
        if np.hypot((r - r2) * grid.dlat, dcol * grid.dlon * coslat) < deg:
            return True
    return False


def storm_mask(
    fields: Mapping[str, np.ndarray], grid: _Grid, row: int, col: int, config: TCConfig
) -> tuple[np.ndarray, np.ndarray]:
    """Row and column indices of one storm's mask (the union over ``config.mask_fields``)."""
    half_deg = config.box_radius_km / _KM_PER_DEG + config.box_margin_deg
    rows, cols = grid.box(row, col, *grid.cells(half_deg, row))
    idx = np.ix_(rows, cols)
    centre = (int(np.searchsorted(rows, row)), int(np.flatnonzero(cols == col)[0]))
    core = grid.cells(config.psl_search_deg, row)
    union = np.zeros((rows.size, cols.size), bool)
    for name in config.mask_fields:
        sub = _box_field(fields, name, idx)
        union |= _piece(_threshold(sub, centre, core, config), centre)
    r, c = np.nonzero(union)
    return rows[r], cols[c]


def _box_field(fields, name, idx):
    if name == "wind":
        u, v = wind_fields(fields)
        return np.hypot(fields[u][idx], fields[v][idx])
    if name == "psl":  # the pressure deficit: deepest at the centre
        return -fields["PSL"][idx]
    return fields[name][idx]


def _threshold(sub, centre, core, config: TCConfig) -> np.ndarray:
    if config.threshold == "percentile":
        return sub >= np.percentile(sub, config.percentile)
    (a, b), (hr, hc) = centre, core
    peak = sub[max(a - hr, 0) : a + hr + 1, max(b - hc, 0) : b + hc + 1].max()
    background = np.median(sub)
    return sub >= background + config.edge_fraction * (peak - background)


def _piece(mask: np.ndarray, centre) -> np.ndarray:
    """The connected piece of ``mask`` holding ``centre``, else the largest one."""
    labels, n = label_components(mask, periodic=False)  # the box is already unwrapped
    if n == 0:
        return mask
    lab = labels[centre]
    if lab == 0:
        lab = int(np.argmax(np.bincount(labels.ravel())[1:])) + 1
    return labels == lab


def detect_storms(
    fields: Mapping[str, np.ndarray],
    lat: np.ndarray,
    lon: np.ndarray,
    config: TCConfig,
    *,
    periodic: bool = True,
    centres: Iterable[tuple[int, int, float, float]] | None = None,
) -> tuple[list[Storm], pd.DataFrame]:
    """Find tropical cyclones in one time step.

    Parameters
    ----------
    fields : 2-D (lat, lon) arrays, ascending latitude, without NaN: ``PSL``; ``VORT850``
        (850 hPa relative vorticity) or ``U850, V850``; optionally ``T200, T500`` (the warm-core
        check, skipped without them), ``Z200, Z1000`` (the thickness check), ``UBOT, VBOT``
        (the maximum wind when there are no 850 hPa winds); and the ``mask_fields``.
    lat, lon, config, periodic : the grid, the settings, whether longitude wraps.
    centres : the centres ``(row, col, vorticity, min_psl)`` :func:`find_centres` found in
        these fields, in its order: each is a storm, and no other (those on a cyclone's
        track, :mod:`climnb.labels.stitch`). None searches, and keeps every centre that passes
        the checks.

    Returns
    -------
    storms : each storm with its own mask.
    table : one row per storm: ``lat, lon`` (centre), ``area_km2, radius_km`` (of its own
        mask; radius of the disc of equal area), ``min_psl``, ``max_wind`` (850 hPa, else 10 m
        winds, in its mask; NaN without winds), ``vorticity``.
    """
    grid = _Grid(lat, lon, periodic)
    cyclonic = None  # else find_centres reads only the rows it searches, and their windows
    if "vorticity" in config.mask_fields:
        cyclonic = cyclonic_vorticity(fields, lat, lon)
        fields = {**fields, "vorticity": cyclonic}
    if centres is None:
        centres = find_centres(fields, lat, lon, config, periodic=periodic, zeta=cyclonic)
    storms = []
    for r, c, zeta, psl in centres:
        rows, cols = storm_mask(fields, grid, r, c, config)
        storms.append(
            Storm(float(grid.lat[r]), float(grid.lon[c]) % 360.0, r, c, zeta, psl, rows, cols)
        )
    return storms, _table(storms, fields, grid)


def _searched_rows(fields, grid: _Grid, config: TCConfig) -> tuple[int, int]:
    """The rows :func:`_vorticity_maxima` reads: those within the latitude limit of the
    checks (:class:`_Checks`) and a window's half height (and one) beyond."""
    limit = config.max_abs_lat
    if not ("T200" in fields and "T500" in fields):
        limit = min(config.max_abs_lat, config.max_abs_lat_no_warm_core)
    near = np.flatnonzero(np.abs(grid.lat) <= limit)
    if not near.size:
        return 0, 0
    hr = grid.cells(config.vorticity_window_deg / 2)[0] + 1
    return max(int(near[0]) - hr, 0), min(int(near[-1]) + hr + 1, grid.shape[0])


def _table(storms, fields, grid: _Grid) -> pd.DataFrame:
    area_row = cell_area_km2(grid.lat, grid.lon)
    winds = wind_fields(fields)
    columns = [
        "lat",
        "lon",
        "n_pixels",
        "area_km2",
        "radius_km",
        "min_psl",
        "max_wind",
        "vorticity",
    ]
    if not storms:
        return pd.DataFrame([], columns=columns)
    rows = {c: [] for c in columns}
    for s in storms:
        area = float(area_row[s.rows].sum())
        if winds is None:
            wind = np.empty(0)
        else:
            wind = np.hypot(fields[winds[0]][s.rows, s.cols], fields[winds[1]][s.rows, s.cols])
        for c, value in (
            ("lat", s.lat),
            ("lon", s.lon),
            ("n_pixels", s.rows.size),
            ("area_km2", area),
            ("radius_km", np.sqrt(area / np.pi)),
            ("min_psl", s.min_psl),
            ("max_wind", float(wind.max()) if wind.size else np.nan),
            ("vorticity", s.vorticity),
        ):
            rows[c].append(value)
    return pd.DataFrame({c: np.array(rows[c]) for c in columns})
