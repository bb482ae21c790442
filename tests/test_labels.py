"""Tests of climnb.labels: geometry, components, detectors, label_dataset, input handling, CLI."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd
import pytest
import xarray as xr
from scipy import ndimage

from climnb.cli import main
from climnb.data.synthetic import make_dataset
from climnb.io.channels import CHANNEL_NAMES
from climnb.io.files import open_fields
from climnb.io.netcdf import normalize
from climnb.labels import LabelConfig, compute, label_dataset, label_step
from climnb.labels.ar import detect_rivers
from climnb.labels.components import label_components, label_max, measure
from climnb.labels.config import ARConfig, TCConfig
from climnb.labels.dynamics import _ddlat, relative_vorticity, vorticity
from climnb.labels.ivt import G, ivt, ivt_proxy
from climnb.labels.scores import iou, score
from climnb.labels.sphere import EARTH_RADIUS_KM, cell_area_km2
from climnb.labels.tc import _Grid, _vorticity_maxima, detect_storms

R_M = EARTH_RADIUS_KM * 1e3


def _compute(ds, config=None, **kwargs):
    return compute(*label_dataset(ds, config, **kwargs), scheduler="sync")


@pytest.fixture(scope="module")
def toy():
    """Two seeds of toy-size synthetic data (16 steps in all), labelled once."""
    runs = []
    for seed in (11, 12):
        ds, events = make_dataset(n_time=8, seed=seed)
        labels, found = _compute(ds)
        runs.append((ds, events, labels, found))
    return runs


@pytest.fixture(scope="module")
def step():
    """One toy time step as plain arrays."""
    ds, events = make_dataset(n_time=1, seed=5)
    fields = {k: ds[k].values[0] for k in ds.data_vars if k != "truth"}
    return ds, events, fields


# --- geometry ---------------------------------------------------------------------------------


@pytest.mark.parametrize("shape", [(96, 144), (181, 360)], ids=["toy", "1deg"])
def test_vorticity_of_solid_body_rotation(shape):
    lat = np.linspace(-90, 90, shape[0])
    lon = np.arange(shape[1]) * 360.0 / shape[1]
    u = 15.0 * np.cos(np.radians(lat))[:, None] * np.ones(lon.size)
    zeta = vorticity(u, np.zeros_like(u), lat, lon)
    expected = 2 * 15.0 * np.sin(np.radians(lat)) / R_M
    inner = slice(1, -1)  # one-sided differences at the first/last row
    np.testing.assert_allclose(
        zeta[inner, :],
        np.broadcast_to(expected[inner, None], zeta[inner].shape),
        rtol=2e-3,
        atol=1e-9,
    )
    assert np.isnan(zeta[[0, -1]]).all()  # the poles, where cos(lat) = 0


def test_vorticity_of_a_meridional_wave_and_periodicity():
    lat = np.linspace(-60, 60, 61)
    lon = np.arange(0, 360, 2.0)
    # v = V sin(k lambda): zeta = V k cos(k lambda) / (R cos(phi))
    k, v0 = 3, 10.0
    v = v0 * np.sin(k * np.radians(lon))[None, :] * np.ones((lat.size, 1))
    zeta = vorticity(np.zeros_like(v), v, lat, lon)
    expected = (
        v0 * k * np.cos(k * np.radians(lon))[None, :] / (R_M * np.cos(np.radians(lat)))[:, None]
    )
    np.testing.assert_allclose(zeta, expected, rtol=2e-3, atol=1e-10)
    rolled = vorticity(np.zeros_like(v), np.roll(v, 7, axis=1), lat, lon)
    np.testing.assert_allclose(rolled, np.roll(zeta, 7, axis=1), rtol=1e-5)


def test_latitude_derivative_matches_numpy_on_even_and_uneven_grids():
    rng = np.random.default_rng(3)
    f = rng.normal(size=(2, 40, 7)).astype(np.float32)
    even = np.radians(np.linspace(-80, 80, 40))
    uneven = np.radians(np.sort(rng.uniform(-80, 80, 40)))
    for phi in (even, uneven):
        np.testing.assert_allclose(
            _ddlat(f, phi), np.gradient(f.astype(float), phi, axis=-2), rtol=1e-4, atol=1e-4
        )


@pytest.mark.parametrize("periodic", [True, False])
def test_vorticity_maxima_are_the_maxima_of_their_windows(periodic):
    """The sparse search finds exactly the pixels equal to their maximum_filter (wrapping
    columns on a global grid), strongest first, on a field with many ties and seam peaks."""
    rng = np.random.default_rng(5)
    lat = np.linspace(-88.75, 88.75, 72)
    lon = np.arange(96) * 3.75
    zeta = ndimage.gaussian_filter(rng.normal(size=(72, 96)), 1.5, mode="wrap")
    zeta = np.round(zeta, 1).astype(np.float32) * np.float32(1e-4)  # plateaus: ties
    zeta[30, 0], zeta[30, -1] = 5e-4, 4e-4  # a peak beside the seam beats its twin across it
    config = TCConfig(min_vorticity=5e-5, vorticity_window_deg=15.0, max_abs_lat=70.0)
    grid = _Grid(lat, lon, periodic)
    rows, cols = _vorticity_maxima(zeta, grid, config)
    half = grid.cells(config.vorticity_window_deg / 2)
    peak = ndimage.maximum_filter(
        zeta,
        size=(2 * half[0] + 1, 2 * half[1] + 1),
        mode=("nearest", "wrap" if periodic else "nearest"),
    )
    want = (zeta == peak) & (zeta >= config.min_vorticity) & (np.abs(lat) <= 70)[:, None]
    assert want.sum() > 3
    found = set(zip(rows.tolist(), cols.tolist(), strict=True))
    assert found == set(zip(*np.nonzero(want), strict=True))
    assert np.all(np.diff(zeta[rows, cols]) <= 0)
    assert ((30, 95) in found) is not periodic


def test_relative_vorticity_dataarray(step):
    ds = step[0]
    z = relative_vorticity(ds.U850, ds.V850)
    assert z.dims == ("time", "lat", "lon") and z.attrs["units"] == "s-1"
    np.testing.assert_allclose(
        z.values[0], vorticity(ds.U850.values[0], ds.V850.values[0], ds.lat, ds.lon), rtol=1e-6
    )


def test_cap_area_is_analytic():
    lat = np.linspace(-90, 90, 97)  # 1.875 degree spacing, edges half way
    lon = np.arange(144) * 2.5
    mask = np.zeros((lat.size, lon.size), bool)
    mask[lat >= 60] = True
    labels, n = label_components(mask)
    table = measure(labels, n, lat, lon)
    edge = np.radians(lat[lat >= 60][0] - 0.9375)
    expected = 2 * np.pi * EARTH_RADIUS_KM**2 * (1 - np.sin(edge))
    assert n == 1
    assert table.area_km2.iloc[0] == pytest.approx(expected, rel=1e-9)
    total = cell_area_km2(lat, lon).sum() * lon.size
    assert total == pytest.approx(4 * np.pi * EARTH_RADIUS_KM**2, rel=1e-9)


def test_length_and_width_of_an_equatorial_band():
    lat = np.linspace(-90, 90, 181)
    lon = np.arange(360.0)
    mask = np.zeros((181, 360), bool)
    mask[88:93, 10:41] = True  # 5 rows (~556 km) by 30 degrees of longitude
    labels, n = label_components(mask)
    row = measure(labels, n, lat, lon).iloc[0]
    km_per_deg = np.pi * EARTH_RADIUS_KM / 180
    assert row.length_km == pytest.approx(30 * km_per_deg, rel=0.01)
    assert row.width_km == pytest.approx(5 * 31 / 30 * km_per_deg, rel=0.02)
    assert row.lat == pytest.approx(0.0, abs=1e-9) and row.lon == pytest.approx(25.0)


# --- components across the seam ----------------------------------------------------------------


@pytest.mark.parametrize("connectivity", [4, 8])
def test_components_join_across_the_seam_not_the_poles(connectivity):
    mask = np.zeros((10, 20), bool)
    mask[4, :3] = mask[4, -3:] = True  # a band cut by the seam
    mask[0, :] = True  # a polar row: one component on its own
    mask[-1, :2] = mask[-1, 5:7] = True  # two pieces at the other pole stay two
    labels, n = label_components(mask, connectivity=connectivity)
    assert n == 4
    assert labels[4, 0] == labels[4, -1] != 0
    _, n_flat = label_components(mask, periodic=False, connectivity=connectivity)
    assert n_flat == 5


def test_seam_merge_is_transitive_and_diagonal():
    mask = np.zeros((6, 12), bool)
    mask[1, 0] = mask[2, -1] = True  # diagonal neighbours across the seam
    mask[2:5, 5] = True
    mask[3, 0] = mask[3, -1] = True  # a second join
    labels, n = label_components(mask, connectivity=8)
    assert n == 2
    assert labels[1, 0] == labels[2, -1] == labels[3, 0]
    labels4, n4 = label_components(mask, connectivity=4)  # no diagonal join: (1, 0) alone
    assert n4 == 3 and labels4[1, 0] != labels4[2, -1] == labels4[3, 0]


def test_seam_crossing_river_is_one_component():
    ds, events = make_dataset(n_time=1, n_tc=0, n_ar=1, seed=2)
    assert events.crosses_seam.iloc[0]
    fields = {k: ds[k].values[0] for k in ("TMQ", "U850", "V850")}
    mask, rivers = detect_rivers(fields, ds.lat.values, ds.lon.values, ARConfig())
    assert len(rivers) == 1
    assert mask[:, 0].any() and mask[:, -1].any()
    assert rivers.length_km.iloc[0] == pytest.approx(events.length_km.iloc[0], rel=0.3)
    truth = ds.truth.values[0] == 2
    assert (mask & truth).sum() / (mask | truth).sum() > 0.8


def test_label_max():
    labels = np.array([[0, 1, 1], [2, 0, 1]])
    values = np.array([[9.0, 1.0, 3.0], [5.0, 7.0, 2.0]])
    np.testing.assert_array_equal(label_max(values, labels, [1, 2]), [3.0, 5.0])


# --- IVT ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("units,scale", [("Pa", 1.0), ("hPa", 100.0)])
def test_ivt_integral_of_a_uniform_column(units, scale):
    plev = xr.DataArray(
        np.array([100000.0, 85000.0, 70000.0, 50000.0]) / scale, dims="plev", attrs={"units": units}
    )
    shape = (4, 3, 5)
    coords = {"plev": plev}
    q = xr.DataArray(np.full(shape, 0.01), dims=("plev", "lat", "lon"), coords=coords)
    u = xr.DataArray(np.full(shape, 10.0), dims=q.dims, coords=coords)
    v = xr.DataArray(np.full(shape, -5.0), dims=q.dims, coords=coords)
    out = ivt(q, u, v)
    expected = 0.01 * 50000.0 / G
    np.testing.assert_allclose(out.ivtu, 10 * expected)
    np.testing.assert_allclose(out.ivtv, -5 * expected)
    np.testing.assert_allclose(out.ivt, np.hypot(10, 5) * expected)
    ps = xr.DataArray(np.full((3, 5), 77500.0), dims=("lat", "lon"))
    under = ivt(q, u, v, surface_pressure=ps)  # surface pressure in Pa, whatever plev uses
    np.testing.assert_allclose(under.ivtu, 10 * 0.01 * (77500.0 - 50000.0) / G)


def test_ivt_proxy_and_errors(step):
    ds = step[0]
    proxy = ivt_proxy(ds.TMQ, ds.U850, ds.V850)
    xr.testing.assert_allclose(proxy.ivt, np.hypot(ds.TMQ * ds.U850, ds.TMQ * ds.V850))
    with pytest.raises(ValueError, match="no pressure dimension 'plev'"):
        ivt(ds.QREFHT, ds.U850, ds.V850)


# --- detectors ---------------------------------------------------------------------------------


def test_quality_on_toy_data(toy):
    ds = xr.concat([r[0] for r in toy], "time")
    labels = xr.concat([r[2] for r in toy], "time")
    found = pd.concat([r[3] for r in toy])
    true = pd.concat([r[1] for r in toy])
    table = score(labels, ds.truth, found, true)
    # the rivers' truth is their region of generated IVT >= 250; these inputs have only TMQ and
    # the 850 hPa wind, so the default draws rivers from the proxy TMQ x |V850| at 250 / 0.7,
    # which misses the rivers whose column wind is weak (recall about 0.56 on these seeds; the
    # moisture rule had 0.71 IoU here): benchmarks/bench_labels.py has the figures
    assert "rivers from transport (the proxy TMQ x |V850|" in labels.attrs["notes"]
    assert table.loc["atmospheric_river", "iou"] >= 0.5, table
    assert table.loc["atmospheric_river", "precision"] >= 0.95, table
    assert table.loc["tropical_cyclone", "iou"] >= 0.70, table
    assert table.loc["tropical_cyclone", ["recall", "precision"]].min() >= 0.95, table


def test_default_draws_rivers_from_ivt_when_the_input_has_it():
    runs = [make_dataset(n_time=8, seed=seed, ivt=True) for seed in (11, 12)]
    found = [_compute(ds[[*CHANNEL_NAMES, "IVTU", "IVTV"]]) for ds, _ in runs]
    assert "rivers from transport (IVTU+IVTV; IVT >= 250" in found[0][0].attrs["notes"]
    table = score(
        xr.concat([f[0] for f in found], "time"),
        xr.concat([ds.truth for ds, _ in runs], "time"),
        pd.concat([f[1] for f in found]),
        pd.concat([e for _, e in runs]),
    )
    # toy seeds 11-12 measured 0.55 (recall 0.53): not the grid's resolution (the length,
    # shape and area checks change nothing here); seed 12's rivers, mostly southern, carry a
    # mean equatorward IVT (-44 to -103 kg m-1 s-1), so the poleward check drops them
    assert table.loc["atmospheric_river", "iou"] >= 0.5, table
    assert table.loc["atmospheric_river", "precision"] >= 0.85, table
    assert table.loc["tropical_cyclone", ["recall", "precision"]].min() >= 0.95, table


@pytest.fixture(scope="module")
def with_ivt():
    ds, events = make_dataset(n_time=6, seed=201, ivt=True)
    return ds, events


def test_transport_rule_draws_rivers_from_ivt(with_ivt):
    ds, events = with_ivt
    inputs = ds[["IVTU", "IVTV", "U850", "V850", "PSL", "T200", "T500", "TMQ", "PRECT"]]
    labels, found = _compute(inputs)
    assert "rivers from transport" in labels.attrs["notes"]
    river = labels.values == 2
    assert river.any() and iou(labels.values, ds.truth.values, 2) >= 0.8
    # every river pixel carries IVT >= 250, none lies within 15 degrees of the equator
    assert (ds.IVT.values[river] >= 250).all()
    assert not river[:, np.abs(ds.lat.values) < 15].any()
    rivers = found[found.class_id == 2]
    assert (rivers.length_km >= 2000).all() and (rivers.length_km >= 2 * rivers.width_km).all()


def test_ivt_only_input_labels_rivers_and_says_why_not_storms(with_ivt):
    ds, _ = with_ivt
    labels, found = _compute(ds[["IVT"]])
    assert labels.attrs["classes"] == "atmospheric_river"
    assert "no storms: the input lacks VORT850 (or U850 and V850), PSL" in labels.attrs["notes"]
    assert set(np.unique(labels.values)) <= {0, 2} and (labels.values == 2).any()
    assert set(found.class_id) == {2}


def test_per_point_percentile_threshold(with_ivt):
    ds, _ = with_ivt
    cfg = LabelConfig(ar=ARConfig(ivt_percentile=85.0, min_series_steps=4))
    labels, _ = _compute(ds[["IVT"]], cfg)
    assert "85th percentile of each point's 6 steps" in labels.attrs["notes"]
    short = LabelConfig(ar=ARConfig(ivt_percentile=85.0))
    labels, _ = _compute(ds[["IVT"]], short)
    assert "shorter than 240: fixed threshold 250" in labels.attrs["notes"]


def test_the_percentile_threshold_is_computed_once(with_ivt, monkeypatch):
    """Not once a step: dask.delayed gave each label task its own renamed copy of the
    threshold's graph (96 toy steps: 17 s -> 1.7 s)."""
    from climnb.labels import dataset

    calls = []
    original = dataset._ivt_threshold

    def counted(ds, config):
        threshold, note = original(ds, config)
        count = threshold.map_blocks(lambda b: calls.append(1) or b, meta=threshold._meta)
        return count, note

    monkeypatch.setattr(dataset, "_ivt_threshold", counted)
    ds, _ = with_ivt
    cfg = LabelConfig(ar=ARConfig(ivt_percentile=85.0, min_series_steps=4))
    labels, _ = _compute(ds[["IVT"]], cfg)
    assert "85th percentile" in labels.attrs["notes"] and labels.sizes["time"] == 6
    assert len(calls) == 1


@pytest.mark.parametrize("classes", ["auto", "ar", "tc", "both"])
def test_constant_fields_and_regional_grids_give_empty_labels(classes):
    ds, _ = make_dataset(n_time=1, n_tc=0, n_ar=0, seed=2)
    flat = ds.copy(deep=True)
    for name in flat.data_vars:
        flat[name][:] = flat[name].mean()
    labels, found = _compute(flat.drop_vars("truth"), None, classes=classes)
    assert not labels.values.any() and len(found) == 0
    regional = ds.isel(lat=slice(50, 80), lon=slice(10, 60)).drop_vars("truth")
    labels, found = _compute(regional, None, classes=classes)
    assert labels.shape == (1, 30, 50)


def test_storms_keep_their_own_masks_and_win_over_rivers(step):
    ds, events, fields = step
    lat, lon = ds.lat.values, ds.lon.values
    storms, table = detect_storms(fields, lat, lon, TCConfig())
    assert len(storms) == (events.class_id == 1).sum()
    areas = cell_area_km2(lat, lon)
    for s, row in zip(storms, table.itertuples(), strict=True):
        assert s.rows.size > 0 and row.area_km2 == pytest.approx(areas[s.rows].sum())
    labels, _ = label_step(fields, lat, lon)
    union = np.zeros(labels.shape, bool)
    for s in storms:
        union[s.rows, s.cols] = True
    np.testing.assert_array_equal(labels == 1, union)
    # a river drawn straight through the storms still leaves the storms class 1
    forced = replace(
        LabelConfig(),
        ar=replace(
            ARConfig(),
            percentile=0.0,
            edge="percentile",
            min_aspect=0.0,
            min_length_km=0.0,
            max_area_km2=1e12,
            lat_band=(0.0, 90.0),
        ),
    )
    labels2, _ = label_step(fields, lat, lon, forced)
    assert (labels2[union] == 1).all() and (labels2 == 2).any()


def test_storm_on_the_seam_wraps():
    ds, events = make_dataset(n_time=1, n_ar=0, n_tc=1, seed=4)
    shift = int(round(events.lon.iloc[0] / 2.5))
    rolled = ds.roll(lon=-shift, roll_coords=False)  # put the storm on column 0
    fields = {k: rolled[k].values[0] for k in rolled.data_vars if k != "truth"}
    storms, _ = detect_storms(fields, ds.lat.values, ds.lon.values, TCConfig())
    assert len(storms) == 1
    cols = set(storms[0].cols.tolist())
    assert 0 in cols and ds.sizes["lon"] - 1 in cols
    truth = rolled.truth.values[0] == 1
    mask = np.zeros_like(truth)
    mask[storms[0].rows, storms[0].cols] = True
    assert (mask & truth).sum() / (mask | truth).sum() >= 0.6


def test_paper_recipe_runs(step):
    ds, _, fields = step
    labels, events = label_step(fields, ds.lat.values, ds.lon.values, LabelConfig.paper())
    assert set(np.unique(labels)) <= {0, 1, 2}
    assert set(events.class_name) <= {"tropical_cyclone", "atmospheric_river"}


@pytest.mark.parametrize(
    "make,match",
    [
        (lambda: ARConfig(percentile=101), "percentile"),
        (lambda: ARConfig(edge="nope"), "edge"),
        (lambda: TCConfig(mask_fields=("Z500",)), "mask_fields"),
        (lambda: LabelConfig(time_chunk=0), "time_chunk"),
    ],
    ids=["percentile", "edge", "mask-fields", "chunk"],
)
def test_bad_config(make, match):
    with pytest.raises(ValueError, match=match):
        make()


# --- label_dataset and input handling -----------------------------------------------------------


def test_label_dataset_is_lazy_one_task_per_step(toy):
    ds = toy[0][0]
    labels, events = label_dataset(ds)
    assert labels.chunks[0] == (1,) * ds.sizes["time"]
    assert labels.dtype == np.uint8 and labels.dims == ("time", "lat", "lon")
    computed, table = _compute(ds)
    np.testing.assert_array_equal(computed.values, toy[0][2].values)
    assert list(table.columns)[:3] == ["time", "class_id", "class_name"]
    assert set(table.time) == set(pd.to_datetime(ds.time.values))


def test_each_step_is_labelled_once(monkeypatch):
    from climnb.labels import dataset

    calls = []
    original = dataset.label_step
    monkeypatch.setattr(dataset, "label_step", lambda *a, **k: calls.append(1) or original(*a, **k))
    ds, _ = make_dataset(n_time=3, seed=1)
    labels, events = label_dataset(ds)
    compute(labels, events, scheduler="threads", num_workers=2)
    assert len(calls) == 3


def _flipped(ds):
    """The same data with descending latitudes, longitudes -180..180 and other names."""
    out = ds.roll(lon=ds.sizes["lon"] // 2, roll_coords=True)
    out = out.assign_coords(lon=((out.lon + 180) % 360) - 180).isel(lat=slice(None, None, -1))
    out = out.rename(lat="latitude", lon="longitude")
    return out.assign(extra=out.TMQ * 0 + 1) if "TMQ" in out else out


def test_normalised_inputs_give_the_same_labels(toy):
    ds = toy[0][0].isel(time=slice(0, 2))
    expected = toy[0][2].isel(time=slice(0, 2))
    flipped = _flipped(ds)
    canonical, _ = compute(*label_dataset(flipped, grid="canonical"), scheduler="sync")
    xr.testing.assert_equal(canonical.drop_attrs(), expected.drop_attrs())
    # by default on the input's own grid: its names, order and longitude convention
    own, events = _compute(flipped)
    assert own.dims == ("time", "latitude", "longitude")
    np.testing.assert_array_equal(own.longitude.values, flipped.longitude.values)
    np.testing.assert_array_equal(own.latitude.values, flipped.latitude.values)
    xr.testing.assert_equal(own.drop_attrs(), _flipped(expected.to_dataset()).labels.drop_attrs())
    assert events.lon.between(-180, 180).all()


def test_missing_values_are_background(toy):
    ds = toy[0][0].isel(time=slice(0, 1)).copy(deep=True)
    ds["TMQ"][0, 40:50, 10:20] = np.nan
    ds["PSL"][0, 0, 0] = 1e36  # CAM5's undeclared fill value
    labels, _ = _compute(ds)
    assert (labels.values[0, 40:50, 10:20] == 0).all() and labels.values[0, 0, 0] == 0


@pytest.mark.parametrize(
    "edit,match",
    [
        (lambda ds: ds.drop_vars("PSL"), "cannot label.*lacks PSL.*found.*--rename"),
        (
            lambda ds: ds.rename(lat="y").assign_coords(y=ds.lat.values),
            "no lat dimension.*found dimensions",
        ),
        (lambda ds: ds.assign(TMQ=ds.TMQ.expand_dims(lev=2)), "TMQ has dimensions"),
        (lambda ds: ds.drop_vars("lon"), "'lon' has no coordinate"),
        (lambda ds: ds.assign(TMQ=ds.TMQ.astype(str)), "TMQ has dtype <U.*expected numbers"),
    ],
    ids=["missing-var", "missing-lat", "wrong-dims", "no-lon-values", "text-dtype"],
)
def test_bad_input_names_the_problem(toy, edit, match):
    ds = toy[0][0].isel(time=slice(0, 1))
    with pytest.raises(ValueError, match=match):
        label_dataset(edit(ds), classes="both")


def test_normalize_without_time_and_with_extra_dims():
    ds = xr.Dataset(
        {"TMQ": (("lev", "lat", "lon"), np.zeros((1, 3, 4)))},
        coords={"lat": [10.0, 0.0, -10.0], "lon": [0.0, 90.0, 180.0, 270.0]},
    )
    out = normalize(ds, required=["TMQ"])
    assert out.TMQ.dims == ("time", "lat", "lon") and out.lat.values[0] == -10.0


def test_open_many_files_with_fill_values(tmp_path, toy):
    ds = toy[0][0].isel(time=slice(0, 3))
    ds["TMQ"][1, 5, 5] = np.nan
    paths = []
    for t in range(3):
        path = tmp_path / f"part{t}.nc"
        ds.isel(time=[t]).to_netcdf(path, encoding={"TMQ": {"_FillValue": -9999.0}})
        paths.append(str(path))
    opened = open_fields(str(tmp_path / "part*.nc"), required=["TMQ", "PSL"])
    assert opened.sizes["time"] == 3 and opened.TMQ.chunks is not None
    assert np.isnan(opened.TMQ.values[1, 5, 5])
    with pytest.raises(FileNotFoundError, match="nothere"):
        open_fields(str(tmp_path / "nothere.nc"))


# --- command line ------------------------------------------------------------------------------


def test_cli_label(tmp_path, toy):
    ds = toy[0][0].isel(time=slice(0, 2))
    src = tmp_path / "fields.nc"
    ds.to_netcdf(src)
    out = tmp_path / "labels.nc"
    # what a killed earlier run of this output left is removed; another output's is not
    mine = [tmp_path / ".labels.nc.0badf00d.tmp", tmp_path / ".labels.events.csv.12345678.tmp"]
    other = tmp_path / ".other.nc.deadbeef.tmp"
    for p in (*mine, other):
        p.write_bytes(b"half")
    assert main(["label", str(src), "--out", str(out), "--no-progress", "--workers", "2"]) == 0
    assert not any(p.exists() for p in mine) and other.exists()
    with xr.open_dataset(out) as written:
        assert written.labels.dtype == np.uint8
        np.testing.assert_array_equal(written.labels.values, toy[0][2].values[:2])
    table = pd.read_csv(tmp_path / "labels.events.csv")
    assert len(table) == len(toy[0][3][toy[0][3].time.isin(ds.time.values)])


def test_cli_label_errors(tmp_path, capsys):
    assert main(["label", str(tmp_path / "none.nc"), "--out", str(tmp_path / "x.nc")]) == 2
    assert "none.nc" in capsys.readouterr().err
    bad = tmp_path / "bad.nc"
    xr.Dataset(
        {"TMQ": (("time", "lat", "lon"), np.zeros((1, 3, 4)))},
        coords={"lat": [0.0, 1, 2], "lon": [0.0, 1, 2, 3]},
    ).to_netcdf(bad)
    argv = ["label", str(bad), "--out", str(tmp_path / "x.nc"), "--classes", "both"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "cannot label" in err and "U850" in err
    assert not (tmp_path / "x.nc").exists()


@pytest.mark.parametrize("suffix", [".nc", ".zarr"])
def test_write_labels_labels_each_step_once(tmp_path, monkeypatch, suffix):
    """The write and the event table come from one run of each label task (xarray's lazy
    write holds copies of the tasks under other names: computed beside the table, every step
    was labelled twice)."""
    import climnb.labels.dataset as dataset
    from climnb.labels.writer import write_labels

    ds = make_dataset(n_time=4, seed=3)[0].drop_vars("truth")
    calls = []
    real = dataset.label_step
    monkeypatch.setattr(dataset, "label_step", lambda *a, **k: calls.append(1) or real(*a, **k))
    labels, events = dataset.label_dataset(ds)
    table = write_labels(labels, events, tmp_path / f"l{suffix}", progress=False)
    assert len(calls) == ds.sizes["time"]
    if suffix == ".nc":  # one HDF5 chunk a step (netCDF's default, all 4 steps in one chunk,
        import netCDF4  # was rewritten at every step's write: 5x slower than Zarr)

        with netCDF4.Dataset(tmp_path / "l.nc") as nc:
            assert nc["labels"].chunking() == [1, *ds.TMQ.shape[1:]]
    expected = dataset.compute(*dataset.label_dataset(ds))[1]
    pd.testing.assert_frame_equal(table.reset_index(drop=True), expected.reset_index(drop=True))


def test_labels_of_the_mirrored_world_are_the_mirrored_labels(toy):
    """What makes the pipeline's "mirror" augmentation exact: the same weather in the other
    hemisphere (rows reversed, meridional winds negated) gets the labels reversed, storms
    (vorticity sign by hemisphere) and rivers (poleward transport) alike."""
    ds, _, labels, _ = toy[0]
    mirrored = ds.isel(lat=slice(None, None, -1)).assign_coords(lat=ds.lat)
    mirrored = mirrored.assign(V850=-mirrored.V850, VBOT=-mirrored.VBOT)
    again, _ = _compute(mirrored)
    assert {1, 2} <= set(np.unique(labels.values))  # storms and rivers to mirror
    np.testing.assert_array_equal(again.values, labels.values[:, ::-1])
