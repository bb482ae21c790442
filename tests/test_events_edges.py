"""Event statistics worked out by hand on a small regional grid over the open Pacific: a
storm's lifetime maximum wind and minimum pressure over its own pixels, a river's maximum and
area-weighted mean IVT and its Ralph category, the genesis year and season, counts, the
landfall table's zeros, tracks that do not belong to the mask, and the categories' bounds."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import xarray as xr

from climnb.stats.events import (
    EVENT_STATS_COLUMNS,
    LANDFALL_COLUMNS,
    calendar_of,
    datetime_mask,
    event_counts,
    event_steps,
    event_table,
    events_to_dataset,
    landfall_table,
    ralph_category,
    saffir_simpson,
)
from climnb.stats.regions import box
from climnb.tracks import track_events

LAT = np.arange(20.0, 50.5, 1.0)
LON = np.arange(160.0, 200.5, 1.0)
TIMES = pd.date_range("2001-12-31T18", periods=3, freq="6h")  # genesis in DJF 2001
STORM = [(5, 6), (5, 6)]  # rows, then columns (+ the step: it moves east)
RIVER = (slice(20, 23), slice(10, 31))  # 3 x 21 cells, at steps 0 and 1


def _case(times=TIMES):
    """The mask (storm at every step, river at steps 0-1) and its fields."""
    shape = (times.size, LAT.size, LON.size)
    mask = np.zeros(shape, np.uint8)
    u, v = np.full(shape, 10.0), np.zeros(shape)
    psl, ivt = np.full(shape, 100000.0), np.full(shape, 2000.0)  # strong outside the events
    for t in range(times.size):
        mask[t, 5:7, 5 + t : 7 + t] = 1
    u[:, 0, 0], psl[:, 0, 0] = 90.0, 90000.0  # stronger and deeper far from the storm
    u[1, 6, 7], v[1, 6, 7] = 30.0, 40.0  # 50 m/s (97 kt: category 3) in the storm at step 1
    psl[2, 5, 8] = 95000.0
    mask[:2][:, RIVER[0], RIVER[1]] = 2
    ivt[:2][:, RIVER[0], RIVER[1]] = 300.0
    ivt[1, 21, 20] = 600.0
    coords = {"time": times, "lat": LAT, "lon": LON}
    dims = ("time", "lat", "lon")
    da = xr.DataArray(mask, coords=coords, dims=dims, name="labels")
    fields = xr.Dataset(
        {n: (dims, a) for n, a in (("UBOT", u), ("VBOT", v), ("PSL", psl), ("IVT", ivt))},
        coords=coords,
    )
    return da, fields


def _by_class(table):
    return table.set_index("class_name")


def test_event_table_by_hand():
    mask, fields = _case()
    table = event_table(event_steps(mask, fields=fields))
    assert list(table.columns) == list(EVENT_STATS_COLUMNS)
    assert table.track_id.tolist() == [0, 1]
    tc, ar = _by_class(table).loc["tropical_cyclone"], _by_class(table).loc["atmospheric_river"]
    assert (tc.year, tc.season, tc.steps, tc.lifetime_h) == (2001, "DJF", 3, 12.0)
    assert (tc.start, tc.end) == (TIMES[0], TIMES[2])
    assert (tc.max_wind, tc.min_psl, tc.category) == (50.0, 95000.0, "3")
    assert np.isnan(tc.max_ivt) and np.isnan(tc.mean_ivt) and tc.ar_category == ""
    np.testing.assert_allclose((tc.genesis_lat, tc.genesis_lon), (25.5, 165.5), atol=0.01)
    assert (ar.steps, ar.lifetime_h, ar.max_ivt) == (2, 6.0, 600.0)
    w = np.repeat(np.cos(np.radians(LAT[RIVER[0]])), 21)
    step1 = np.full(63, 300.0)
    step1[1 * 21 + 10] = 600.0  # row 21, column 20
    np.testing.assert_allclose(ar.mean_ivt, (300.0 + np.average(step1, weights=w)) / 2)
    # 600 is rank 2; the river lasts 12 h (two 6-hourly steps), under 24 h: one down
    assert ar.ar_category == "AR1" and tc.category == "3"
    assert np.isnan(ar.max_wind) and np.isnan(ar.min_psl) and ar.category == ""
    assert table.landfall_regions.tolist() == ["", ""]


def test_the_same_events_from_other_names_of_the_fields():
    mask, fields = _case()
    want = event_table(event_steps(mask, fields=fields))
    other = fields.rename(UBOT="U850", VBOT="V850").assign(
        IVTU=fields.IVT * 0.6, IVTV=fields.IVT * 0.8
    )
    got = event_table(event_steps(mask, fields=other.drop_vars("IVT")))
    for column in ("max_wind", "min_psl", "category", "max_ivt", "mean_ivt", "ar_category"):
        pd.testing.assert_series_equal(got[column], want[column], rtol=1e-9)
    # the lowest-level wind wins over 850 hPa where the file has both
    both = fields.assign(U850=fields.UBOT * 0, V850=fields.VBOT * 0)
    assert event_table(event_steps(mask, fields=both)).max_wind.iat[0] == 50.0
    # fields without any of the variables: no intensities
    plain = event_table(event_steps(mask, fields=fields[[]].assign(TMQ=fields.PSL)))
    assert plain.max_wind.isna().all() and plain.max_ivt.isna().all()


def test_counts_per_year_and_season_and_no_event_at_all():
    mask, fields = _case()
    table = event_table(event_steps(mask, fields=fields))
    counts = event_counts(table).set_index("class_name")
    assert counts.loc["tropical_cyclone"].tolist() == [2001, 1, 12.0]
    assert event_counts(table, by="season").season.tolist() == ["DJF", "DJF"]
    with pytest.raises(ValueError, match="by must be 'year' or 'season', got 'month'"):
        event_counts(table, by="month")
    empty = event_steps(mask * 0, fields=fields)
    assert list(event_table(empty).columns) == list(EVENT_STATS_COLUMNS)
    assert event_table(empty).empty


def test_landfall_table_has_every_region_year_and_class_with_zeros():
    mask, fields = _case()
    regions = [box("sea", (20, 50), (160, 200)), box("north", (40, 50), (160, 200))]
    steps = event_steps(mask, fields=fields, regions=regions)
    assert steps.regions == ("sea", "north") and steps.landfalls.empty
    table = landfall_table(steps)
    assert list(table.columns) == list(LANDFALL_COLUMNS)
    assert len(table) == 2 * 2 * 2  # two regions, years 2001 and 2002, two classes
    assert sorted(set(table.year)) == [2001, 2002]
    assert (table.landfalling_events == 0).all() and (table.landfall_steps == 0).all()
    assert len(landfall_table(steps, classes=(1,))) == 4


def test_tracks_of_other_times_or_other_masks_are_refused():
    mask, fields = _case()
    obs = track_events(mask)
    later = obs.assign(time=obs.time + pd.Timedelta(hours=1))
    with pytest.raises(ValueError, match=r"--tracks: 5 of 5 track steps are at times mask"):
        event_steps(mask, later, fields=fields)
    moved = obs.assign(lat=obs.lat + 3.0)
    with pytest.raises(ValueError, match=r"--tracks: 5 of 5 track steps match no region of mask"):
        event_steps(mask, moved, fields=fields)
    bigger = obs.assign(area_km2=obs.area_km2 * 2)
    with pytest.raises(ValueError, match="match no region"):
        event_steps(mask, bigger, fields=fields)
    storms = obs[obs.class_id == 1]
    with pytest.raises(ValueError, match=r"--tracks: 3 of 3 track steps match no region"):
        event_steps(xr.where(mask == 1, 0, mask), storms)
    table = event_table(event_steps(mask, storms, fields=fields))
    assert table.class_name.tolist() == ["tropical_cyclone"]


def test_fields_of_another_calendar_are_refused():
    mask, fields = _case()
    noleap = fields.convert_calendar("noleap")
    with pytest.raises(ValueError, match="in the standard calendar, the fields' in the noleap"):
        event_steps(mask, fields=noleap)
    same = event_steps(mask.convert_calendar("noleap"), fields=noleap)
    assert calendar_of(same.obs.time.to_numpy()) == "noleap"
    table = event_table(same)
    assert table.lifetime_h.tolist() == [12.0, 6.0] and table.year.tolist() == [2001, 2001]
    assert table.ar_category.tolist() == ["", "AR1"]
    assert calendar_of(mask.time) == calendar_of([]) == "standard"
    assert datetime_mask(mask.convert_calendar("noleap")).time.dtype.kind == "M"


def test_events_dataset_units_text_and_attributes():
    mask, fields = _case()
    table = event_table(event_steps(mask, fields=fields))
    ds = events_to_dataset(table, attrs={"title": "mine", "period": "2001"})
    assert ds.sizes["event"] == 2 and ds.attrs["title"] == "mine" and ds.attrs["period"] == "2001"
    assert ds.attrs["Conventions"] == "CF-1.8"
    assert ds.min_psl.attrs["units"] == "Pa" and ds.genesis_lon.attrs["units"] == "degrees_east"
    assert (
        ds.category.values.tolist() == ["3", ""]
        and ds.class_name.values.tolist()[0] == "tropical_cyclone"
    )
    assert "units" not in ds.steps.attrs


def test_ralph_and_saffir_simpson_at_their_bounds():
    ivt = [250.0, 249.9, 300.0, 300.0, 300.0, 300.0, 1250.0, 1249.0, 1249.0]
    hours = [30.0, 30.0, 48.0, 48.1, 24.0, 23.9, 30.0, 48.1, 20.0]
    expected = ["AR1", "none", "AR1", "AR2", "AR1", "none", "AR5", "AR5", "AR3"]
    assert list(ralph_category(ivt, hours)) == expected
    kt = 0.514444
    winds = np.array([33.9, 34.0, 82.9, 83.0, 95.9, 96.0, 112.9, 113.0, 136.9, 137.0]) * kt
    assert list(saffir_simpson(winds)) == ["TD", "TS", "1", "2", "2", "3", "3", "4", "4", "5"]


@pytest.mark.parametrize(
    ("start", "season"),
    [("2001-03-01", "MAM"), ("2001-05-31T18", "MAM"), ("2001-06-01", "JJA"), ("2001-11-30", "SON")],
)
def test_the_season_of_genesis(start, season):
    mask, fields = _case(pd.date_range(start, periods=3, freq="6h"))
    assert event_table(event_steps(mask, fields=fields)).season.tolist() == [season] * 2


def _river(freq: str, n_steps: int, river_steps: int):
    """A river of IVT 600 (rank 2) at the first ``river_steps`` of ``n_steps``."""
    times = pd.date_range("2001-01-01", periods=n_steps, freq=freq)
    mask = np.zeros((n_steps, LAT.size, LON.size), np.uint8)
    mask[:river_steps][:, RIVER[0], RIVER[1]] = 2
    coords = {"time": times, "lat": LAT, "lon": LON}
    da = xr.DataArray(mask, coords=coords, dims=("time", "lat", "lon"), name="labels")
    fields = xr.Dataset({"IVT": (da.dims, np.where(mask == 2, 600.0, 0.0))}, coords=coords)
    return event_table(event_steps(da, fields=fields))


@pytest.mark.parametrize(
    ("freq", "n_steps", "river_steps", "category"),
    [("12h", 2, 2, "AR2"), ("6h", 5, 3, "AR1"), ("6h", 5, 5, "AR2"), ("1D", 3, 3, "AR3")],
    ids=["24h", "18h", "30h", "72h"],
)
def test_ralph_duration_is_the_time_covered_by_the_steps(freq, n_steps, river_steps, category):
    """The duration counts the last step's own length (the median step): two 12-hourly steps
    last 24 h (no step down), three 6-hourly ones 18 h (one down), three daily ones 72 h."""
    assert _river(freq, n_steps, river_steps).ar_category.tolist() == [category]


def test_the_wind_of_one_level_needs_both_components():
    mask, fields = _case()
    want = event_table(event_steps(mask, fields=fields)).max_wind.iat[0]
    lower = fields.rename(UBOT="U850", VBOT="V850").assign(UBOT=fields.UBOT * 0)
    assert event_table(event_steps(mask, fields=lower)).max_wind.iat[0] == want  # no VBOT


def test_a_storm_that_stays_put_makes_no_landfall():
    """Its path between two steps has no length (the cosine of the angle can round above 1)."""
    times = pd.date_range("2001-08-01", periods=3, freq="6h")
    mask = np.zeros((3, LAT.size, LON.size), np.uint8)
    mask[:, 1:3, 1:3] = 1  # centred near 21.5 N, 161.5 E, at every step
    da = xr.DataArray(mask, coords={"time": times, "lat": LAT, "lon": LON},
                      dims=("time", "lat", "lon"))  # fmt: skip
    steps = event_steps(da, regions=[box("sea", (20, 50), (160, 200))])
    assert steps.obs.track_id.nunique() == 1 and steps.landfalls.empty
