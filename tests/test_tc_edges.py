"""The storm rules of ``climnb.labels.tc`` where they decide, on hand-built fields of the toy
grid (96 x 144): the vorticity maxima against a maximum filter, centres merged within
``merge_deg``, the ``keep`` list, a regional grid's borders, a low near the pole, the warm
core against its ring, and a storm's mask at its half maximum."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import ndimage

from climnb.labels.config import TCConfig
from climnb.labels.tc import _Grid, _vorticity_maxima, detect_storms, find_centres

LAT = np.linspace(-90.0, 90.0, 96)  # 1.89 degrees by 2.5
LON = np.arange(144) * 2.5
DLAT = LAT[1] - LAT[0]


def _distance_deg(row, col, lat=LAT, lon=LON):
    """Local flat distance (degrees of arc) of every grid cell from ``(row, col)``."""
    coslat = np.cos(np.radians(lat[row]))
    dy = (np.arange(lat.size) - row)[:, None] * (lat[1] - lat[0])
    dcol = np.arange(lon.size) - col
    dx = dcol[None, :] * (lon[1] - lon[0]) * coslat
    return np.hypot(dy, dx)


def _cone(row, col, depth, radius, lat=LAT, lon=LON):
    """A conical low ``depth`` Pa deep reaching the 101,000 Pa around it ``radius`` degrees out."""
    d = _distance_deg(row, col, lat, lon)
    return -depth * np.clip(1.0 - d / radius, 0.0, None)


def _peak(row, col, value, sigma=1.0, lat=LAT, lon=LON):
    return value * np.exp(-(_distance_deg(row, col, lat, lon) ** 2) / (2 * sigma**2))


# --- vorticity maxima -------------------------------------------------------------------------


@pytest.mark.parametrize("periodic", [True, False], ids=["global", "regional"])
@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("window, half", [(12.0, (3, 2)), (4.0, (1, 1))], ids=["12deg", "4deg"])
def test_vorticity_maxima_are_those_of_a_maximum_filter(periodic, seed, window, half):
    """Every pixel above the threshold, within the latitude limit and the largest of its
    window (rows clipped at the grid's edge, columns wrapped on a global grid) - including
    maxima on the first and last rows and columns - strongest first."""
    rng = np.random.default_rng(seed)
    modes = ["nearest", "wrap" if periodic else "nearest"]
    zeta = ndimage.gaussian_filter(rng.standard_normal(LAT.shape + LON.shape), 1.5, mode=modes)
    config = TCConfig(min_vorticity=0.0, vorticity_window_deg=window, max_abs_lat=60.0)
    hr = max(round(window / 2 / DLAT), 1)  # half windows: 3 rows, 2 columns; 1 and 1
    hc = max(round(window / 2 / 2.5), 1)
    assert (hr, hc) == half
    largest = ndimage.maximum_filter(zeta, size=(2 * hr + 1, 2 * hc + 1), mode=modes)
    expected = (zeta >= largest) & (zeta >= 0.0) & (np.abs(LAT) <= 60.0)[:, None]
    rows, cols = _vorticity_maxima(zeta, _Grid(LAT, LON, periodic), config)
    assert sorted(zip(rows.tolist(), cols.tolist(), strict=True)) == sorted(
        zip(*np.nonzero(expected), strict=True)
    )
    assert (np.diff(zeta[rows, cols]) <= 0).all()  # strongest first
    assert 20 < rows.size and (cols.min() <= hc or cols.max() >= LON.size - 1 - hc)


# --- centres ---------------------------------------------------------------------------------


def _two_lows():
    """Two sharp closed lows 1.5 degrees wide at (58, 30) (21 N) and (60, 31), each under its
    own vorticity peak (2e-4 and 1.5e-4 s-1, three rows apart: two maxima)."""
    psl = 101000.0 + _cone(58, 30, 1000.0, 1.5) + _cone(60, 31, 800.0, 1.5)
    zeta = _peak(58, 30, 2e-4) + _peak(61, 31, 1.5e-4)
    return {"PSL": psl, "VORT850": zeta}


def test_centres_closer_than_merge_deg_are_one_storm():
    """The second peak's low lies 4.4 degrees from the first (2 rows, 1 column): one storm
    (the stronger) with the default 6 degrees, two with 4."""
    fields = _two_lows()
    gap = np.hypot(2 * DLAT, 2.5 * np.cos(np.radians(LAT[58])))
    assert 4.0 < gap < 6.0 == TCConfig().merge_deg
    found = find_centres(fields, LAT, LON, TCConfig())
    assert [(r, c) for r, c, *_ in found] == [(58, 30)]
    apart = find_centres(fields, LAT, LON, TCConfig(merge_deg=4.0))
    assert [(r, c) for r, c, *_ in apart] == [(58, 30), (60, 31)]
    assert 4.45 < gap < 4.46  # the column's width at 21 N, not at the equator (4.64 there)
    assert len(find_centres(fields, LAT, LON, TCConfig(merge_deg=4.5))) == 1


def _storm_fields(*centres):
    """Closed lows with their vorticity peaks and moisture (TMQ and PRECT) at ``centres``."""
    psl = np.full(LAT.shape + LON.shape, 101000.0)
    zeta, tmq = np.zeros_like(psl), np.zeros_like(psl)
    for row, col in centres:
        psl += _cone(row, col, 1000.0, 3.0)
        zeta += np.sign(LAT[row]) * _peak(row, col, 2e-4, 2.0)  # cyclonic in either hemisphere
        tmq += _peak(row, col, 60.0, 3.0)
    return {"PSL": psl, "VORT850": zeta, "TMQ": tmq, "PRECT": tmq * 1e-8}


def test_the_centres_given_are_the_storms():
    fields = _storm_fields((58, 72), (40, 20))  # 21 N and 14 S
    every, table = detect_storms(fields, LAT, LON, TCConfig())
    assert sorted((s.row, s.col) for s in every) == [(40, 20), (58, 72)] and len(table) == 2
    found = find_centres(fields, LAT, LON, TCConfig())
    on_track = [centre for centre in found if centre[:2] == (40, 20)]
    kept, table = detect_storms(fields, LAT, LON, TCConfig(), centres=on_track)
    assert [(s.row, s.col) for s in kept] == [(40, 20)] and len(table) == 1
    assert detect_storms(fields, LAT, LON, TCConfig(), centres=[])[0] == []


def test_a_storm_mask_is_its_moisture_above_half_the_peak():
    """TMQ a Gaussian at the centre on a background of 0: the mask is every cell at or above
    half the centre's value (the box's median is ~0), a disc of radius 1.18 sigma (3.5
    degrees)."""
    fields = _storm_fields((58, 72))
    config = TCConfig(mask_fields=("TMQ",))
    [storm], _ = detect_storms(fields, LAT, LON, config)
    tmq = fields["TMQ"]
    expected = set(zip(*np.nonzero(tmq >= 0.5 * tmq[58, 72]), strict=True))
    assert 5 < len(expected) < 40
    assert set(zip(storm.rows.tolist(), storm.cols.tolist(), strict=True)) == expected
    from climnb.labels.sphere import cell_area_km2

    _, table = detect_storms(fields, LAT, LON, config)
    area = float(cell_area_km2(LAT, LON)[storm.rows].sum())
    assert table.area_km2[0] == pytest.approx(area)
    assert table.radius_km[0] == pytest.approx(np.sqrt(area / np.pi))  # the disc of that area


# --- a regional grid's borders and the pole ---------------------------------------------------

# a regional grid: 0-40 N by 1.9 degrees, 100-160 E by 2.5 degrees
RLAT = LAT[48:70]
RLON = LON[40:65]


def _regional(row, col, depth=1000.0, radius=3.0):
    psl = 101000.0 + _cone(row, col, depth, radius, RLAT, RLON)
    return {"PSL": psl, "VORT850": _peak(row, col, 2e-4, 2.0, RLAT, RLON)}


def _regional_centres(fields, **config):
    settings = {"max_abs_lat_no_warm_core": 45.0, **config}
    found = find_centres(fields, RLAT, RLON, TCConfig(**settings), periodic=False)
    return [(r, c) for r, c, *_ in found]


def test_a_closed_low_near_a_regional_grids_corner_is_found():
    """Five cells from the southern and western borders: the checks' boxes are cut at the
    borders, not wrapped, and the low lies whole inside."""
    assert _regional_centres(_regional(5, 5)) == [(5, 5)]
    assert _regional_centres(_regional(16, 19)) == [(16, 19)]


@pytest.mark.parametrize("where", [(0, 12), (10, 0), (21, 12), (10, 24)], ids=str)
def test_a_low_on_a_regional_grids_border_is_not_closed(where):
    """A low whose centre is a border cell may be open beyond the border: not a storm, however
    sharp (here only the centre lies below the 200 Pa rise)."""
    row, col = where
    fields = _regional(row, col, depth=1000.0, radius=1.0)
    assert _regional_centres(fields) == []
    # one cell in from the border the same low is closed
    inside = (min(max(row, 1), RLAT.size - 2), min(max(col, 1), RLON.size - 2))
    assert _regional_centres(_regional(*inside, depth=1000.0, radius=1.0)) == [inside]


def test_a_closed_low_near_the_pole_is_closed():
    """At 84 N the check's box spans many columns (the disc is wide on its poleward side) and
    is cut at the pole: a low 5 degrees wide (its 200 Pa contour 4 degrees out, 15 columns) is
    still closed, when the latitude limits allow."""
    row = 92
    assert 84.0 < LAT[row] < 85.0
    fields = {"PSL": 101000.0 + _cone(row, 40, 1000.0, 5.0), "VORT850": _peak(row, 40, 2e-4)}
    polar = TCConfig(max_abs_lat=90.0, max_abs_lat_no_warm_core=90.0)
    assert [(r, c) for r, c, *_ in find_centres(fields, LAT, LON, polar)] == [(row, 40)]
    assert find_centres(fields, LAT, LON, TCConfig()) == []


# --- the warm core ----------------------------------------------------------------------------


def _warm(core_k, radius):
    """A closed low at (58, 72) with a flat warm core ``core_k`` K above 240 K out to
    ``radius`` degrees, in T200 and T500."""
    t = 240.0 + core_k * (_distance_deg(58, 72) <= radius)
    return {**_storm_fields((58, 72)), "T200": t, "T500": t}


@pytest.mark.parametrize(
    "core_k, radius, found",
    [(0.9, 3.5, True), (0.7, 3.5, False), (0.9, 6.0, False)],
    ids=["0.9K-3.5deg", "0.7K-3.5deg", "0.9K-6deg"],
)
def test_the_warm_core_is_measured_against_the_ring_5_degrees_out(core_k, radius, found):
    """0.9 K above the ring is a warm core and 0.7 K is not (0.8 K asked); a core wider than
    the ring (6 degrees) has no warmer core than its ring."""
    assert (TCConfig().warm_core_k, TCConfig().warm_core_deg) == (0.8, 5.0)
    centres = find_centres(_warm(core_k, radius), LAT, LON, TCConfig())
    assert [(r, c) for r, c, *_ in centres] == ([(58, 72)] if found else [])


@pytest.mark.parametrize("side", [1, -1], ids=["east", "west"])
def test_a_warm_patch_on_the_ring_counts_in_its_mean(side):
    """The ring is read in 16 directions, every 22.5 degrees from due east: a patch 4 K warmer
    at the ring's eastern or western point raises the ring's mean by 4 / 16 K, and a core
    0.9 K warmer than the rest is no longer 0.8 K above it."""
    fields = _warm(0.9, 3.5)
    assert find_centres(fields, LAT, LON, TCConfig())  # without the patch
    patch = (58, 72 + side * round(5.0 / (2.5 * np.cos(np.radians(LAT[58])))))
    assert patch == (58, 72 + 2 * side)
    for name in ("T200", "T500"):
        fields[name][patch] += 4.0
    assert find_centres(fields, LAT, LON, TCConfig()) == []


@pytest.mark.parametrize("col", [1, RLON.size - 2], ids=["west", "east"])
def test_the_warm_cores_ring_stops_at_a_regional_grids_border(col):
    """A sharp closed low one cell from the border, with a warm core 2 degrees wide: the
    ring's points past the border are read on the border cells (2.3 degrees out, outside the
    core), not nearer the centre."""
    row = 10  # 21 N
    fields = _regional(row, col, depth=1000.0, radius=1.0)
    d = _distance_deg(row, col, RLAT, RLON)
    t = 240.0 + 0.9 * (d <= 2.0)
    border = 0 if col == 1 else RLON.size - 1
    assert t[row, border] == 240.0 and t[row, col] == 240.9
    fields |= {"T200": t, "T500": t, "TMQ": t * 0.0, "PRECT": t * 0.0}
    assert _regional_centres(fields) == [(row, col)]
    colder = 240.0 + 0.7 * (d <= 2.0)
    assert _regional_centres({**fields, "T200": colder, "T500": colder}) == []


def test_a_warm_core_near_the_pole_is_judged_on_its_ring_5_degrees_out():
    """At 86 N a column is 0.17 degrees: the ring 5 degrees out runs 30 columns east and
    west of the centre, outside a warm core 3.5 degrees wide."""
    row = 93
    assert 86.0 < LAT[row] < 87.0
    psl = 101000.0 + _cone(row, 40, 1000.0, 3.0)
    t = 240.0 + 0.9 * (_distance_deg(row, 40) <= 3.5)
    fields = {"PSL": psl, "VORT850": _peak(row, 40, 2e-4), "T200": t, "T500": t}
    polar = TCConfig(max_abs_lat=90.0)
    assert [(r, c) for r, c, *_ in find_centres(fields, LAT, LON, polar)] == [(row, 40)]


@pytest.mark.parametrize("radius, closed", [(25.0, True), (30.0, False)], ids=["5.0deg", "6.0deg"])
def test_a_low_is_closed_when_its_200_pa_contour_lies_within_5_5_degrees(radius, closed):
    """A cone 1,000 Pa deep: its 200 Pa contour lies radius / 5 degrees out."""
    assert TCConfig().pressure_rise_deg == 5.5
    fields = {"PSL": 101000.0 + _cone(58, 72, 1000.0, radius), "VORT850": _peak(58, 72, 2e-4)}
    found = find_centres(fields, LAT, LON, TCConfig())
    assert [(r, c) for r, c, *_ in found] == ([(58, 72)] if closed else [])


@pytest.mark.parametrize("peak, found", [(-4.9e-5, False), (-5.1e-5, True)], ids=str)
def test_vorticity_threshold_in_the_southern_hemisphere(peak, found):
    """South of the equator cyclones turn clockwise: negative vorticity, of the same size."""
    fields = {"PSL": 101000.0 + _cone(37, 72, 1000.0, 3.0), "VORT850": _peak(37, 72, peak, 2.0)}
    assert -20.0 < LAT[37] < -19.0  # 19.9 S
    assert bool(find_centres(fields, LAT, LON, TCConfig())) is found


def test_cyclonic_vorticity_flips_the_south_and_zeroes_missing_rows():
    from climnb.labels.tc import cyclonic_vorticity

    vort = np.full(LAT.shape + LON.shape, 1e-5)
    vort[[0, -1]] = np.nan  # the rows at the poles
    zeta = cyclonic_vorticity({"VORT850": vort}, LAT, LON)
    assert (zeta[[0, -1]] == 0).all()
    np.testing.assert_array_equal(zeta[1:48], np.float32(-1e-5))
    np.testing.assert_array_equal(zeta[48:-1], np.float32(1e-5))


def test_max_wind_near_is_the_strongest_within_the_box():
    from climnb.labels.tc import max_wind_near

    u, v = np.zeros(LAT.shape + LON.shape), np.zeros(LAT.shape + LON.shape)
    u[59, 73], v[59, 73] = 30.0, 40.0  # 50 m/s, 1 row and 1 column away
    u[58, 80] = 90.0  # 8 columns (18.7 degrees) away
    fields = {"U850": u, "V850": v}
    assert max_wind_near(fields, LAT, LON, 58, 72, 4.0) == 50.0
    assert max_wind_near(fields, LAT, LON, 58, 72, 20.0) == 90.0
    assert np.isnan(max_wind_near({}, LAT, LON, 58, 72, 4.0))


def test_the_latitude_limit_includes_its_own_row():
    lat_limit = float(abs(LAT[80]))
    zeta = _peak(80, 72, 2e-4)
    rows, _ = _vorticity_maxima(zeta, _Grid(LAT, LON, True), TCConfig(max_abs_lat=lat_limit))
    assert rows.tolist() == [80]
    below = TCConfig(max_abs_lat=lat_limit - 1e-6)
    assert _vorticity_maxima(zeta, _Grid(LAT, LON, True), below)[0].size == 0


@pytest.mark.parametrize("thick_m, found", [(60.0, True), (40.0, False)], ids=["60m", "40m"])
def test_the_thickness_check_when_asked(thick_m, found):
    """With ``thickness_rise_m`` 50 and Z200, Z1000 given, the core's thickness must exceed
    the ring's (4 degrees out) by 50 m."""
    fields = _warm(0.9, 3.5)
    z = 12000.0 + thick_m * (_distance_deg(58, 72) <= 2.5)
    fields |= {"Z200": z, "Z1000": np.zeros_like(z)}
    config = TCConfig(thickness_rise_m=50.0)
    assert bool(find_centres(fields, LAT, LON, config)) is found
    assert find_centres(fields, LAT, LON, TCConfig())  # not asked: not checked


def test_a_percentile_mask_is_the_boxs_top_cells_around_the_centre():
    """``threshold="percentile"``: the cells of the storm's box (11 rows by 9 columns at
    21 N: 10.2 degrees either side) at or above its 93rd percentile, the piece holding the
    centre."""
    fields = _storm_fields((58, 72))
    config = TCConfig(mask_fields=("TMQ",), threshold="percentile")
    [storm], _ = detect_storms(fields, LAT, LON, config)
    box = fields["TMQ"][58 - 5 : 58 + 6, 72 - 4 : 72 + 5]
    top = box >= np.percentile(box, 93.0)
    assert 3 < top.sum() < 12
    assert storm.rows.size == top.sum() and (58, 72) in set(
        zip(storm.rows.tolist(), storm.cols.tolist(), strict=True)
    )


def test_a_warm_core_exactly_warm_core_k_above_its_ring_is_warm():
    """Temperatures given as anomalies: a core of exactly 0.8 K on 0 K around it."""
    t = 0.8 * (_distance_deg(58, 72) <= 3.5)
    fields = {**_storm_fields((58, 72)), "T200": t, "T500": t}
    assert find_centres(fields, LAT, LON, TCConfig())
    less = {**fields, "T200": t * 0.99, "T500": t * 0.99}
    assert find_centres(less, LAT, LON, TCConfig()) == []
