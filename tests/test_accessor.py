"""``ds.climnb``: results on the caller's grid (names, order, -180..180) with CF attributes."""

from __future__ import annotations

import dask.array as dsa
import numpy as np
import pytest
import xarray as xr

import climnb.accessor  # noqa: F401  (registers ds.climnb)
from climnb.labels import compute, label_dataset


@pytest.fixture(scope="module")
def data(toy):
    return toy[0].isel(time=slice(0, 3))


@pytest.fixture(scope="module")
def flipped(data):
    """The same data as another model would write it: latitude/longitude, north first,
    -180..180."""
    out = data.isel(lat=slice(None, None, -1)).roll(lon=72, roll_coords=True)
    out = out.assign_coords(lon=(out.lon + 180) % 360 - 180)
    return out.rename(lat="latitude", lon="longitude")


def _canonical(da):
    da = da.rename(latitude="lat", longitude="lon")
    return da.assign_coords(lon=da.lon % 360).sortby(["lat", "lon"])


def test_label_on_the_callers_grid(data, flipped):
    labels = flipped.climnb.label()
    assert isinstance(labels.data, dsa.Array), "lazy"
    assert labels.dims == ("time", "latitude", "longitude")
    np.testing.assert_array_equal(labels.latitude, flipped.latitude)
    np.testing.assert_array_equal(labels.longitude, flipped.longitude)
    assert labels.latitude.attrs["units"] == "degrees_north"
    assert labels.attrs["flag_meanings"] == "background tropical_cyclone atmospheric_river"
    reference, _ = compute(*label_dataset(data))
    xr.testing.assert_equal(
        _canonical(labels).drop_attrs(), reference.drop_attrs().rename("labels")
    )


def test_tracks_from_a_mask_on_the_callers_grid(data, flipped):
    tracks = flipped.climnb.tracks("truth")
    direct = data.climnb.tracks(data.truth)
    assert tracks.attrs["featureType"] == "trajectory"
    xr.testing.assert_allclose(tracks, direct)


def test_explore_without_a_network_compares_truth_and_heuristic_labels(flipped):
    import holoviews as hv

    layout = flipped.climnb.explore()
    assert isinstance(layout, hv.Layout)
    assert [d.name for d in layout.DynamicMap.I.kdims] == ["channel", "time"]
