"""Tracks: storms and rivers of a class mask linked over time, with ids, lifetimes and speeds.

A small linker on overlap and centre distance (documented here; tobac was considered, but it
detects its own features from thresholds and pulls in iris, trackpy and scikit-learn, while
climnb already has the regions: the labels or a network's prediction):

1. at each step, the connected regions of each class (1 cyclone, 2 river) are found with
   :func:`climnb.labels.components.label_components` (joined across the 0/360 seam) and
   measured (centroid on the sphere, area, length);
2. a region at step *t* continues a track that ended at step *t-1* when they are of the same
   class and either **overlap** (share pixels: at least ``min_overlap`` of the smaller one) or
   have **centres** within ``max_speed_kmh`` x the time between the steps (great-circle
   distance, so the seam does not matter);
3. candidate pairs are taken best first - overlapping pairs by the overlap, then the rest by
   distance - and each region continues at most one track and each track is continued by at
   most one region (one-to-one). At a split, the best part continues the track and the others
   start new ones; at a merge, the best match continues and the others end;
4. a region that continues nothing starts a new track; a track not continued ends.

Cyclones of heuristic labels follow the detector's own tracks: the labeller stitches storm
centres into tracks (:mod:`climnb.labels.stitch`, TempestExtremes' ``StitchNodes``) and its
event table names each storm's track (``storm_track``). Given that table (``storms``), a
cyclone region holding a centre continues only the track of the same stitched number, whatever
the overlap: two storms whose masks touch, or a storm forming beside one that fills, stay two
tracks, as the detector saw them.

:func:`track_events` returns one row per track and step; :func:`track_summary` one row per
track (lifetime, distance, mean and maximum speed, where it formed and ended);
:func:`tracks_to_dataset` and :func:`write_tracks` give a CF discrete sampling geometry
(``featureType = "trajectory"``, contiguous ragged array) that :func:`read_tracks` reads back.

Examples
--------
>>> from climnb.synthetic import make_dataset
>>> ds, truth = make_dataset(n_time=4, seed=0)
>>> obs = track_events(ds.truth)
>>> summary = track_summary(obs)
>>> sorted(summary.class_name.unique()), bool((summary.lifetime_h <= 9).all())
(['atmospheric_river', 'tropical_cyclone'], True)
>>> tracks_to_dataset(obs).attrs["featureType"]
'trajectory'
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import xarray as xr

from climnb.atomic import atomic_path
from climnb.channels import CLASS_NAMES
from climnb.labels.components import label_components, measure
from climnb.labels.schema import COLUMNS, MASK_EVENT_COLUMNS, TRACK_COLUMNS, conform
from climnb.labels.sphere import great_circle_km, is_periodic
from climnb.steps import iter_steps
from climnb.versions import written_by

__all__ = [
    "TrackConfig",
    "check_mask",
    "check_times",
    "track_events",
    "track_times",
    "track_summary",
    "tracks_to_dataset",
    "write_tracks",
    "read_tracks",
    "tracks_period",
    "default_max_gap",
    "OBS_COLUMNS",
    "SUMMARY_COLUMNS",
]

log = logging.getLogger(__name__)

#: Columns of :func:`track_events`, one row per track and step (the one event schema,
#: :data:`climnb.labels.schema.TRACK_COLUMNS`).
OBS_COLUMNS = TRACK_COLUMNS


#: Columns of :func:`track_summary`, one row per track (indexed by ``track_id``).
SUMMARY_COLUMNS = (
    "class_name",
    "start",
    "end",
    "steps",
    "lifetime_h",
    "distance_km",
    "mean_speed_kmh",
    "max_speed_kmh",
    "start_lat",
    "start_lon",
    "end_lat",
    "end_lon",
    "max_area_km2",
)


#: Columns of a track's steps -> their variables along ``obs`` in the trajectory file.
_ALONG = {
    "area_km2": "area",
    "length_km": "length",
    "width_km": "width",
    "n_pixels": "n_pixels",
    "speed_kmh": "speed",
}


@dataclass(frozen=True)
class TrackConfig:
    """Settings of the linker.

    Attributes
    ----------
    max_speed_kmh : fastest centre motion linked without overlap, per class id (km/h).
        Tropical cyclones rarely exceed 60 km/h; river centroids jump as their shape
        changes, hence more for class 2.
    min_overlap : overlap (shared pixels / pixels of the smaller region) that links two
        regions whatever their centres.
    min_pixels : regions smaller than this are ignored.
    max_gap_steps : steps a track may miss and still be continued (by overlap or centre
        distance over the whole time since it was last seen); 0 links consecutive steps
        only. Detections on a coarse grid come and go (a storm's centre falls on a grid
        point at one step and between points at the next); cyclone trackers bridge such
        gaps (TempestExtremes' ``StitchNodes --maxgap``).
    """

    max_speed_kmh: tuple[tuple[int, float], ...] = ((1, 80.0), (2, 150.0))
    min_overlap: float = 0.1
    min_pixels: int = 1
    max_gap_steps: int = 0

    def speed(self, class_id: int) -> float:
        return dict(self.max_speed_kmh).get(class_id, max(v for _, v in self.max_speed_kmh))


@dataclass
class _Region:
    class_id: int
    pixels: np.ndarray  # flat indices
    row: dict
    tags: frozenset = frozenset()  # the stitched tracks of the storm centres it holds


def _regions(values: np.ndarray, lat, lon, periodic: bool, cfg: TrackConfig) -> list[_Region]:
    out = []
    for k in range(1, len(CLASS_NAMES)):
        labels, n = label_components(values == k, periodic=periodic)
        if n == 0:
            continue
        table = measure(labels, n, lat, lon)
        flat = labels.ravel()
        order = np.argsort(flat, kind="stable")
        bounds = np.searchsorted(flat[order], np.arange(n + 2))
        for row in table.itertuples(index=False):
            pixels = order[bounds[row.label] : bounds[row.label + 1]]
            if pixels.size >= cfg.min_pixels:
                out.append(_Region(k, pixels, row._asdict()))
    return out


def _pairs(prev: list[_Region], cur: list[_Region], hours: list[float], cfg: TrackConfig):
    """Candidate (score, i, j): overlapping pairs first (by overlap), then by distance
    (``hours[i]``: the time since region ``i`` was seen).

    Each previous region is compared with all current ones at once: the current regions'
    indices painted on the grid give every overlap with one ``bincount`` of its pixels (a
    speckled prediction has thousands of regions per step).
    """
    if not prev or not cur:
        return []
    owner = np.full(1 + max(int(r.pixels.max()) for r in (*prev, *cur)), -1, np.intp)
    for j, b in enumerate(cur):
        owner[b.pixels] = j  # regions of one step never share a pixel
    classes = np.array([b.class_id for b in cur])
    sizes = np.array([b.pixels.size for b in cur])
    lats = np.array([b.row["lat"] for b in cur], float)
    lons = np.array([b.row["lon"] for b in cur], float)
    pairs = []
    for i, a in enumerate(prev):
        same = classes == a.class_id
        if not same.any():
            continue
        hit = owner[a.pixels]
        shared = np.bincount(hit[hit >= 0], minlength=len(cur))
        overlap = shared / np.minimum(a.pixels.size, sizes)
        dist = great_circle_km(a.row["lat"], a.row["lon"], lats, lons)
        if a.tags:  # the detector's tracks decide between regions that hold its centres
            tagged = np.array([bool(b.tags) for b in cur])
            kin = np.array([bool(a.tags & b.tags) for b in cur])
            pairs += [((-1, float(dist[j])), i, int(j)) for j in np.flatnonzero(same & kin)]
            same = same & ~tagged
        linked = same & (overlap >= cfg.min_overlap)
        near = same & ~linked & (dist <= cfg.speed(a.class_id) * hours[i])
        pairs += [((0, -float(overlap[j])), i, int(j)) for j in np.flatnonzero(linked)]
        pairs += [((1, float(dist[j])), i, int(j)) for j in np.flatnonzero(near)]
    return sorted(pairs)


def track_events(
    mask: xr.DataArray, config: TrackConfig | None = None, *, storms: pd.DataFrame | None = None
) -> pd.DataFrame:
    """Link the regions of a class mask (time, lat, lon) over time into tracks.

    ``mask`` is on an ascending-latitude grid with longitudes in degrees (labels from
    :func:`climnb.labels.label_dataset`, a prediction from :func:`climnb.predict.predict`
    with ``grid="canonical"``, or ``ds.truth``); it is read one step at a time. ``storms``:
    the labels' event table (``time, class_id, lat, lon, storm_track``), whose stitched
    cyclone tracks the cyclone regions then follow (see the module); None links by overlap
    and distance alone.

    Returns
    -------
    pandas.DataFrame
        One row per track and step, columns :data:`OBS_COLUMNS`, sorted by track then time;
        ``track_id`` counts from 0 in order of first appearance; ``speed_kmh`` is the centre's
        speed since the track's previous step (NaN at its first).
    """
    cfg = config or TrackConfig()
    mask = mask.transpose("time", "lat", "lon")
    check_mask(mask)
    lat, lon = mask.lat.values.astype(float), mask.lon.values.astype(float)
    periodic = is_periodic(lon)
    times = track_times(mask.time.values)
    check_times(times)
    centres = _storm_centres(storms, lat, lon)
    rows, prev, next_id = [], [], 0  # prev: (region, track id, step) of tracks to continue
    for t, (values,) in iter_steps([mask]):
        time = times[t]
        cur = _regions(values, lat, lon, periodic, cfg)
        _tag(cur, centres.get(_time_key(time), ()))
        hours = [(time - times[s]).total_seconds() / 3600.0 for _, _, s in prev]
        ids = [None] * len(cur)
        used = set()
        for _, i, j in _pairs([p[0] for p in prev], cur, hours, cfg):
            if i in used or ids[j] is not None:
                continue
            used.add(i)
            ids[j] = prev[i][1]
            r, p = cur[j].row, prev[i][0].row
            dist = float(great_circle_km(p["lat"], p["lon"], r["lat"], r["lon"]))
            r["speed_kmh"] = dist / hours[i] if hours[i] > 0 else np.nan
        for j, region in enumerate(cur):
            if ids[j] is None:
                ids[j], next_id = next_id, next_id + 1
            r = region.row
            rows.append(
                {
                    "track_id": ids[j],
                    "time": time,
                    "class_id": region.class_id,
                    "class_name": CLASS_NAMES[region.class_id],
                    **{k: r[k] for k in MASK_EVENT_COLUMNS if k in r},
                    "speed_kmh": r.get("speed_kmh", np.nan),
                }
            )
        waiting = [p for i, p in enumerate(prev) if i not in used and t - p[2] <= cfg.max_gap_steps]
        prev = [(region, ids[j], t) for j, region in enumerate(cur)] + waiting
    obs = conform(pd.DataFrame(rows, columns=list(OBS_COLUMNS)), OBS_COLUMNS)
    obs = obs.sort_values(["track_id", "time"], kind="stable").reset_index(drop=True)
    log.info("%d regions linked into %d tracks", len(obs), obs.track_id.nunique())
    return obs


def _time_key(time) -> str:
    """One form of a time, whether a Timestamp, a cftime date or either read back as text."""
    try:
        return str(pd.Timestamp(time))
    except (TypeError, ValueError):  # a cftime date, or its text (a 360-day calendar's 30 Feb)
        return str(time)


def _storm_centres(storms: pd.DataFrame | None, lat, lon) -> dict:
    """``{time: [(flat index of the centre's cell, stitched track), ...]}`` of the storms on
    a stitched track (``storm_track >= 0``)."""
    if storms is None or "storm_track" not in storms or storms.empty:
        return {}
    on = storms[(storms.class_id == 1) & (storms.storm_track >= 0)]
    rows = np.abs(np.asarray(on.lat, float)[:, None] - lat[None, :]).argmin(axis=1)
    dlon = np.abs((np.asarray(on.lon, float)[:, None] - lon[None, :] + 180.0) % 360.0 - 180.0)
    flat = rows * lon.size + dlon.argmin(axis=1)
    out: dict = {}
    for time, f, k in zip(on.time, flat, on.storm_track, strict=True):
        out.setdefault(_time_key(time), []).append((int(f), int(k)))
    return out


def _tag(regions: list[_Region], centres) -> None:
    """Give each cyclone region the stitched tracks of the centres it holds."""
    for region in regions:
        if region.class_id == 1 and centres:
            held = np.isin([f for f, _ in centres], region.pixels)
            region.tags = frozenset(k for (_, k), h in zip(centres, held, strict=True) if h)


def track_times(values) -> list:
    """Times as objects that subtract to a ``timedelta``: pandas Timestamps, or cftime dates
    of a model calendar (``noleap``, ``360_day``), whose own arithmetic then gives the hours."""
    values = np.asarray(values)
    if values.dtype.kind == "O":
        return list(values)
    return list(pd.DatetimeIndex(values))


def check_times(times) -> None:
    """Refuse repeated or decreasing times (overlapping inputs), naming the first one."""
    seen: dict = {}
    for i, t in enumerate(times):
        if t in seen:
            raise ValueError(
                f"time {t} is repeated (steps {seen[t]} and {i}): the inputs overlap in time; "
                "give each time step once"
            )
        seen[t] = i
        if i and t < times[i - 1]:
            raise ValueError(
                f"times go backwards at step {i} ({times[i - 1]}, then {times[i]}): give the "
                "inputs in time order"
            )


def check_mask(mask: xr.DataArray) -> None:
    """Refuse a variable that is not a class mask: tracks need the classes 0 (background),
    1, 2 (:data:`climnb.channels.CLASS_NAMES`) as whole numbers, as labels and predictions
    hold them (with ``flag_values``). A field such as TMQ is refused naming its values."""
    n = len(CLASS_NAMES)
    values = np.asarray(mask.values)
    if values.dtype.kind not in "iub":
        if values.dtype.kind != "f":
            raise ValueError(f"variable {mask.name} is {values.dtype}, not a class mask")
        finite = np.isfinite(values)
        whole = finite & (values == np.round(values))
        if not whole.all():
            bad = values[~whole].flat[0]
            raise ValueError(
                f"variable {mask.name} is not a class mask: it holds {bad:g} (values "
                f"{np.nanmin(values):.4g}..{np.nanmax(values):.4g}); a mask holds the class "
                f"numbers 0..{n - 1} (labels, truth or prediction; --variable)"
            )
    if values.size and (values.min() < 0 or values.max() > n - 1):
        raise ValueError(
            f"variable {mask.name} is not a class mask of climnb's classes: values "
            f"{values.min():g}..{values.max():g}, expected 0..{n - 1} ({', '.join(CLASS_NAMES)})"
        )


def _hours(first: pd.Series, last: pd.Series) -> pd.Series:
    if first.dtype.kind == "M":
        return (last - first).dt.total_seconds() / 3600.0
    return pd.Series(
        [(b - a).total_seconds() / 3600.0 for a, b in zip(first, last, strict=True)],
        index=first.index,
    )


def track_summary(obs: pd.DataFrame) -> pd.DataFrame:
    """One row per track: class, first and last time, steps, lifetime (h), distance (km),
    mean and maximum speed (km/h), where it formed and where it ended, maximum area."""
    if obs.empty:
        return pd.DataFrame(columns=SUMMARY_COLUMNS, index=pd.Index([], name="track_id"))
    g = obs.sort_values(["track_id", "time"]).groupby("track_id", sort=True)
    first, last = g.first(), g.last()
    hours = _hours(first.time, last.time)
    distance = g.apply(_path_km, include_groups=False)
    return pd.DataFrame(
        {
            "class_name": first.class_name,
            "start": first.time,
            "end": last.time,
            "steps": g.size(),
            "lifetime_h": hours,
            "distance_km": distance,
            "mean_speed_kmh": np.where(hours > 0, distance / hours.where(hours > 0), np.nan),
            "max_speed_kmh": g.speed_kmh.max(),
            "start_lat": first.lat,
            "start_lon": first.lon,
            "end_lat": last.lat,
            "end_lon": last.lon,
            "max_area_km2": g.area_km2.max(),
        }
    )


def _path_km(track: pd.DataFrame) -> float:
    lat, lon = track.lat.to_numpy(), track.lon.to_numpy()
    return (
        float(np.sum(great_circle_km(lat[:-1], lon[:-1], lat[1:], lon[1:])))
        if len(lat) > 1
        else 0.0
    )


def tracks_to_dataset(obs: pd.DataFrame, *, attrs: dict | None = None) -> xr.Dataset:
    """Tracks as a CF discrete sampling geometry: trajectories in a contiguous ragged array.

    Dimensions ``trajectory`` (one per track: ``trajectory`` id with ``cf_role =
    trajectory_id``, ``row_size`` with ``sample_dimension = obs``, class and the summary of
    :func:`track_summary`) and ``obs`` (each track's steps in order: ``time``, ``lat``, ``lon``,
    area, length, speed). CF-1.10, ``featureType = "trajectory"``.
    """
    obs = obs.sort_values(["track_id", "time"], kind="stable").reset_index(drop=True)
    summary = track_summary(obs)
    flags = {
        "flag_values": np.arange(1, len(CLASS_NAMES), dtype=np.int8),
        "flag_meanings": " ".join(CLASS_NAMES[1:]),
    }
    traj = {
        "trajectory": (
            "trajectory",
            summary.index.to_numpy(np.int32),
            {"cf_role": "trajectory_id", "long_name": "track id"},
        ),
        "row_size": (
            "trajectory",
            summary.steps.to_numpy(np.int32),
            {"sample_dimension": "obs", "long_name": "number of steps of this track"},
        ),
        "class_id": (
            "trajectory",
            summary.index.map(obs.groupby("track_id").class_id.first()).to_numpy(np.int8),
            {"long_name": "class of the track", **flags},
        ),
        "lifetime": (
            "trajectory",
            summary.lifetime_h.to_numpy(float),
            {"long_name": "time from first to last step", "units": "h"},
        ),
        "distance": (
            "trajectory",
            summary.distance_km.to_numpy(float),
            {"long_name": "distance travelled by the centre", "units": "km"},
        ),
        "mean_speed": (
            "trajectory",
            summary.mean_speed_kmh.to_numpy(float),
            {"long_name": "mean speed of the centre", "units": "km h-1"},
        ),
        "max_area": (
            "trajectory",
            summary.max_area_km2.to_numpy(float),
            {"long_name": "largest area", "units": "km2"},
        ),
    }
    along = {
        name: ("obs", obs[column].to_numpy(COLUMNS[column].dtype), _attrs(column))
        for column, name in _ALONG.items()
    }
    coords = {
        "time": ("obs", _time_values(obs.time), {"standard_name": "time"}),
        "lat": (
            "obs",
            obs.lat.to_numpy(float),
            {"standard_name": "latitude", "units": "degrees_north", "long_name": "centre"},
        ),
        "lon": (
            "obs",
            obs.lon.to_numpy(float),
            {"standard_name": "longitude", "units": "degrees_east", "long_name": "centre"},
        ),
    }
    ds = xr.Dataset({**traj, **along}, coords=coords)
    ds = ds.set_coords("trajectory")
    ds.attrs = {
        "Conventions": "CF-1.10",
        "featureType": "trajectory",
        "title": "tracks of tropical cyclones and atmospheric rivers",
        "source": written_by("climnb.tracks"),
        **(attrs or {}),
    }
    return ds


def _attrs(column: str) -> dict[str, str]:
    attrs = {"long_name": COLUMNS[column].long_name}
    return attrs | ({"units": COLUMNS[column].units} if COLUMNS[column].units else {})


def _time_values(times: pd.Series) -> np.ndarray:
    if times.dtype.kind == "O" and len(times):
        return np.asarray(times.to_numpy(), dtype=object)  # cftime dates, their calendar kept
    return pd.DatetimeIndex(times).to_numpy()


def write_tracks(obs: pd.DataFrame, path: str | os.PathLike, *, attrs: dict | None = None) -> Path:
    """Write the tracks as a CF trajectory NetCDF file (:func:`tracks_to_dataset`), atomically."""
    path = Path(path)
    ds = tracks_to_dataset(obs, attrs=attrs)
    encoding = {"units": "hours since 1970-01-01", "dtype": "f8"}
    first = ds.time.values[0] if ds.sizes["obs"] else None
    if getattr(first, "calendar", None):  # a model calendar: kept as it is
        encoding["calendar"] = first.calendar
    with atomic_path(path) as tmp:
        ds.to_netcdf(tmp, encoding={"time": encoding})
    return path


def read_tracks(path: str | os.PathLike) -> pd.DataFrame:
    """Read a trajectory file of :func:`write_tracks` back into the rows of
    :func:`track_events` (track id repeated along each track by ``row_size``)."""
    with xr.open_dataset(path) as ds:
        if ds.attrs.get("featureType") != "trajectory" or "row_size" not in ds:
            raise ValueError(f"{path}: not a CF trajectory file (featureType, row_size)")
        ids = np.repeat(ds.trajectory.values, ds.row_size.values)
        classes = np.repeat(ds.class_id.values, ds.row_size.values).astype(int)
        obs = pd.DataFrame(
            {
                "track_id": ids,
                "time": _time_values(pd.Series(ds.time.values)),
                "class_id": classes,
                "class_name": [CLASS_NAMES[k] for k in classes],
                "lat": ds.lat.values,
                "lon": ds.lon.values,
                **{column: ds[name].values for column, name in _ALONG.items()},
            }
        )
    return conform(obs, OBS_COLUMNS)


def tracks_period(path: str | os.PathLike) -> tuple[str | None, str | None]:
    """The first and last time a trajectory file's tracks were looked for in (its
    ``time_coverage_start`` and ``_end``), or None where the file does not say."""
    with xr.open_dataset(path) as ds:
        return ds.attrs.get("time_coverage_start") or None, ds.attrs.get(
            "time_coverage_end"
        ) or None


def default_max_gap(mask: xr.DataArray) -> int:
    """The steps a track may miss by default: the gap the labeller's cyclone tracks allowed
    (labels' ``storm_max_gap_h``) in steps of the mask's time axis, else 0."""
    hours = mask.attrs.get("storm_max_gap_h")
    times = track_times(mask.time.values) if "time" in mask.dims else []
    if hours is None or len(times) < 2:
        return 0
    step = (times[1] - times[0]).total_seconds() / 3600.0
    return int(float(hours) // step) if step > 0 else 0
