"""The moisture method's half-maximum edge (``ARConfig(edge="half_max")``) where it decides:
a band at exactly ``min_anomaly`` and just under it, the edge drawn at half a river's peak
anomaly when the candidate above the percentile is wider, and the size of the window the local
peak is taken in. On the toy grid (96 x 144), without the tropical damping, so that the
anomaly is the TMQ above its row's median (0) exactly."""

from __future__ import annotations

import numpy as np
import pytest

from climnb.labels.ar import _window, detect_rivers
from climnb.labels.config import ARConfig

LAT = np.linspace(-90.0, 90.0, 96)  # 1.89 degrees by 2.5
LON = np.arange(144) * 2.5
ROW_40N = 69
MOISTURE = ARConfig(method="moisture", field="tmq", edge="half_max", tropics_sigma_deg=0.0)


def _flat_band(value: float) -> dict[str, np.ndarray]:
    """TMQ ``value`` on 2 rows by 21 columns at 40 N (4,500 by 420 km), 0 elsewhere."""
    tmq = np.zeros((LAT.size, LON.size))
    tmq[ROW_40N : ROW_40N + 2, 20:41] = value
    return {"TMQ": tmq}


@pytest.mark.parametrize("value, kept", [(10.0, True), (9.99, False)], ids=["10.0", "9.99"])
def test_a_band_at_min_anomaly_is_a_river_and_just_under_it_is_not(value, kept):
    """Both the candidate's 90th percentile and the river's mean anomaly must reach
    ``min_anomaly`` (10 kg m-2): here both are the band's value."""
    assert MOISTURE.min_anomaly == 10.0
    mask, table = detect_rivers(_flat_band(value), LAT, LON, MOISTURE)
    assert len(table) == int(kept)
    if kept:
        assert (mask == (_flat_band(value)["TMQ"] > 0)).all()


def test_the_edge_is_drawn_at_half_the_rivers_peak():
    """Two bands of Gaussian cross-section (peak 30, sigma 2 rows) 31 columns long, at 40 N
    and 40 S: the 95th percentile takes some 5 rows either side of each axis, the half-maximum
    edge redraws each at its 15 kg m-2 contour (2.35 rows either side); the table gives the
    strongest wind on each."""
    tmq = np.zeros((LAT.size, LON.size))
    for row, cols in ((ROW_40N, slice(20, 51)), (LAT.size - 1 - ROW_40N, slice(80, 111))):
        rows = np.arange(LAT.size)[:, None] - row
        tmq[:, cols] = 30.0 * np.exp(-(rows**2) / (2 * 2.0**2))
    u = np.where(tmq >= 15.0, 10.0, 0.0)
    fields = {"TMQ": tmq, "U850": u, "V850": -u}
    mask, table = detect_rivers(fields, LAT, LON, MOISTURE)
    assert len(table) == 2
    above_percentile = tmq > np.percentile(tmq, MOISTURE.percentile)
    assert above_percentile.sum() > 1.5 * mask.sum()  # the candidates, wider than the rivers
    expected = tmq >= 15.0
    assert expected.sum() == 2 * 5 * 31  # the axes and 2 rows either side
    assert (mask == expected).all()
    assert table.max_wind.to_numpy() == pytest.approx([np.hypot(10.0, 10.0)] * 2)


def test_the_local_peak_window_is_twice_edge_window_km_across_at_45_degrees():
    """600 km either side: 600 / 210.7 km a row -> 3 rows, 600 / (278.0 cos 45 = 196.6) km a
    column -> 4 columns (rounded up), so 7 rows by 9 columns; 1,000 km: 5 and 6, 11 by 13."""
    assert _window(LAT, LON, ARConfig()) == (7, 9)
    assert _window(LAT, LON, ARConfig(edge_window_km=1000.0)) == (11, 13)


# --- the transport method: an object parted at its saddle beside one kept whole ---------------


def _two_bands() -> dict[str, np.ndarray]:
    """Two bands of IVT 40 columns long at 45 N (background 100): columns 20-59 fall from 800
    at the ends to 650 half way (one river, the first object), columns 80-119 to 350 (two
    rivers end to end)."""
    ivt = np.full((LAT.size, LON.size), 100.0)
    row = int(np.argmin(np.abs(LAT - 45.0)))
    along = np.linspace(0.0, 1.0, 40)
    for start, middle in ((20, 650.0), (80, 350.0)):
        axis = middle + (800.0 - middle) * np.cos(np.pi * along) ** 2
        cols = start + np.arange(40)
        ivt[row, cols] = axis
        ivt[row - 1, cols] = ivt[row + 1, cols] = 0.6 * axis
    heading = np.radians(30.0)
    return {"IVT": ivt, "IVTU": ivt * np.cos(heading), "IVTV": ivt * np.sin(heading)}


def test_an_object_parted_at_its_saddle_leaves_the_one_beside_it_whole():
    from climnb.labels.ar import transport_rivers
    from climnb.labels.components import label_components

    mask, table = transport_rivers(_two_bands(), LAT, LON, ARConfig(method="transport"))
    labels, n = label_components(mask)
    assert n == len(table) == 3
    row = int(np.argmin(np.abs(LAT - 45.0)))
    assert len(set(labels[row, [20, 80, 119]].tolist())) == 3  # the whole one and two parts
    assert (labels[row - 1 : row + 2, 20:60] > 0).all()  # the whole one: three rows all along


def test_transport_rivers_need_both_winds_for_their_maximum_wind():
    from climnb.labels.ar import transport_rivers

    fields = _two_bands()
    u = np.where(fields["IVT"] > 200, 20.0, 0.0)
    _, table = transport_rivers({**fields, "U850": u}, LAT, LON, ARConfig(method="transport"))
    assert len(table) == 3 and table.max_wind.isna().all()
    both = {**fields, "U850": u, "V850": u * 0.75}
    _, table = transport_rivers(both, LAT, LON, ARConfig(method="transport"))
    assert (table.max_wind == 25.0).all()
