"""Storms and rivers of the synthetic climate: small state machines that are born, move and
die between time steps, and how each is drawn into the fields and its truth mask.

:func:`climnb.data.synthetic.make_dataset` drives them; :class:`Future` is a second climate
with known changes (more rivers, stronger storms, rivers moved poleward).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from scipy import ndimage
from scipy.spatial import cKDTree

__all__ = [
    "EARTH_RADIUS_KM",
    "GAPS",
    "IVT_THRESHOLD",
    "PRESENT",
    "Events",
    "Future",
    "River",
    "Storm",
    "draw_river",
    "draw_storm",
    "great_circle_km",
    "river_ids",
    "river_truth",
]

EARTH_RADIUS_KM = 6371.0
#: Gaps tried between rivers that touch, widest first, in half widths of the two rivers (between
#: their axes side by side, or between one's end and the next's start)
GAPS = (1.8, 1.7, 1.6, 1.5, 1.4, 1.3, 1.2, 1.1, 1.0)
#: IVT (kg m-1 s-1) at the edge of a river's truth.
IVT_THRESHOLD = 250.0


# ---------------------------------------------------------------------------------------------
# Events: storms and rivers as small state machines that move and die between time steps
# ---------------------------------------------------------------------------------------------


@dataclass
class Storm:
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
class River:
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


def great_circle_km(lat1, lon1, lat2, lon2):
    p1, p2 = np.radians(lat1), np.radians(lat2)
    dl = np.radians(lon2 - lon1)
    h = np.sin((p2 - p1) / 2) ** 2 + np.cos(p1) * np.cos(p2) * np.sin(dl / 2) ** 2
    return 2 * EARTH_RADIUS_KM * np.arcsin(np.sqrt(np.clip(h, 0, 1)))


class Events:
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

    def _new_storm(self, moving: bool | None = None, hemi: float | None = None) -> Storm:
        rng = self.rng
        for _ in range(200):
            hemi = rng.choice([-1.0, 1.0]) if hemi is None else hemi
            lat = hemi * rng.uniform(8.0, 28.0)
            lon = rng.uniform(0.0, 360.0)
            radius = rng.uniform(*self.tc_radius_km)
            if all(
                great_circle_km(lat, lon, s.lat, s.lon) > 1.6 * (radius + s.radius_km) + 300
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
        return Storm(
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

    def _new_river(self, seam: bool = False) -> River:
        rng = self.rng
        hemi = rng.choice([-1.0, 1.0])
        length = rng.uniform(2000.0, 6000.0)
        heading = rng.uniform(np.radians(5), np.radians(28))
        river = River(
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
                great_circle_km(s.lat, s.lon, o.lat, o.lon) < 1.2 * (s.radius_km + o.radius_km)
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

    def _new_group(self, seam: bool = False) -> list[River]:
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
        self.place_group([GAPS[0]] * (self.n_ar - 1))
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

    def _replacement(self, i: int) -> Storm:
        """A new storm placed clear of all storms but the one it replaces."""
        keep = self.storms
        self.storms = keep[:i] + keep[i + 1 :]
        try:
            return self._new_storm()
        finally:
            self.storms = keep


def _river_path(r: River, hemi: float, n: int = 64) -> np.ndarray:
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


def draw_storm(f, truth, lat, lon, s: Storm):
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
    r = great_circle_km(s.lat, s.lon, la, lo)
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


def draw_river(f, lat, lon, r: River):
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


def river_truth(truth, ivt, drawn, threshold=IVT_THRESHOLD) -> bool:
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


def river_ids(truth, drawn, ids) -> np.ndarray:
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
    seg = great_circle_km(path[:-1, 0], path[:-1, 1], path[1:, 0], path[1:, 1])
    s = np.concatenate([[0.0], np.cumsum(seg)])
    fine = np.linspace(0.0, s[-1], max(int(s[-1] / step_km) + 1, 2))
    return np.interp(fine, s, path[:, 0]), np.interp(fine, s, path[:, 1])


def _tangents(plat, plon):
    """Unit (east, north) direction of a polyline at each of its points."""
    de = np.gradient(plon) * np.cos(np.radians(plat))
    dn = np.gradient(plat)
    norm = np.maximum(np.hypot(de, dn), 1e-12)
    return de / norm, dn / norm
