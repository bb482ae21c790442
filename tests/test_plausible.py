"""Physical plausibility after units (label, stats) and accumulation periods from the file's
own time step."""

from __future__ import annotations

import contextlib
import io

import numpy as np
import pytest
import xarray as xr

from climnb.cli import main
from climnb.data.synthetic import make_dataset
from climnb.io.netcdf import normalize
from climnb.io.plausible import RANGES, check_plausible


@pytest.fixture(scope="module")
def toy():
    ds, _ = make_dataset(n_time=4, seed=2)
    return ds


def _run(argv):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = main(argv)
    lines = [ln for ln in err.getvalue().splitlines() if ln.startswith("climnb ")]
    return status, lines


def test_the_toy_fields_are_plausible(toy):
    check_plausible(toy, source="toy")
    assert set(RANGES) <= set(toy.data_vars) | {"IVT"}


@pytest.mark.parametrize(
    "units,var",
    [("PSL=hPa", "PSL"), ("TMQ=m", "TMQ")],
)
def test_label_refuses_units_that_give_implausible_fields(toy, tmp_path, units, var):
    path = tmp_path / "f.nc"
    toy.to_netcdf(path)
    status, lines = _run(
        ["label", str(path), "--out", str(tmp_path / "l.nc"), "--units", units, "--no-progress"]
    )
    assert status == 2 and len(lines) == 1, lines
    assert str(path) in lines[0] and var in lines[0] and f"--units {var}=UNITS" in lines[0]
    assert "plausible" in lines[0]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["f.nc"]


def test_rename_onto_a_variable_the_file_has_is_refused(toy, tmp_path):
    path = tmp_path / "f.nc"
    toy.to_netcdf(path)
    status, lines = _run(
        ["label", str(path), "--out", str(tmp_path / "l.nc"), "--rename", "TMQ=PSL"]
    )
    assert status == 2 and "--rename TMQ=PSL" in lines[0] and "has a variable PSL" in lines[0]


def test_stats_refuses_mm_per_day_labelled_m_per_s(toy, tmp_path):
    ds = toy.copy()
    ds["PRECT"] = ds.PRECT * 86400e3  # mm/day values, the attribute left at m s-1
    path = tmp_path / "f.nc"
    ds.to_netcdf(path)
    status, lines = _run(["stats", str(path), "--precip", str(tmp_path / "p.csv")])
    assert status == 2 and "PRECT" in lines[0] and "0..2000 mm/day" in lines[0], lines
    assert "--units PRECT=UNITS" in lines[0]


def test_an_accumulation_is_over_the_files_time_step(toy):
    """3-hourly amounts in kg m-2 are rates over 3 h (not ERA5's 1 h: 3x too high)."""
    ds = toy[["PRECT"]].copy()
    amount = ds.PRECT * 1000.0 * 3 * 3600  # kg m-2 over each 3-hour step
    ds["PRECT"] = amount.assign_attrs(units="kg m-2")
    ds = ds.assign_coords(time=xr.date_range("2000-01-01", periods=4, freq="3h"))
    rate = normalize(ds, required=["PRECT"]).PRECT
    np.testing.assert_allclose(rate.values, toy.PRECT.values, rtol=1e-5)
    hourly = ds.assign_coords(time=xr.date_range("2000-01-01", periods=4, freq="1h"))
    rate = normalize(hourly, required=["PRECT"]).PRECT
    np.testing.assert_allclose(rate.values, 3 * toy.PRECT.values, rtol=1e-5)
