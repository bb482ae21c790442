"""Variables where the rules decide: the names a quantity is known by, a units override of a
file's own variable, a pressure-level dimension found by its CF attributes, temperatures in
degC on levels, and the time step of a series."""

from __future__ import annotations

import numpy as np
import pytest
import xarray as xr
from test_mutation_survivors import IVTU_BY_HAND, P_HPA, _on_levels

from climnb.io.variables import (
    _level_dim,
    _override_units,
    _step_seconds,
    canonicalize,
    known_names,
)


def test_a_quantity_is_known_by_its_aliases_and_its_names_on_levels():
    names = known_names("U850")
    assert names[0] == "U850" and "u@850hPa" in names and "ua@850hPa" in names
    assert known_names("not a quantity") == ("not a quantity",)


def test_a_units_override_of_the_files_own_variable():
    ds = xr.Dataset({"foo": ("x", [1.0, 2.0], {"units": "m"})})
    notes = []
    out, by_quantity = _override_units(ds, {"foo": "km"}, notes)
    assert out.foo.attrs["units"] == "km" and by_quantity == {}
    assert notes == ["foo: units 'km' as asked"]
    assert ds.foo.attrs["units"] == "m"  # the input unchanged


def test_a_level_dimension_found_by_its_cf_attributes():
    ds = xr.Dataset(
        {"ta": (("time", "isobaric"), np.ones((1, 3)))},
        coords={"isobaric": ("isobaric", [850.0, 500.0, 200.0], {"axis": "Z", "units": "hPa"})},
    )
    assert _level_dim(ds) == "isobaric"
    assert _level_dim(ds.drop_vars("isobaric")) is None  # no coordinate: nothing to go by


def test_temperatures_in_degc_on_levels_give_the_same_transport():
    """The hand-worked profile of ``test_mutation_survivors.py`` (IVTU 264.6), T in degC."""
    ds = _on_levels("level", P_HPA, "hPa")
    celsius = ds.assign(t=(ds.t - 273.15).assign_attrs(units="degC"))
    out, _ = canonicalize(celsius)
    np.testing.assert_allclose(out.IVTU.values, IVTU_BY_HAND, rtol=1e-3)


@pytest.mark.parametrize(
    "times, seconds",
    [
        (np.array(["2000-01-01T00", "2000-01-01T01", "2000-01-01T02"], "datetime64[ns]"), 3600.0),
        (np.array(["2000-01-01T00"], "datetime64[ns]"), None),
        (np.array(["2000-01-01T00", "2000-01-01T00"], "datetime64[ns]"), None),
    ],
    ids=["hourly", "one step", "repeated"],
)
def test_the_step_of_a_series(times, seconds):
    da = xr.DataArray(np.zeros(times.size), dims="time", coords={"time": times})
    assert _step_seconds(da) == seconds
