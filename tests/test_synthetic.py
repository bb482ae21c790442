"""The synthetic CAM5-like data: structure, physics, embedded events and their truth."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import xarray as xr
from scipy import ndimage

from climnb.data.synthetic import EARTH_RADIUS_KM, make_dataset
from climnb.io.channels import CHANNEL_NAMES, CHANNELS, channel

KM_PER_DEG = np.radians(1.0) * EARTH_RADIUS_KM


def _nearest(ds, lat, lon):
    i = int(np.abs(ds.lat.values - lat).argmin())
    j = int(np.abs(((ds.lon.values - lon + 180) % 360) - 180).argmin())
    return i, j


def _local(ds, row, radius_km):
    """Fields around a storm: arrays on a lat/lon box and east/north offsets in km."""
    half = radius_km / KM_PER_DEG
    sub = ds.sel(time=row.time).sel(lat=slice(row.lat - half, row.lat + half))
    dlon = (sub.lon - row.lon + 180) % 360 - 180
    sub = sub.isel(lon=np.flatnonzero(np.abs(dlon.values) <= half / np.cos(np.radians(row.lat))))
    dlon = (sub.lon - row.lon + 180) % 360 - 180
    x = dlon * KM_PER_DEG * np.cos(np.radians(sub.lat))
    y = (sub.lat - row.lat) * KM_PER_DEG
    return sub, x.transpose("lat", "lon"), y.broadcast_like(x).transpose("lat", "lon")


@pytest.fixture(scope="module")
def storms(toy):
    return toy[1][toy[1].class_name == "tropical_cyclone"]


@pytest.fixture(scope="module")
def rivers(toy):
    return toy[1][toy[1].class_name == "atmospheric_river"]


# --- structure --------------------------------------------------------------------------------


def test_variables_dims_dtypes_and_units(toy):
    ds, _ = toy
    assert list(ds.data_vars) == [*CHANNEL_NAMES, "truth"]
    for c in CHANNELS:
        da = ds[c.name]
        assert da.dims == ("time", "lat", "lon")
        assert da.dtype == np.float32
        assert da.attrs["units"] == c.units and da.attrs["long_name"] == c.long_name
        assert np.isfinite(da.values).all(), c.name
    assert ds.truth.dtype == np.uint8
    assert set(np.unique(ds.truth.values)) == {0, 1, 2}
    assert ds.truth.attrs["flag_meanings"] == "background tropical_cyclone atmospheric_river"


def test_coordinates_are_cf_and_ordered(toy):
    ds, _ = toy
    assert ds.sizes == {"time": 8, "lat": 96, "lon": 144}
    lat, lon = ds.lat.values, ds.lon.values
    assert lat[0] == -90.0 and lat[-1] == 90.0 and np.all(np.diff(lat) > 0)
    assert lon[0] == 0.0 and lon[-1] < 360.0 and np.allclose(np.diff(lon), 2.5)
    assert ds.lat.attrs["units"] == "degrees_north" and ds.lon.attrs["units"] == "degrees_east"
    assert (np.diff(ds.time.values) == np.timedelta64(3, "h")).all()
    assert ds.attrs["Conventions"].startswith("CF")


def test_full_size_grid():
    ds, events = make_dataset(n_time=1, n_lat=768, n_lon=1152, seed=2)
    assert ds.TMQ.shape == (1, 768, 1152)
    assert 0.001 < float((ds.truth == 1).mean()) < 0.02
    assert 0.003 < float((ds.truth == 2).mean()) < 0.05
    assert len(events) == 6


def test_channel_lookup():
    assert channel("PRECT").units == "m s-1"
    with pytest.raises(KeyError, match="unknown channel 'TMP'"):
        channel("TMP")


# --- determinism and variety ------------------------------------------------------------------


def test_same_seed_same_data(toy):
    ds, events = make_dataset(n_time=8, seed=11)
    xr.testing.assert_identical(ds, toy[0])
    pd.testing.assert_frame_equal(events, toy[1])


def test_different_seeds_and_steps_differ(toy):
    ds, _ = toy
    other, _ = make_dataset(n_time=8, seed=12)
    assert not np.allclose(ds.TMQ.values, other.TMQ.values)
    anomaly = ds.PSL - ds.PSL.mean("lon")
    first, last = anomaly.isel(time=0).values.ravel(), anomaly.isel(time=-1).values.ravel()
    assert np.corrcoef(first, last)[0, 1] < 0.95  # the weather evolves


# --- physically plausible background ----------------------------------------------------------


def test_magnitudes_and_structure(toy):
    ds, _ = toy
    zonal = ds.mean(["time", "lon"])
    tropics, polar = zonal.sel(lat=slice(-10, 10)), zonal.sel(lat=slice(60, 90))
    assert 100_500 < float(ds.PSL.mean()) < 102_500
    assert float(tropics.TMQ.mean()) > 3 * float(polar.TMQ.mean())
    assert float(tropics.QREFHT.mean()) > 3 * float(polar.QREFHT.mean())
    assert float(tropics.TS.mean()) > float(polar.TS.mean()) + 30
    # temperature falls with height everywhere
    assert (ds.T200 < ds.T500).all() and (ds.T500 < ds.TREFHT).all()
    assert (ds.TREFHT <= ds.TS).all()
    # westerlies in mid-latitudes of both hemispheres, easterly trades at the equator
    for band in (slice(-55, -35), slice(35, 55)):
        assert float(zonal.U850.sel(lat=band).mean()) > 3.0
    assert float(tropics.U850.mean()) < 0.0
    assert (ds.PRECT >= 0).all() and (ds.PS <= ds.PSL + 1).all()


def test_geopotential_follows_temperature(toy):
    ds, _ = toy
    thickness = (ds.Z200 - ds.Z1000).values.ravel()
    t_mean = ((ds.TREFHT + 2 * ds.T500 + ds.T200) / 4).values.ravel()
    assert np.corrcoef(thickness, t_mean)[0, 1] > 0.99
    assert 10_000 < thickness.min() and thickness.max() < 13_000
    z1000 = ds.Z1000.values.ravel()
    assert np.corrcoef(z1000, ds.PSL.values.ravel())[0, 1] > 0.99  # low pressure, low height


# --- tropical cyclones ------------------------------------------------------------------------


def test_storm_catalogue_ranges(storms):
    assert len(storms) == 3 * 8
    assert storms.lat.abs().between(5, 35).all()
    assert (storms.lat > 0).any() and (storms.lat < 0).any(), "storms in both hemispheres"
    assert storms.psl_drop_pa.between(1000, 8000).all()
    assert storms.radius_km.between(300, 800).all()
    moved = storms.groupby("event_id")[["lat", "lon"]].agg(lambda s: s.max() - s.min())
    assert (moved.max(axis=1) > 0.5).any(), "some storms move between steps"


def test_storms_are_where_the_catalogue_says(toy, storms):
    ds, _ = toy
    for row in storms.itertuples():
        i, j = _nearest(ds, row.lat, row.lon)
        assert ds.truth.sel(time=row.time).values[i, j] == 1, row


def test_storm_physics_matches_truth(toy, storms):
    ds, _ = toy
    for row in storms.itertuples():
        sub, x, y = _local(ds, row, 3 * row.radius_km)
        r = np.hypot(x, y)
        inside = sub.truth == 1
        # the pressure minimum of the neighbourhood lies inside the storm's mask
        psl = sub.PSL.values
        assert inside.values.ravel()[psl.argmin()], row
        ring = (r > 2.5 * row.radius_km).values
        drop = psl[ring].mean() - psl.min()
        assert 0.5 * row.psl_drop_pa < drop < 1.5 * row.psl_drop_pa + 500, row
        # warm core aloft
        warm = ((sub.T200 + sub.T500) / 2).values
        core = (r <= max(0.3 * row.radius_km, float(r.min()))).values
        assert warm[core].mean() > warm[ring].mean() + 0.8, row
        # moist and rainy inside the mask
        assert float(sub.TMQ.where(inside).mean()) > float(sub.TMQ.where(~inside).mean()) + 10
        # cyclonic: anticlockwise (positive angular momentum) in the north, clockwise in the south
        near = (r < row.radius_km).values
        spin = (x * sub.V850 - y * sub.U850).values[near].sum()
        assert np.sign(spin) == np.sign(row.lat), row
        speed = np.hypot(sub.U850, sub.V850).values[near]
        assert speed.max() > 15.0


# --- atmospheric rivers -----------------------------------------------------------------------


def test_river_catalogue_ranges(rivers):
    assert rivers.length_km.between(2000, 6000).all()
    assert (rivers.width_km < 1000).all()
    assert (rivers.length_km / rivers.width_km >= 2).all()


def test_rivers_are_long_narrow_moist_midlatitude(toy, rivers):
    ds, _ = toy
    lat = np.abs(ds.lat.values)[:, None]
    for t in range(ds.sizes["time"]):
        step = ds.isel(time=t)
        inside = step.truth.values == 2
        assert inside.any()
        around = ndimage.binary_dilation(inside, iterations=3) & ~inside & (step.truth.values == 0)
        assert step.TMQ.values[inside].mean() > step.TMQ.values[around].mean() + 8
        speed = np.hypot(step.U850.values, step.V850.values)
        assert speed[inside].mean() > speed[around].mean() + 5
        band = np.broadcast_to((lat >= 25) & (lat <= 65), inside.shape)
        assert band[inside].mean() > 0.8, "rivers mostly at 25-65 degrees"
    for row in rivers.itertuples():
        i, j = _nearest(ds, row.lat, row.lon)
        window = ds.truth.sel(time=row.time).values[max(i - 1, 0) : i + 2]
        assert (np.take(window, [j - 1, j, (j + 1) % 144], axis=1) == 2).any(), row


def test_some_rivers_cross_the_seam(toy, rivers):
    ds, _ = toy
    crossing = rivers[rivers.crosses_seam.astype(bool)]
    assert len(crossing) > 0
    for t in crossing.time.unique():
        truth = ds.truth.sel(time=t).values
        rows_west, rows_east = np.flatnonzero(truth[:, 0] == 2), np.flatnonzero(truth[:, -1] == 2)
        assert len(np.intersect1d(rows_west, rows_east)) > 0, "river continues across 0/360"


def test_cyclone_wins_where_events_overlap():
    ds, events = make_dataset(n_time=12, n_tc=6, n_ar=6, seed=5)
    for row in events[events.class_id == 1].itertuples():
        sub, x, y = _local(ds, row, row.radius_km)
        disc = (np.hypot(x, y) < 0.9 * row.radius_km).values
        assert (sub.truth.values[disc] == 1).all()


# --- argument validation ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"n_time": 0}, "n_time must be a positive integer"),
        ({"n_lat": -96}, "n_lat must be a positive integer"),
        ({"n_lon": 14.5}, "n_lon must be a positive integer"),
        ({"n_tc": -1}, "n_tc must be a non-negative integer"),
        ({"n_ar": -2}, "n_ar must be a non-negative integer"),
        ({"n_lat": 8, "n_lon": 12}, "too small"),
        ({"n_lat": 32, "n_lon": 48}, "too coarse for tropical cyclones"),
        ({"n_lat": 48, "n_lon": 72, "n_tc": 0}, "too coarse for atmospheric rivers"),
        ({"n_tc": 60}, "cannot place 60 non-overlapping"),
        ({"tc_radius_km": (500, 400)}, "tc_radius_km"),
        ({"moving_fraction": 1.5}, "moving_fraction"),
    ],
    ids=[
        "no-time",
        "negative-lat",
        "float-lon",
        "negative-tc",
        "negative-ar",
        "tiny-grid",
        "coarse-for-tc",
        "coarse-for-ar",
        "too-many-storms",
        "radius-order",
        "fraction",
    ],
)
def test_bad_arguments_raise(kwargs, message):
    with pytest.raises(ValueError, match=message):
        make_dataset(**kwargs)


def test_no_events_is_allowed():
    ds, events = make_dataset(n_time=2, n_tc=0, n_ar=0, n_lat=32, n_lon=48)
    assert (ds.truth == 0).all() and events.empty
