"""CAM5-like synthetic climate fields with embedded storms and rivers, and their true masks.

Every test, docstring example, notebook and the Binder demo uses this generator, so it is
deterministic for a seed and fast: a full-size sample (768 x 1152 x 16) takes about 0.2 s.

The background is a zonally varying climate (moist warm tropics, cold dry poles, subtropical
highs, mid-latitude westerlies and trades) plus smooth large-scale noise that evolves in time.
Geopotential heights follow from pressure and temperature by the hypsometric equation, so a
storm's warm core also thickens the 1000-200 hPa layer. Two kinds of event are drawn in:

* tropical cyclones between 5 and 35 degrees latitude: a pressure low of 10-80 hPa, a
  cyclonic vortex (anticlockwise in the north, clockwise in the south), a warm core aloft and a
  flat-topped disc of moisture and rain whose edge is the truth mask; some drift poleward and
  westward between steps;
* atmospheric rivers: curved filaments 2,000-6,000 km long and 300-900 km wide, mostly at
  25-65 degrees latitude, carrying extra moisture with the wind aligned along them; the first
  river always straddles the 0/360 longitude seam when it is born. Their cross-sections vary:
  each river has its own profile (from Gaussian to flat-topped), its own widths on either
  side, a jet narrower or wider than its moisture, and its own strength.

Vapour transport: IVT is generated as ``s * TMQ * (U850, V850)``, where ``s`` (0.5-0.9) is a
smooth, slowly changing field standing for the ratio of the column's mean wind to the 850 hPa
wind, so IVT is not the 850 hPa proxy that detectors see. Background humidity and jet strength
also vary from seed to seed.

Rivers that touch: ``make_dataset(river_layout="side_by_side" | "end_to_end")`` draws its
two or three rivers as one group, each beside the last (a parallel axis 1.1-1.4 half widths
from its edge) or each starting beyond the end of the last (a gap of 0.5-1 of their half
widths, turned by 10-30 degrees), so that their regions of IVT >= 250 touch with weaker
transport between their cores. The group moves and dies as one. ``river_id`` then says
which river each river pixel of the truth belongs to: the river whose own added transport
(moisture times jet) is largest there.

The truth of a storm is its disc (the radius of its moisture and rain). The truth of a river is
not its drawing: it is its connected region of generated IVT >= 250 kg m-1 s-1 (the common
fixed threshold of IVT catalogues) within the river's reach, so that the score measures
agreement with a physical definition rather than with the generator's profile. A river whose
IVT never reaches 250 has no truth pixels (and is marked ``weak`` in the event table).

Examples
--------
>>> from climnb.data.synthetic import make_dataset
>>> ds, events = make_dataset(n_time=2, seed=1)
>>> ds.TMQ.dims, ds.TMQ.shape
(('time', 'lat', 'lon'), (2, 96, 144))
>>> sorted(events.class_name.unique())
['atmospheric_river', 'tropical_cyclone']
"""

from __future__ import annotations

import functools
import os
from pathlib import Path

import numpy as np
import pandas as pd
import xarray as xr
from scipy import ndimage

from climnb.data.climate import Noise, background, finish, topography
from climnb.data.events import (
    EARTH_RADIUS_KM,
    GAPS,
    PRESENT,
    Events,
    Future,
    draw_river,
    draw_storm,
    river_ids,
    river_truth,
)
from climnb.io.atomic import atomic_path
from climnb.io.channels import CHANNEL_NAMES, CHANNELS, CLASS_NAMES
from climnb.versions import written_by

__all__ = [
    "Future",
    "make_dataset",
    "write_dataset",
    "save_dataset",
    "read_events",
    "summarize",
    "EARTH_RADIUS_KM",
    "TOY_SHAPE",
    "FULL_SHAPE",
    "RIVER_LAYOUTS",
]

#: Layouts of rivers that touch (``make_dataset(river_layout=...)``).
RIVER_LAYOUTS = ("side_by_side", "end_to_end")
TOY_SHAPE = (96, 144)
FULL_SHAPE = (768, 1152)


def _validate(n_time, n_lat, n_lon, n_tc, n_ar, tc_radius_km, moving_fraction):
    for name, value in (("n_time", n_time), ("n_lat", n_lat), ("n_lon", n_lon)):
        if not isinstance(value, (int, np.integer)) or value < 1:
            raise ValueError(f"{name} must be a positive integer, got {value!r}")
    for name, value in (("n_tc", n_tc), ("n_ar", n_ar)):
        if not isinstance(value, (int, np.integer)) or value < 0:
            raise ValueError(f"{name} must be a non-negative integer, got {value!r}")
    if n_lat < 16 or n_lon < 24:
        raise ValueError(f"grid {n_lat} x {n_lon} is too small: need at least 16 x 24 (lat x lon)")
    lo, hi = tc_radius_km
    if not 0 < lo <= hi:
        raise ValueError(f"tc_radius_km must be (min, max) with 0 < min <= max, got {tc_radius_km}")
    cell_km = np.radians(360.0 / n_lon) * EARTH_RADIUS_KM
    if n_tc and lo < 1.2 * cell_km:
        need = int(np.ceil(360.0 / np.degrees(lo / 1.2 / EARTH_RADIUS_KM)))
        raise ValueError(
            f"grid {n_lat} x {n_lon} ({cell_km:.0f} km cells) is too coarse for tropical cyclones "
            f"of radius {lo:g} km: use n_lon >= {need}, or larger tc_radius_km, or n_tc=0"
        )
    if n_ar and 300.0 < 1.0 * cell_km:
        raise ValueError(
            f"grid {n_lat} x {n_lon} ({cell_km:.0f} km cells) is too coarse for atmospheric "
            "rivers 300-900 km wide: use n_lon >= 134, or n_ar=0"
        )
    if not 0.0 <= moving_fraction <= 1.0:
        raise ValueError(f"moving_fraction must be in [0, 1], got {moving_fraction}")


def _coords(n_time, n_lat, n_lon, start, freq):
    lat = np.linspace(-90.0, 90.0, n_lat)
    lon = np.arange(n_lon) * (360.0 / n_lon)
    time = pd.date_range(start, periods=n_time, freq=freq)
    return time, lat, lon


def make_dataset(
    *,
    n_time: int = 8,
    n_lat: int = TOY_SHAPE[0],
    n_lon: int = TOY_SHAPE[1],
    n_tc: int = 3,
    n_ar: int = 3,
    seed: int = 0,
    start: str = "2000-01-01",
    freq: str = "3h",
    tc_radius_km: tuple[float, float] = (350.0, 700.0),
    moving_fraction: float = 0.6,
    ivt: bool = False,
    future: Future | None = None,
    river_layout: str | None = None,
) -> tuple[xr.Dataset, pd.DataFrame]:
    """Generate CAM5-like fields with known tropical cyclones and atmospheric rivers.

    Parameters
    ----------
    n_time : number of time steps.
    n_lat, n_lon : grid size; latitudes run -90..90 inclusive, longitudes 0..360 exclusive.
        96 x 144 is the toy size, 768 x 1152 the size of the paper's data.
    n_tc, n_ar : number of tropical cyclones and atmospheric rivers present at every step.
    seed : seed of the random generator; the same arguments give the same data.
    start, freq : first time and spacing (pandas offset alias; CAM5 output is 3-hourly).
    tc_radius_km : range of storm radii (the edge of the truth mask).
    moving_fraction : fraction of storms that move between steps.
    ivt : also return the generated vapour transport ``IVT``, ``IVTU``, ``IVTV``
        (kg m-1 s-1), from which the rivers' truth is drawn.
    future : a second climate (:class:`Future`): more rivers, stronger storms, rivers
        shifted poleward; ``None`` is today's. Its settings go in the attributes.
    river_layout : ``"side_by_side"`` or ``"end_to_end"`` draws the ``n_ar`` (2 or 3) rivers
        as one group that touches (see the module's docstring) and adds ``river_id``;
        ``None`` (default) draws them apart, as before.

    Returns
    -------
    ds : xarray.Dataset
        The 16 channels of :data:`climnb.io.channels.CHANNELS` as float32 (time, lat, lon) with CF
        attributes, plus ``truth`` (uint8: 0 background, 1 tropical cyclone, 2 atmospheric
        river; a cyclone wins where both overlap; a river's truth is its region of
        IVT >= 250 kg m-1 s-1, see the module's docstring). With ``river_layout``,
        ``river_id`` (int32: the ``event_id`` of the river each river pixel of ``truth``
        belongs to, -1 elsewhere).
    events : pandas.DataFrame
        One row per event and time: ``time, event_id, class_id, class_name, lat, lon`` (centre
        of a storm, midpoint of a river), ``radius_km, psl_drop_pa, max_wind`` (storms),
        ``length_km, width_km, crosses_seam, max_ivt, weak`` (rivers; ``weak``: its IVT
        stays below 250, so it has no truth pixels).

    Raises
    ------
    ValueError
        For impossible sizes, negative counts, or a grid too coarse for the events asked for.
    """
    future = future or PRESENT
    _validate(n_time, n_lat, n_lon, n_tc, n_ar, tc_radius_km, moving_fraction)
    n_ar += future.more_rivers
    _check_layout(river_layout, n_ar)
    time, lat, lon = _coords(n_time, n_lat, n_lon, start, freq)
    rng = np.random.default_rng(seed)
    topo = topography(rng, lat, lon)
    noise = Noise(rng, lat, lon, n_fields=7)
    style = np.random.default_rng([seed, 1])  # cross-sections, background and column wind
    events = Events(
        rng, n_tc, n_ar, tc_radius_km, moving_fraction, style, future, layout=river_layout
    )
    column = Noise(style, lat, lon, n_fields=1, memory=0.9)
    rh0, jet0 = style.uniform(0.68, 0.8), style.uniform(9.0, 14.0)
    names = list(CHANNEL_NAMES) + (["IVTU", "IVTV", "IVT"] if ivt else [])
    climate = (noise, column, topo, rh0, jet0)
    data, truth, river_id, rows = _draw_steps(time, lat, lon, names, events, climate, river_layout)
    ds = _to_dataset(data, truth, time, lat, lon, seed)
    return _with_layout(ds, river_id, river_layout, future), _events_frame(rows)


def _check_layout(river_layout: str | None, n_ar: int) -> None:
    """Refuse a ``river_layout`` that is not one of :data:`RIVER_LAYOUTS` with 2 or 3 rivers."""
    if river_layout is not None and (river_layout not in RIVER_LAYOUTS or n_ar not in (2, 3)):
        raise ValueError(
            f"river_layout must be one of {RIVER_LAYOUTS} with 2 or 3 rivers (n_ar), got "
            f"{river_layout!r} with {n_ar}"
        )


def _draw_steps(time, lat, lon, names, events: Events, climate, layout: str | None):
    """Every step of the series drawn in turn (the climate and the events moved on between
    steps): ``(fields by name, truth, river_id or None, the event catalogue's rows)``.
    ``climate``: the background's noise, column wind, topography, humidity and jet."""
    noise, column, topo, rh0, jet0 = climate
    shape = (len(time), lat.size, lon.size)
    data = {name: np.empty(shape, np.float32) for name in names}
    truth = np.zeros(shape, np.uint8)
    river_id = np.full(shape, -1, np.int32) if layout else None
    rows = []
    for t in range(len(time)):
        if t:
            noise.step()
            column.step()
            events.step()
        draw = functools.partial(
            _draw_step, truth[t], events, lat, lon, noise, column, topo, rh0, jet0
        )
        f, drawn, strong = draw()
        if river_id is not None:
            ids = [r.id for r in events.rivers]
            f, drawn, strong = _place_touching(events, truth[t], ids, draw, (f, drawn, strong))
            river_id[t] = river_ids(truth[t], drawn, ids)
        peaks = [float(f["IVT"][d[0]][np.isfinite(d[1])].max()) for d in drawn]
        for name in names:
            data[name][t] = f[name]
        rows += _catalogue(time[t], events, strong, peaks)
    return data, truth, river_id, rows


def _place_touching(events: Events, truth, ids, draw, step):
    """The step drawn with each pair of the river group at the widest gap at which the two
    touch (tried once, at the group's first step); ``step``: the step as first drawn."""
    f, drawn, strong = step
    for pair in range(len(ids) - 1) if not events.placed else ():
        for gap in GAPS[1:]:  # the widest gap at which the pair touches
            if _touching(river_ids(truth, drawn, ids), ids[: pair + 2]):
                break
            events.place_group(events.gaps[:pair] + [gap] + events.gaps[pair + 1 :])
            f, drawn, strong = draw()
    events.placed = True
    return f, drawn, strong


def _with_layout(ds: xr.Dataset, river_id, river_layout, future: Future) -> xr.Dataset:
    """``ds`` with the river of each river pixel (rivers that touch) and the future's changes."""
    if river_id is not None:
        ds["river_id"] = (
            ("time", "lat", "lon"),
            river_id,
            {
                "long_name": "event_id of the river of each river pixel of truth",
                "comment": "-1 where truth is not a river",
            },
        )
        ds.attrs["river_layout"] = river_layout
    if future != PRESENT:
        ds.attrs.update(
            future_more_rivers=future.more_rivers,
            future_storm_intensity=future.storm_intensity,
            future_river_shift_deg=future.river_shift_deg,
        )
    return ds


def _draw_step(truth, events: Events, lat, lon, noise, column, topo, rh0, jet0):
    """The fields of one step with its events drawn in (``truth`` filled); returns the fields,
    the rivers' drawings and whether each has truth pixels."""
    truth[:] = 0
    f = background(lat, noise, topo, rh0, jet0)
    drawn = [draw_river(f, lat, lon, r) for r in events.rivers]
    for s in events.storms:
        draw_storm(f, truth, lat, lon, s)
    f = finish(f)
    ratio = np.clip(0.7 + 0.1 * column.field(0), 0.5, 0.9)
    f["IVTU"], f["IVTV"] = ratio * f["TMQ"] * f["U850"], ratio * f["TMQ"] * f["V850"]
    f["IVT"] = np.hypot(f["IVTU"], f["IVTV"])
    strong = [river_truth(truth, f["IVT"], d) for d in drawn]
    return f, drawn, strong


def _touching(river_id: np.ndarray, ids) -> bool:
    """Whether the rivers ``ids`` all lie in one connected region of river pixels (8
    neighbours, across the 0/360 seam: the grid is labelled twice side by side)."""
    twice = np.concatenate([river_id, river_id], axis=1)
    labels, _ = ndimage.label(twice >= 0, structure=np.ones((3, 3), bool))
    for k in np.unique(labels[labels > 0]):
        if set(ids) <= set(np.unique(twice[labels == k]).tolist()):
            return True
    return False


def _catalogue(time, events: Events, strong, peaks) -> list[dict]:
    rows = []
    for s in events.storms:
        rows.append(
            dict(
                time=time,
                event_id=s.id,
                class_id=1,
                lat=s.lat,
                lon=s.lon % 360.0,
                radius_km=s.radius_km,
                psl_drop_pa=s.drop_pa,
                max_wind=s.vmax,
            )
        )
    for r, ok, peak in zip(events.rivers, strong, peaks, strict=True):
        mid = r.path[len(r.path) // 2]
        lons = r.path[:, 1]
        seam = np.floor(lons.min() / 360.0) != np.floor(lons.max() / 360.0)
        rows.append(
            dict(
                time=time,
                event_id=r.id,
                class_id=2,
                lat=mid[0],
                lon=mid[1] % 360.0,
                length_km=r.length_km,
                width_km=r.width_km,
                crosses_seam=bool(seam),
                max_ivt=peak,
                weak=not ok,
            )
        )
    return rows


def _events_frame(rows: list[dict]) -> pd.DataFrame:
    columns = [
        "time",
        "event_id",
        "class_id",
        "class_name",
        "lat",
        "lon",
        "radius_km",
        "psl_drop_pa",
        "max_wind",
        "length_km",
        "width_km",
        "crosses_seam",
        "max_ivt",
        "weak",
    ]
    df = pd.DataFrame(rows, columns=[c for c in columns if c != "class_name"])
    df.insert(3, "class_name", [CLASS_NAMES[c] for c in df.class_id])
    df["crosses_seam"] = df.crosses_seam.astype("boolean")
    df["weak"] = df.weak.astype("boolean")
    return df


_IVT_NAMES = {
    "IVTU": "eastward vertically integrated water vapour transport",
    "IVTV": "northward vertically integrated water vapour transport",
    "IVT": "vertically integrated water vapour transport (magnitude)",
}


def _to_dataset(data, truth, time, lat, lon, seed) -> xr.Dataset:
    dims = ("time", "lat", "lon")
    variables = {c.name: (dims, data[c.name], c.attrs) for c in CHANNELS}
    for name, long_name in _IVT_NAMES.items():
        if name in data:
            attrs = {"units": "kg m-1 s-1", "long_name": long_name}
            variables[name] = (dims, data[name], attrs)
    variables["truth"] = (
        dims,
        truth,
        {
            "long_name": "true class of each pixel",
            "flag_values": np.array([0, 1, 2], np.uint8),
            "flag_meanings": " ".join(CLASS_NAMES),
        },
    )
    coords = {
        "time": ("time", time, {"standard_name": "time"}),
        "lat": (
            "lat",
            lat,
            {
                "units": "degrees_north",
                "standard_name": "latitude",
                "long_name": "latitude",
                "axis": "Y",
            },
        ),
        "lon": (
            "lon",
            lon,
            {
                "units": "degrees_east",
                "standard_name": "longitude",
                "long_name": "longitude",
                "axis": "X",
            },
        ),
    }
    attrs = {
        "title": "climnb synthetic CAM5-like fields",
        "source": written_by("climnb.data.synthetic"),
        "seed": seed,
        "Conventions": "CF-1.8",
    }
    return xr.Dataset(variables, coords=coords, attrs=attrs)


def write_dataset(
    path: str | os.PathLike,
    *,
    events_path: str | os.PathLike | None = None,
    **kwargs,
) -> str:
    """Generate with :func:`make_dataset` (``kwargs``) and save with :func:`save_dataset`.

    Returns a short summary of what was written.
    """
    ds, events = make_dataset(**kwargs)
    save_dataset(ds, events, path, events_path=events_path)
    return summarize(ds, events, path=path)


def save_dataset(
    ds: xr.Dataset,
    events: pd.DataFrame,
    path: str | os.PathLike,
    *,
    events_path: str | os.PathLike | None = None,
) -> tuple[Path, Path]:
    """Write the fields and truth (NetCDF) and the events (CSV), each atomically.

    ``events_path`` defaults to ``path`` with the suffix ``.events.csv``. Returns both paths.
    """
    path = Path(path)
    events_path = Path(events_path) if events_path else path.with_suffix(".events.csv")
    with atomic_path(path) as tmp:
        ds.to_netcdf(tmp, encoding={"truth": {"dtype": "u1"}})
    with atomic_path(events_path) as tmp:
        events.to_csv(tmp, index=False)
    return path, events_path


def read_events(path: str | os.PathLike) -> pd.DataFrame | None:
    """The event list :func:`save_dataset` wrote beside the fields ``path``, or None.

    Real files come without one; synthetic fields saved by notebook 00 or ``climnb synth`` have
    ``path`` with the suffix ``.events.csv``, which scoring against the truth needs.
    """
    events_path = Path(path).with_suffix(".events.csv")
    if not events_path.is_file():
        return None
    return pd.read_csv(events_path, parse_dates=["time"])


def summarize(ds: xr.Dataset, events: pd.DataFrame, *, path=None) -> str:
    """A short human-readable summary of a synthetic data set."""
    n_time, n_lat, n_lon = ds.sizes["time"], ds.sizes["lat"], ds.sizes["lon"]
    frac = [float((ds.truth == k).mean()) for k in (1, 2)]
    counts = events.groupby("class_name").event_id.nunique()
    lines = [
        f"{n_time} time steps of {n_lat} x {n_lon} x {len(CHANNEL_NAMES)} channels"
        + (f" -> {path}" if path else ""),
        f"  {pd.Timestamp(ds.time.values[0]):%Y-%m-%d %H:%M} .. "
        f"{pd.Timestamp(ds.time.values[-1]):%Y-%m-%d %H:%M}",
        f"  tropical cyclones: {counts.get('tropical_cyclone', 0)} storms, "
        f"{100 * frac[0]:.2f}% of pixels",
        f"  atmospheric rivers: {counts.get('atmospheric_river', 0)} rivers, "
        f"{100 * frac[1]:.2f}% of pixels, "
        f"{int(events.crosses_seam.fillna(False).sum())} river-steps across the 0/360 seam",
    ]
    return "\n".join(lines)
