"""Variables where the rules decide: the names a quantity is known by, a units override of a
file's own variable, a pressure-level dimension found by its CF attributes, temperatures in
degC on levels, and the time step of a series."""

from __future__ import annotations

import numpy as np
import pytest
import xarray as xr
from test_mutation_survivors import IVTU_BY_HAND, P_HPA, _on_levels

from climnb.io.variables import canonicalize, known_names


def test_a_quantity_is_known_by_its_aliases_and_its_names_on_levels():
    names = known_names("U850")
    assert names[0] == "U850" and "u@850hPa" in names and "ua@850hPa" in names
    assert known_names("not a quantity") == ("not a quantity",)


def test_a_units_override_of_the_files_own_variable():
    ds = xr.Dataset({"foo": ("x", [1.0, 2.0], {"units": "m"})})
    out, notes = canonicalize(ds, units={"foo": "km"})
    assert out.foo.attrs["units"] == "km"
    assert notes == ["foo: units 'km' as asked"]  # and no quantity of climnb's given units
    assert ds.foo.attrs["units"] == "m"  # the input unchanged


def test_a_level_dimension_found_by_its_cf_attributes():
    ds = xr.Dataset(
        {"ta": (("time", "isobaric"), [[1.0, 2.0, 3.0]], {"units": "K"})},
        coords={"isobaric": ("isobaric", [850.0, 500.0, 200.0], {"axis": "Z", "units": "hPa"})},
    )
    out, _ = canonicalize(ds)
    assert (out.T500.item(), out.T200.item()) == (2.0, 3.0)  # picked along "isobaric"
    out, _ = canonicalize(ds.drop_vars("isobaric"))  # no coordinate: nothing to go by
    assert not {"T500", "T200"} & set(out.data_vars) and "ta" in out


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
        (np.array(["2000-01-01T00", "2000-01-01T03", "2000-01-01T06"], "datetime64[ns]"), 10800.0),
        (np.array(["2000-01-01T00"], "datetime64[ns]"), None),
        (np.array(["2000-01-01T00", "2000-01-01T00"], "datetime64[ns]"), None),
    ],
    ids=["hourly", "3-hourly", "one step", "repeated"],
)
def test_the_step_of_a_series(times, seconds):
    """An amount (mm) is made a rate over the series' time step; without one (a single or
    repeated time) over ERA5's hour, which the note says."""
    ds = xr.Dataset(
        {"PRECT": ("time", np.full(times.size, 3.6), {"units": "mm"})}, coords={"time": times}
    )
    out, [note] = canonicalize(ds)
    np.testing.assert_allclose(out.PRECT.values, 3.6e-3 / (seconds or 3600.0))
    if seconds:
        assert f"the file's time step, {seconds / 3600:g} h)" in note
    else:
        assert "1 h assumed (ERA5's)" in note
