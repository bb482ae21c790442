"""Tracks: the linker against the synthetic truth's event ids, hand-made masks for the seam,
splits and far jumps, and the CF trajectory file written and read back."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import xarray as xr

from climnb.labels.sphere import great_circle_km
from climnb.tracks import (
    OBS_COLUMNS,
    TrackConfig,
    read_tracks,
    track_events,
    track_summary,
    tracks_to_dataset,
    write_tracks,
)


@pytest.fixture(scope="module")
def tracked(toy):
    ds, truth = toy
    return ds, truth, track_events(ds.truth)


def _nearest_event(obs, truth):
    """The truth event nearest to each tracked region of the same class and step."""
    m = obs.merge(truth[["time", "class_id", "event_id", "lat", "lon"]], on=["time", "class_id"])
    m["d"] = great_circle_km(m.lat_x, m.lon_x, m.lat_y, m.lon_y)
    return m.loc[m.groupby(["track_id", "time"]).d.idxmin()]


def test_tracks_follow_the_synthetic_events(tracked):
    ds, truth, obs = tracked
    assert list(obs.columns) == list(OBS_COLUMNS)
    best = _nearest_event(obs, truth)
    # every truth event is followed by exactly one track (rivers that touch form one region,
    # so a river track may carry a second river after a merge; storms never touch)
    assert best.groupby("event_id").track_id.nunique().eq(1).all()
    storms = best[best.class_id == 1]
    assert storms.groupby("track_id").event_id.nunique().eq(1).all()
    assert storms.event_id.nunique() == truth[truth.class_id == 1].event_id.nunique()
    seam = truth[truth.crosses_seam.fillna(False).astype(bool)].event_id.unique()
    assert len(seam) and best[best.event_id.isin(seam)].track_id.nunique() == len(seam)


def test_storm_speeds_match_the_truth(tracked):
    ds, truth, obs = tracked
    summary = track_summary(obs)
    best = _nearest_event(obs, truth)
    for event_id, ev in truth[truth.class_id == 1].groupby("event_id"):
        if len(ev) < 3:
            continue
        track = best[best.event_id == event_id].track_id.iloc[0]
        km = great_circle_km(
            ev.lat.values[:-1], ev.lon.values[:-1], ev.lat.values[1:], ev.lon.values[1:]
        )
        hours = (ev.time.iloc[-1] - ev.time.iloc[0]).total_seconds() / 3600
        row = summary.loc[track]
        assert row.lifetime_h == hours and row.steps == len(ev)
        # centroids of masks on a 1.9 x 2.5 degree grid: within one grid cell per track
        assert abs(row.distance_km - km.sum()) < 300, (event_id, row.distance_km, km.sum())


def _mask(boxes, n_lat=46, n_lon=72):
    """A (time, lat, lon) mask from per-step lists of (class, lat rows, lon columns)."""
    lat = np.linspace(-90, 90, n_lat)
    lon = np.arange(n_lon) * 360.0 / n_lon
    data = np.zeros((len(boxes), n_lat, n_lon), np.uint8)
    for t, step in enumerate(boxes):
        for k, rows, cols in step:
            data[t][np.ix_(rows, cols)] = k
    time = pd.date_range("2001-01-01", periods=len(boxes), freq="3h")
    return xr.DataArray(
        data, coords={"time": time, "lat": lat, "lon": lon}, dims=("time", "lat", "lon")
    )


def test_a_storm_crossing_the_seam_keeps_its_id():
    rows = np.arange(28, 31)
    cols = [[69, 70, 71], [70, 71, 0], [71, 0, 1], [0, 1, 2]]  # moves east through 0/360
    obs = track_events(_mask([[(1, rows, c)] for c in cols]))
    assert obs.track_id.nunique() == 1 and len(obs) == 4
    # 5 degrees of longitude in 3 h along the storm's latitude
    lat = obs.lat.iloc[1:].to_numpy()
    np.testing.assert_allclose(obs.speed_kmh.iloc[1:], great_circle_km(lat, 0.0, lat, 5.0) / 3)


def test_far_jumps_and_other_classes_start_new_tracks():
    rows = np.arange(28, 31)
    steps = [
        [(1, rows, [10, 11])],
        [(1, rows, [40, 41])],  # 75 degrees away: too fast for a storm
        [(2, rows, [40, 41])],  # same place, other class
    ]
    obs = track_events(_mask(steps))
    assert obs.track_id.tolist() == [0, 1, 2]
    assert obs.speed_kmh.isna().all()


def test_a_split_continues_with_the_larger_part():
    rows = np.arange(20, 26)
    steps = [
        [(2, rows, np.arange(10, 30))],
        [(2, rows, np.arange(10, 25)), (2, rows, np.arange(27, 30))],
    ]
    obs = track_events(_mask(steps), TrackConfig(max_speed_kmh=((2, 1.0),)))
    at1 = obs[obs.time == obs.time.max()].sort_values("n_pixels")
    assert at1.track_id.tolist() == [1, 0]  # the small part starts track 1


def _centres(mask, rows_cols_tracks):
    """A labels' event table: one storm centre per (step, row, col, stitched track)."""
    return pd.DataFrame(
        [
            {
                "time": mask.time.values[t],
                "class_id": 1,
                "lat": float(mask.lat[r]),
                "lon": float(mask.lon[c]),
                "storm_track": k,
            }
            for t, r, c, k in rows_cols_tracks
        ]
    )


def test_cyclones_follow_the_labellers_stitched_tracks():
    rows = np.arange(28, 31)
    # a storm fills while another forms beside it: their masks overlap at step 1
    mask = _mask([[(1, rows, [10, 11, 12])], [(1, rows, [12, 13, 14])], [(1, rows, [14, 15])]])
    assert track_events(mask).track_id.nunique() == 1  # by overlap: one track
    storms = _centres(mask, [(0, 29, 11, 0), (1, 29, 13, 1), (2, 29, 15, 1)])
    obs = track_events(mask, storms=storms)
    assert obs.track_id.tolist() == [0, 1, 1]
    # one stitched track across a jump the overlap and speed rules would not link
    far = _mask([[(1, rows, [10, 11])], [(1, rows, [40, 41])]])
    assert track_events(far).track_id.nunique() == 2
    linked = track_events(far, storms=_centres(far, [(0, 29, 10, 3), (1, 29, 40, 3)]))
    assert linked.track_id.nunique() == 1
    # regions without a centre (e.g. a prediction's speckle) link as before
    assert track_events(mask, storms=storms.iloc[:0]).track_id.nunique() == 1


def test_trajectory_file_round_trip(tracked, tmp_path):
    ds, truth, obs = tracked
    path = write_tracks(obs, tmp_path / "tracks.nc")
    with xr.open_dataset(path) as f:
        assert f.attrs["featureType"] == "trajectory"
        assert f.trajectory.attrs["cf_role"] == "trajectory_id"
        assert f.row_size.attrs["sample_dimension"] == "obs"
        assert int(f.row_size.sum()) == f.sizes["obs"] == len(obs)
        assert f.lat.attrs["units"] == "degrees_north"
    back = read_tracks(path)
    pd.testing.assert_series_equal(back.track_id, obs.track_id.astype(back.track_id.dtype))
    np.testing.assert_allclose(back.lat, obs.lat)
    assert (back.time.values == obs.time.values).all()
    assert back.time.dtype == obs.time.dtype == "datetime64[us]"  # NetCDF decodes to ns
    assert tracks_to_dataset(obs.iloc[:0]).sizes["trajectory"] == 0
    xr.Dataset({"a": ("x", [1])}).to_netcdf(tmp_path / "plain.nc")
    with pytest.raises(ValueError, match="not a CF trajectory file"):
        read_tracks(tmp_path / "plain.nc")


def test_tracks_command(toy, tmp_path, capsys):
    from climnb.cli import main

    ds, _ = toy
    src = tmp_path / "labels.zarr"
    ds[["truth"]].chunk({"time": 4}).to_zarr(src, zarr_format=3, consolidated=False)
    out = tmp_path / "tracks.nc"
    assert main(["tracks", str(src), "--out", str(out), "--csv", str(tmp_path / "t.csv")]) == 0
    assert "tracks over 8 steps" in capsys.readouterr().out
    expected = track_events(ds.truth)
    back = read_tracks(out)
    assert len(back) == len(expected) and back.track_id.nunique() == expected.track_id.nunique()
    assert len(pd.read_csv(tmp_path / "t.csv")) == len(expected)
    assert main(["tracks", str(src), "--out", str(out), "--variable", "nope"]) == 2
    assert "no class mask nope" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("gap", "tracks"), [(0, [0, 0, 1]), (1, [0, 0, 0])], ids=["no-gap", "gap-1"]
)
def test_tracks_command_bridges_a_missed_step_with_max_gap(tmp_path, capsys, gap, tracks):
    from climnb.cli import main

    rows = np.arange(28, 31)
    # a storm at steps 0 and 1, missed at step 2, back at step 3 one column further east
    mask = _mask([[(1, rows, [10, 11])], [(1, rows, [11, 12])], [], [(1, rows, [12, 13])]])
    src = tmp_path / "labels.nc"
    mask.to_dataset(name="labels").to_netcdf(src)
    out, csv = tmp_path / "tracks.nc", tmp_path / "tracks.csv"
    argv = ["tracks", str(src), "--out", str(out), "--csv", str(csv), "--max-gap", str(gap)]
    assert main(argv) == 0
    assert f"{len(set(tracks))} tracks over 4 steps" in capsys.readouterr().out
    assert read_tracks(out).track_id.tolist() == tracks
    assert pd.read_csv(csv).track_id.tolist() == tracks
    if gap:  # the speed over the gap: one column (5 degrees) in 6 hours
        lat = read_tracks(out).lat.iat[2]
        expected = great_circle_km(lat, 57.5, lat, 62.5) / 6.0
        np.testing.assert_allclose(read_tracks(out).speed_kmh.iat[2], expected)


def test_tracks_command_refuses_a_negative_max_gap(tmp_path, capsys):
    from climnb.cli import main

    src = tmp_path / "labels.nc"
    _mask([[], []]).to_dataset(name="labels").to_netcdf(src)
    argv = ["tracks", str(src), "--out", str(tmp_path / "t.nc"), "--max-gap", "-1"]
    assert main(argv) == 2
    assert capsys.readouterr().err.strip() == (
        "climnb tracks: error: --max-gap must be 0 or more steps, got -1"
    )
