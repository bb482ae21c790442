"""The labeller's faster kernels give, bit for bit, what the plain computations give: the
components of a large mask from its runs, the IVT only where it can reach the threshold,
the vorticity of some rows, and the event table built column by column."""

import numpy as np
import pandas as pd
import pytest
from scipy import ndimage

from climnb.io.channels import CLASS_NAMES
from climnb.labels import components
from climnb.labels.ar import _ivt_above, ivt_magnitude
from climnb.labels.components import _join_seam, _label, label_components
from climnb.labels.dynamics import vorticity, vorticity_rows
from climnb.labels.schema import EVENT_COLUMNS
from climnb.labels.step import _EMPTY_RIVERS, _events

# above the size from which a mask is labelled from its runs (components._RUNS_FROM)
SHAPE = (260, 300)


def _plain(mask, periodic, connectivity):
    """ndimage.label, then the seam joined: the labeller's plain route."""
    structure = ndimage.generate_binary_structure(2, 1 if connectivity == 4 else 2)
    labels, n = ndimage.label(mask, structure=structure, output=np.int32)
    if periodic and n > 1:
        labels, n = _join_seam(labels, n, diagonal=connectivity == 8)
    return labels, n


def _masks(seed):
    rng = np.random.default_rng(seed)
    smooth = rng.standard_normal(SHAPE).cumsum(0).cumsum(1)
    yield smooth > np.percentile(smooth, 90)
    mask = np.zeros(SHAPE, bool)  # pieces that meet only across the seam, or diagonally
    mask[10:20, :5] = mask[10:20, -5:] = True
    mask[40, 0] = mask[41, -1] = mask[42, 0] = True
    mask[60, :] = True  # a whole row: its own run at both ends
    mask[61, 3:7] = True
    mask[100:110, 150:152] = mask[110, 152] = True  # touches diagonally only
    yield mask


@pytest.mark.parametrize("connectivity", [4, 8])
@pytest.mark.parametrize("periodic", [True, False])
@pytest.mark.parametrize("seed", [0, 1])
def test_components_from_runs_are_those_of_ndimage_label(seed, periodic, connectivity):
    for mask in _masks(seed):
        labels, n, (where, idx) = _label(mask, periodic, connectivity, pixels=True)
        expected, n_expected = _plain(mask, periodic, connectivity)
        assert n == n_expected and labels.dtype == np.int32
        np.testing.assert_array_equal(labels, expected)
        np.testing.assert_array_equal(where, np.flatnonzero(expected))
        np.testing.assert_array_equal(idx, expected.ravel()[where])


def test_a_mask_of_many_short_runs_goes_to_ndimage_label():
    mask = np.random.default_rng(2).random(SHAPE) < 0.5
    assert components._label_runs(mask, True, True) is None
    labels, n = label_components(mask)
    expected, n_expected = _plain(mask, True, 8)
    assert n == n_expected
    np.testing.assert_array_equal(labels, expected)


def _winds(seed, nan=True, shape=(96, 144)):
    rng = np.random.default_rng(seed)
    u = (rng.standard_normal(shape) * 150).astype(np.float32)
    v = (rng.standard_normal(shape) * 150).astype(np.float32)
    if nan:
        u[3, 4], v[5, 6], u[7, 8], v[7, 8] = np.nan, np.inf, np.inf, np.nan
    return u, v


@pytest.mark.parametrize("threshold", [250.0, "field", -1.0])
@pytest.mark.parametrize("proxy", [False, True])
def test_ivt_where_it_can_reach_the_threshold_is_that_of_the_whole_grid(proxy, threshold):
    u, v = _winds(3)
    fields = {"U850": u / 20, "V850": v / 20, "TMQ": np.abs(u) / 5} if proxy else {}
    fields |= {} if proxy else {"IVTU": u, "IVTV": v}
    if threshold == "field":
        threshold = np.random.default_rng(4).uniform(100, 400, u.shape)
    rows = np.zeros(u.shape[0], bool)
    rows[40:56] = True
    exclude = np.zeros(u.shape, bool)
    exclude[:, 100:110] = True
    whole = ivt_magnitude(fields)
    expected = whole >= threshold
    expected[rows] = False
    expected &= ~exclude
    ivt, above = _ivt_above(fields, threshold, rows, exclude)
    np.testing.assert_array_equal(above, expected)
    assert ivt.dtype == whole.dtype
    np.testing.assert_array_equal(ivt[above], whole[above])


@pytest.mark.parametrize(
    "lat",
    [np.linspace(-90, 90, 97), np.linspace(60, -40, 41), np.sort(np.r_[-80, 3.0, 7, 20, 61])],
)
@pytest.mark.parametrize("lon", [np.arange(0, 360, 2.5), np.arange(100, 160, 1.5)])
def test_vorticity_of_some_rows_is_that_of_the_whole_grid(lat, lon):
    u, v = (w.astype(np.float64) for w in _winds(5, nan=False, shape=(lat.size, lon.size)))
    whole = vorticity(u, v, lat, lon)
    for lo, hi in [(0, lat.size), (0, 2), (1, 3), (2, lat.size), (lat.size - 1, lat.size)]:
        part = vorticity_rows(u, v, lat, lon, lo, hi)
        assert part.dtype == whole.dtype
        np.testing.assert_array_equal(part, whole[lo:hi])


_STORMS = pd.DataFrame(  # as climnb.labels.tc.detect_storms gives them
    {
        "lat": [10.0, -12.5],
        "lon": [100.0, 355.0],
        "n_pixels": [12, 30],
        "area_km2": [1.0e5, 3.0e5],
        "radius_km": [178.4, 309.0],
        "min_psl": [99000.0, 98500.0],
        "max_wind": [30.0, np.nan],
        "vorticity": [2e-4, 3e-4],
    }
)
_NO_STORMS = pd.DataFrame([], columns=list(_STORMS.columns))  # object columns, no rows
_RIVERS = pd.DataFrame(  # as climnb.labels.ar.detect_rivers gives them
    {
        "label": [1, 2, 3],
        "n_pixels": [200, 150, 90],
        "area_km2": [2.0e6, 1.5e6, 9.0e5],
        "lat": [35.0, -40.0, 50.0],
        "lon": [200.0, 20.0, 330.0],
        "length_km": [4000.0, 3000.0, 2500.0],
        "width_km": [500.0, 500.0, 360.0],
        "max_ivt": [700.0, 500.0, 400.0],
        "max_wind": [25.0, 20.0, 18.0],
    }
)
_TABLES = {
    "storms-and-rivers": (_STORMS.assign(storm_track=[0, 3]), _RIVERS),
    "untracked": (_STORMS, _RIVERS),
    "storms-only": (_STORMS.assign(storm_track=[1, 2]), _EMPTY_RIVERS),
    "rivers-only": (_NO_STORMS, _RIVERS),
    "nothing": (_NO_STORMS, _EMPTY_RIVERS),
    "nothing-tracked": (_NO_STORMS.assign(storm_track=[]), _EMPTY_RIVERS),
    "float32": (_STORMS.astype({"vorticity": "float32", "area_km2": "float32"}), _RIVERS),
    "float32-storms-only": (_STORMS.astype({"vorticity": "float32"}), _EMPTY_RIVERS),
    "int32-and-uint64": (
        _STORMS.astype({"n_pixels": "uint64"}),
        _RIVERS.astype({"n_pixels": "int32"}),
    ),
    "bool": (_STORMS.assign(max_wind=[True, False]), _RIVERS),
    "object": (_STORMS.astype({"min_psl": object}), _RIVERS),
    "str": (_STORMS.astype({"lon": str}), _RIVERS),
    "track-object": (_STORMS.assign(storm_track=[None, 4]), _RIVERS),
    "track-float": (_STORMS.assign(storm_track=[np.nan, 4.0]), _RIVERS),
}


def _concatenated(storms: pd.DataFrame, rivers: pd.DataFrame) -> pd.DataFrame:
    """The label table's definition: the tables with rows concatenated, classes added."""
    tables = ((storms, 1), (rivers.drop(columns="label"), 2))
    parts = [t.assign(class_id=k) for t, k in tables if len(t)]
    if parts:
        events = pd.concat(parts, ignore_index=True)
    else:
        events = pd.DataFrame({"class_id": pd.Series(dtype=int)})
    events["class_name"] = [CLASS_NAMES[c] for c in events.class_id]
    if "storm_track" not in events:
        events["storm_track"] = -1
    events["storm_track"] = events.storm_track.fillna(-1).astype(np.int64)
    return events.reindex(columns=[c for c in EVENT_COLUMNS if c != "time"])


@pytest.mark.parametrize("name", list(_TABLES))
def test_a_step_table_is_its_tables_concatenated(name):
    """Column by column, the table of a step is what concatenating its storms and rivers
    gives: dtypes (numbers, and any other type), column order, index and values."""
    storms, rivers = _TABLES[name]
    got, want = _events(storms, rivers), _concatenated(storms, rivers)
    pd.testing.assert_frame_equal(
        got, want, check_exact=True, check_index_type=True, check_column_type=True
    )
    assert got.dtypes.to_dict() == want.dtypes.to_dict()
    assert got.storm_track.dtype == np.int64 and (got.storm_track.values >= -1).all()


@pytest.mark.parametrize("warm_core", [True, False])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_vorticity_maxima_from_the_searched_rows_are_those_of_the_whole_grid(seed, warm_core):
    # the storms' vorticity is computed only in the rows the centres are looked for in and
    # the reach of their windows: maxima near the latitude limit, with larger values beyond
    # it inside their window, must come out as from the whole grid
    from climnb.labels.config import TCConfig
    from climnb.labels.tc import (
        _cyclonic,
        _Grid,
        _searched_rows,
        _vorticity_maxima,
        cyclonic_vorticity,
    )

    lat, lon = np.linspace(-90, 90, 96), np.arange(144) * 2.5
    u, v = (ndimage.gaussian_filter(w, 2) for w in _winds(seed, nan=False))
    fields = {"U850": u, "V850": v} | ({"T200": u, "T500": v} if warm_core else {})
    config = TCConfig(min_vorticity=1e-7)
    grid = _Grid(lat, lon, True)
    limit = config.max_abs_lat if warm_core else config.max_abs_lat_no_warm_core
    rows = _searched_rows(fields, grid, config)
    assert rows[0] > 0 and rows[1] < lat.size  # not the whole grid
    part = _cyclonic(fields, lat, lon, *rows)
    whole = cyclonic_vorticity(fields, lat, lon)
    found = _vorticity_maxima(part, grid, config, limit)
    expected = _vorticity_maxima(whole, grid, config, limit)
    assert found[0].size > 10
    np.testing.assert_array_equal(found, expected)


@pytest.mark.parametrize("given", ["winds", "vorticity"])
def test_a_grid_beyond_the_storms_latitude_limit_has_no_storms(given):
    from climnb.labels.config import TCConfig
    from climnb.labels.tc import detect_storms

    lat, lon = np.linspace(60, 80, 9), np.arange(0, 40, 2.5)
    rng = np.random.default_rng(0)
    names = ["U850", "V850"] if given == "winds" else ["VORT850"]
    fields = {k: rng.random((9, 16)) for k in [*names, "PSL", "T200", "T500"]}
    storms, table = detect_storms(fields, lat, lon, TCConfig(mask_fields=("psl",)), periodic=False)
    assert storms == [] and len(table) == 0


@pytest.mark.parametrize(
    "value", [np.nan, np.inf, -np.inf, 1e30, -1e30, 9.9e29, -2e19, 1e19, 3.0e38, 0.0]
)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_missing_values_are_found_whatever_the_sum_of_squares_says(value, dtype):
    # one pass (the sum of squares) clears a float32 field; anything it cannot clear is
    # decided by the field's extremes against the fill limit of 1e30, as before
    from climnb.labels.step import fill_missing

    field = np.full((96, 144), 5.0, dtype)
    field[10, 20] = value
    out, missing = fill_missing({"TMQ": field})
    bad = not np.isfinite(np.float64(dtype(value))) or abs(float(dtype(value))) >= np.float32(1e30)
    assert (missing is not None) == bad
    if bad:
        assert missing.sum() == 1 and missing[10, 20] and out["TMQ"][10, 20] == 5.0
    else:
        assert out["TMQ"] is field
