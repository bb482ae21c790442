"""Events from tracks: counts, genesis, lifetime, intensity and category, and landfall by region.

The tracks of :mod:`climnb.tracks` (one row per track and step) are joined, step by step, with
the mask's regions they came from (the same connected components, so each row meets its own
pixels), and with the fields where given:

* tropical cyclones: the maximum wind speed over the storm's pixels (lowest-level wind
  ``UBOT``/``VBOT``, else 850 hPa ``U850``/``V850``), the minimum sea-level pressure ``PSL``
  and the Saffir-Simpson category of the lifetime maximum wind (:func:`saffir_simpson`);
  ``"unknown"`` without winds. Grid-box winds of a climate model are lower than the 1-minute
  10 m winds the scale is defined on, so categories on coarse grids are low;
* atmospheric rivers: duration, the maximum and the mean IVT (``IVT``, or the magnitude of
  ``IVTU``/``IVTV``) over the river's pixels, and the category of Ralph et al. (2019, BAMS
  100, 269-289; :func:`ralph_category`) from the event's maximum IVT and duration;
  ``"unknown"`` without IVT;
* landfall, as the literature defines it (land: :func:`climnb.stats.regions.land_mask`):

  - a tropical cyclone makes landfall where its centre crosses from ocean onto land
    (NHC's definition, used by IBTrACS and the tracker studies), once per crossing: the
    track between two steps is followed along the great circle, and the landfall is in the
    region of the first land cell it meets, at the step that ends the segment. A track
    whose first centre is over land (an inland heat low) never makes landfall, wherever it
    goes later, and a storm that stays over land does not land again at every step;
  - an atmospheric river makes landfall at a step when its object reaches the coast from
    the ocean: the object holds ocean cells and land cells next to them (the coast it
    crosses), and the landfall is in the regions of those coastal land cells. The object
    stands in for the river's axis (Guan & Waliser 2015 ask the axis to reach the coast;
    climnb's masks and tracks carry no axis), so a river whose edge only brushes the coast
    counts too. A river whose object holds no ocean cell when it first appears formed over
    land and never makes landfall.

The mask is read one step at a time, so memory stays that of one step of mask and fields.
:func:`event_table` gives one row per event (:data:`EVENT_STATS_COLUMNS`), :func:`event_counts`
counts per year and season, :func:`landfall_table` per region and year.

Examples
--------
>>> from climnb.data.synthetic import make_dataset
>>> ds, _ = make_dataset(n_time=6, seed=0)
>>> steps = event_steps(ds.truth, fields=ds)
>>> table = event_table(steps)
>>> sorted(table.class_name.unique()), set(table.category) <= set(SAFFIR_SIMPSON + ("",))
(['atmospheric_river', 'tropical_cyclone'], True)
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np
import pandas as pd
import xarray as xr

from climnb.io.channels import CLASS_NAMES
from climnb.io.steps import iter_steps
from climnb.labels.components import label_components, label_pixels, measure
from climnb.labels.sphere import is_periodic, unit_vectors
from climnb.stats.groups import SEASONS
from climnb.stats.masks import MISSING, check_same_grid
from climnb.stats.regions import Region, land_mask, region_masks
from climnb.tracks import TrackConfig, default_max_gap, track_events, track_times

__all__ = [
    "EventSteps",
    "event_steps",
    "event_table",
    "event_counts",
    "landfall_table",
    "events_to_dataset",
    "calendar_of",
    "saffir_simpson",
    "ralph_category",
    "SAFFIR_SIMPSON",
    "EVENT_STATS_COLUMNS",
    "LANDFALL_COLUMNS",
]

log = logging.getLogger(__name__)

_KNOT = 0.514444  # m s-1
#: Saffir-Simpson classes (the first two are below hurricane strength) and their lower
#: 1-minute sustained wind bounds in knots (NHC): 34, 64, 83, 96, 113, 137.
SAFFIR_SIMPSON = ("TD", "TS", "1", "2", "3", "4", "5", "unknown")
_SS_KNOTS = np.array([34.0, 64.0, 83.0, 96.0, 113.0, 137.0])

#: Columns of :func:`event_table`, one row per event (track).
EVENT_STATS_COLUMNS = (
    "track_id",
    "class_name",
    "year",
    "season",
    "start",
    "end",
    "steps",
    "lifetime_h",
    "genesis_lat",
    "genesis_lon",
    "max_wind",
    "min_psl",
    "category",
    "max_ivt",
    "mean_ivt",
    "ar_category",
    "landfall_regions",
)
#: Columns of :func:`landfall_table`.
LANDFALL_COLUMNS = ("region", "year", "class_name", "landfalling_events", "landfall_steps")


@dataclass
class EventSteps:
    """What :func:`event_steps` returns: ``obs`` (the tracks' rows with ``max_wind``,
    ``min_psl``, ``max_ivt``, ``mean_ivt``), ``landfalls`` (one row per track, step and
    region where it makes landfall there; see the module's docstring) and the region
    names."""

    obs: pd.DataFrame
    landfalls: pd.DataFrame
    regions: tuple[str, ...]


def saffir_simpson(wind_ms) -> np.ndarray:
    """Saffir-Simpson class of maximum winds (m s-1): ``TD``, ``TS``, ``1``..``5``, or
    ``unknown`` where the wind is missing."""
    w = np.asarray(wind_ms, float) / _KNOT
    idx = np.searchsorted(_SS_KNOTS, np.nan_to_num(w, nan=0.0), side="right")
    names = np.array(SAFFIR_SIMPSON[:7], object)[idx]
    return np.where(np.isfinite(w), names, "unknown").astype(object)


def ralph_category(max_ivt, duration_h) -> np.ndarray:
    """AR category of Ralph et al. (2019): ``AR1``..``AR5`` from the maximum IVT (kg m-1 s-1;
    250, 500, 750, 1000, 1250 start ranks 1-5), one rank up for AR conditions lasting over 48
    h and one down under 24 h; ``none`` below rank 1, ``unknown`` without IVT."""
    ivt, hours = np.asarray(max_ivt, float), np.asarray(duration_h, float)
    rank = np.searchsorted([250.0, 500.0, 750.0, 1000.0, 1250.0], np.nan_to_num(ivt), "right")
    rank = rank + (hours > 48.0) - (hours < 24.0)
    rank = np.where(np.nan_to_num(ivt) < 250.0, 0, np.clip(rank, 0, 5))
    names = np.where(rank > 0, np.char.add("AR", rank.astype(str)), "none").astype(object)
    return np.where(np.isfinite(ivt), names, "unknown").astype(object)


def event_steps(
    mask: xr.DataArray,
    obs: pd.DataFrame | None = None,
    *,
    fields: xr.Dataset | None = None,
    regions: list[Region] = (),
    source: str = "mask",
    storms: pd.DataFrame | None = None,
) -> EventSteps:
    """The tracks of ``mask`` with per-step intensities from ``fields`` and landfalls.

    Parameters
    ----------
    mask : a class mask (time, lat, lon) on the canonical grid.
    obs : its tracks (:func:`climnb.tracks.track_events` or
        :func:`climnb.tracks.read_tracks`); tracked here when None.
    fields : fields on the same grid and times (canonical names: ``UBOT``/``VBOT`` or
        ``U850``/``V850``, ``PSL``, ``IVT`` or ``IVTU``/``IVTV``); any may be missing.
    regions : regions for landfall.
    source : what to call the mask in messages.
    storms : the labels' event table; when tracked here, cyclones follow its stitched
        tracks (:func:`climnb.tracks.track_events`).
    """
    mask = mask.transpose("time", "lat", "lon")
    if fields is not None:
        check_same_grid(mask, fields, (source, "the fields"))
        _check_same_calendar(mask, fields, source)
    if obs is None:  # a missing value (MISSING) holds no object to track
        # the gaps and storm tracks of `climnb tracks` on the same labels
        config = TrackConfig(max_gap_steps=default_max_gap(mask))
        obs = track_events(mask.where(mask != MISSING, 0), config, storms=storms)
    obs = obs.reset_index(drop=True).copy()
    lat, lon = mask.lat.values.astype(float), mask.lon.values.astype(float)
    where_land = land = None
    if regions:
        land = land_mask(lat, lon).values
        where_land = region_masks(list(regions), lat, lon, source=source).values & land
    extra = {c: np.full(len(obs), np.nan) for c in ("max_wind", "min_psl", "max_ivt", "mean_ivt")}
    landfalls = []
    times = track_times(mask.time.values)  # cftime dates of a model calendar stay so
    obs["time"] = _same_times(obs.time, times, source)
    by_time = obs.groupby("time", sort=False).indices
    steps = [t for t, time in enumerate(times) if time in by_time]
    coast = _Coast(land, where_land, lat, lon) if regions else None
    unmatched: list[int] = []
    for t, (values, step) in iter_steps([mask, _fields_at(fields, mask.time.values)], steps):
        rows = by_time[times[t]]
        step = _step_fields(step)
        for k in (1, 2):
            _one_class(
                values == k, k, obs, rows, step, lat, lon, extra, coast, landfalls, unmatched
            )
    if unmatched:
        r = unmatched[0]
        raise ValueError(
            f"--tracks: {len(unmatched)} of {len(obs)} track steps match no region of "
            f"{source} (first: track {obs.track_id.iat[r]} at {obs.time.iat[r]}); give the "
            f"tracks of these masks (climnb tracks {source}), or leave out --tracks"
        )
    for c, v in extra.items():
        obs[c] = v
    if coast is not None:
        landfalls += coast.storm_landfalls(obs)
    names = tuple(r.name for r in regions)
    landfalls = pd.DataFrame(landfalls, columns=["track_id", "time", "class_name", "region"])
    landfalls["region"] = [names[i] for i in landfalls.region]
    return EventSteps(obs, landfalls, names)


def calendar_of(time) -> str:
    """The calendar of a time coordinate's values: a cftime date's own (``noleap``,
    ``360_day``, ``all_leap``, ...), else ``standard``."""
    values = np.asarray(getattr(time, "values", time))
    first = values.flat[0] if values.size else None
    return str(getattr(first, "calendar", None) or "standard")


def _check_same_calendar(mask, fields, source: str) -> None:
    a, b = calendar_of(mask.time), calendar_of(fields.time)
    if _standard(a) != _standard(b):
        raise ValueError(
            f"{source}: its time is in the {a} calendar, the fields' in the {b} calendar; give "
            "fields of the same run (--fields)"
        )


def _standard(calendar: str) -> str:
    return "standard" if calendar in ("standard", "gregorian", "proleptic_gregorian") else calendar


def _same_times(times: pd.Series, mask_times: list, source: str) -> pd.Series:
    """The tracks' times as the mask's (cftime dates of its calendar, or Timestamps); a track
    time the mask does not have (tracks of another run or period) is refused."""
    if times.empty:
        return pd.Series(np.array([], dtype=object), index=times.index, name="time")
    known = {_key(t): t for t in mask_times}
    out, missing = [], []
    for t in times:
        found = known.get(_key(t))
        (missing.append(t) if found is None else out.append(found))
    if missing:
        raise ValueError(
            f"--tracks: {len(missing)} of {len(times)} track steps are at times {source} does "
            f"not have (first: {missing[0]}); give the tracks of these masks (climnb tracks "
            f"{source}), or leave out --tracks to track here"
        )
    if all(isinstance(t, pd.Timestamp) for t in out):  # the standard calendar: datetimes
        return pd.Series(pd.DatetimeIndex(out), index=times.index, name="time")
    return pd.Series(np.array(out, dtype=object), index=times.index, name="time")


def _key(t) -> tuple:
    """A time as (year, month, day, hour, minute, second), whatever its type or calendar."""
    t = pd.Timestamp(t) if isinstance(t, (np.datetime64, str)) else t
    return (t.year, t.month, t.day, t.hour, t.minute, t.second)


#: How far (degrees) a track's centre may lie from the centre of its region in the mask: the
#: tracks of these masks put it on the region's own centre (to the rounding of the file).
_SAME_PLACE_DEG = 0.5


def datetime_mask(obj):
    """``obj`` with numpy datetimes: a noleap or 360-day calendar converted (its dates moved;
    :func:`event_steps` no longer uses it: it keeps the file's own calendar)."""
    if obj.time.dtype == object:
        obj = obj.convert_calendar("standard", align_on="year", use_cftime=False)
    return obj


_datetime_mask = datetime_mask  # the old private name, for one release


_FIELDS = ("UBOT", "VBOT", "U850", "V850", "PSL", "IVT", "IVTU", "IVTV")


def _fields_at(fields: xr.Dataset | None, times) -> xr.Dataset | None:
    """The variables of ``fields`` that :func:`_step_fields` uses, at the mask's ``times``."""
    names = [v for v in _FIELDS if v in fields] if fields is not None else []
    if not names:  # a mask-only file: no intensities
        return None
    keep = fields[names]
    where = {_key(t): i for i, t in enumerate(track_times(keep.time.values))}
    index = [where[_key(t)] for t in track_times(times)]  # the same dates, any time type
    return keep.isel(time=index).transpose("time", ...)


def _step_fields(ds: dict[str, np.ndarray] | None) -> dict[str, np.ndarray]:
    """The wind speed, PSL and IVT of one step (its variables' arrays), those there are."""
    if ds is None:
        return {}
    out = {}
    for u, v in (("UBOT", "VBOT"), ("U850", "V850")):
        if u in ds and v in ds:
            out["wind"] = np.hypot(ds[u], ds[v])
            break
    if "PSL" in ds:
        out["psl"] = ds["PSL"]
    if "IVT" in ds:
        out["ivt"] = ds["IVT"]
    elif "IVTU" in ds and "IVTV" in ds:
        out["ivt"] = np.hypot(ds["IVTU"], ds["IVTV"])
    return out


def _one_class(binary, k, obs, rows, step, lat, lon, extra, coast, landfalls, unmatched):
    """Match the class-``k`` components of one step to the tracks' rows and measure them;
    rows with no component of their area (tracks of other masks) go to ``unmatched``."""
    rows = [r for r in rows if obs.class_id.iat[r] == k]
    if not rows:
        return
    if not binary.any():
        unmatched += rows
        return
    labels, n = label_components(binary, periodic=is_periodic(lon))
    where, idx = label_pixels(labels)
    table = measure(labels, n, lat, lon, pixels=(where, idx))
    t_lat, t_lon, t_area, t_label = (
        table[c].to_numpy() for c in ("lat", "lon", "area_km2", "label")
    )
    order = np.argsort(idx, kind="stable")
    bounds = np.searchsorted(idx[order], np.arange(n + 2))
    coslat = np.cos(np.radians(lat))
    for r in rows:
        d = np.hypot(t_lat - obs.lat.iat[r], (t_lon - obs.lon.iat[r] + 180) % 360 - 180)
        area = obs.area_km2.iat[r]
        d = d + 1e3 * (np.abs(t_area - area) > 1e-4 * area)  # the same region first
        if d.min() > _SAME_PLACE_DEG:  # no region of its area and place: another mask's track
            unmatched.append(r)
            continue
        label = int(t_label[int(np.argmin(d))])
        pixels = where[order[bounds[label] : bounds[label + 1]]]
        _measure_fields(step, pixels, coslat[pixels // lon.size], r, k, extra)
        if coast is not None and k == 2:
            track = obs.track_id.iat[r]
            for i in coast.river_landfall(track, pixels):
                landfalls.append((track, obs.time.iat[r], CLASS_NAMES[k], int(i)))


class _Coast:
    """Where events make landfall (see the module's docstring): ``land`` (lat, lon) and
    ``regions`` (region, lat, lon; land within each region) on the grid ``lat``, ``lon``."""

    def __init__(self, land, regions, lat, lon):
        self.land, self.regions = land, regions.reshape(regions.shape[0], -1)
        self.lat, self.lon = np.asarray(lat, float), np.asarray(lon, float)
        self.periodic = is_periodic(lon)
        self.born = {}  # river track -> whether its first object held ocean

    def river_landfall(self, track, pixels: np.ndarray) -> np.ndarray:
        """The regions (indices) where the river ``track``'s object ``pixels`` (flat indices,
        at one step, in time order) crosses the coast from the ocean."""
        over = self.land.ravel()[pixels]
        born = self.born.setdefault(track, not over.all())
        if not born or over.all() or not over.any():
            return np.empty(0, int)
        coast = pixels[over][self._beside(pixels[over], pixels[~over])]
        return np.flatnonzero(self.regions[:, coast].any(axis=1))

    def _beside(self, cells: np.ndarray, others: np.ndarray) -> np.ndarray:
        """Whether each of ``cells`` (flat indices) has one of ``others`` among its eight
        neighbours (across the seam on a global grid, never across the poles)."""
        nrow, ncol = self.land.shape
        r, c = np.divmod(cells, ncol)
        near = np.zeros(cells.size, bool)
        for dr in (-1, 0, 1):
            for dc in (-1, 0, 1):
                rr, cc = r + dr, c + dc
                ok = (rr >= 0) & (rr < nrow)
                if self.periodic:
                    cc = cc % ncol
                else:
                    ok &= (cc >= 0) & (cc < ncol)
                flat = np.clip(rr, 0, nrow - 1) * ncol + np.clip(cc, 0, ncol - 1)
                near |= ok & np.isin(flat, others)
        return near

    def storm_landfalls(self, obs: pd.DataFrame) -> list[tuple]:
        """``(track_id, time, class_name, region)`` of each crossing of a storm's centre
        from ocean onto land, for the storms whose first centre is over the ocean."""
        out = []
        storms = obs[obs.class_id == 1].sort_values(["track_id", "time"], kind="stable")
        for track, t in storms.groupby("track_id", sort=True):
            lat, lon = t.lat.to_numpy(float), t.lon.to_numpy(float)
            cells = self._cells(lat[:1], lon[:1])
            if self.land.ravel()[cells[0]]:
                continue  # formed over land: it never makes landfall
            for j in range(1, len(t)):
                path = self._cells(*_segment(lat[j - 1], lon[j - 1], lat[j], lon[j], self._step))
                over = self.land.ravel()[path]
                enter = np.flatnonzero(over[1:] & ~over[:-1])
                for e in enter:
                    for i in np.flatnonzero(self.regions[:, path[e + 1]]):
                        out.append((track, t.time.iat[j], CLASS_NAMES[1], int(i)))
        return out

    @property
    def _step(self) -> float:
        """Degrees between the points a segment is followed at: half the grid's spacing."""
        dlat = np.abs(np.diff(self.lat)).min() if self.lat.size > 1 else 1.0
        dlon = np.abs(np.diff(self.lon)).min() if self.lon.size > 1 else 1.0
        return 0.5 * float(min(dlat, dlon))

    def _cells(self, lat, lon) -> np.ndarray:
        """Flat index of the grid cell nearest to each point (degrees)."""
        r = np.abs(self.lat[None, :] - np.asarray(lat)[:, None]).argmin(axis=1)
        d = np.abs((self.lon[None, :] - np.asarray(lon)[:, None] + 180.0) % 360.0 - 180.0)
        return r * self.lon.size + d.argmin(axis=1)


def _segment(lat0, lon0, lat1, lon1, step_deg: float) -> tuple[np.ndarray, np.ndarray]:
    """Points every ``step_deg`` (of arc, or less) along the great circle between two points,
    both ends included (degrees; longitudes in 0..360)."""
    a, b = unit_vectors(lat0, lon0), unit_vectors(lat1, lon1)
    angle = float(np.degrees(np.arccos(np.clip(a @ b, -1.0, 1.0))))
    f = np.linspace(0.0, 1.0, max(int(np.ceil(angle / step_deg)), 1) + 1)[:, None]
    if angle < 1e-9:
        p = np.repeat(a[None, :], f.size, axis=0)
    else:  # spherical interpolation
        w = np.radians(angle)
        p = (np.sin((1 - f) * w) * a + np.sin(f * w) * b) / np.sin(w)
    lat = np.degrees(np.arcsin(np.clip(p[:, 2], -1.0, 1.0)))
    return lat, np.degrees(np.arctan2(p[:, 1], p[:, 0])) % 360.0


def _measure_fields(step, pixels, weights, r, k, extra):
    if k == 1 and "wind" in step:
        extra["max_wind"][r] = float(np.nanmax(step["wind"].ravel()[pixels]))
    if k == 1 and "psl" in step:
        extra["min_psl"][r] = float(np.nanmin(step["psl"].ravel()[pixels]))
    if k == 2 and "ivt" in step:
        ivt = step["ivt"].ravel()[pixels]
        extra["max_ivt"][r] = float(np.nanmax(ivt))
        extra["mean_ivt"][r] = float(np.average(ivt, weights=weights))


def event_table(steps: EventSteps) -> pd.DataFrame:
    """One row per event: :data:`EVENT_STATS_COLUMNS` (``year`` and ``season`` of genesis;
    ``landfall_regions``: the regions it made landfall in, space-separated)."""
    obs = steps.obs.sort_values(["track_id", "time"], kind="stable")
    if obs.empty:
        return pd.DataFrame(columns=list(EVENT_STATS_COLUMNS))
    g = obs.groupby("track_id", sort=True)
    first, last = g.first(), g.last()
    hours = _hours(first.time, last.time)  # in the calendar's own arithmetic (cftime)
    step_h = _step_hours(obs)
    duration = hours + step_h  # the time covered: a one-step event lasts one step
    max_wind, max_ivt = g.max_wind.max(), g.max_ivt.max()
    tc, ar = first.class_id == 1, first.class_id == 2
    fallen = steps.landfalls.groupby("track_id").region.agg(lambda r: " ".join(dict.fromkeys(r)))
    out = pd.DataFrame(
        {
            "track_id": first.index,
            "class_name": first.class_name,
            "year": [int(t.year) for t in first.time],
            "season": [SEASONS[(t.month % 12) // 3] for t in first.time],
            "start": first.time,
            "end": last.time,
            "steps": g.size(),
            "lifetime_h": hours,
            "genesis_lat": first.lat,
            "genesis_lon": first.lon,
            "max_wind": max_wind.where(tc),
            "min_psl": g.min_psl.min().where(tc),
            "category": np.where(tc, saffir_simpson(max_wind), ""),
            "max_ivt": max_ivt.where(ar),
            "mean_ivt": g.mean_ivt.mean().where(ar),
            "ar_category": np.where(ar, ralph_category(max_ivt, duration), ""),
            "landfall_regions": fallen.astype(object).reindex(first.index).fillna("").to_numpy(),
        }
    )
    return out.reset_index(drop=True)


def _step_hours(obs: pd.DataFrame) -> float:
    times = sorted(set(obs.time))
    if len(times) < 2:
        return 0.0
    return float(
        np.median([(b - a).total_seconds() for a, b in zip(times, times[1:], strict=False)]) / 3600
    )


def _hours(first: pd.Series, last: pd.Series) -> pd.Series:
    """Hours from ``first`` to ``last``, each pair subtracted in its own calendar."""
    return pd.Series(
        [(b - a).total_seconds() / 3600.0 for a, b in zip(first, last, strict=True)],
        index=first.index,
        dtype=float,
    )


def _years(times) -> list[int]:
    """The year of each time (Timestamps, numpy datetimes or cftime dates)."""
    return [int(t.year) for t in track_times(np.asarray(list(times), dtype=object))]


def event_counts(table: pd.DataFrame, by: str = "year") -> pd.DataFrame:
    """Events per class and ``by`` (``"year"`` or ``"season"``; of genesis): count, mean
    lifetime (h), and for storms the count per Saffir-Simpson class."""
    if by not in ("year", "season"):
        raise ValueError(f"by must be 'year' or 'season', got {by!r}")
    g = table.groupby(["class_name", by])
    out = g.agg(count=("track_id", "size"), mean_lifetime_h=("lifetime_h", "mean"))
    return out.reset_index()


def landfall_table(steps: EventSteps, *, classes=(1, 2)) -> pd.DataFrame:
    """Landfalling events and landfall steps per region, year and class (every region and
    class of the period, zeros included)."""
    lf = steps.landfalls
    years = sorted(set(_years(steps.obs.time))) if len(steps.obs) else []
    index = pd.MultiIndex.from_product(
        [list(steps.regions), years, [CLASS_NAMES[k] for k in classes]],
        names=["region", "year", "class_name"],
    )
    if lf.empty:
        out = pd.DataFrame(0, index=index, columns=["landfalling_events", "landfall_steps"])
        return out.reset_index()
    lf = lf.assign(year=_years(lf.time))
    first = lf.sort_values("time").drop_duplicates(["track_id", "region"])  # year of 1st landfall
    events = first.groupby(["region", "year", "class_name"]).size()
    stepsn = (
        lf.drop_duplicates(["time", "region", "class_name"])
        .groupby(["region", "year", "class_name"])
        .size()
    )
    out = pd.DataFrame(
        {
            "landfalling_events": events.reindex(index, fill_value=0),
            "landfall_steps": stepsn.reindex(index, fill_value=0),
        }
    )
    return out.reset_index()[list(LANDFALL_COLUMNS)]


def events_to_dataset(table: pd.DataFrame, *, attrs: dict | None = None) -> xr.Dataset:
    """The event table as a NetCDF-ready Dataset along ``event`` (CF units on the columns)."""
    units = {
        "lifetime_h": "h",
        "genesis_lat": "degrees_north",
        "genesis_lon": "degrees_east",
        "max_wind": "m s-1",
        "min_psl": "Pa",
        "max_ivt": "kg m-1 s-1",
        "mean_ivt": "kg m-1 s-1",
    }
    t = table.reset_index(drop=True)
    ds = xr.Dataset(
        {
            c: ("event", t[c].astype(str).to_numpy() if t[c].dtype == object else t[c].to_numpy())
            for c in t.columns
        }
    )
    for c, u in units.items():
        if c in ds:
            ds[c].attrs["units"] = u
    ds.attrs = {
        "title": "events of tropical cyclones and atmospheric rivers",
        "source": "climnb.stats.events",
        "Conventions": "CF-1.8",
        **(attrs or {}),
    }
    return ds
