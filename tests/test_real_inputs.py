"""Files as they come: ERA5, MERRA-2, CAM5 and generic naming, units, grids, labelled as they are.

The fixtures are synthetic fields (with a known truth) dressed as each source writes them
(:mod:`climnb.data.lookalike`), written to NetCDF; each is labelled through the command line and the
API, and the file must be unchanged afterwards.
"""

from __future__ import annotations

import hashlib

import numpy as np
import pytest
import xarray as xr

from climnb.cli import main
from climnb.data.lookalike import dress
from climnb.data.synthetic import make_dataset
from climnb.io.files import open_fields
from climnb.io.netcdf import normalize
from climnb.io.variables import canonicalize
from climnb.labels import compute, label_dataset
from climnb.labels.scores import iou


@pytest.fixture(scope="module")
def fields():
    ds, _ = make_dataset(n_time=3, seed=201, ivt=True)
    return ds


def _digest(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _label(ds, **kwargs):
    return compute(*label_dataset(ds, **kwargs), scheduler="sync")


def _write(ds, path):
    ds.drop_vars("truth").to_netcdf(path)
    return path


@pytest.mark.parametrize(
    "source,classes,truth_iou",
    [
        ("era5", "tropical_cyclone atmospheric_river", 0.8),
        # no T200: storms from pressure and vorticity, the warm-core check skipped
        ("merra2", "tropical_cyclone atmospheric_river", 0.8),
        ("cam5", "tropical_cyclone atmospheric_river", 0.6),
        ("ivt", "atmospheric_river", 0.8),
        ("tmq", "atmospheric_river", 0.3),
    ],
)
def test_each_source_is_labelled_as_it_comes(tmp_path, capsys, fields, source, classes, truth_iou):
    dressed = dress(fields, source)
    src = _write(dressed, tmp_path / f"{source}.nc")
    before = _digest(src)
    out = tmp_path / "labels.nc"
    assert main(["label", str(src), "--out", str(out), "--no-progress"]) == 0
    assert _digest(src) == before  # the input is never changed
    printed = capsys.readouterr().out
    with xr.open_dataset(out) as written, xr.open_dataset(src) as original:
        labels = written.labels
        assert labels.attrs["classes"] == classes
        # on the input's own grid: its coordinate names, values and order
        for dim in labels.dims[1:]:
            np.testing.assert_array_equal(labels[dim].values, original[dim].values)
        truth = dressed.truth.transpose(*dressed.truth.dims).values
        assert iou(labels.values, truth, 2) >= truth_iou
        if "tropical_cyclone" in classes:
            assert iou(labels.values, truth, 1) >= 0.8
        else:
            assert "no storms" in printed and not (labels.values == 1).any()
    assert not (labels.values[:, np.abs(labels[labels.dims[1]].values) < 15] == 2).any()


def test_era5_units_levels_and_names_are_converted(fields):
    era5 = dress(fields, "era5")
    ds = normalize(era5)
    for name, expect in (("PSL", "PSL"), ("U850", "U850"), ("T200", "T200"), ("T500", "T500")):
        np.testing.assert_allclose(ds[name].values, fields[expect].values, rtol=1e-6)
    np.testing.assert_allclose(ds.Z1000.values, fields.Z1000.values, rtol=1e-5, atol=1e-3)
    np.testing.assert_allclose(ds.PRECT.values, fields.PRECT.values, rtol=1e-5)
    assert (
        ds.TMQ.attrs["climnb_source"] == "TMQ <- tcwv (kg m**-2 -> kg m-2)"
        or "tcwv" in (ds.TMQ.attrs["climnb_source"])
    )
    assert "geopotential / g" in ds.Z200.attrs["climnb_source"]
    assert ds.lat.values[0] < ds.lat.values[-1]


def test_merra2_precipitation_and_signed_longitudes(fields):
    merra = dress(fields, "merra2")
    ds = normalize(merra)
    np.testing.assert_allclose(ds.PRECT.values, fields.PRECT.values, rtol=1e-5)
    assert ds.lon.values.min() >= 0 and np.all(np.diff(ds.lon.values) > 0)
    np.testing.assert_allclose(ds.TMQ.values, fields.TMQ.values)


def test_units_are_read_and_odd_ones_named(fields):
    ds = xr.Dataset(
        {
            "msl": fields.PSL.isel(time=0).assign_attrs(units="hPa") / 100.0,
            "pr": (fields.PRECT.isel(time=0) * 86400e3).assign_attrs(units="mm/day"),
            "tcwv": fields.TMQ.isel(time=0).assign_attrs(units="buckets"),
        }
    )
    ds["msl"].attrs["units"] = "hPa"
    with pytest.raises(ValueError, match="tcwv.*buckets.*cannot be read"):
        canonicalize(ds)
    ds["tcwv"].attrs["units"] = "m s-1"
    with pytest.raises(ValueError, match="tcwv.*do not convert to kg m-2"):
        canonicalize(ds)
    out, notes = canonicalize(ds.drop_vars("tcwv"))
    np.testing.assert_allclose(out.PSL.values, fields.PSL.values[0], rtol=1e-6)
    np.testing.assert_allclose(out.PRECT.values, fields.PRECT.values[0], rtol=1e-5)
    assert any("hPa -> Pa" in n for n in notes) and any("mm/day" in n for n in notes)
    bare = xr.Dataset({"TMQ": (("lat", "lon"), np.ones((2, 3)))})
    _, notes = canonicalize(bare)
    assert notes == ["TMQ <- TMQ (no units given: assumed kg m-2)"]


def test_rename_maps_unknown_names(tmp_path, capsys, fields):
    # no standard_name either (with one, a variable is found whatever its name)
    water = fields.TMQ.copy(deep=False).assign_attrs(standard_name="my own water")
    odd = xr.Dataset({"my_water": water, "my_flux": fields.IVT})
    src = _write(odd.assign(truth=fields.truth), tmp_path / "odd.nc")
    out = tmp_path / "odd-labels.nc"
    assert main(["label", str(src), "--out", str(out), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "my_water" in err and "--rename" in err and "IVT" in err
    argv = ["label", str(src), "--out", str(out), "--rename", "my_flux=IVT", "--no-progress"]
    assert main(argv) == 0
    assert "rivers from transport (IVT" in capsys.readouterr().out
    assert main(["label", str(src), "--out", str(out), "--rename", "nope=IVT"]) == 2
    assert "no variable 'nope'" in capsys.readouterr().err


def test_other_dimension_order_and_regional_cut(fields):
    merra = dress(fields, "merra2")
    swapped = merra.transpose("time", "lon", "lat")
    labels, _ = _label(swapped.drop_vars("truth"))
    base, _ = _label(merra.drop_vars("truth"))
    xr.testing.assert_equal(labels.transpose(*base.dims).drop_attrs(), base.drop_attrs())
    region = merra.sel(lat=slice(10, 70), lon=slice(-100, 20)).drop_vars("truth")
    labels, events = _label(region)
    assert labels.shape == (3, region.sizes["lat"], region.sizes["lon"])
    assert "atmospheric_river" in labels.attrs["classes"]


def test_rounded_longitudes_and_curvilinear_grids(fields):
    ds = fields[["TMQ"]].isel(time=0)
    lon = ds.lon.values.copy()
    lon[0] = -5.9e-13  # reanalysis rounding of 0
    rounded = ds.assign_coords(lon=lon)
    out = normalize(rounded, required=["TMQ"])
    assert out.lon.values[0] == 0.0 and out.sizes["lon"] == ds.sizes["lon"]
    curvi = xr.Dataset(
        {"TMQ": (("y", "x"), np.zeros((3, 4)))},
        coords={
            "nav_lat": (("y", "x"), np.zeros((3, 4)), {"standard_name": "latitude"}),
            "nav_lon": (("y", "x"), np.zeros((3, 4)), {"standard_name": "longitude"}),
        },
    )
    with pytest.raises(ValueError, match="curvilinear.*regrid"):
        normalize(curvi)


def test_cf_attributes_find_coordinates_of_any_name(fields):
    ds = fields[["TMQ"]].rename(lat="y", lon="x", time="t0")
    ds["t0"].attrs["standard_name"] = "time"
    out = normalize(ds, required=["TMQ"])
    assert out.TMQ.dims == ("time", "lat", "lon") and out.sizes["time"] == 3


def test_open_dataset_names_a_file_that_is_not_netcdf(tmp_path):
    bad = tmp_path / "notes.nc"
    bad.write_text("not a netcdf file")
    with pytest.raises(ValueError, match="notes.nc: cannot be read as NetCDF"):
        open_fields(bad)


@pytest.mark.parametrize(
    "make_argv,message",
    [
        (lambda src, d: ["--out", str(src)], "is an input"),
        (lambda src, d: ["--out", str(d / "x.nc"), "--events", str(d / "x.nc")], "same file"),
        (lambda src, d: ["--out", str(d)], "is a directory"),
        (lambda src, d: ["--out", str(src / "x.nc")], "not a directory"),  # missing: made
        (lambda src, d: ["--out", str(d / "x.nc"), "--events", str(src)], "is an input"),
    ],
    ids=["out-is-input", "events-is-out", "out-is-dir", "under-a-file", "events-is-input"],
)
def test_label_refuses_bad_outputs_before_any_work(tmp_path, capsys, fields, make_argv, message):
    src = _write(dress(fields, "cam5"), tmp_path / "fields.nc")
    before = _digest(src)
    assert main(["label", str(src), *make_argv(src, tmp_path), "--no-progress"]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1
    assert _digest(src) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fields.nc"]


def test_label_refuses_an_empty_time_axis(tmp_path, capsys, fields):
    src = _write(dress(fields, "cam5").isel(time=slice(0, 0)), tmp_path / "empty.nc")
    assert main(["label", str(src), "--out", str(tmp_path / "x.nc")]) == 2
    assert f"error: {src}: the input's time axis is empty" in capsys.readouterr().err
    assert not (tmp_path / "x.nc").exists()
