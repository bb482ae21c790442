"""Change of events and attributed precipitation between two periods (climnb.stats.change_tables):
planted changes of the synthetic future are found with their sign and size, two runs of the same
climate are not flagged, and what cannot be compared is refused."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import xarray as xr

from climnb.data.synthetic import Future, make_dataset
from climnb.stats import BUILTIN, CompareConfig, box, class_mask, precipitation
from climnb.stats.change_tables import (
    CHANGE_COLUMNS,
    _years_per_step,
    change_text,
    compare_events,
    compare_precip,
    ratio_change,
)

CONFIG = CompareConfig(block=8, n_resamples=199, seed=3)
REGIONS = [BUILTIN["global"], BUILTIN["us_west_coast"]]


def _row(table: pd.DataFrame, quantity: str, class_name: str, region: str = "global"):
    return table.set_index(["quantity", "class_name", "region"]).loc[(quantity, class_name, region)]


@pytest.fixture(scope="module")
def climates():
    """Today (seed 1), a future with more rivers (seed 2) and today again (seed 3)."""
    common = dict(n_time=64, n_tc=2, n_ar=2, ivt=True)
    today, truth_today = make_dataset(seed=1, **common)
    future, truth_future = make_dataset(seed=2, future=Future(more_rivers=3), **common)
    again, _ = make_dataset(seed=3, **common)
    return today, future, again, truth_today, truth_future


@pytest.fixture(scope="module")
def event_changes(climates):
    today, future, again, *_ = climates
    out = {}
    for name, other in (("future", future), ("same", again)):
        out[name] = compare_events(
            class_mask(today), class_mask(other), CONFIG, fields=(today, other), regions=REGIONS
        )
    return out


def test_ratio_change_of_known_blocks():
    rng = np.random.default_rng(0)
    ones = np.ones((6, 1))
    same = ratio_change(2 * ones, ones, 2 * ones, ones, CONFIG, rng)
    assert same["change"][0] == 0 and same["p_value"][0] == 1.0
    assert same["ci_low"][0] == same["ci_high"][0] == 0
    # B's blocks all exceed A's: the largest possible split, p = 1/(n+1) up to ties
    a = np.arange(6.0)[:, None]
    shifted = ratio_change(a, ones, a + 10, ones, CONFIG, rng)
    assert shifted["change"][0] == pytest.approx(10.0)
    assert shifted["p_value"][0] < 0.05
    assert shifted["ci_low"][0] <= 10.0 <= shifted["ci_high"][0]
    # a ratio, not a mean of ratios: 3 events in one block of two years, none in another
    r = ratio_change([[3.0], [0.0]], [[2.0], [1.0]], [[1.0], [1.0]], [[1.0], [1.0]], CONFIG, rng)
    assert r["a"][0] == pytest.approx(1.0) and r["b"][0] == pytest.approx(1.0)
    # no events in either period: an undefined mean intensity gives NaN, never "significant"
    nan = ratio_change(np.zeros((3, 1)), np.zeros((3, 1)), ones[:3], ones[:3], CONFIG, rng)
    assert np.isnan(nan["change"][0]) and np.isnan(nan["p_value"][0])


def test_more_rivers_are_significantly_more_river_events(climates, event_changes):
    _, _, _, truth_today, truth_future = climates
    table = event_changes["future"]
    assert list(table.columns) == list(CHANGE_COLUMNS)
    ar = _row(table, "events_per_year", "atmospheric_river")
    assert ar.change > 0 and ar.significant and ar.ci_low > 0
    # the generator draws 5 rivers per step instead of 2: 2.5 times the events it lists
    planted = 1.5 * ar.a
    assert ar.ci_low <= planted <= ar.ci_high
    assert ar.b / ar.a == pytest.approx(
        truth_future[truth_future.class_id == 2].event_id.nunique()
        / truth_today[truth_today.class_id == 2].event_id.nunique(),
        rel=0.25,
    )
    landfalls = _row(table, "landfalls_per_year", "atmospheric_river", "global")
    assert landfalls.change > 0


def test_same_climate_changes_no_event_statistic_significantly(event_changes):
    table = event_changes["same"]
    assert not table.significant_fdr.any()
    for k in ("tropical_cyclone", "atmospheric_river"):
        assert not _row(table, "events_per_year", k).significant


def test_same_climate_changes_no_precipitation_share_significantly():
    """Two runs of 160 steps in blocks of 16: the toy's rain varies slowly (storms live up to
    15 steps, the background is persistent), so shorter blocks would be correlated."""
    common = dict(n_time=160, n_tc=2, n_ar=2)
    one, _ = make_dataset(seed=1, **common)
    two, _ = make_dataset(seed=3, **common)
    table = compare_precip(
        class_mask(one),
        precipitation(one),
        class_mask(two),
        precipitation(two),
        CompareConfig(block=16, n_resamples=199),
        regions=REGIONS,
    )
    assert not table.significant_fdr.any()
    assert table.significant.mean() <= 0.15


def test_stronger_storms_are_the_same_storms_with_stronger_winds():
    common = dict(n_time=64, seed=5, n_tc=3, n_ar=1)
    today, _ = make_dataset(**common)
    future, _ = make_dataset(future=Future(storm_intensity=1.5), **common)
    table = compare_events(class_mask(today), class_mask(future), CONFIG, fields=(today, future))
    count = _row(table, "events_per_year", "tropical_cyclone")
    assert count.change == 0 and not count.significant
    wind = _row(table, "mean_max_wind", "tropical_cyclone")
    assert wind.significant and wind.ci_low > 0
    # pressure drops 1.5 times deeper: gradient winds about sqrt(1.5) times stronger
    assert 1.1 < wind.b / wind.a < 1.4
    psl = _row(table, "mean_min_psl", "tropical_cyclone")
    assert psl.change < 0 and psl.significant


def test_more_rivers_carry_a_larger_share_of_the_rain(climates):
    today, future, *_ = climates
    table = compare_precip(
        class_mask(today),
        precipitation(today),
        class_mask(future),
        precipitation(future),
        CONFIG,
        regions=REGIONS,
    )
    share = _row(table, "share_of_total", "atmospheric_river")
    assert share.change > 0 and share.significant and share.ci_low > 0
    assert 0 <= share.a < share.b <= 1
    assert set(table.quantity) == {
        "mean_mm_day",
        "share_of_total",
        "share_of_above_p95",
        "share_of_above_p99",
    }
    assert set(table.region) == {"global", "us_west_coast"}
    text = change_text(table)
    assert "share_of_total %" in text and "FDR" in text


def test_extremes_of_both_periods_use_the_same_pooled_thresholds(climates):
    """B equal to A with all rain doubled: the same shares of the total, twice the rate; above
    the pooled percentiles, most exceedances are B's."""
    today, *_ = climates
    m = class_mask(today)
    rain = precipitation(today)
    table = compare_precip(m, rain, m, 2 * rain, CONFIG)
    total = _row(table, "share_of_total", "atmospheric_river")
    assert total.change == pytest.approx(0, abs=1e-12)
    rate = _row(table, "mean_mm_day", "all")
    assert rate.b == pytest.approx(2 * rate.a) and rate.significant


def test_what_cannot_be_compared_is_refused(climates):
    today, future, *_ = climates
    m = class_mask(today)
    with pytest.raises(ValueError, match="a.nc: period of 64 steps is shorter than two"):
        compare_events(m, class_mask(future), CompareConfig(block="year"), names=("a.nc", "b"))
    with pytest.raises(ValueError, match="different classes"):
        compare_events(m, m.assign_attrs(classes="atmospheric_river"), names=("a", "b.nc"))
    with pytest.raises(ValueError, match="b.nc: grid does not match"):
        compare_precip(
            m,
            precipitation(today),
            m.isel(lon=slice(0, None, 2)),
            precipitation(today).isel(lon=slice(0, None, 2)),
            CONFIG,
            names=("a.nc", "b.nc"),
        )
    with pytest.raises(ValueError, match="covers no grid point"):
        compare_events(m, m, CONFIG, regions=[box("dot", (10.1, 10.6), (20.1, 20.6))])


def test_years_per_step_follow_the_calendar():
    noleap = xr.date_range("2000-01-01", periods=16, freq="3h", calendar="noleap", use_cftime=True)
    standard = pd.date_range("2000-01-01", periods=16, freq="6h")
    assert _years_per_step(xr.DataArray(noleap, dims="time")) == pytest.approx(0.125 / 365)
    assert _years_per_step(xr.DataArray(standard, dims="time")) == pytest.approx(0.25 / 365.2425)
