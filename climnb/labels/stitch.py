"""Storm centres stitched into tracks, and the tracks a tropical cyclone makes kept.

The second half of a TempestExtremes-style detector (``StitchNodes``; Ullrich & Zarzycki 2017,
GMD 10, 1069; the settings of Zarzycki & Ullrich 2017, GRL 44, 1141): the centres found at each
step (:func:`climnb.labels.tc.find_centres`) are linked into paths, and only the paths that
behave as tropical cyclones keep their storms. Each rule and its reason
(:class:`climnb.labels.config.TCConfig`):

* **linking**: a centre continues the path of its hemisphere whose last centre is nearest,
  within ``max_speed_kmh`` times the input's time step (150 km/h: TempestExtremes' range of 8
  degrees in 6 hours), after at most ``max_gap_h`` without a centre (24 h): a storm's centre
  comes and goes on a coarse grid;
* **lifetime** of at least ``min_lifetime_h`` (54 h; TECA and Vitart et al. 1997 ask for 2
  days): a tropical cyclone is a long-lived, self-sustaining vortex, unlike the lows that
  form and fill within a day along troughs and fronts;
* **genesis** between ``genesis_lat`` (5 and 30 degrees; Gray 1968, MWR 96, 669): no cyclone
  forms where the Coriolis parameter vanishes, and none poleward of the warm tropical water;
* **over the ocean at genesis** and for at least ``min_ocean_h`` (54 h; TempestExtremes'
  surface-height test of 10 six-hourly points): a tropical cyclone draws its energy from the
  sea surface; heat lows over deserts and plateaus, whose pressure minima and cyclonic
  vorticity resemble weak storms, form and stay over land;
* **wind**, where the input has winds: the strongest wind within ``wind_radius_deg`` (2
  degrees) of the centre reaches ``min_wind_ms`` (10 m/s) for at least ``min_windy_h`` (54 h;
  Zarzycki & Ullrich 2017's 10 six-hourly points): a tropical storm's circulation is strong
  and lasting, a depression's is not.

Examples
--------
>>> import pandas as pd
>>> from climnb.labels.config import TCConfig
>>> times = pd.date_range("2026-01-01", periods=12, freq="6h")
>>> centres = pd.DataFrame({"time": times, "lat": -15.0, "lon": 90.0 - 0.5 * np.arange(12)})
>>> paths = stitch_centres(centres, TCConfig())
>>> int(paths.track_id.nunique()), bool(paths.keep.all())
(1, True)
>>> bool(stitch_centres(centres.iloc[:4], TCConfig()).keep.any())  # 18 h: too short
False
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from climnb.labels.config import TCConfig
from climnb.labels.land import land_fraction_values
from climnb.labels.sphere import great_circle_km

__all__ = ["stitch_centres", "track_rules"]


def _hours(a, b) -> float:
    return pd.Timedelta(b - a).total_seconds() / 3600.0


def track_rules(config: TCConfig, *, winds: bool = False) -> str:
    """The rules of :func:`stitch_centres` in words, for a run's notes (``winds``: the input
    has winds, so the wind rule applies)."""
    lo, hi = config.genesis_lat
    text = (
        f"tracks of at least {config.min_lifetime_h:g} h (gaps up to {config.max_gap_h:g} h, "
        f"up to {config.max_speed_kmh:g} km/h), formed over the ocean between {lo:g} and "
        f"{hi:g} deg of latitude, at least {config.min_ocean_h:g} h over the ocean"
    )
    if winds and config.min_wind_ms is not None:
        text += (
            f", winds of {config.min_wind_ms:g} m/s within {config.wind_radius_deg:g} deg of "
            f"the centre for at least {config.min_windy_h:g} h"
        )
    return text


def stitch_centres(centres: pd.DataFrame, config: TCConfig) -> pd.DataFrame:
    """Link storm centres over time into paths and mark the paths a cyclone makes.

    Parameters
    ----------
    centres : one row per centre: ``time`` (datetimes or cftime dates), ``lat``, ``lon``
        (degrees), optionally ``land_fraction`` (of the grid cell of the centre; else that of
        the half-degree cell around it) and ``wind`` (the strongest wind near the centre, m/s;
        NaN or absent without winds: no wind rule); any other columns kept.
    config : the rules (see the module).

    Returns
    -------
    The rows of ``centres`` in time order with ``track_id`` (counting from 0) and ``keep``
    (the path passes every rule).
    """
    out = centres.reset_index(drop=True).copy()
    out["track_id"] = -1
    out["keep"] = False
    if out.empty:
        return out
    times = list(dict.fromkeys(out.time))  # in order of appearance
    order = {t: i for i, t in enumerate(sorted(times))}
    out = out.iloc[np.argsort([order[t] for t in out.time], kind="stable")].reset_index(drop=True)
    ordered = sorted(times)
    gaps = [_hours(a, b) for a, b in zip(ordered[:-1], ordered[1:], strict=True)]
    dt = float(np.median(gaps)) if gaps else 0.0  # the input's time step
    # the range of one step, across a gap too (TempestExtremes' --range)
    reach = config.max_speed_kmh * (dt or 6.0)
    active: list[tuple[int, object, float, float]] = []  # (track id, time, lat, lon)
    next_id = 0
    for time, rows in out.groupby(out.time.map(order), sort=True):
        time = rows.time.iloc[0]
        active = [a for a in active if _hours(a[1], time) <= config.max_gap_h + dt]
        pairs = []
        for k, (_, _, lat, lon) in enumerate(active):
            dist = great_circle_km(lat, lon, rows.lat.to_numpy(float), rows.lon.to_numpy(float))
            same = np.sign(rows.lat.to_numpy(float)) == np.sign(lat)  # cyclones keep a hemisphere
            pairs += [
                (d, k, j)
                for j, d, ok in zip(rows.index, dist, same, strict=True)
                if ok and d <= reach
            ]
        taken, ids = set(), {}
        for _, k, j in sorted(pairs):
            if k not in taken and j not in ids:
                taken.add(k)
                ids[j] = active[k][0]
        for j in rows.index:
            if j not in ids:
                ids[j], next_id = next_id, next_id + 1
        out.loc[list(ids), "track_id"] = list(ids.values())
        seen = set(ids.values())
        active = [a for a in active if a[0] not in seen] + [
            (ids[j], time, float(out.lat[j]), float(out.lon[j])) for j in rows.index
        ]
    _judge(out, config)
    return out


def _judge(paths: pd.DataFrame, config: TCConfig) -> None:
    if "land_fraction" in paths:  # of the input's grid cell: as precise as the centre
        paths["over_land"] = paths.land_fraction.to_numpy(float) >= 0.5
    else:
        paths["over_land"] = _land(paths.lat.to_numpy(float), paths.lon.to_numpy(float))
    lo, hi = config.genesis_lat
    for _, path in paths.groupby("track_id", sort=False):
        first, last = path.iloc[0], path.iloc[-1]
        hours = _hours(first.time, last.time)
        ocean = ~path.over_land.to_numpy()
        step = hours / max(len(path) - 1, 1)
        keep = (
            hours >= config.min_lifetime_h
            and lo <= abs(first.lat) <= hi
            and not (config.genesis_over_ocean and first.over_land)
            and (ocean.sum() - 1) * step >= config.min_ocean_h
            and _windy(path, config, step)
        )
        paths.loc[path.index, "keep"] = bool(keep)


def _windy(path: pd.DataFrame, config: TCConfig, step: float) -> bool:
    """The wind rule: met, or not applicable (no winds, or switched off)."""
    if config.min_wind_ms is None or "wind" not in path or path.wind.isna().all():
        return True
    windy = int((path.wind.to_numpy(float) >= config.min_wind_ms).sum())
    return windy > 0 and (windy - 1) * step >= config.min_windy_h


def _land(lat: np.ndarray, lon: np.ndarray) -> np.ndarray:
    """Whether each point is over land: its half-degree cell is at least half land."""
    grid_lat, grid_lon = np.arange(-89.75, 90.0, 0.5), np.arange(0.25, 360.0, 0.5)
    frac = land_fraction_values(grid_lat, grid_lon)
    r = np.clip(np.round((lat + 89.75) / 0.5).astype(int), 0, grid_lat.size - 1)
    c = np.round(((lon % 360.0) - 0.25) / 0.5).astype(int) % grid_lon.size
    return frac[r, c] >= 0.5
