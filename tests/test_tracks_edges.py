"""The tracks' linker where its rules decide: the default speed limits just under and just over,
the overlap threshold, a missed step, one-to-one matching, what a class mask may hold, times
that repeat or go backwards, a model calendar, and the trajectory file's attributes."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import xarray as xr

from climnb.labels.sphere import great_circle_km
from climnb.tracks import (
    SUMMARY_COLUMNS,
    TrackConfig,
    check_mask,
    check_times,
    default_max_gap,
    read_tracks,
    track_events,
    track_summary,
    tracks_period,
    tracks_to_dataset,
    write_tracks,
)

#: A regional grid 0.5 degrees apart (not global: no seam), 20-50N, 0-30E.
LAT = np.arange(20.0, 50.01, 0.5)
LON = np.arange(0.0, 30.0, 0.5)
KM_PER_ROW = great_circle_km(0.0, 0.0, 0.5, 0.0)  # 55.6 km north per row


def _mask(steps, hours=3.0, times=None):
    """A (time, lat, lon) mask; ``steps``: per step a list of (class, rows, cols)."""
    data = np.zeros((len(steps), LAT.size, LON.size), np.uint8)
    for t, step in enumerate(steps):
        for k, rows, cols in step:
            data[t][np.ix_(np.atleast_1d(rows), np.atleast_1d(cols))] = k
    if times is None:
        times = pd.date_range("2001-01-01", periods=len(steps), freq=pd.Timedelta(hours=hours))
    return xr.DataArray(
        data, coords={"time": times, "lat": LAT, "lon": LON}, dims=("time", "lat", "lon")
    )


def _ids(mask, config=None):
    return track_events(mask, config).sort_values(["time", "class_id"]).track_id.tolist()


@pytest.mark.parametrize(
    ("k", "rows", "linked"),
    [(1, 4, True), (1, 5, False), (2, 8, True), (2, 9, False)],
    ids=["storm-222km", "storm-278km", "river-445km", "river-500km"],
)
def test_default_speed_limits_just_under_and_just_over(k, rows, linked):
    """In 3 h a storm may move 240 km (80 km/h), a river's centre 450 km (150 km/h)."""
    mask = _mask([[(k, 10, 10)], [(k, 10 + rows, 10)]])
    assert _ids(mask) == ([0, 0] if linked else [0, 1])


def test_speed_is_distance_over_hours_and_the_limit_is_inclusive():
    mask = _mask([[(1, 10, 10)], [(1, 11, 10)], [(1, 13, 10)]], hours=1.0)
    obs = track_events(mask, TrackConfig(max_speed_kmh=((1, 1000.0),)))
    assert obs.track_id.tolist() == [0, 0, 0]
    np.testing.assert_allclose(obs.speed_kmh.iloc[1:], [KM_PER_ROW, 2 * KM_PER_ROW], rtol=1e-6)
    summary = track_summary(obs).loc[0]
    assert summary.lifetime_h == 2.0 and summary.steps == 3
    np.testing.assert_allclose(summary.distance_km, 3 * KM_PER_ROW, rtol=1e-6)
    np.testing.assert_allclose(summary.mean_speed_kmh, 1.5 * KM_PER_ROW, rtol=1e-6)
    np.testing.assert_allclose(summary.max_speed_kmh, 2 * KM_PER_ROW, rtol=1e-6)
    # the step of exactly the limit is linked: the limit is the distance the track moved
    step = great_circle_km(obs.lat.iat[0], obs.lon.iat[0], obs.lat.values[1:], obs.lon.values[1:])
    exact = TrackConfig(max_speed_kmh=((1, float(step[0])),))
    assert _ids(mask.isel(time=[0, 1]), exact) == [0, 0]


def test_one_step_track_has_no_speed_and_no_distance():
    obs = track_events(_mask([[(1, 10, 10)]]))
    row = track_summary(obs).loc[0]
    assert row.distance_km == 0.0 and row.lifetime_h == 0.0
    assert np.isnan(row.mean_speed_kmh) and np.isnan(obs.speed_kmh.iat[0])


@pytest.mark.parametrize(
    ("shared", "linked"), [(2, True), (1, False)], ids=["10-percent", "5-percent"]
)
def test_overlap_links_far_centres_from_a_tenth_of_the_smaller_region(shared, linked):
    """A river band of 20 pixels, then one of 20 further east sharing ``shared`` pixels: the
    centres lie 5 degrees of longitude apart, too far for the (tiny) speed limit."""
    before = [(2, [30, 31], np.arange(0, 10))]
    if shared == 2:
        after = [(2, [30, 31], np.arange(9, 19))]
    else:  # the same band, its second row one column further east
        after = [(2, 30, np.arange(9, 19)), (2, 31, np.arange(10, 20))]
    config = TrackConfig(max_speed_kmh=((2, 0.001),))
    obs = track_events(_mask([before, after]), config)
    assert obs.n_pixels.tolist() == [20, 20]
    assert obs.track_id.nunique() == (1 if linked else 2)


def test_the_first_region_of_a_step_can_continue_a_track_by_overlap():
    """Region 0 of the later step (the first in label order) overlaps; region 1 does not."""
    config = TrackConfig(max_speed_kmh=((2, 0.001),))
    steps = [[(2, [30, 31], np.arange(0, 10))], [(2, [30, 31], np.arange(5, 15)), (2, 50, 50)]]
    obs = track_events(_mask(steps), config)
    later = obs[obs.time == obs.time.max()].sort_values("n_pixels")
    assert later.track_id.tolist() == [1, 0]


def test_one_to_one_a_track_continues_once_and_a_region_once():
    # two storms side by side become one: the nearer continues, the other ends
    steps = [[(1, 10, 10), (1, 10, 14)], [(1, 10, 11)]]
    obs = track_events(_mask(steps))
    assert obs.track_id.tolist() == [0, 0, 1]
    # one storm becomes two: the nearer part continues it, the other starts a track
    steps = [[(1, 10, 10)], [(1, 10, 11), (1, 10, 13)]]
    obs = track_events(_mask(steps))
    later = obs[obs.time == obs.time.max()].sort_values("lon")
    assert later.track_id.tolist() == [0, 1]


def test_a_missed_step_ends_the_track_unless_a_gap_is_allowed():
    steps = [[(1, 10, 10)], [(1, 11, 10)], [], [(1, 12, 10)], [], [], [(1, 13, 10)]]
    assert _ids(_mask(steps)) == [0, 0, 1, 2]
    assert _ids(_mask(steps), TrackConfig(max_gap_steps=1)) == [0, 0, 0, 1]
    assert _ids(_mask(steps), TrackConfig(max_gap_steps=2)) == [0, 0, 0, 0]


def test_a_river_speed_limit_is_taken_for_classes_not_named():
    config = TrackConfig(max_speed_kmh=((1, 10.0), (2, 1000.0)))
    assert config.speed(1) == 10.0 and config.speed(2) == 1000.0 and config.speed(7) == 1000.0
    mask = _mask([[(1, 10, 10), (2, 40, 10)], [(1, 14, 10), (2, 52, 10)]])
    assert _ids(mask, config) == [0, 1, 2, 1]


def test_small_regions_are_ignored_when_asked():
    mask = _mask([[(1, 10, 10), (1, [20, 21], [20, 21])]])
    assert len(track_events(mask)) == 2
    assert track_events(mask, TrackConfig(min_pixels=4)).n_pixels.tolist() == [4]
    assert track_events(mask, TrackConfig(min_pixels=5)).empty


def test_what_a_class_mask_may_hold():
    mask = _mask([[(1, 10, 10), (2, 30, [1, 2, 3])]])
    check_mask(mask)
    check_mask(mask.astype(float))
    check_mask(mask.astype(bool))
    check_mask(mask.isel(time=slice(0, 0)))  # no steps: nothing to refuse
    with pytest.raises(ValueError, match=r"holds 0.5 \(values 0..1.5\); a mask holds"):
        check_mask((mask * 0.5 + xr.where(mask == 2, 0.5, 0.0)).rename("m"))
    for bad, values in ((3, "0..3"), (-1, "-1..2")):
        with pytest.raises(
            ValueError, match=f"not a class mask of climnb's classes: values {values}"
        ):
            check_mask(xr.where(mask == 1, bad, mask.astype(int)))
    with pytest.raises(ValueError, match="is <U1, not a class mask"):
        check_mask(xr.DataArray(np.array(["a"]), name="names"))


def test_times_that_repeat_or_go_backwards_are_refused():
    t = pd.to_datetime(["2001-01-01T00", "2001-01-01T06", "2001-01-01T03", "2001-01-01T09"])
    check_times(list(t[[0, 2, 1, 3]]))
    with pytest.raises(ValueError, match=r"times go backwards at step 2 \(2001-01-01 06:00:00"):
        check_times(list(t))
    with pytest.raises(ValueError, match=r"is repeated \(steps 0 and 2\)"):
        check_times(list(t[[0, 2, 0]]))


def test_tracks_on_a_noleap_calendar_across_the_end_of_february(tmp_path):
    times = xr.date_range("2001-02-28T18", periods=3, freq="3h", calendar="noleap", use_cftime=True)
    obs = track_events(_mask([[(1, 10, 10)], [(1, 11, 10)], [(1, 12, 10)]], times=times))
    assert obs.track_id.tolist() == [0, 0, 0]
    np.testing.assert_allclose(obs.speed_kmh.iloc[1:], KM_PER_ROW / 3.0, rtol=1e-6)
    summary = track_summary(obs)
    assert summary.lifetime_h.tolist() == [6.0]
    np.testing.assert_allclose(summary.mean_speed_kmh, KM_PER_ROW / 3.0, rtol=1e-6)
    back = read_tracks(write_tracks(obs, tmp_path / "t.nc"))
    assert [t.calendar for t in back.time] == ["noleap"] * 3
    assert [str(t) for t in back.time] == [str(t) for t in times]


def test_summary_of_no_tracks_and_the_trajectory_files_attributes(tmp_path):
    empty = track_summary(track_events(_mask([[]])))
    assert list(empty.columns) == list(SUMMARY_COLUMNS) and empty.index.name == "track_id"
    obs = track_events(_mask([[(1, 10, 10)]]))
    path = write_tracks(obs, tmp_path / "one.nc", attrs={"time_coverage_start": "2001-01-01"})
    assert path == tmp_path / "one.nc"
    assert tracks_period(path) == ("2001-01-01", None)
    both = {"time_coverage_start": "2001-01-01", "time_coverage_end": "2001-12-31"}
    assert tracks_period(write_tracks(obs, tmp_path / "two.nc", attrs=both)) == tuple(both.values())
    ds = tracks_to_dataset(obs, attrs={"title": "mine"})
    assert ds.attrs["title"] == "mine" and ds.attrs["featureType"] == "trajectory"
    assert ds.class_id.attrs["flag_values"].tolist() == [1, 2]
    assert ds.class_id.attrs["flag_meanings"] == "tropical_cyclone atmospheric_river"
    assert ds.area.attrs["units"] == "km2" and ds.speed.attrs["units"] == "km h-1"
    xr.Dataset({"a": ("x", [1])}, attrs={"featureType": "trajectory"}).to_netcdf(tmp_path / "x.nc")
    with pytest.raises(ValueError, match="not a CF trajectory file"):
        read_tracks(tmp_path / "x.nc")


@pytest.mark.parametrize(
    ("hours", "steps", "gap_h", "expected"),
    [
        (3.0, 4, 12, 4),
        (5.0, 2, 12, 2),
        (1.0, 3, 3, 3),
        (6.0, 1, 12, 0),
        (3.0, 4, None, 0),
        (-3.0, 2, 12, 0),
    ],
    ids=["3h-12h", "5h-floor", "1h-steps", "one-step", "no-attribute", "backwards"],
)
def test_default_gap_is_the_labellers_storm_gap_in_steps(hours, steps, gap_h, expected):
    start = pd.Timestamp("2001-01-02")
    times = [start + pd.Timedelta(hours=hours * k) for k in range(steps)]
    mask = _mask([[]] * steps, times=times)
    if gap_h is not None:
        mask.attrs["storm_max_gap_h"] = gap_h
    assert default_max_gap(mask) == expected


def test_default_gap_without_a_time_axis_or_with_a_repeated_time():
    mask = _mask([[]], hours=3.0).isel(time=0, drop=True)
    mask.attrs["storm_max_gap_h"] = 12
    assert default_max_gap(mask) == 0
    twice = _mask([[], []], times=pd.to_datetime(["2001-01-01", "2001-01-01"]))
    twice.attrs["storm_max_gap_h"] = 12
    assert default_max_gap(twice) == 0  # the tracks then refuse the repeated time


# the labeller's stitched cyclone tracks (its event table's ``storm_track``)


def _storms(mask, centres):
    """A labels' event table: (step, row, col, stitched track) of each storm centre."""
    return pd.DataFrame(
        [
            {"time": mask.time.values[t], "class_id": 1, "lat": float(mask.lat[r]),
             "lon": float(mask.lon[c]), "storm_track": k}
            for t, r, c, k in centres
        ]
    )  # fmt: skip


def test_stitched_centres_are_matched_at_their_own_time():
    """A storm moves east and another forms where it was: the stitched tracks, not the
    overlap, say which continues it (centres of another step never count)."""
    mask = _mask([[(1, [10, 11], [10, 11])], [(1, [10, 11], [10, 11]), (1, [10, 11], [14, 15])]])
    assert _ids(mask) == [0, 0, 1]  # by overlap: the newcomer continues
    storms = _storms(mask, [(0, 10, 10, 0), (1, 10, 14, 0), (1, 10, 10, 1)])
    obs = track_events(mask, storms=storms)
    later = obs[obs.time == obs.time.max()].sort_values("lon")
    assert later.track_id.tolist() == [1, 0]
    as_text = storms.assign(time=storms.time.astype(str))  # the event table read from CSV
    assert track_events(mask, storms=as_text).track_id.tolist() == obs.track_id.tolist()


def test_stitched_centres_on_a_model_calendar_and_across_the_seam():
    """A storm just east of the seam jumps far (linked only by its stitched track) while a
    new one forms where it was, on a 360-day calendar (30 February)."""
    lat, lon = np.linspace(-90, 90, 46), np.arange(72) * 5.0
    times = xr.date_range("2001-02-30", periods=2, freq="6h", calendar="360_day", use_cftime=True)
    data = np.zeros((2, lat.size, lon.size), np.uint8)
    data[:, 28:30, 0:2] = 1  # at 0-5 E, at both steps
    data[1, 28:30, 30:32] = 1  # far away
    mask = xr.DataArray(data, coords={"time": times, "lat": lat, "lon": lon},
                        dims=("time", "lat", "lon"))  # fmt: skip
    assert track_events(mask).track_id.tolist() == [0, 0, 1]  # by overlap
    storms = pd.DataFrame(
        {"time": [str(times[0]), str(times[1]), str(times[1])], "class_id": 1,
         "lat": lat[28], "lon": [358.5, 150.0, 0.0], "storm_track": [3, 3, 4]}
    )  # fmt: skip  # the first centre west of the seam, its nearest cell at 0 E
    obs = track_events(mask, storms=storms)
    later = obs[obs.time == obs.time.max()].sort_values("lon")
    assert later.track_id.tolist() == [1, 0]  # the far one continues, the newcomer is new


def test_stitched_centres_never_link_rivers():
    mask = _mask([[(2, [40, 41], np.arange(0, 20))], [(2, [40, 41], np.arange(40, 60))]])
    storms = _storms(mask, [(0, 40, 5, 7), (1, 40, 45, 7)])  # on the rivers' cells
    assert track_events(mask, storms=storms).track_id.nunique() == 2


@pytest.mark.parametrize("hours", [1.0, 0.5], ids=["1h", "30min"])
def test_mean_speed_of_a_track_an_hour_or_less_long(hours):
    fast = TrackConfig(max_speed_kmh=((1, 1000.0),))
    obs = track_events(_mask([[(1, 10, 10)], [(1, 11, 10)]], hours=hours), fast)
    row = track_summary(obs).loc[0]
    assert row.lifetime_h == hours
    np.testing.assert_allclose(row.mean_speed_kmh, KM_PER_ROW / hours, rtol=1e-6)
