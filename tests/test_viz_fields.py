"""Channel maps and mask overlays are HoloViews objects holding the right data."""

from __future__ import annotations

import holoviews as hv
import numpy as np
import pytest

from climnb.viz.fields import channel_grid, channel_map, channel_over_time, mask_overlay


def test_channel_map_holds_the_field(toy):
    ds, _ = toy
    img = channel_map(ds, "PSL", time=2)
    assert isinstance(img, hv.Image)
    assert [d.name for d in img.kdims] == ["lon", "lat"]
    assert img.vdims[0].name == "PSL" and img.vdims[0].unit == "Pa"
    np.testing.assert_array_equal(
        img.dimension_values("PSL", flat=False), ds.PSL.isel(time=2).values
    )


def test_mask_overlay_is_transparent_on_background(toy):
    ds, _ = toy
    values = mask_overlay(ds.truth, time=0).dimension_values("class", flat=False)
    truth = ds.truth.isel(time=0).values
    assert np.isnan(values[truth == 0]).all()
    np.testing.assert_array_equal(values[truth > 0], truth[truth > 0])


def test_channel_grid_overlays_mask_on_each_channel(toy):
    ds, _ = toy
    layout = channel_grid(ds, ["TMQ", "U850"], time=1)
    assert isinstance(layout, hv.Layout) and len(layout) == 2
    for panel in layout:
        assert isinstance(panel, hv.Overlay) and len(panel) == 2
    bare = channel_grid(ds, ["TMQ"], mask=None)
    assert isinstance(bare[0] if len(bare) else None, hv.Image)


def test_channel_over_time_has_a_frame_per_step(toy):
    ds, _ = toy
    hmap = channel_over_time(ds.isel(time=slice(0, 3)), "TMQ")
    assert isinstance(hmap, hv.HoloMap) and hmap.kdims[0].name == "time"
    assert len(hmap) == 3


def test_unknown_channel_names_what_exists(toy):
    ds, _ = toy
    with pytest.raises(KeyError, match="'TMP' is not in the dataset; it has TMQ, U850"):
        channel_map(ds, "TMP")
