"""Class frequency where a group has a single step: a month of one step, and a point with
one valid step among missing ones, is a frequency over that one step, not missing."""

from __future__ import annotations

import numpy as np
import pandas as pd
import xarray as xr

from climnb.stats.frequency import frequency
from climnb.stats.masks import MISSING


def _mask(values, times):
    values = np.asarray(values, np.int16).reshape(len(times), 1, 2)
    return xr.DataArray(
        values,
        dims=("time", "lat", "lon"),
        coords={"time": times, "lat": [10.0], "lon": [0.0, 2.5]},
    )


def test_a_month_of_one_step_has_a_frequency():
    times = pd.to_datetime(["2000-01-01", "2000-01-02", "2000-02-01"])
    out = frequency(_mask([1, 0, 1, 1, 2, 0], times), by="month")
    storms = out.frequency.sel({"class": "tropical_cyclone"})
    assert out.steps.values.tolist() == [2, 1] + [0] * 10
    np.testing.assert_array_equal(storms.values[:2, 0, :], [[1.0, 0.5], [0.0, 0.0]])
    assert np.isnan(storms.values[2:]).all()  # months without steps
    rivers = out.frequency.sel({"class": "atmospheric_river"})
    np.testing.assert_array_equal(rivers.values[:2, 0, :], [[0.0, 0.0], [1.0, 0.0]])


def test_a_point_with_one_valid_step_has_a_frequency_over_it():
    times = pd.to_datetime(["2000-01-01", "2000-01-02"])
    out = frequency(_mask([1, MISSING, MISSING, MISSING], times), by="all")
    storms = out.frequency.sel({"class": "tropical_cyclone"}).values[0]
    assert storms[0] == 1.0 and np.isnan(storms[1])  # one valid step; none


def test_counts_without_missing_values_give_a_month_of_one_step_its_frequency():
    from climnb.stats.frequency import frequency_from_counts
    from climnb.stats.groups import class_counts

    times = pd.to_datetime(["2000-01-01", "2000-01-02", "2000-02-01"])
    mask = _mask([1, 0, 1, 1, 2, 0], times)
    counts = class_counts(mask, "month", classes=(0, 1, 2))
    out = frequency_from_counts(counts, mask, drop_group=False)
    rivers = out.frequency.sel({"class": "atmospheric_river"})
    np.testing.assert_array_equal(rivers.values[:2, 0, :], [[0.0, 0.0], [1.0, 0.0]])
