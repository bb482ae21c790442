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

import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
import xarray as xr
from scipy import ndimage
from scipy.spatial import cKDTree

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

EARTH_RADIUS_KM = 6371.0
#: Layouts of rivers that touch (``make_dataset(river_layout=...)``).
RIVER_LAYOUTS = ("side_by_side", "end_to_end")
#: Gaps tried between rivers that touch, widest first, in half widths of the two rivers (between
#: their axes side by side, or between one's end and the next's start)
_GAPS = (1.8, 1.7, 1.6, 1.5, 1.4, 1.3, 1.2, 1.1, 1.0)
TOY_SHAPE = (96, 144)
FULL_SHAPE = (768, 1152)

#: IVT (kg m-1 s-1) at the edge of a river's truth.
IVT_THRESHOLD = 250.0
_G = 9.80665  # m s-2
_RD = 287.04  # J kg-1 K-1
_H = _RD / _G  # m K-1, hypsometric scale


# ---------------------------------------------------------------------------------------------
# Events: storms and rivers as small state machines that move and die between time steps
# ---------------------------------------------------------------------------------------------


@dataclass
class _Storm:
    id: int
    lat: float
    lon: float
    radius_km: float
    drop_pa: float
    warm_k: float
    dlat: float  # degrees per step (poleward positive, sign applied by hemisphere)
    dlon: float
    life: int

    @property
    def vmax(self) -> float:
        """Maximum tangential wind (m s-1), an empirical wind-pressure relation."""
        return 7.0 * np.sqrt(self.drop_pa / 100.0)


@dataclass
class _River:
    id: int
    lat: float
    lon: float
    heading: float  # radians from east, towards the pole of its hemisphere
    curvature: float  # radians per 1000 km
    length_km: float
    width_km: float
    moisture: float  # kg m-2 added on the axis
    jet: float  # m s-1 along the axis
    dlon: float
    life: int
    shape: float = 6.0  # profile exponent: 2 Gaussian .. 8 flat-topped
    skew: float = 1.0  # width on the left of the axis / width on the right
    jet_width: float = 1.0  # jet half width / moisture half width
    turn: float = 0.0  # radians from the heading of the river it follows (end to end)
    path: np.ndarray = field(default=None, repr=False)  # (n, 2) lat, unwrapped lon


@dataclass(frozen=True)
class Future:
    """A second climate drawn by the same generator, with known changes.

    Attributes
    ----------
    more_rivers : atmospheric rivers added to ``n_ar`` at every step.
    storm_intensity : factor on every storm's central pressure drop (its maximum wind grows
        with the square root, its warm core with the drop).
    river_shift_deg : degrees by which rivers form closer to their pole.

    The event list of :func:`make_dataset` holds each event as drawn, so the expected change
    of any statistic is known exactly from it.
    """

    more_rivers: int = 0
    storm_intensity: float = 1.0
    river_shift_deg: float = 0.0

    def __post_init__(self):
        if not isinstance(self.more_rivers, (int, np.integer)) or self.more_rivers < 0:
            raise ValueError(
                f"more_rivers must be a non-negative integer, got {self.more_rivers!r}"
            )
        if not 0.2 <= self.storm_intensity <= 3.0:
            raise ValueError(f"storm_intensity must be in [0.2, 3], got {self.storm_intensity}")
        if not -20.0 <= self.river_shift_deg <= 20.0:
            raise ValueError(f"river_shift_deg must be in [-20, 20], got {self.river_shift_deg}")


#: Today's climate: no change.
PRESENT = Future()


def _great_circle_km(lat1, lon1, lat2, lon2):
    p1, p2 = np.radians(lat1), np.radians(lat2)
    dl = np.radians(lon2 - lon1)
    h = np.sin((p2 - p1) / 2) ** 2 + np.cos(p1) * np.cos(p2) * np.sin(dl / 2) ** 2
    return 2 * EARTH_RADIUS_KM * np.arcsin(np.sqrt(np.clip(h, 0, 1)))


class _Events:
    """Draws, moves and retires storms and rivers so that each step has a fixed count."""

    def __init__(
        self,
        rng,
        n_tc,
        n_ar,
        tc_radius_km,
        moving_fraction,
        style=None,
        future=PRESENT,
        layout=None,
    ):
        self.rng = rng
        self.future = future
        # the rivers' cross-sections come from their own generator, so that the events'
        # places and times stay those of earlier versions for the same seed
        self.style = style if style is not None else np.random.default_rng(0)
        self.tc_radius_km = tc_radius_km
        self.moving_fraction = moving_fraction
        self.next_id = 0
        self.n_tc = n_tc
        self.storms = []
        first = rng.choice([-1.0, 1.0])
        for i in range(n_tc):  # hemispheres alternate; the first storm always moves
            moving = (i == 0 and moving_fraction > 0) or None
            self.storms.append(self._new_storm(moving=moving, hemi=first * (-1) ** i))
        self.layout, self.n_ar = layout, n_ar
        if layout is None:
            self.rivers = [self._new_river(seam=(i == 0)) for i in range(n_ar)]
        else:
            self._new_group(seam=True)

    def _id(self):
        self.next_id += 1
        return self.next_id - 1

    def _new_storm(self, moving: bool | None = None, hemi: float | None = None) -> _Storm:
        rng = self.rng
        for _ in range(200):
            hemi = rng.choice([-1.0, 1.0]) if hemi is None else hemi
            lat = hemi * rng.uniform(8.0, 28.0)
            lon = rng.uniform(0.0, 360.0)
            radius = rng.uniform(*self.tc_radius_km)
            if all(
                _great_circle_km(lat, lon, s.lat, s.lon) > 1.6 * (radius + s.radius_km) + 300
                for s in self.storms
            ):
                break
        else:
            raise ValueError(
                f"cannot place {self.n_tc} non-overlapping tropical cyclones of radius "
                f"{self.tc_radius_km} km between 5 and 35 degrees latitude (only "
                f"{len(self.storms)} fit); "
                "ask for fewer storms (n_tc) or smaller ones (tc_radius_km)"
            )
        drop = rng.uniform(1000.0, 8000.0) * self.future.storm_intensity
        moving = (rng.random() < self.moving_fraction) if moving is None else moving
        return _Storm(
            id=self._id(),
            lat=lat,
            lon=lon,
            radius_km=radius,
            drop_pa=drop,
            warm_k=1.5 + 5.0 * drop / 8000.0,
            dlat=hemi * rng.uniform(0.2, 0.6) if moving else 0.0,
            dlon=-rng.uniform(0.4, 1.2) if moving else 0.0,
            life=int(rng.integers(4, 16)),
        )

    def _new_river(self, seam: bool = False) -> _River:
        rng = self.rng
        hemi = rng.choice([-1.0, 1.0])
        length = rng.uniform(2000.0, 6000.0)
        heading = rng.uniform(np.radians(5), np.radians(28))
        river = _River(
            id=self._id(),
            lat=hemi * (rng.uniform(26.0, 42.0) + self.future.river_shift_deg),
            lon=rng.uniform(0.0, 360.0),
            heading=heading,
            curvature=rng.uniform(-0.15, 0.15),
            length_km=length,
            width_km=rng.uniform(300.0, 900.0),
            moisture=rng.uniform(22.0, 32.0),
            jet=rng.uniform(15.0, 25.0),
            dlon=rng.uniform(0.5, 2.0),
            life=int(rng.integers(3, 10)),
        )
        style = self.style
        river.moisture = style.uniform(12.0, 34.0)
        river.jet = style.uniform(8.0, 28.0)
        river.shape = style.uniform(2.0, 8.0)
        river.skew = float(np.exp(style.uniform(-0.35, 0.35)))
        river.jet_width = style.uniform(0.6, 1.4)
        river.heading = style.uniform(np.radians(12), np.radians(35))
        river.path = _river_path(river, hemi)
        if seam:  # shift so that the middle of the river sits on the 0/360 seam
            mid = river.path[len(river.path) // 2, 1]
            river.path[:, 1] -= mid
            river.lon -= mid
        return river

    def step(self):
        """Advance one time step: move events, replace those that died or left their band."""
        for i, s in enumerate(self.storms):
            s.lat += s.dlat
            s.lon = (s.lon + s.dlon) % 360.0
            s.life -= 1
            others = self.storms[:i] + self.storms[i + 1 :]
            crowded = any(
                _great_circle_km(s.lat, s.lon, o.lat, o.lon) < 1.2 * (s.radius_km + o.radius_km)
                for o in others
            )
            if s.life <= 0 or abs(s.lat) > 33.0 or crowded:
                self.storms[i] = self._replacement(i)
        for i, r in enumerate(self.rivers):
            r.lon += r.dlon
            r.path[:, 1] += r.dlon
            r.life -= 1
            if r.life <= 0 and self.layout is None:
                self.rivers[i] = self._new_river()
        if self.layout is not None and self.rivers[0].life <= 0:
            self._new_group()

    def _new_group(self, seam: bool = False) -> list[_River]:
        """``n_ar`` rivers that touch: each beside the last or beyond its end (``layout``,
        placed by :meth:`place_group`); they move and die together."""
        rng = self.rng
        group = []
        for k in range(self.n_ar):
            r = self._new_river(seam=seam and k == 0)
            # strong rivers with distinct cores (flat-topped moisture, a jet narrower than
            # it), so that a reader of the map sees two rivers where their regions touch
            r.moisture, r.jet = rng.uniform(24.0, 34.0), rng.uniform(18.0, 28.0)
            r.shape, r.jet_width, r.skew = rng.uniform(5.0, 8.0), rng.uniform(0.6, 0.8), 1.0
            # and poleward all along (a straight axis), as the river rules ask of each
            r.heading, r.curvature = np.radians(rng.uniform(20.0, 35.0)), 0.0
            if self.layout == "end_to_end":  # a chain, kept within the mid-latitudes
                r.heading, r.length_km = np.radians(rng.uniform(18.0, 28.0)), 3000.0
                r.lat = np.sign(r.lat) * rng.uniform(26.0, 32.0)
            r.path = _river_path(r, float(np.sign(r.lat)))
            if seam and k == 0:
                r.path[:, 1] -= r.path[len(r.path) // 2, 1]
            r.turn = np.radians(rng.uniform(5.0, 10.0))
            group.append(r)
        self.rivers = group
        self.place_group([_GAPS[0]] * (self.n_ar - 1))
        self.placed = False  # make_dataset picks, pair by pair, the widest gap that touches
        return group

    def place_group(self, gaps) -> None:
        """Put each river of the group ``gaps[i]`` half widths beside the last (parallel, on
        its poleward side) or beyond its end (turned towards the equator by 5-10 degrees
        while it still heads poleward)."""
        self.gaps = list(gaps)
        pairs = zip(self.rivers[:-1], self.rivers[1:], self.gaps, strict=True)
        for last, r, gap in pairs:
            hemi = float(np.sign(last.lat))
            r.dlon, r.life = last.dlon, last.life
            km = gap * (last.width_km + r.width_km) / 2.0
            if self.layout == "side_by_side":
                r.path = _offset(last.path, km, hemi)
                r.heading, r.length_km = last.heading, last.length_km
            else:
                end = last.heading + last.curvature * last.length_km / 1000.0
                ok = end - r.turn > np.radians(8.0)
                r.heading = end - r.turn if ok else end + r.turn
                r.lat, r.lon = _advance(last.path[-1], last.path[-2], km)
                r.path = _river_path(r, hemi)
            r.lat, r.lon = float(r.path[0, 0]), float(r.path[0, 1])

    def _replacement(self, i: int) -> _Storm:
        """A new storm placed clear of all storms but the one it replaces."""
        keep = self.storms
        self.storms = keep[:i] + keep[i + 1 :]
        try:
            return self._new_storm()
        finally:
            self.storms = keep


def _river_path(r: _River, hemi: float, n: int = 64) -> np.ndarray:
    """Points along a river: march from its start with slowly turning heading."""
    ds = r.length_km / (n - 1)
    lat, lon = r.lat, r.lon
    points = [(lat, lon)]
    for k in range(1, n):
        heading = r.heading + r.curvature * (k * ds / 1000.0)
        dlat = np.degrees(ds * np.sin(heading) / EARTH_RADIUS_KM) * hemi
        dlon = np.degrees(ds * np.cos(heading) / (EARTH_RADIUS_KM * np.cos(np.radians(lat))))
        lat, lon = lat + dlat, lon + dlon
        points.append((lat, lon))
    return np.array(points)


def _offset(path: np.ndarray, km: float, hemi: float) -> np.ndarray:
    """The polyline ``path`` moved ``km`` to its poleward side, along its local normal."""
    east, north = _tangents(path[:, 0], path[:, 1])
    side = hemi if np.mean(east) >= 0 else -hemi  # the normal that points poleward
    n_east, n_north = -north * side, east * side
    lat = path[:, 0] + np.degrees(km * n_north / EARTH_RADIUS_KM)
    lon = path[:, 1] + np.degrees(km * n_east / (EARTH_RADIUS_KM * np.cos(np.radians(path[:, 0]))))
    return np.stack([lat, lon], axis=1)


def _advance(point, before, km: float) -> tuple[float, float]:
    """The point ``km`` beyond ``point`` in the direction from ``before`` to it."""
    de = (point[1] - before[1]) * np.cos(np.radians(point[0]))
    dn = point[0] - before[0]
    norm = max(float(np.hypot(de, dn)), 1e-12)
    lat = point[0] + np.degrees(km * dn / norm / EARTH_RADIUS_KM)
    lon = point[1] + np.degrees(km * de / norm / (EARTH_RADIUS_KM * np.cos(np.radians(point[0]))))
    return float(lat), float(lon)


# ---------------------------------------------------------------------------------------------
# Background climate
# ---------------------------------------------------------------------------------------------


class _Noise:
    """Smooth, large-scale random fields, periodic in longitude, evolving as AR(1) in time.

    A field is ``A_lat @ C @ B_lon`` with a few meridional modes and zonal wavenumbers up to
    ``m_max``: two small matrix products, so it costs ~1 ms even at full size.
    """

    def __init__(self, rng, lat, lon, n_fields, k_max=8, m_max=8, memory=0.8):
        colat = np.radians(90.0 - lat)
        self.a = np.stack([np.cos(k * colat) for k in range(k_max + 1)], axis=1)
        lam = np.radians(lon)
        modes = [np.ones_like(lam)]
        for m in range(1, m_max + 1):
            modes += [np.cos(m * lam), np.sin(m * lam)]
        self.b = np.stack(modes)  # zonal waves are damped by coslat in field(): 0 at the poles
        self.coslat = np.cos(np.radians(lat))[:, None]
        k = np.arange(k_max + 1)[:, None]
        m = np.concatenate([[0], np.repeat(np.arange(1, m_max + 1), 2)])[None, :]
        self.scale = 1.0 / (1.0 + 0.35 * np.hypot(k, m)) ** 1.5
        self.scale /= np.sqrt((self.scale**2).sum() / 3.0)
        self.rng, self.memory = rng, memory
        self.coef = rng.standard_normal((n_fields, *self.scale.shape))

    def step(self):
        eps = self.rng.standard_normal(self.coef.shape)
        self.coef = self.memory * self.coef + np.sqrt(1 - self.memory**2) * eps

    def field(self, i: int) -> np.ndarray:
        c = self.coef[i] * self.scale
        zonal = self.a @ c[:, :1] * self.b[:1]
        waves = (self.a @ c[:, 1:]) @ self.b[1:]
        return (zonal + self.coslat * waves).astype(np.float32)


def _background(lat, noise: _Noise, topo, rh0=0.75, jet0=12.0) -> dict[str, np.ndarray]:
    phi = np.radians(lat)[:, None].astype(np.float32)
    s2 = np.sin(phi) ** 2
    n = [noise.field(i) for i in range(7)]
    ts = 302.0 - 50.0 * s2 + 3.0 * n[0]
    psl = (
        101325.0
        + 900.0 * np.exp(-(((np.abs(phi) - 0.52) / 0.16) ** 2))
        - 1400.0 * np.exp(-(((np.abs(phi) - 1.05) / 0.18) ** 2))
        + 700.0 * n[1]
    )
    u = (
        jet0 * np.exp(-(((np.abs(phi) - 0.79) / 0.22) ** 2))
        - 5.0 * np.exp(-((phi / 0.2) ** 2))
        + 4.0 * n[2]
    )
    v = 4.0 * n[3]
    rh = np.clip(rh0 + 0.12 * n[4], 0.3, 1.0)
    tmq = rh * 62.0 * np.exp(0.065 * (ts - 302.0))
    prect = 4e-8 * (tmq / 50.0) ** 2 * np.exp(1.2 * n[5])
    return {
        "TS": ts,
        "PSL": psl,
        "U850": u,
        "V850": v,
        "TMQ": tmq,
        "PRECT": prect,
        "T500": 0.6 * ts + 85.0 + 1.5 * n[6],
        "T200": 218.0 + 4.0 * s2 + 1.0 * n[6],
        "topo": topo,
    }


def _topography(rng, lat, lon) -> np.ndarray:
    """A fixed smooth land height (m), zero over 'ocean', for PS and ZBOT."""
    noise = _Noise(rng, lat, lon, 1, k_max=6, m_max=6, memory=0.0)
    return np.clip(noise.field(0) - 0.6, 0.0, None) * 1500.0


def _finish(f: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Derive the remaining channels so that they agree with each other physically."""
    ts, psl, topo = f["TS"], f["PSL"], f.pop("topo")
    f["TREFHT"] = ts - 1.5
    f["PS"] = psl * np.exp(-topo / (_H * ts))
    f["ZBOT"] = np.float32(62.0) + 0.1 * (f["TREFHT"] - 280.0)
    f["UBOT"] = 0.7 * f["U850"] - 0.15 * f["V850"]
    f["VBOT"] = 0.7 * f["V850"] + 0.15 * f["U850"]
    f["QREFHT"] = 3.4e-4 * f["TMQ"]
    # hypsometric equation: 1000 hPa height from PSL, 1000-200 hPa thickness from mean T
    f["Z1000"] = _H * (ts - 3.0) * np.log(psl / 100000.0)
    t_mean = (f["TREFHT"] + 2.0 * f["T500"] + f["T200"]) / 4.0
    f["Z200"] = f["Z1000"] + _H * t_mean * np.log(5.0)
    return {k: np.asarray(v, dtype=np.float32) for k, v in f.items()}


# ---------------------------------------------------------------------------------------------
# Drawing events into the fields
# ---------------------------------------------------------------------------------------------


def _box(lat, lon, lat0, lat1, lon0, lon1):
    """Row slice and (wrapped) column indices of a lat/lon box; lon0/lon1 may be unwrapped."""
    rows = np.flatnonzero((lat >= lat0) & (lat <= lat1))
    dlon = 360.0 / lon.size
    c0, c1 = int(np.floor(lon0 / dlon)), int(np.ceil(lon1 / dlon))
    cols = np.arange(c0, c1 + 1) % lon.size
    cols = np.unique(cols) if c1 - c0 + 1 > lon.size else cols
    return rows, cols


def _draw_storm(f, truth, lat, lon, s: _Storm):
    half = np.degrees(3.0 * s.radius_km / EARTH_RADIUS_KM)
    rows, cols = _box(
        lat,
        lon,
        s.lat - half,
        s.lat + half,
        s.lon - half / np.cos(np.radians(s.lat)),
        s.lon + half / np.cos(np.radians(s.lat)),
    )
    la, lo = np.meshgrid(lat[rows], lon[cols], indexing="ij")
    r = _great_circle_km(s.lat, s.lon, la, lo)
    x = EARTH_RADIUS_KM * np.radians((lo - s.lon + 180.0) % 360.0 - 180.0) * np.cos(np.radians(la))
    y = EARTH_RADIUS_KM * np.radians(la - s.lat)
    idx = np.ix_(rows, cols)
    disc = 1.0 / (1.0 + (r / s.radius_km) ** 8)  # flat top, edge (0.5) at the radius
    f["PSL"][idx] -= s.drop_pa * np.exp(-0.5 * (r / (0.6 * s.radius_km)) ** 2)
    warm = s.warm_k * np.exp(-0.5 * (r / (0.7 * s.radius_km)) ** 2)
    f["T500"][idx] += warm
    f["T200"][idx] += 0.8 * warm
    f["TMQ"][idx] += (22.0 + 2e-3 * s.drop_pa) * disc
    f["PRECT"][idx] += (1.0e-6 + 2.5e-10 * s.drop_pa) * disc
    # Rankine-like vortex, maximum wind at a third of the radius
    rm = s.radius_km / 3.0
    vt = s.vmax * np.where(r < rm, r / rm, (rm / np.maximum(r, 1e-6)) ** 0.6)
    vt *= np.exp(-((r / (2.5 * s.radius_km)) ** 4))
    sense = 1.0 if s.lat >= 0 else -1.0  # cyclonic: anticlockwise in the north
    rr = np.maximum(r, 1e-6)
    f["U850"][idx] += -sense * vt * y / rr
    f["V850"][idx] += sense * vt * x / rr
    truth[idx] = np.where(r <= s.radius_km, 1, truth[idx])


def _draw_river(f, lat, lon, r: _River):
    """Add river ``r`` to the fields; returns ``(index, distance_km, axis_km, transport)`` for
    its truth (``transport``: its own added moisture times jet on ``index``)."""
    hw = r.width_km / 2.0
    hw_left, hw_right = hw * np.sqrt(r.skew), hw / np.sqrt(r.skew)
    reach = 2.5 * max(hw_left, hw_right) * max(1.0, r.jet_width)  # beyond: nothing added
    pad = np.degrees(reach / EARTH_RADIUS_KM)
    plat, plon = _densify(r.path, step_km=hw / 10.0)
    coslat = np.cos(np.radians(min(np.abs(plat).max() + pad, 80.0)))
    rows, cols = _box(
        lat,
        lon,
        plat.min() - pad,
        plat.max() + pad,
        plon.min() - pad / coslat,
        plon.max() + pad / coslat,
    )
    la, lo = np.meshgrid(lat[rows], lon[cols], indexing="ij")
    tree = cKDTree(_xyz(plat, plon))
    chord, nearest = tree.query(
        _xyz(la.ravel(), lo.ravel()), distance_upper_bound=reach / EARTH_RADIUS_KM
    )
    near = np.isfinite(chord)
    d = np.full(la.size, np.inf)
    d[near] = 2 * EARTH_RADIUS_KM * np.arcsin(np.minimum(chord[near] / 2, 1.0))
    d = d.reshape(la.shape)
    east, north = _tangents(plat, plon)
    j = np.where(near, nearest, 0).reshape(la.shape)
    # which side of the axis: the offset from the nearest axis point against the normal
    de = ((lo - plon[j] + 180.0) % 360.0 - 180.0) * np.cos(np.radians(la))
    dn = la - plat[j]
    left = (-north[j] * de + east[j] * dn) > 0
    u = d / np.where(left, hw_left, hw_right)
    u_reach = reach / np.where(left, hw_left, hw_right)
    moist = _profile(u, r.shape) - _profile(u_reach, r.shape)
    jet = _profile(u / r.jet_width, 2.0) - _profile(u_reach / r.jet_width, 2.0)
    moist, jet = np.clip(moist, 0.0, None), np.clip(jet, 0.0, None)
    idx = np.ix_(rows, cols)
    f["TMQ"][idx] += r.moisture * moist
    f["PRECT"][idx] += 1.5e-7 * moist
    f["U850"][idx] += r.jet * jet * east[j]
    f["V850"][idx] += r.jet * jet * north[j]
    return idx, d, min(hw_left, hw_right) / 4.0, r.moisture * moist * r.jet * jet


def _profile(u, shape):
    """Cross-section ``exp(-ln 2 * u^shape)``: 1 on the axis, 0.5 at ``u = 1``."""
    return np.exp(-np.log(2.0) * np.power(u, shape))


def _river_truth(truth, ivt, drawn, threshold=IVT_THRESHOLD) -> bool:
    """Mark a river's connected region of IVT >= ``threshold`` that holds its axis; returns
    whether it has one."""
    idx, d, axis_km = drawn[:3]
    region = (ivt[idx] >= threshold) & np.isfinite(d)
    labels, _ = ndimage.label(region, structure=np.ones((3, 3), bool))
    axis = d <= max(axis_km, np.nanmin(d))
    keep = np.unique(labels[axis & region])
    mask = np.isin(labels, keep[keep > 0])
    box = truth[idx]
    truth[idx] = np.where(mask & (box == 0), 2, box)
    return bool(mask.any())


def _river_ids(truth, drawn, ids) -> np.ndarray:
    """The id of the river whose own transport is largest at each river pixel of ``truth``
    (-1 elsewhere)."""
    best = np.zeros(truth.shape)
    out = np.full(truth.shape, -1, np.int32)
    for (idx, _, _, transport), rid in zip(drawn, ids, strict=True):
        more = transport > best[idx]
        best[idx] = np.where(more, transport, best[idx])
        out[idx] = np.where(more, rid, out[idx])
    return np.where(truth == 2, out, -1)


def _xyz(lat, lon):
    phi, lam = np.radians(lat), np.radians(lon)
    return np.stack([np.cos(phi) * np.cos(lam), np.cos(phi) * np.sin(lam), np.sin(phi)], axis=-1)


def _densify(path, step_km):
    """Resample a polyline so that neighbouring points are at most ``step_km`` apart."""
    seg = _great_circle_km(path[:-1, 0], path[:-1, 1], path[1:, 0], path[1:, 1])
    s = np.concatenate([[0.0], np.cumsum(seg)])
    fine = np.linspace(0.0, s[-1], max(int(s[-1] / step_km) + 1, 2))
    return np.interp(fine, s, path[:, 0]), np.interp(fine, s, path[:, 1])


def _tangents(plat, plon):
    """Unit (east, north) direction of a polyline at each of its points."""
    de = np.gradient(plon) * np.cos(np.radians(plat))
    dn = np.gradient(plat)
    norm = np.maximum(np.hypot(de, dn), 1e-12)
    return de / norm, dn / norm


# ---------------------------------------------------------------------------------------------
# Public API
# ---------------------------------------------------------------------------------------------


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
    if river_layout is not None and (
        river_layout not in RIVER_LAYOUTS or n_ar + future.more_rivers not in (2, 3)
    ):
        raise ValueError(
            f"river_layout must be one of {RIVER_LAYOUTS} with 2 or 3 rivers (n_ar), got "
            f"{river_layout!r} with {n_ar + future.more_rivers}"
        )
    n_ar += future.more_rivers
    time, lat, lon = _coords(n_time, n_lat, n_lon, start, freq)
    rng = np.random.default_rng(seed)
    topo = _topography(rng, lat, lon)
    noise = _Noise(rng, lat, lon, n_fields=7)
    style = np.random.default_rng([seed, 1])  # cross-sections, background and column wind
    events = _Events(
        rng, n_tc, n_ar, tc_radius_km, moving_fraction, style, future, layout=river_layout
    )
    column = _Noise(style, lat, lon, n_fields=1, memory=0.9)
    rh0, jet0 = style.uniform(0.68, 0.8), style.uniform(9.0, 14.0)
    names = list(CHANNEL_NAMES) + (["IVTU", "IVTV", "IVT"] if ivt else [])
    data = {name: np.empty((n_time, n_lat, n_lon), np.float32) for name in names}
    truth = np.zeros((n_time, n_lat, n_lon), np.uint8)
    river_id = np.full((n_time, n_lat, n_lon), -1, np.int32) if river_layout else None
    rows = []
    for t in range(n_time):
        if t:
            noise.step()
            column.step()
            events.step()
        f, drawn, strong = _draw_step(truth[t], events, lat, lon, noise, column, topo, rh0, jet0)
        if river_id is not None:
            ids = [r.id for r in events.rivers]
            for pair in range(len(ids) - 1) if not events.placed else ():
                for gap in _GAPS[1:]:  # the widest gap at which the pair touches
                    if _touching(_river_ids(truth[t], drawn, ids), ids[: pair + 2]):
                        break
                    events.place_group(events.gaps[:pair] + [gap] + events.gaps[pair + 1 :])
                    f, drawn, strong = _draw_step(
                        truth[t], events, lat, lon, noise, column, topo, rh0, jet0
                    )
            events.placed = True
            river_id[t] = _river_ids(truth[t], drawn, ids)
        peaks = [float(f["IVT"][d[0]][np.isfinite(d[1])].max()) for d in drawn]
        for name in names:
            data[name][t] = f[name]
        rows += _catalogue(time[t], events, strong, peaks)
    ds = _to_dataset(data, truth, time, lat, lon, seed)
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
    return ds, _events_frame(rows)


def _draw_step(truth, events: _Events, lat, lon, noise, column, topo, rh0, jet0):
    """The fields of one step with its events drawn in (``truth`` filled); returns the fields,
    the rivers' drawings and whether each has truth pixels."""
    truth[:] = 0
    f = _background(lat, noise, topo, rh0, jet0)
    drawn = [_draw_river(f, lat, lon, r) for r in events.rivers]
    for s in events.storms:
        _draw_storm(f, truth, lat, lon, s)
    f = _finish(f)
    ratio = np.clip(0.7 + 0.1 * column.field(0), 0.5, 0.9)
    f["IVTU"], f["IVTV"] = ratio * f["TMQ"] * f["U850"], ratio * f["TMQ"] * f["V850"]
    f["IVT"] = np.hypot(f["IVTU"], f["IVTV"])
    strong = [_river_truth(truth, f["IVT"], d) for d in drawn]
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


def _catalogue(time, events: _Events, strong, peaks) -> list[dict]:
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
