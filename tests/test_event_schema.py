"""One event-table schema: labels, the events of a mask and tracks share names and dtypes."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import xarray as xr

from climnb.data.synthetic import make_dataset
from climnb.io.channels import CLASS_NAMES
from climnb.labels import LabelConfig, compute, label_dataset
from climnb.labels.events import events_from_mask
from climnb.labels.schema import (
    COLUMNS,
    EVENT_COLUMNS,
    MASK_EVENT_COLUMNS,
    TRACK_COLUMNS,
    conform,
)
from climnb.labels.step import _EMPTY_RIVERS, _events
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
