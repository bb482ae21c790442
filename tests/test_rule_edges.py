"""The detection rules at the edges where they decide: objects just under and just over each
length, aspect, area and latitude threshold of the river rules, and lows just under and just
over the storm checks (a low open on one side, a pressure rise short of the threshold, the
vorticity threshold, the latitude limit). Each case is built by hand on the toy grid (96 x 144)
and its measured size is checked to lie where the case says, so that a case cannot drift to
the wrong side of its threshold unnoticed. Storms are tested through the public functions
only."""

from __future__ import annotations

import numpy as np
import pytest

from climnb.labels.ar import detect_rivers, river_rules
from climnb.labels.components import label_components, measure
from climnb.labels.config import ARConfig, TCConfig
from climnb.labels.tc import find_centres

LAT = np.linspace(-90.0, 90.0, 96)  # the toy grid: 1.89 degrees by 2.5
LON = np.arange(144) * 2.5
ROW_40N = 69  # 40.7 degrees north


def _band(row: int, n_rows: int, n_cols: int, col: int = 20) -> np.ndarray:
    mask = np.zeros((LAT.size, LON.size), bool)
    mask[row : row + n_rows, col : col + n_cols] = True
    return mask


def _shape(mask: np.ndarray):
    labels, n = label_components(mask, periodic=True)
    assert n == 1
    return measure(labels, n, LAT, LON).iloc[0]


def _kept(mask: np.ndarray, config: ARConfig | None = None, fields=None) -> bool:
    rivers, table = river_rules(mask, fields or {}, LAT, LON, config or ARConfig())
    assert len(table) == int(rivers.max())
    return len(table) == 1


# --- the river rules of the transport method ----------------------------------------------

# (case, band (row, rows, columns), measured size within (lo, hi), kept by the default rules)
TRANSPORT = [
    ("length 1,890 km < 2,000", (ROW_40N, 2, 10), ("length_km", 1800, 2000), False),
    ("length 2,100 km >= 2,000", (ROW_40N, 2, 11), ("length_km", 2000, 2200), True),
    ("aspect 1.98 < 2", (ROW_40N - 2, 6, 12), ("aspect", 1.9, 2.0), False),
    ("aspect 2.11 >= 2", (ROW_40N - 2, 6, 13), ("aspect", 2.0, 2.2), True),
    ("centroid 19.1 degrees < 20", (57, 2, 11), ("lat", 18.5, 20.0), False),
    ("centroid 21.0 degrees >= 20", (58, 2, 11), ("lat", 20.0, 21.5), True),
]


@pytest.mark.parametrize(
    "band, size, kept", [c[1:] for c in TRANSPORT], ids=[c[0] for c in TRANSPORT]
)
def test_transport_rules_at_their_thresholds(band, size, kept):
    mask = _band(*band)
    shape = _shape(mask)
    what, lo, hi = size
    value = shape.length_km / shape.width_km if what == "aspect" else shape[what]
    assert lo <= value < hi
    assert ARConfig().ivt_min_length_km == 2000.0 and ARConfig().ivt_min_aspect == 2.0
    assert _kept(mask) is kept


def test_river_length_threshold_is_inclusive():
    mask = _band(ROW_40N, 2, 11)
    length = float(_shape(mask).length_km)
    assert _kept(mask, ARConfig(ivt_min_length_km=length))
    assert not _kept(mask, ARConfig(ivt_min_length_km=length + 1.0))


def test_small_objects_are_left_out_by_area():
    """With no length or aspect rule, the area decides: 4 pixels (178,000 km2) are fewer
    than 200,000 km2, 5 pixels (222,000 km2) are not."""
    config = ARConfig(ivt_min_length_km=0.0, ivt_min_aspect=0.0)
    four, five = _band(ROW_40N, 1, 4), _band(ROW_40N, 1, 5)
    assert 1.7e5 < _shape(four).area_km2 < 2.0e5 < _shape(five).area_km2 < 2.3e5
    assert not _kept(four, config) and _kept(five, config)


@pytest.mark.parametrize(
    "north, south, kept",
    [(49.0, 0.0, False), (51.0, 0.0, True), (0.0, 51.0, False)],
    ids=["poleward 49 < 50", "poleward 51 >= 50", "equatorward"],
)
def test_poleward_transport_at_its_threshold(north, south, kept):
    """``IVTV`` northward in the northern hemisphere is poleward; the river's mean decides."""
    mask = _band(ROW_40N, 2, 11)
    ivtv = np.where(mask, north - south, 0.0)
    assert _kept(mask, ARConfig(ivt_min_poleward=50.0), {"IVTV": ivtv}) is kept
    south_mask = _band(LAT.size - ROW_40N - 2, 2, 11)  # the mirror band at 40.7 S
    flipped = np.where(south_mask, -(north - south), 0.0)  # southward there is poleward
    assert _kept(south_mask, ARConfig(ivt_min_poleward=50.0), {"IVTV": flipped}) is kept


# --- the moisture method's rules -----------------------------------------------------------------


def _moisture(mask: np.ndarray, **settings) -> bool:
    """Whether the moisture method (the percentile mask, no edge redrawn) keeps the band that
    is the only moist air of the step."""
    config = ARConfig(method="moisture", field="tmq", edge="percentile", **settings)
    tmq = np.where(mask, 50.0, 0.0)
    found, table = detect_rivers({"TMQ": tmq}, LAT, LON, config)
    assert not (found & ~mask).any()
    return len(table) == 1


MOISTURE = [
    ("length 1,470 km < 1,500", (ROW_40N, 2, 8), ("length_km", 1400, 1500), False),
    ("length 1,680 km >= 1,500", (ROW_40N, 2, 9), ("length_km", 1500, 1700), True),
    ("aspect 2.94 < 3", (ROW_40N - 1, 4, 13), ("aspect", 2.8, 3.0), False),
    ("aspect 3.20 >= 3", (ROW_40N - 1, 4, 14), ("aspect", 3.0, 3.3), True),
]


@pytest.mark.parametrize(
    "band, size, kept", [c[1:] for c in MOISTURE], ids=[c[0] for c in MOISTURE]
)
def test_moisture_rules_at_their_thresholds(band, size, kept):
    mask = _band(*band)
    shape = _shape(mask)
    what, lo, hi = size
    value = shape.length_km / shape.width_km if what == "aspect" else shape[what]
    assert lo <= value < hi
    assert ARConfig().min_length_km == 1500.0 and ARConfig().min_aspect == 3.0
    assert _moisture(mask) is kept


def test_moisture_area_limits_are_inclusive():
    mask = _band(ROW_40N, 2, 11)
    area = float(_shape(mask).area_km2)
    assert _moisture(mask, max_area_km2=area) and not _moisture(mask, max_area_km2=area * 0.99)
    assert _moisture(mask, min_area_km2=area) and not _moisture(mask, min_area_km2=area * 1.01)


# --- storm centres ------------------------------------------------------------------------


def _low(
    row: int = 58,
    col: int = 72,
    *,
    depth: float = 1000.0,
    vorticity: float = 2e-4,
    open_east: bool = False,
):
    """A cyclone at (row, col): a vorticity peak and a conical low ``depth`` Pa deep that
    reaches the surrounding 101,000 Pa 3 degrees out, in the degrees of arc the checks use.
    ``open_east``: a trough runs east from the centre, rising 10 Pa per degree, so the
    pressure never rises by 200 Pa that way within 5.5 degrees."""
    coslat = np.cos(np.radians(LAT[row]))
    dy = (np.arange(LAT.size) - row)[:, None] * (LAT[1] - LAT[0])
    dx = (np.arange(LON.size) - col)[None, :] * (LON[1] - LON[0]) * coslat
    d = np.hypot(dy, dx)
    psl = 101000.0 - depth * np.clip(1.0 - d / 3.0, 0.0, None)
    if open_east:
        trough = (dx > 0) & (np.abs(dy) < 1.5)
        psl = np.where(trough, np.minimum(psl, 101000.0 - depth + 10.0 * dx), psl)
    zeta = vorticity * np.exp(-(d**2) / (2 * 2.0**2))
    return {"PSL": psl, "VORT850": zeta}


def _found(fields) -> list[tuple[int, int]]:
    return [(r, c) for r, c, *_ in find_centres(fields, LAT, LON, TCConfig())]


def test_a_closed_low_is_a_storm_and_a_low_open_on_one_side_is_not():
    assert _found(_low()) == [(58, 72)]  # 21.0 degrees north
    open_ = _low(open_east=True)
    assert open_["PSL"][58, 72] == open_["PSL"].min()  # the same centre, still the minimum
    assert _found(open_) == []


@pytest.mark.parametrize("depth, found", [(190.0, False), (210.0, True)], ids=["190 Pa", "210 Pa"])
def test_pressure_rise_at_its_threshold(depth, found):
    assert TCConfig().pressure_rise_pa == 200.0
    assert bool(_found(_low(depth=depth))) is found


@pytest.mark.parametrize(
    "peak, found", [(4.9e-5, False), (5.1e-5, True)], ids=["4.9e-5 s-1", "5.1e-5 s-1"]
)
def test_vorticity_at_its_threshold(peak, found):
    assert TCConfig().min_vorticity == 5.0e-5
    assert bool(_found(_low(vorticity=peak))) is found


@pytest.mark.parametrize(
    "row, found", [(63, True), (64, False)], ids=["29.5 degrees", "31.4 degrees"]
)
def test_latitude_limit_without_a_warm_core(row, found):
    """Without temperatures (no warm-core check) centres are looked for within 30 degrees."""
    assert TCConfig().max_abs_lat_no_warm_core == 30.0
    assert 29.0 < LAT[63] < 30.0 < LAT[64] < 32.0
    assert bool(_found(_low(row=row))) is found


def test_a_one_pixel_object_is_judged_by_its_own_transport():
    """With no size rules, a river of one pixel is kept when its poleward IVT (60) reaches the
    threshold (50): its mean is its one value."""
    config = ARConfig(
        ivt_min_length_km=0.0, ivt_min_aspect=0.0, min_area_km2=0.0, ivt_min_poleward=50.0
    )
    mask = _band(ROW_40N, 1, 1)
    assert _kept(mask, config, {"IVTV": np.where(mask, 60.0, 0.0)})
    assert not _kept(mask, config, {"IVTV": np.where(mask, 40.0, 0.0)})


def test_transport_rivers_report_peak_transport_and_wind():
    from climnb.labels.ar import transport_rivers

    mask = _band(ROW_40N, 2, 11)
    ivt = np.where(mask, 300.0, 0.0)
    ivt[ROW_40N, 25] = 420.0
    u = np.where(mask, 20.0, 0.0)
    v = np.where(mask, 5.0, 0.0)
    v[ROW_40N + 1, 22] = 15.0
    fields = {"IVT": ivt, "IVTV": np.where(mask, 100.0, 0.0), "U850": u, "V850": v}
    found, table = transport_rivers(fields, LAT, LON, ARConfig())
    assert (found == mask).all() and len(table) == 1
    assert table.max_ivt[0] == 420.0 and table.max_wind[0] == pytest.approx(25.0)  # (20, 15)
    _, without_wind = transport_rivers(
        {k: fields[k] for k in ("IVT", "IVTV")}, LAT, LON, ARConfig()
    )
    assert np.isnan(without_wind.max_wind[0])
