"""One event-table schema: labels, the events of a mask and tracks share names and dtypes."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import xarray as xr

from climnb.data.synthetic import make_dataset
from climnb.labels import LabelConfig, compute, label_dataset
from climnb.labels.events import events_from_mask
from climnb.labels.schema import (
    COLUMNS,
    EVENT_COLUMNS,
    MASK_EVENT_COLUMNS,
    TRACK_COLUMNS,
    conform,
)
from climnb.tracks import read_tracks, track_events, write_tracks


@pytest.fixture(scope="module")
def toy():
    ds, _ = make_dataset(n_time=3, seed=2)
    return ds


def _check(table: pd.DataFrame, columns: tuple[str, ...]) -> None:
    assert list(table.columns) == list(columns)
    for name in columns:
        want = COLUMNS[name].dtype
        if want == "time":
            assert table[name].dtype.kind in "MO", name
        elif want == "str":
            assert table[name].map(type).eq(str).all(), name
        else:
            assert str(table[name].dtype) == want, name


def test_label_table_follows_the_schema(toy):
    _, events = compute(*label_dataset(toy, LabelConfig()))
    assert len(events) > 0
    _check(events, EVENT_COLUMNS)


def test_mask_events_follow_the_schema_and_carry_the_classes(toy):
    events = events_from_mask(toy.truth)
    _check(events, MASK_EVENT_COLUMNS)
    assert set(events.class_id) == {1, 2}
    assert (
        events.class_name == events.class_id.map({1: "tropical_cyclone", 2: "atmospheric_river"})
    ).all()
    # every truth pixel of a class is in exactly one region of that class
    for k in (1, 2):
        assert events[events.class_id == k].n_pixels.sum() == int((toy.truth == k).sum())


def test_tracks_follow_the_schema_in_memory_and_on_disk(toy, tmp_path):
    obs = track_events(toy.truth)
    _check(obs, TRACK_COLUMNS)
    back = read_tracks(write_tracks(obs, tmp_path / "t.nc"))
    _check(back, TRACK_COLUMNS)
    pd.testing.assert_frame_equal(back.drop(columns="time"), obs.drop(columns="time"))
    with xr.open_dataset(tmp_path / "t.nc") as ds:
        assert ds.width.attrs["units"] == COLUMNS["width_km"].units == "km"


def test_tracks_and_mask_events_measure_the_same_regions(toy):
    obs = track_events(toy.truth).drop(columns=["track_id", "speed_kmh"])
    events = events_from_mask(toy.truth)
    key = ["time", "class_id", "lat"]
    pd.testing.assert_frame_equal(
        obs.sort_values(key).reset_index(drop=True),
        events.sort_values(key).reset_index(drop=True),
    )


def test_an_empty_mask_gives_an_empty_table_in_the_schema(toy):
    empty = xr.zeros_like(toy.truth)
    _check(events_from_mask(empty), MASK_EVENT_COLUMNS)
    _check(track_events(empty), TRACK_COLUMNS)
    assert len(events_from_mask(empty)) == len(track_events(empty)) == 0


def test_mask_events_join_the_seam_on_a_global_grid_only():
    lat = np.linspace(-10.0, 10.0, 5)
    mask = np.zeros((1, 5, 8), np.uint8)
    mask[0, 2, [0, -1]] = 2  # a region on each edge of the longitudes

    def events(lon):
        da = xr.DataArray(mask, {"time": [np.datetime64("2000-01-01")], "lat": lat, "lon": lon})
        return events_from_mask(da)

    assert len(events(np.arange(8) * 45.0)) == 1  # global: one river across 0/360
    assert len(events(100.0 + np.arange(8) * 2.0)) == 2  # regional: two


def test_conform_orders_casts_and_fills():
    frame = pd.DataFrame({"n_pixels": [3.0], "lat": [1], "extra": ["x"]})
    out = conform(frame, ("lat", "n_pixels", "max_ivt"))
    assert list(out.columns) == ["lat", "n_pixels", "max_ivt"]
    assert out.dtypes.astype(str).tolist() == ["float64", "int64", "float64"]
    assert np.isnan(out.max_ivt.iat[0])


def test_viz_keeps_the_old_import():
    from climnb.viz.events import events_from_mask as old

    assert old is events_from_mask
