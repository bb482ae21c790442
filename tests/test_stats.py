"""climnb.stats: frequency, events, landfall, attributed precipitation and change, checked
against the synthetic generator's own truth and against direct numpy computations."""

from __future__ import annotations

import json
import tracemalloc

import dask
import numpy as np
import pandas as pd
import pytest
import xarray as xr

from climnb.data.synthetic import Future, make_dataset
from climnb.stats import (
    BUILTIN,
    CompareConfig,
    attributed_precipitation,
    box,
    class_mask,
    compare,
    event_steps,
    event_table,
    events_to_dataset,
    fdr_mask,
    frequency,
    land_fraction,
    landfall_table,
    parse_region,
    precipitation,
    ralph_category,
    read_geojson,
    region_masks,
    saffir_simpson,
    write_frequency,
)
from climnb.stats.groups import group_index
from climnb.tracks import track_events, track_summary


@pytest.fixture(scope="module")
def toy():
    ds, events = make_dataset(n_time=24, seed=0, ivt=True)
    return ds, events


def _numpy_frequency(truth: xr.DataArray, k: int, sel=None) -> np.ndarray:
    values = truth.values if sel is None else truth.values[sel]
    return (values == k).mean(axis=0)


# --- frequency -----------------------------------------------------------------------------


@pytest.mark.parametrize("chunk", [1, 5, 24], ids=["chunk1", "chunk5", "chunk24"])
def test_frequency_is_exact_on_the_truth(toy, chunk):
    ds, _ = toy
    freq = frequency(class_mask(ds).chunk({"time": chunk})).compute()
    for k in (1, 2):
        expected = _numpy_frequency(ds.truth, k)
        np.testing.assert_allclose(freq.frequency.sel(class_id=k).values, expected, atol=1e-7)
    assert int(freq.steps) == 24
    assert freq.frequency.attrs["cell_methods"] == "time: mean"


def test_frequency_by_season_and_month_on_a_noleap_calendar():
    ds, _ = make_dataset(n_time=40, seed=2, freq="9D", start="2001-01-01")
    ds = ds.convert_calendar("noleap")  # CAM5's calendar: cftime times
    mask = class_mask(ds)
    months = ds.time.dt.month.values
    by_month = frequency(mask, "month").compute()
    for m in (1, 6, 12):
        expected = _numpy_frequency(ds.truth, 2, months == m)
        got = by_month.frequency.sel(class_id=2, month=m).values
        np.testing.assert_allclose(got, expected, atol=1e-7)
    by_season = frequency(mask, "season").compute()
    djf = np.isin(months, (12, 1, 2))
    np.testing.assert_allclose(
        by_season.frequency.sel(class_id=1, season="DJF").values,
        _numpy_frequency(ds.truth, 1, djf),
        atol=1e-7,
    )
    assert int(by_season.steps.sum()) == 40
    assert by_season.attrs["calendar"] == "noleap"
    assert by_season.attrs["period_start"].startswith("2001-01-01")


def test_groups_of_steps_and_years():
    time = xr.DataArray(pd.date_range("1999-12-01", periods=70, freq="D"), dims="time")
    idx, labels = group_index(time, "year")
    assert labels == (1999, 2000) and (idx == 0).sum() == 31
    idx, labels = group_index(time, 30)
    assert labels == (0, 1, 2) and (idx == 2).sum() == 10
    idx, labels = group_index(time, "season")
    assert set(idx) == {0}  # December, January, February
    with pytest.raises(ValueError, match="group by"):
        group_index(time, "week")


@pytest.mark.parametrize("suffix", [".nc", ".zarr"])
def test_frequency_file_is_cf_and_reads_back(toy, tmp_path, suffix):
    ds, _ = toy
    freq = frequency(class_mask(ds), "season")
    path = write_frequency(freq, tmp_path / f"freq{suffix}")
    back = xr.open_zarr(path, consolidated=False) if suffix == ".zarr" else xr.open_dataset(path)
    assert back.frequency.attrs["cell_methods"] == "time: mean"
    assert back.attrs["period_steps"] == 24 and "period_end" in back.attrs
    assert list(back["class"].values) == ["tropical_cyclone", "atmospheric_river"]
    np.testing.assert_allclose(
        back.frequency.sel(season="DJF").values, freq.frequency.sel(season="DJF").values
    )


def test_frequency_runs_on_a_distributed_client(toy):
    distributed = pytest.importorskip("distributed")
    ds, _ = toy
    with distributed.Client(processes=False, n_workers=1, threads_per_worker=2):
        freq = frequency(class_mask(ds).chunk({"time": 6})).compute()
    np.testing.assert_allclose(
        freq.frequency.sel(class_id=2).values, _numpy_frequency(ds.truth, 2), atol=1e-7
    )


def test_counting_tasks_join_chunks_and_never_span_two_groups():
    import dask.array as da

    from climnb.stats.groups import _group_chunks

    idx = np.array([0] * 5 + [1] * 3 + [2] * 10)
    small = da.zeros((18, 1000, 1000), dtype=np.uint8, chunks=(2, -1, -1))  # 1 MB a step: joined
    assert _group_chunks(idx, small) == (5, 3, 10)
    big = da.zeros((18, 8192, 8192), dtype=np.uint8, chunks=(2, -1, -1))  # 64 MB a step: kept
    assert _group_chunks(idx, big) == (2, 2, 1, 2, 1, 2, 2, 2, 2, 2)


# --- masks ---------------------------------------------------------------------------------


def test_mask_flags_are_read_by_meaning():
    values = np.array([[[0, 1], [1, 0]]], np.int8)
    da = xr.DataArray(
        values,
        dims=("time", "lat", "lon"),
        coords={"time": [0], "lat": [0.0, 1.0], "lon": [0.0, 1.0]},
        attrs={"flag_values": [0, 1], "flag_meanings": "background AR"},
        name="LABELS",
    )
    m = class_mask(da.to_dataset())
    assert m.values.tolist() == [[[0, 2], [2, 0]]]
    assert m.attrs["classes"] == "atmospheric_river"
    with pytest.raises(ValueError, match="flag_values"):
        class_mask(da.drop_attrs().to_dataset(), source="x.nc")


def test_probabilities_become_the_most_probable_class():
    p = np.zeros((1, 2, 2, 3), np.float32)
    p[0, 0, 0] = [0.1, 0.7, 0.2]
    p[0, 1, 1] = [0.2, 0.1, 0.7]
    p[0, 0, 1] = p[0, 1, 0] = [0.8, 0.1, 0.1]
    da = xr.DataArray(
        p,
        dims=("time", "lat", "lon", "class"),
        coords={"class": ["background", "tropical_cyclone", "atmospheric_river"]},
        name="probability",
    )
    assert class_mask(da.to_dataset()).values.tolist() == [[[1, 0], [0, 2]]]


# --- the synthetic future ------------------------------------------------------------------


def test_future_storms_are_the_same_storms_stronger():
    _, a = make_dataset(n_time=12, seed=3)
    _, b = make_dataset(n_time=12, seed=3, future=Future(storm_intensity=1.5))
    tc = a.class_id == 1
    np.testing.assert_allclose(b.psl_drop_pa[tc], 1.5 * a.psl_drop_pa[tc])
    np.testing.assert_allclose(b.max_wind[tc], np.sqrt(1.5) * a.max_wind[tc])
    assert (a.lat == b.lat).all() and (a.event_id == b.event_id).all()


def test_future_rivers_are_shifted_poleward_by_the_degrees_asked():
    a_ds, a = make_dataset(n_time=48, seed=1, n_tc=0, n_ar=3)
    b_ds, b = make_dataset(n_time=48, seed=1, n_tc=0, n_ar=3, future=Future(river_shift_deg=8))
    np.testing.assert_allclose(np.abs(b.lat) - np.abs(a.lat), 8.0)  # the generator's list

    def mean_abs_lat(ds):  # where the masks say rivers are, frequency-weighted
        f = frequency(class_mask(ds)).frequency.sel(class_id=2).compute()
        w = f * np.cos(np.radians(f.lat))
        return float((w * np.abs(f.lat)).sum() / w.sum())

    assert mean_abs_lat(b_ds) - mean_abs_lat(a_ds) == pytest.approx(8.0, abs=1.5)


def test_future_has_more_rivers_at_every_step():
    _, b = make_dataset(n_time=6, seed=0, n_ar=2, future=Future(more_rivers=3))
    per_step = b[b.class_id == 2].groupby("time").size()
    assert (per_step == 5).all()
    with pytest.raises(ValueError, match="more_rivers"):
        Future(more_rivers=-1)


# --- events --------------------------------------------------------------------------------


@pytest.mark.parametrize("seed", [0, 1])
def test_event_counts_and_lifetimes_are_the_generators(seed):
    ds, truth = make_dataset(n_time=32, seed=seed, n_tc=3, n_ar=0)
    table = event_table(event_steps(class_mask(ds), fields=ds))
    g = truth.groupby("event_id").time.agg(["min", "max"])
    lifetimes = np.sort(((g["max"] - g["min"]).dt.total_seconds() / 3600).to_numpy())
    assert len(table) == truth.event_id.nunique()
    np.testing.assert_array_equal(np.sort(table.lifetime_h.to_numpy()), lifetimes)
    first = truth.sort_values("time").drop_duplicates("event_id")
    got = table.sort_values(["start", "genesis_lat"]).genesis_lat.to_numpy()
    want = first.sort_values(["time", "lat"]).lat.to_numpy()
    np.testing.assert_allclose(got, want, atol=1.5)  # disc centroid on the grid


def test_stronger_storms_have_stronger_winds_and_lower_pressure():
    a, _ = make_dataset(n_time=12, seed=3, n_ar=0)
    b, _ = make_dataset(n_time=12, seed=3, n_ar=0, future=Future(storm_intensity=1.6))
    ta = event_table(event_steps(class_mask(a), fields=a)).set_index("track_id")
    tb = event_table(event_steps(class_mask(b), fields=b)).set_index("track_id")
    assert (tb.min_psl < ta.min_psl).all()
    assert (tb.max_wind > ta.max_wind).mean() > 0.8
    order = ["TD", "TS", "1", "2", "3", "4", "5"]
    rank = {c: i for i, c in enumerate(order)}
    assert sum(rank[c] for c in tb.category) > sum(rank[c] for c in ta.category)


def test_events_without_fields_are_unknown(toy):
    ds, _ = toy
    table = event_table(event_steps(class_mask(ds)))
    tc, ar = table.class_name == "tropical_cyclone", table.class_name == "atmospheric_river"
    assert (table.category[tc] == "unknown").all() and (table.ar_category[ar] == "unknown").all()
    assert table.max_wind.isna().all()
    out = events_to_dataset(table)
    assert out.sizes["event"] == len(table) and out.max_ivt.attrs["units"] == "kg m-1 s-1"


def test_events_from_a_trajectory_file_match_those_tracked_here(toy, tmp_path):
    from climnb.tracks import read_tracks, write_tracks

    ds, _ = toy
    mask = class_mask(ds)
    path = write_tracks(track_events(mask), tmp_path / "tracks.nc")
    here = event_table(event_steps(mask, fields=ds))
    there = event_table(event_steps(mask, read_tracks(path), fields=ds))
    pd.testing.assert_series_equal(here.max_ivt, there.max_ivt)
    pd.testing.assert_series_equal(here.min_psl, there.min_psl)


def test_saffir_simpson_bounds():
    knots = np.array([20, 34, 63.9, 64, 83, 96, 113, 137, 200]) * 0.514444
    assert list(saffir_simpson(knots)) == ["TD", "TS", "TS", "1", "2", "3", "4", "5", "5"]
    assert list(saffir_simpson([np.nan])) == ["unknown"]


def test_ralph_categories():
    ivt = [300, 300, 600, 800, 1100, 1300, 1300, 200, np.nan]
    hours = [30, 20, 30, 30, 30, 30, 60, 60, 30]
    assert list(ralph_category(ivt, hours)) == [
        "AR1",
        "none",  # weak and short
        "AR2",
        "AR3",
        "AR4",
        "AR5",
        "AR5",  # exceptional stays AR5
        "none",
        "unknown",
    ]


# --- regions and landfall ------------------------------------------------------------------


def test_land_fraction_from_the_packaged_mask():
    lat, lon = np.linspace(-90, 90, 96), np.arange(144) * 2.5
    land = land_fraction(lat, lon)
    global_land = float(land.weighted(np.cos(np.radians(land.lat))).mean())
    assert 0.26 < global_land < 0.32  # 29 % of the Earth is land
    assert float(land.sel(lat=23, lon=15, method="nearest")) == 1.0  # Sahara
    assert float(land.sel(lat=0, lon=200, method="nearest")) == 0.0  # Pacific


def test_regions_from_names_boxes_and_geojson(tmp_path):
    lat, lon = np.linspace(-90, 90, 96), np.arange(144) * 2.5
    (sw,) = parse_region("sw=30:40,-124:-111")
    rows, cols = (lat > 30) & (lat < 40), (lon > 236) & (lon < 249)
    np.testing.assert_array_equal(sw.contains(lat, lon), rows[:, None] & cols[None, :])
    ring = [[-124, 30], [-111, 30], [-111, 40], [-124, 40], [-124, 30]]
    doc = {
        "type": "FeatureCollection",
        "features": [
            {
                "type": "Feature",
                "properties": {"name": "sw"},
                "geometry": {"type": "Polygon", "coordinates": [ring]},
            }
        ],
    }
    (tmp_path / "r.geojson").write_text(json.dumps(doc))
    (geo,) = read_geojson(tmp_path / "r.geojson")
    np.testing.assert_array_equal(geo.contains(lat, lon), sw.contains(lat, lon))
    with pytest.raises(ValueError, match="covers no grid point"):
        region_masks([box("tiny", (10.1, 10.6), (20.1, 20.6))], lat, lon)
    with pytest.raises(ValueError, match="unknown region"):
        parse_region("atlantis")


def _blob_mask(steps_over_land: int, steps_at_sea: int):
    """A river-shaped blob over California for some steps and over the Pacific for others."""
    lat, lon = np.linspace(-90, 90, 96), np.arange(144) * 2.5
    n = steps_over_land + steps_at_sea
    values = np.zeros((n, lat.size, lon.size), np.uint8)
    rows = (lat > 34) & (lat < 40)
    for t in range(n):
        cols = (lon > 236) & (lon < 241) if t < steps_over_land else (lon > 200) & (lon < 205)
        values[t][np.ix_(rows, cols)] = 2
    time = pd.date_range("2001-01-01", periods=n, freq="3h")
    return xr.DataArray(
        values,
        dims=("time", "lat", "lon"),
        coords={"time": time, "lat": lat, "lon": lon},
        attrs={"flag_values": [0, 1, 2], "flag_meanings": "background tropical_cyclone ar"},
        name="labels",
    )


def test_landfall_counts_events_and_steps_over_land_in_the_region():
    mask = class_mask(_blob_mask(3, 2).to_dataset())
    steps = event_steps(mask, regions=[BUILTIN["california"], box("hawaii", (15, 25), (195, 210))])
    table = landfall_table(steps).set_index(["region", "class_name"])
    ca = table.loc[("california", "atmospheric_river")]
    assert (ca.landfalling_events, ca.landfall_steps) == (1, 3)
    assert table.loc[("hawaii", "atmospheric_river")].landfall_steps == 0  # over sea
    # the jump to the Pacific is too far for one track: a second event, which stays at sea
    assert event_table(steps).landfall_regions.tolist() == ["california", ""]


def _drawn(steps: list[list[tuple[int, tuple, tuple]]]) -> xr.DataArray:
    """A class mask on the toy grid, one list per 3-hourly step of ``(class, (lat0, lat1),
    (lon0, lon1))`` boxes (degrees, ends included)."""
    lat, lon = np.linspace(-90, 90, 96), np.arange(144) * 2.5
    values = np.zeros((len(steps), lat.size, lon.size), np.uint8)
    for t, boxes in enumerate(steps):
        for k, (la0, la1), (lo0, lo1) in boxes:
            rows = (lat >= la0) & (lat <= la1)
            cols = (lon >= lo0) & (lon <= lo1)
            values[t][np.ix_(rows, cols)] = k
    time = pd.date_range("2001-01-01", periods=len(steps), freq="3h")
    return class_mask(
        xr.DataArray(
            values,
            dims=("time", "lat", "lon"),
            coords={"time": time, "lat": lat, "lon": lon},
            attrs={"flag_values": [0, 1, 2], "flag_meanings": "background tc ar"},
            name="labels",
        ).to_dataset()
    )


_QUEENSLAND = box("queensland", (-30, -10), (138, 155))
_NORTHERN_TERRITORY = box("northern_territory", (-30, -10), (125, 138))


def _storm_at(lon: float) -> list[tuple]:
    """A storm 3 x 3 cells round (-19.9, lon): the coast of Queensland lies between 147.5
    (land) and 150 (ocean) there."""
    return [(1, (-22, -18), (lon - 2.5, lon + 2.5))]


def _landfalls(mask, regions=(_QUEENSLAND, _NORTHERN_TERRITORY)):
    steps = event_steps(mask, regions=list(regions))
    table = landfall_table(steps).set_index(["region", "class_name"])
    return steps, table


def test_a_storm_from_the_sea_onto_land_makes_one_landfall_where_it_crosses():
    track = [160.0, 157.5, 155.0, 152.5, 150.0, 147.5, 145.0, 142.5]
    steps, table = _landfalls(_drawn([_storm_at(x) for x in track]))
    assert steps.obs.track_id.nunique() == 1
    qld = table.loc[("queensland", "tropical_cyclone")]
    assert (qld.landfalling_events, qld.landfall_steps) == (1, 1)  # not every step over land
    (landfall,) = steps.landfalls.itertuples()
    assert landfall.time == pd.Timestamp("2001-01-01 15:00")  # the step that reached 147.5
    assert table.loc[("northern_territory", "tropical_cyclone")].landfalling_events == 0
    assert event_table(steps).landfall_regions.tolist() == ["queensland"]


def test_a_low_born_over_land_never_makes_landfall():
    """An inland heat low that drifts out to sea and back ashore: no landfall anywhere."""
    track = [132.5, 137.5, 142.5, 147.5, 152.5, 157.5, 152.5, 147.5, 142.5]
    steps, table = _landfalls(_drawn([_storm_at(x) for x in track]))
    assert steps.obs.track_id.nunique() == 1
    assert table.landfalling_events.sum() == 0 and steps.landfalls.empty
    assert event_table(steps).landfall_regions.tolist() == [""]


def test_a_river_lands_where_it_crosses_the_coast_not_inland():
    ocean_to_land = [[(2, (-24, -18), (130, 165))]] * 2  # crosses the coast at 147.5-150
    steps, table = _landfalls(_drawn(ocean_to_land))
    qld = table.loc[("queensland", "atmospheric_river")]
    assert (qld.landfalling_events, qld.landfall_steps) == (1, 2)
    # its land reaches the Northern Territory box too, but it crosses no coast there
    assert table.loc[("northern_territory", "atmospheric_river")].landfalling_events == 0
    inland = [[(2, (-24, -18), (125, 145))]] * 2
    steps, table = _landfalls(_drawn(inland))
    assert table.landfalling_events.sum() == 0
    born_inland = [[(2, (-24, -18), (125, 145))], [(2, (-24, -18), (125, 160))]]
    steps, table = _landfalls(_drawn(born_inland))
    assert steps.obs.track_id.nunique() == 1
    assert table.landfalling_events.sum() == 0


# --- attributed precipitation --------------------------------------------------------------


def test_attributed_precipitation_matches_numpy(toy):
    ds, _ = toy
    table = attributed_precipitation(
        class_mask(ds).chunk({"time": 7}), precipitation(ds), by="all", percentiles=(95.0,)
    )
    p, m = ds.PRECT.values.astype(float), ds.truth.values
    w = np.cos(np.radians(ds.lat.values))[None, :, None]
    q95 = np.percentile(p, 95, axis=0)
    rows = table.set_index(["class_name", "measure"]).share
    for k, name in ((1, "tropical_cyclone"), (2, "atmospheric_river")):
        total = (p * w).sum()
        assert rows[(name, "total")] == pytest.approx((p * w * (m == k)).sum() / total)
        ext = np.where(p > q95, p, 0) * w
        assert rows[(name, "above_p95")] == pytest.approx((ext * (m == k)).sum() / ext.sum())


def test_precipitation_in_other_names_and_units_gives_the_same_shares(toy):
    ds, _ = toy
    pr = ds.PRECT * 1000.0  # kg m-2 s-1, CMIP's pr
    other = ds.drop_vars("PRECT").assign(pr=pr.assign_attrs(units="kg m-2 s-1"))
    a = attributed_precipitation(class_mask(ds), precipitation(ds), by="all")
    b = attributed_precipitation(class_mask(ds), precipitation(other), by="all")
    np.testing.assert_allclose(a.share, b.share, rtol=1e-5)
    bad = ds.assign(PRECT=ds.PRECT.assign_attrs(units="K"))
    with pytest.raises(ValueError, match="x.nc: .*units"):
        precipitation(bad, source="x.nc")


# --- change between periods ----------------------------------------------------------------


def test_fdr_benjamini_hochberg():
    assert fdr_mask(np.array([0.01, 0.04, 0.03, 0.005]), 0.05).all()
    assert fdr_mask(np.array([0.01, 0.02, 0.3]), 0.05).tolist() == [True, True, False]
    assert fdr_mask(np.array([0.04, 0.045, 0.05]), 0.05).tolist() == [True, True, True]
    assert not fdr_mask(np.array([0.03, np.nan]), 0.05)[1]


@pytest.fixture(scope="module")
def planted():
    """A and B of the same climate (two seeds); B has a planted river patch at every step."""
    a, _ = make_dataset(n_time=64, seed=11, n_tc=2, n_ar=2)
    b, _ = make_dataset(n_time=64, seed=12, n_tc=2, n_ar=2)
    patch = (np.abs(b.lat - 50) < 12) & (np.abs(b.lon - 180) < 30)
    mb = class_mask(b).where(~patch, 2).astype(np.uint8).assign_attrs(class_mask(b).attrs)
    # FDR over 13,824 points can pass a patch of ~300 only if p can be below
    # 0.1 * 300 / 13824: 999 permutations give p down to 0.001
    result = compare(class_mask(a), mb, CompareConfig(block=8, n_resamples=999))
    return a, patch, result


def test_planted_change_is_found_with_its_sign_and_size(planted):
    a, patch, result = planted
    ar = result.maps.sel(class_id=2)
    expected = 1.0 - (a.truth == 2).mean("time")  # B is river at every step there
    inside = patch.values
    np.testing.assert_allclose(ar.change.values[inside], expected.values[inside], atol=1e-6)
    assert ar.significant.values[inside].mean() > 0.95
    assert (ar.ci_low.values[inside] <= expected.values[inside] + 1e-6).all()
    assert (ar.ci_high.values[inside] >= expected.values[inside] - 1e-6).all()
    assert (ar.ci_low.values[inside] > 0).mean() > 0.95
    assert ar.significant.values[~inside].mean() < 0.01


def test_same_climate_flags_few_points(planted):
    _, _, result = planted
    tc = result.maps.sel(class_id=1)
    assert float(tc.significant_local.mean()) < 0.05
    assert float(tc.significant.mean()) < 0.005


def test_future_with_more_rivers_is_a_significant_increase():
    a, _ = make_dataset(n_time=96, seed=1, n_tc=0, n_ar=2)
    b, _ = make_dataset(n_time=96, seed=11, n_tc=0, n_ar=2, future=Future(more_rivers=2))
    result = compare(class_mask(a), class_mask(b), CompareConfig(block=16, n_resamples=499))
    row = result.table.set_index(["class_name", "region"]).loc[("atmospheric_river", "global")]
    assert row.significant and row.change > 0 and row.ci_low > 0
    # twice the rivers: at most twice the area (rivers overlap), and clearly more
    assert 0.3 * row.a < row.change < 1.2 * row.a
    assert row.ci_low <= row.change <= row.ci_high


def test_compare_refuses_what_cannot_be_compared(toy):
    ds, _ = toy
    m = class_mask(ds)
    only_ar = m.assign_attrs(classes="atmospheric_river")
    with pytest.raises(ValueError, match="different classes"):
        compare(m, only_ar, names=("a.nc", "b.nc"))
    with pytest.raises(ValueError, match="b.nc: grid does not match"):
        compare(m, m.isel(lon=slice(0, None, 2)), names=("a.nc", "b.nc"))
    with pytest.raises(ValueError, match="a.nc: period of 24 steps is shorter than two"):
        compare(m, m, CompareConfig(block="year"), names=("a.nc", "b.nc"))


def test_compare_is_deterministic_for_a_seed(toy):
    ds, _ = toy
    m = class_mask(ds)
    one = compare(m, m, CompareConfig(block=4, n_resamples=99, seed=5)).table
    two = compare(m, m, CompareConfig(block=4, n_resamples=99, seed=5)).table
    pd.testing.assert_frame_equal(one, two)
    assert (one.change == 0).all() and not one.significant.any()


def test_many_resamples_are_drawn_in_small_blocks_of_points(toy):
    """Thousands of resamples over a whole grid hold a few tens of MB, not the resamples of
    thousands of points at once (a Binder session has 2 GB for everything)."""
    ds, _ = toy
    m = class_mask(ds)
    config = CompareConfig(block=4, n_resamples=4999, coarsen=2)
    compare(m, m, config)  # imports and caches outside the measurement
    tracemalloc.start()
    try:
        compare(m, m, config)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 80 * 2**20, f"{peak / 2**20:.0f} MiB"


def test_lazy_masks_are_computed_in_one_pass(toy):
    ds, _ = toy
    m = class_mask(ds).chunk({"time": 6})
    calls = []

    def read(block):  # counts the chunks the pass reads
        calls.append(block.shape[0])
        return block

    spied = m.copy(data=m.data.map_blocks(read, dtype=m.dtype))
    with dask.config.set(scheduler="sync"):
        frequency(spied, "season").compute()
    assert sorted(c for c in calls if c) == [6, 6, 6, 6]  # (0: dask probing the meta)


def test_track_summary_schema_is_reused(toy):
    """The events table keeps the tracks' names for what they share."""
    ds, _ = toy
    steps = event_steps(class_mask(ds))
    summary = track_summary(steps.obs)
    table = event_table(steps)
    np.testing.assert_array_equal(summary.lifetime_h.to_numpy(), table.lifetime_h.to_numpy())


def test_compare_in_coarser_cells_averages_the_points(toy):
    ds, _ = toy
    m = class_mask(ds)
    fine = compare(m, m, CompareConfig(block=4, n_resamples=19)).maps
    coarse = compare(m, m, CompareConfig(block=4, n_resamples=19, coarsen=2)).maps
    assert coarse.sizes["lat"] == 48 and coarse.sizes["lon"] == 72
    expected = fine.a.coarsen(lat=2, lon=2).mean()
    np.testing.assert_allclose(coarse.a.values, expected.values, atol=1e-6)


@pytest.mark.parametrize(
    "module",
    [
        "masks",
        "groups",
        "frequency",
        "regions",
        "events",
        "precip",
        "change",
        "change_tables",
        "examples",
        "workflow",
    ],
)
def test_docstring_examples_run(module):
    import doctest
    import importlib

    mod = importlib.import_module(f"climnb.stats.{module}")
    result = doctest.testmod(mod, optionflags=doctest.ELLIPSIS)
    assert result.failed == 0 and result.attempted > 0


def test_events_landfall_and_precipitation_on_a_noleap_calendar():
    ds, _ = make_dataset(n_time=8, seed=0, ivt=True)
    noleap = ds.convert_calendar("noleap")
    steps = event_steps(class_mask(noleap), fields=noleap, regions=[BUILTIN["california"]])
    same = event_steps(class_mask(ds), fields=ds, regions=[BUILTIN["california"]])
    pd.testing.assert_series_equal(event_table(steps).max_ivt, event_table(same).max_ivt)
    shares = attributed_precipitation(class_mask(noleap), precipitation(noleap), by="month")
    assert set(shares.season) == {1}
