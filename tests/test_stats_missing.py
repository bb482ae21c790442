"""Missing values are missing in ``climnb stats``: NaN rain is never no rain, a NaN in a float
mask never background; shares and frequencies are over the valid values, the output says how
many were left out, and more than 5 % of them is refused with a line naming the variable and
the steps."""

from __future__ import annotations

import contextlib
import io

import numpy as np
import pandas as pd
import pytest
import xarray as xr

from climnb.cli import main
from climnb.data.synthetic import make_dataset
from climnb.stats.frequency import frequency
from climnb.stats.masks import class_mask
from climnb.stats.precip import attributed_precipitation


@pytest.fixture(scope="module")
def toy():
    ds, _ = make_dataset(n_time=8, seed=5)
    return ds


def _run(argv):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = main(argv)
    return status, out.getvalue(), err.getvalue()


def _holes(ds: xr.Dataset, var: str, steps=(1, 2), rows=slice(40, 43)) -> xr.Dataset:
    """``var`` (as float) with NaN in a band of latitudes at ``steps``."""
    ds = ds.copy()
    values = ds[var].values.astype(np.float64)
    for t in steps:
        values[t, rows, :] = np.nan
    ds[var] = (ds[var].dims, values, ds[var].attrs)
    return ds


def test_nan_rain_is_left_out_not_taken_as_no_rain(toy):
    ds = _holes(toy, "PRECT")
    table = attributed_precipitation(class_mask(ds), ds.PRECT, by="all")
    mean = table[(table.measure == "total") & (table.class_name == "tropical_cyclone")]
    w = np.broadcast_to(np.cos(np.radians(ds.lat.values))[:, None], ds.PRECT.shape[1:])
    p = ds.PRECT.values
    ok = np.isfinite(p)
    valid = (np.where(ok, p, 0) * w).sum() / (ok * w).sum() * 86400e3
    as_zero = (np.nan_to_num(p) * w).sum() / (w.sum() * p.shape[0]) * 86400e3
    assert mean.mean_mm_day.iloc[0] == pytest.approx(valid, rel=1e-6)
    assert abs(valid - as_zero) > 1e-3 * valid  # the two differ: the test can tell
    assert "2 of 8 steps" in table.attrs["missing"] and "PRECT" in table.attrs["missing"]


def test_a_float_masks_nan_is_not_background(toy):
    ds = _holes(toy, "truth", steps=(0, 3, 5))
    mask = class_mask(ds)
    freq = frequency(mask).frequency.sel(class_id=1).values
    truth = ds.truth.values
    expected = np.nansum(truth == 1, axis=0) / np.isfinite(truth).sum(axis=0)
    np.testing.assert_allclose(freq, expected, rtol=1e-6)
    assert not np.allclose(freq, (np.nan_to_num(truth) == 1).mean(axis=0))


def test_stats_says_how_many_values_were_left_out(toy, tmp_path):
    path = tmp_path / "holes.nc"
    _holes(_holes(toy, "truth", steps=(2,)), "PRECT", steps=(4,)).to_netcdf(path)
    status, out, err = _run(
        ["stats", str(path), "--out", str(tmp_path / "f.nc"), "--precip", str(tmp_path / "p.csv")]
    )
    assert status == 0, err
    assert "truth has 432 missing values (NaN) in 1 of 8 steps" in out
    assert "PRECT has" in out and "left out" in out
    assert pd.read_csv(tmp_path / "p.csv").mean_mm_day.notna().all()


@pytest.mark.parametrize("var,option", [("PRECT", "--precip"), ("truth", "--out")])
def test_more_than_5_percent_missing_is_refused_naming_variable_and_steps(
    toy, tmp_path, var, option
):
    path = tmp_path / "holes.nc"
    _holes(toy, var, steps=(1, 2, 6), rows=slice(0, 30)).to_netcdf(path)
    target = tmp_path / ("x.csv" if option == "--precip" else "x.nc")
    status, out, err = _run(["stats", str(path), option, str(target)])
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert status == 2 and len(lines) == 1, err
    assert str(path) in lines[0] and var in lines[0] and "steps 1, 2, 6" in lines[0]
    assert "more than 5 %" in lines[0]
    assert not target.exists()
