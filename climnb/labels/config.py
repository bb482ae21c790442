"""Settings of the label heuristics: frozen dataclasses with documented defaults.

The defaults reach the quality targets on the synthetic data (``benchmarks/bench_labels.py``)
and differ from the paper's recipe as follows; :meth:`LabelConfig.paper` switches them back.

* Rivers are IVT objects (``ARConfig.method="auto"``: the transport rule) whenever the input
  has IVT, its components, or TMQ and 850 hPa winds; the moisture rules below apply to TMQ
  alone (and to ``method="moisture"``).

* Edges: a river's or a storm's edge is the half-maximum contour of its own moisture / rain
  anomaly (``ARConfig.edge = "half_max"``, ``TCConfig.threshold = "half_max"``) instead of the
  paper's percentile masks (``"percentile"``), whose size follows how much of the globe or the
  box the events fill rather than the events themselves. The per-step percentile still picks
  the candidate rivers; the half maximum only redraws their edges.
* Rivers: objects must also carry ``min_anomaly`` of extra water, and ``min_aspect`` is 3
  rather than 2 (measured on the narrower half-maximum objects; 2 admits blobs of subtropical
  moisture).
* Storms: the mask is the union over TMQ and PRECT; the paper also used wind speed
  (``TCConfig.mask_fields``), whose ring of strong wind reaches past the rain. The warm core is
  compared with the mean on a ring rather than asked to fall in every direction, and
  ``min_vorticity`` is 5e-5 rather than TECA's 1.6e-4, which a coarse grid cannot see; the
  pressure and warm-core checks keep the precision. The thickness check is off.

:meth:`LabelConfig.paper` returns the paper's recipe.

Examples
--------
>>> from dataclasses import replace
>>> config = LabelConfig()
>>> config.ar.percentile, config.tc.min_vorticity
(95.0, 5e-05)
>>> replace(config, ar=replace(config.ar, percentile=94.0)).ar.percentile
94.0
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace
from typing import Literal

__all__ = ["ARConfig", "TCConfig", "LabelConfig", "MASK_FIELDS"]

#: Fields a storm's mask can be drawn from (see :attr:`TCConfig.mask_fields`).
MASK_FIELDS = ("TMQ", "PRECT", "wind", "vorticity", "psl")


def _check_range(obj, name: str, lo: float, hi: float) -> None:
    value = getattr(obj, name)
    if not lo <= value <= hi:
        raise ValueError(f"{type(obj).__name__}.{name} must be in [{lo}, {hi}], got {value!r}")


@dataclass(frozen=True)
class ARConfig:
    """Atmospheric-river detection.

    Attributes
    ----------
    method : ``"transport"`` draws rivers as IVT objects (:func:`climnb.labels.ar.transport_rivers`:
        IVT >= ``ivt_threshold``, length >= 2000 km, length / width >= 2); ``"moisture"`` uses
        the per-step percentile of the SC18 paper and the settings below; ``"auto"`` (default)
        takes ``"transport"`` when the input has IVT, its components, or TMQ with 850 hPa
        winds (the proxy, thresholded at ``proxy_threshold``), and ``"moisture"`` (from TMQ
        alone, as the paper's final data set) only without winds or IVT.
    ivt_threshold : IVT (kg m-1 s-1) of the transport method: 250, the fixed threshold of IVT
        catalogues (Rutz et al. 2014).
    proxy_threshold : the same threshold for the proxy ``TMQ * |V850|`` (inputs with TMQ and
        850 hPa winds but no IVT): ``ivt_threshold / 0.7``, since the proxy moves the whole
        column with the 850 hPa wind, which is faster than the column's vapour-weighted mean
        wind where the wind weakens towards the moist surface layer. The ratio 0.7 is the
        synthetic generator's mean ratio (0.5-0.9, :mod:`climnb.synthetic`), an assumption,
        not a measurement of the real atmosphere: with real data, prefer IVT, or calibrate
        the ratio on a period that has both. It was checked on seeds 1000-1007 (toy river IoU
        0.47 at 250, 0.77 at 330, 0.83 at 357, 0.82 at 400), not on the benchmark's seeds.
    ivt_percentile : if set (85 in Guan & Waliser 2015), the threshold of each grid point is
        this percentile of its own IVT series, and at least ``ivt_floor``, when the series has
        at least ``min_series_steps`` steps (else ``ivt_threshold``).
    ivt_floor, min_series_steps : see ``ivt_percentile``.
    ivt_min_length_km, ivt_min_aspect : least length and length / width of an IVT object
        (2000 km and 2, Guan & Waliser 2015).
    ivt_min_poleward : least mean poleward IVT (kg m-1 s-1) over an object where the
        meridional transport is known: 0 asks for a poleward component, as Guan & Waliser
        (2015) do; their 50 kg m-1 s-1 drops a third of the synthetic rivers, which run more
        zonally than real ones. None switches the check off.
    ivt_lat_band : range of ``|latitude|`` the centroid of an IVT object must lie in (20-80
        degrees: the subtropics' trade-wind moisture forms long IVT >= 250 objects too).
    split_ratio : with the transport method, IVT objects that touch are parted before the
        rules (:func:`climnb.labels.components.split_at_saddles`): a watershed of IVT seeded
        at each independent IVT maximum, one whose prominence (its height above the saddle
        that joins it to a higher maximum) is at least ``split_ratio`` of its height above
        the object's edge and whose region above that saddle covers ``min_area_km2``. 0.6 is
        IPART's ``max_ph_ratio`` (Xu et al. 2020, GMD 13, 4639, its peak partition of merged
        systems); the physical reason: along one river the transport stays high from source
        to landfall, while two rivers that touch side by side or end to end are joined by
        weaker transport between their cores, a saddle deep compared with their heights.
        None keeps touching objects whole.
    split_min_area_km2 : least area above its saddle of an independent IVT maximum (5e5
        km2, IPART's ``min_area``, its least area of a river: a bump smaller than a river
        is part of the river it sits on).
    split_levels : levels between an object's edge and its highest IVT on which the saddles
        are read (16: a saddle's depth to 1/16 of the object's height).
    storm_buffer_km : with the transport method, no river pixel within this distance of a
        storm's mask (a cyclone's circulation carries strong transport of its own).
    exclude_tropics_deg : no river pixel within this latitude of the equator (both methods).
    field : ``"ivt"`` thresholds the IVT proxy ``TMQ * |V850|`` (or true IVT when the input
        has ``IVT``); ``"tmq"`` thresholds precipitable water, as the final data set of the paper.
    tropics_sigma_deg : width of the tropical damping ``1 - exp(-lat^2 / (2 sigma^2))`` applied
        before the threshold (19 degrees in the paper); 0 switches it off.
    percentile : per-time-step percentile of the damped field above which pixels are candidate
        river pixels (95 in the paper, 94 in its code).
    min_length_km : least great-circle length of a river (1500-2000 km in the literature).
    min_aspect : least length / width.
    lat_band : range of ``|latitude|`` (degrees) the centroid of a river must lie in.
    min_area_km2, max_area_km2 : limits on a river's area.
    edge : ``"half_max"`` (default) draws each river's edge where its TMQ anomaly over the
        zonal median falls to ``edge_fraction`` of its peak; ``"percentile"`` keeps the
        percentile mask itself (the paper).
    edge_fraction : fraction of the peak anomaly at the edge (0.5: half maximum).
    min_anomaly : with ``edge="half_max"``, least TMQ anomaly (kg m-2) of a river: the 90th
        percentile of its candidate and the mean over its redrawn object must reach it. Rivers
        carry 20-30 kg m-2 more water than the air around them, noise a few.
    edge_window_km : with ``edge="half_max"``, radius within which a river pixel's peak
        anomaly is looked for (more than the half width of the widest river).
    grow_pixels : with ``edge="half_max"``, how far (pixels) a redrawn river may reach beyond
        the percentile mask it grew from.
    connectivity : 8 or 4 neighbours for connected components.
    """

    method: Literal["auto", "transport", "moisture"] = "auto"
    ivt_threshold: float = 250.0
    proxy_threshold: float = 250.0 / 0.7
    ivt_percentile: float | None = None
    ivt_floor: float = 100.0
    min_series_steps: int = 240
    ivt_min_length_km: float = 2000.0
    ivt_min_aspect: float = 2.0
    ivt_min_poleward: float | None = 0.0
    storm_buffer_km: float = 500.0
    ivt_lat_band: tuple[float, float] = (20.0, 80.0)
    split_ratio: float | None = 0.6
    split_min_area_km2: float = 5.0e5
    split_levels: int = 16
    exclude_tropics_deg: float = 15.0
    field: Literal["ivt", "tmq"] = "ivt"
    tropics_sigma_deg: float = 19.0
    percentile: float = 95.0
    min_length_km: float = 1500.0
    min_aspect: float = 3.0
    lat_band: tuple[float, float] = (15.0, 80.0)
    min_area_km2: float = 2.0e5
    max_area_km2: float = 2.0e7
    edge: Literal["half_max", "percentile"] = "half_max"
    edge_fraction: float = 0.5
    min_anomaly: float = 10.0
    edge_window_km: float = 600.0
    grow_pixels: int = 2
    connectivity: int = 8

    def __post_init__(self):
        _check_choice(self, "method", ("auto", "transport", "moisture"))
        _check_choice(self, "field", ("ivt", "tmq"))
        _check_range(self, "exclude_tropics_deg", 0.0, 90.0)
        if self.ivt_percentile is not None:
            _check_range(self, "ivt_percentile", 0.0, 100.0)
        if self.split_ratio is not None:
            _check_range(self, "split_ratio", 0.0, 1.0)
        if not isinstance(self.split_levels, int) or self.split_levels < 2:
            raise ValueError(
                f"ARConfig.split_levels must be an integer >= 2, got {self.split_levels!r}"
            )
        _check_choice(self, "edge", ("half_max", "percentile"))
        _check_range(self, "percentile", 0.0, 100.0)
        _check_range(self, "edge_fraction", 0.0, 1.0)
        _check_range(self, "tropics_sigma_deg", 0.0, 90.0)
        if not 0 <= self.lat_band[0] < self.lat_band[1] <= 90:
            raise ValueError(f"ARConfig.lat_band must be 0 <= lo < hi <= 90, got {self.lat_band}")


@dataclass(frozen=True)
class TCConfig:
    """Tropical-cyclone detection (TECA-style candidates) and masks.

    Attributes
    ----------
    min_vorticity : least 850 hPa relative vorticity (s-1, sign flipped in the southern
        hemisphere) of a candidate. TECA uses 1.6e-4 on grids of about 1 degree; the default is
        lower because vorticity computed on a coarse grid is smoothed (a 2.5 degree toy grid
        sees a third of it), and the pressure and warm-core checks keep precision.
    vorticity_window_deg : size of the window in which a vorticity maximum must be the largest.
    psl_search_deg : the sea-level pressure minimum must lie within this distance of the
        vorticity maximum; it becomes the storm centre.
    pressure_rise_pa, pressure_rise_deg : a closed low: every path from the centre to this
        great-circle distance climbs this much (TempestExtremes: 200 Pa within 5.5 degrees).
    warm_core_k, warm_core_deg : the largest ``(T200 + T500) / 2`` within ``psl_search_deg`` of
        the centre must exceed its mean on the ring at ``warm_core_deg`` by this much (a warm
        core; both relative to the median of their latitude row). TECA asks for the fall in
        every direction, which the equator-to-pole gradient defeats for weak, broad storms.
    thickness_rise_m, thickness_deg : optional check of the ``Z200 - Z1000`` thickness in the same
        way (TECA: 50 m within 4 degrees); None switches it off.
    max_abs_lat : storms are looked for within this latitude: 50 degrees, TempestExtremes'
        bound (poleward of it, deep lows with a warm core are extratropical or transitioning).
    max_abs_lat_no_warm_core : without T200 and T500 (no warm-core check: storms from pressure
        minima with cyclonic vorticity alone, as from ERA5's ``msl`` and ``vo``), centres are
        looked for only within this latitude: poleward of it, the deep lows with strong
        cyclonic vorticity are mostly extratropical, which only a warm core tells apart.
    box_radius_km, box_margin_deg : half size of the box around each centre in which the mask
        is drawn: the largest storm radius expected plus a margin.
    mask_fields : fields thresholded in the box; their union is the storm's mask.
        ``"wind"`` is the 850 hPa wind speed (10 m wind without it), ``"vorticity"`` the
        cyclonic 850 hPa vorticity and ``"psl"`` the sea-level pressure deficit; those the
        input lacks are left out.
    fallback_mask_fields : the masks' fields when the input has none of ``mask_fields``
        (ERA5's ``msl`` and ``vo`` alone).
    threshold : ``"half_max"`` (default): each field's edge lies at ``edge_fraction`` of the way
        from the box's background (its median) to the peak near the centre;
        ``"percentile"``: at the ``percentile`` of the field within the box (the paper).
    percentile : the percentile of ``threshold="percentile"`` (93 in the paper's code).
    edge_fraction : see ``threshold``.
    merge_deg : candidates closer than this are one storm (the one with lower pressure;
        TempestExtremes: 6 degrees).
    tracks : whether the storms of a run are stitched into tracks and only those on a
        cyclone's track kept (:mod:`climnb.labels.stitch`): ``"auto"`` (default) when there is
        no warm-core check (no ``T200``, ``T500``: pressure and vorticity alone cannot tell a
        tropical cyclone from a heat low or a monsoon depression, its track can) and the input
        spans ``min_lifetime_h``; ``"on"``, ``"off"``.
    min_lifetime_h : a track lasts at least this long (TempestExtremes: 54 h; TECA: 2 days).
    max_gap_h : a track may go this long without a centre (TempestExtremes: 24 h).
    max_speed_kmh : fastest centre motion linked (TempestExtremes: 8 degrees in 6 h).
    genesis_lat : a track starts between these latitudes (Gray 1968: 5 to 30 degrees).
    genesis_over_ocean : a track starts over the ocean (Gray 1968: cyclones form over warm
        water); heat lows form over land.
    min_ocean_h : a track spends at least this long over the ocean (TempestExtremes: 10
        six-hourly points over low ground).
    min_wind_ms, min_windy_h, wind_radius_deg : where the input has winds, a track's
        strongest wind within ``wind_radius_deg`` of its centre reaches ``min_wind_ms`` for at
        least ``min_windy_h`` (Zarzycki & Ullrich 2017: 10 m/s of 10 m wind within 2 degrees
        at 10 six-hourly points, i.e. 54 h): a depression's circulation is weaker. The 850 hPa
        wind, used where given, is stronger than the 10 m wind, so the rule is then looser.
        None switches it off.
    """

    min_vorticity: float = 5.0e-5
    vorticity_window_deg: float = 7.75
    psl_search_deg: float = 2.0
    pressure_rise_pa: float = 200.0
    pressure_rise_deg: float = 5.5
    warm_core_k: float = 0.8
    warm_core_deg: float = 5.0
    thickness_rise_m: float | None = None
    thickness_deg: float = 4.0
    max_abs_lat: float = 50.0
    max_abs_lat_no_warm_core: float = 30.0
    box_radius_km: float = 800.0
    box_margin_deg: float = 3.0
    mask_fields: tuple[str, ...] = ("TMQ", "PRECT")
    fallback_mask_fields: tuple[str, ...] = ("psl",)
    threshold: Literal["half_max", "percentile"] = "half_max"
    percentile: float = 93.0
    edge_fraction: float = 0.5
    merge_deg: float = 6.0
    tracks: Literal["auto", "on", "off"] = "auto"
    min_lifetime_h: float = 54.0
    max_gap_h: float = 24.0
    max_speed_kmh: float = 150.0
    genesis_lat: tuple[float, float] = (5.0, 30.0)
    genesis_over_ocean: bool = True
    min_ocean_h: float = 54.0
    min_wind_ms: float | None = 10.0
    min_windy_h: float = 54.0
    wind_radius_deg: float = 2.0

    def __post_init__(self):
        _check_choice(self, "threshold", ("half_max", "percentile"))
        _check_choice(self, "tracks", ("auto", "on", "off"))
        lo, hi = self.genesis_lat
        if not 0 <= lo < hi <= 90:
            raise ValueError(f"TCConfig.genesis_lat must be 0 <= lo < hi <= 90, got {lo, hi}")
        _check_range(self, "percentile", 0.0, 100.0)
        _check_range(self, "edge_fraction", 0.0, 1.0)
        _check_range(self, "max_abs_lat", 0.0, 90.0)
        _check_range(self, "max_abs_lat_no_warm_core", 0.0, 90.0)
        for name in ("mask_fields", "fallback_mask_fields"):
            value = getattr(self, name)
            if set(value) - set(MASK_FIELDS) or not value:
                raise ValueError(
                    f"TCConfig.{name} must be a non-empty subset of {', '.join(MASK_FIELDS)}; "
                    f"got {value}"
                )


@dataclass(frozen=True)
class LabelConfig:
    """Settings of :func:`climnb.labels.label_dataset`: rivers, storms and the time chunking.

    Attributes
    ----------
    ar, tc : river and storm settings.
    time_chunk : time steps per dask task (1: one task per step).
    """

    ar: ARConfig = field(default_factory=ARConfig)
    tc: TCConfig = field(default_factory=TCConfig)
    time_chunk: int = 1

    def __post_init__(self):
        if not isinstance(self.time_chunk, int) or self.time_chunk < 1:
            raise ValueError(
                f"LabelConfig.time_chunk must be a positive int, got {self.time_chunk}"
            )

    @classmethod
    def recipe(cls, name: str, *, ar_percentile: float | None = None) -> LabelConfig:
        """A named recipe: ``"default"``, ``"paper"`` (:meth:`paper`) or ``"ivt"`` (rivers by
        the transport method, which needs IVT or its components, or TMQ and 850 hPa winds for
        the proxy); ``ar_percentile`` replaces the rivers' per-step percentile.

        >>> LabelConfig.recipe("paper", ar_percentile=90).ar.percentile
        90.0
        """
        recipes = {
            "default": cls,
            "paper": cls.paper,
            "ivt": lambda: cls(ar=ARConfig(method="transport")),
        }
        if name not in recipes:
            raise ValueError(f"unknown recipe {name!r}; choose one of {', '.join(recipes)}")
        config = recipes[name]()
        if ar_percentile is None:
            return config
        return replace(config, ar=replace(config.ar, percentile=float(ar_percentile)))

    @classmethod
    def paper(cls) -> LabelConfig:
        """The recipe of the paper and its scripts: percentile edges, wind in the storm mask."""
        return cls(
            ar=ARConfig(method="moisture", edge="percentile"),
            tc=TCConfig(
                min_vorticity=1.6e-4,
                threshold="percentile",
                mask_fields=("TMQ", "wind", "PRECT"),
                thickness_rise_m=50.0,
            ),
        )

    def to_dict(self) -> dict:
        """A plain nested dict (for NetCDF attributes and logs)."""
        return {f.name: _plain(getattr(self, f.name)) for f in fields(self)}

    @classmethod
    def from_dict(cls, d: dict) -> LabelConfig:
        """The settings :meth:`to_dict` wrote (as read back from JSON: lists for tuples);
        keys this version does not know are left out, missing ones take the defaults.

        >>> import json
        >>> text = json.dumps(LabelConfig.paper().to_dict())  # as stats.h5 and bundles keep it
        >>> LabelConfig.from_dict(json.loads(text)) == LabelConfig.paper()
        True
        """
        parts = {"ar": ARConfig, "tc": TCConfig}
        values = {}
        for f in fields(cls):
            if f.name not in d:
                continue
            value = d[f.name]
            if f.name in parts:
                known = {g.name for g in fields(parts[f.name])}
                value = parts[f.name](
                    **{k: _tuples(v) for k, v in dict(value).items() if k in known}
                )
            values[f.name] = value
        return cls(**values)


def _tuples(value):
    return tuple(_tuples(v) for v in value) if isinstance(value, list) else value


def _plain(value):
    if hasattr(value, "__dataclass_fields__"):
        return {f.name: _plain(getattr(value, f.name)) for f in fields(value)}
    return value


def _check_choice(obj, name: str, choices: tuple[str, ...]) -> None:
    value = getattr(obj, name)
    if value not in choices:
        raise ValueError(f"{type(obj).__name__}.{name} must be one of {choices}, got {value!r}")
