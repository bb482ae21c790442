"""Views of the statistics (climnb.viz.stats) and ``ds.climnb.frequency``: the objects' types,
dimensions and data, not pixels."""

from __future__ import annotations

import holoviews as hv
import numpy as np
import pytest

import climnb.accessor  # noqa: F401  (ds.climnb)
from climnb.data.synthetic import make_dataset
from climnb.stats import CompareConfig, class_mask, compare, frequency
from climnb.viz.stats import change_map, frequency_maps, stipples


@pytest.fixture(scope="module")
def toy():
    ds, _ = make_dataset(n_time=16, seed=0)
    return ds


def test_frequency_maps_side_by_side_show_the_frequency_with_coastlines(toy):
    freq = frequency(class_mask(toy)).compute()
    view = frequency_maps(freq, freq, names=("labels", "prediction"))
    assert isinstance(view, hv.Layout) and len(view) == 4
    first = view.values()[0]
    image, coast = first.values()
    assert isinstance(coast, hv.Path) and len(coast.data) > 0
    shown = image.dimension_values("frequency", flat=False)
    expected = 100 * freq.frequency.sel({"class": "tropical_cyclone"}).values
    np.testing.assert_allclose(shown, expected, atol=1e-4)


def test_change_map_stipples_exactly_the_significant_points(toy):
    a, b = class_mask(toy), class_mask(toy)
    patch = (np.abs(toy.lat - 45) < 10) & (np.abs(toy.lon - 200) < 20)
    b = b.where(~patch, 2).astype(np.uint8).assign_attrs(a.attrs)
    maps = compare(a, b, CompareConfig(block=2, n_resamples=999)).maps
    overlay = change_map(maps, "atmospheric_river")
    points = next(el for el in overlay.values() if isinstance(el, hv.Points))
    sig = maps.significant.sel({"class": "atmospheric_river"})
    assert len(points) == int(sig.sum()) > 0
    assert len(stipples(sig)) == len(points)


def test_accessor_frequency_on_the_callers_grid(toy):
    west = toy.assign_coords(lon=(toy.lon + 180) % 360 - 180).sortby("lon")
    freq = west.climnb.frequency(by="season")
    assert freq.frequency.dims == ("class", "season", "lat", "lon")
    assert float(freq.lon.min()) < 0
    expected = (west.truth == 2).mean("time")
    np.testing.assert_allclose(
        freq.frequency.sel(class_id=2, season="DJF").values, expected.values, atol=1e-7
    )
