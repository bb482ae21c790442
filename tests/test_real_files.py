"""Real files through climnb label and tracks: ERA5 as the Copernicus data store writes it, its
GRIB twin, a NAM GRIB on a Lambert grid, and the rules of the opener (units, joins, calendars,
IVT from levels, curvilinear grids).

The real files are small cuts in ``tests/data`` (see its README for sources and licences).
"""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import xarray as xr

from climnb.cli import main
from climnb.data.lookalike import dress
from climnb.data.synthetic import make_dataset
from climnb.io.files import open_fields
from climnb.io.levels import ivt_from_levels, specific_humidity
from climnb.labels import compute, label_dataset
from climnb.labels.scores import iou
from climnb.tracks import TrackConfig, track_events, track_summary

DATA = Path(__file__).parent / "data"
ERA5 = DATA / "era5_msl_vo850_2026-02_sh_2.5x2.5.nc"
NAM = DATA / "nam_florence_subset.grib2"


def _label(ds, **kwargs):
    return compute(*label_dataset(ds, **kwargs), scheduler="sync")


def test_era5_as_the_data_store_writes_it(tmp_path, capsys, caplog):
    out = tmp_path / "labels.nc"
    with caplog.at_level(logging.INFO, logger="climnb.io.netcdf"):
        assert main(["label", str(ERA5), "--out", str(out), "--no-progress"]) == 0
    assert "opened 1 file(s), 40 time steps" in caplog.text
    printed = capsys.readouterr().out
    assert "40 time steps labelled" in printed and "warm core skipped" in printed
    with xr.open_dataset(out) as labels, xr.open_dataset(ERA5) as src:
        # the input's own names and order, all of them, and its scalar coordinate
        assert labels.labels.dims == ("valid_time", "latitude", "longitude")
        for name in ("valid_time", "latitude", "longitude", "number"):
            np.testing.assert_array_equal(labels[name].values, src[name].values)
        assert "time" not in labels.variables
        checks = labels.labels.attrs["storm_checks"]
        assert "VORT850 as given" in checks and "warm core skipped" in checks
        assert "no max wind" in checks
        assert labels.labels.attrs["classes"] == "tropical_cyclone"
        at = labels.labels.sel(valid_time="2026-02-07T06")
        assert at.sel(latitude=-20.0, longitude=117.5) == 1  # the 991 hPa low
        assert int((at == 1).sum()) < 20  # and not much else
    events = pd.read_csv(tmp_path / "labels.events.csv", parse_dates=["time"])
    storm = events[events.time == "2026-02-07T06"].iloc[0]
    assert (storm.lat, storm.lon) == (-20.0, 117.5) and storm.min_psl < 99100
    assert np.isnan(storm.max_wind)


def test_era5_storm_is_tracked_across_its_life():
    labels, _ = _label(open_fields(ERA5, canonical=False), grid="canonical")
    obs = track_events(labels, TrackConfig(max_gap_steps=4))
    summary = track_summary(obs)
    long = summary[summary.lifetime_h >= 48]
    assert len(long) == 1
    track = long.iloc[0]
    # the low is found as it leaves the Kimberley coast, and passes the 991 hPa centre
    assert track.start <= pd.Timestamp("2026-02-07T06")
    at = obs[(obs.track_id == long.index[0]) & (obs.time == pd.Timestamp("2026-02-07T06"))]
    assert (at.lat.iloc[0], at.lon.iloc[0]) == pytest.approx((-20.0, 117.5), abs=1e-9)
    assert track.end_lat < -25.0 and track.lifetime_h >= 60  # moved south over 2.5 days
    consecutive = track_summary(track_events(labels))  # gaps of coarse sampling split it
    assert consecutive.lifetime_h.max() < track.lifetime_h


def _write_grib(ds: xr.Dataset, path: Path) -> Path:
    """The ERA5 cut as GRIB 2 (IEEE floats: the values unchanged), written with ecCodes."""
    import eccodes

    lat, lon = ds.latitude.values, ds.longitude.values
    grid = {
        "Ni": lon.size,
        "Nj": lat.size,
        "latitudeOfFirstGridPointInDegrees": float(lat[0]),
        "longitudeOfFirstGridPointInDegrees": float(lon[0]),
        "latitudeOfLastGridPointInDegrees": float(lat[-1]),
        "longitudeOfLastGridPointInDegrees": float(lon[-1]),
        "iDirectionIncrementInDegrees": 2.5,
        "jDirectionIncrementInDegrees": 2.5,
        "jScansPositively": 0,
    }
    with open(path, "wb") as f:
        for t in ds.valid_time.values:
            stamp = pd.Timestamp(t)
            for name, level in (("msl", None), ("vo", 850)):
                h = eccodes.codes_grib_new_from_samples("regular_ll_pl_grib2")
                for key, value in grid.items():
                    eccodes.codes_set(h, key, value)
                eccodes.codes_set(h, "dataDate", int(stamp.strftime("%Y%m%d")))
                eccodes.codes_set(h, "dataTime", int(stamp.strftime("%H%M")))
                eccodes.codes_set(h, "shortName", name)
                if level is None:
                    eccodes.codes_set(h, "typeOfLevel", "meanSea")
                else:
                    eccodes.codes_set(h, "typeOfLevel", "isobaricInhPa")
                    eccodes.codes_set(h, "level", level)
                eccodes.codes_set(h, "packingType", "grid_ieee")
                values = ds[name].sel(valid_time=t).values.astype(np.float64).ravel()
                eccodes.codes_set_values(h, values)
                eccodes.codes_write(h, f)
                eccodes.codes_release(h)
    return path


def test_grib_twin_labels_like_its_netcdf(tmp_path):
    with xr.open_dataset(ERA5) as src:
        grib = _write_grib(src.isel(valid_time=slice(6, 14)).load(), tmp_path / "era5.grib2")
        netcdf = tmp_path / "era5.nc"
        src.isel(valid_time=slice(6, 14)).to_netcdf(netcdf)
    for path in (grib, netcdf):
        assert main(["label", str(path), "--out", str(path) + ".labels.nc", "--no-progress"]) == 0
    with (
        xr.open_dataset(str(grib) + ".labels.nc") as a,
        xr.open_dataset(str(netcdf) + ".labels.nc") as b,
    ):
        np.testing.assert_array_equal(a.labels.values, b.labels.values)
        assert (a.labels.values == 1).any()
        np.testing.assert_array_equal(a.latitude.values, b.latitude.values)
    ev_a = pd.read_csv(str(grib) + ".labels.events.csv")
    ev_b = pd.read_csv(str(netcdf) + ".labels.events.csv")
    pd.testing.assert_frame_equal(ev_a, ev_b)


def test_nam_grib_is_refused_without_regrid_and_labelled_with_it(tmp_path, capsys):
    out = tmp_path / "nam.nc"
    assert main(["label", str(NAM), "--out", str(out), "--no-progress"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--regrid DEG" in err and str(NAM) in err
    assert main(["label", str(NAM), "--out", str(out), "--regrid", "1", "--no-progress"]) == 0
    printed = capsys.readouterr().out
    assert "IVTU+IVTV" in printed  # computed from u, v, r and t on the isobaric levels
    with xr.open_dataset(out) as labels:
        from climnb.io.grib import open_grib

        src = open_grib(NAM)
        assert labels.labels.dims[-2:] == ("y", "x") and labels.labels.shape[-2:] == (65, 93)
        np.testing.assert_allclose(labels.latitude.values, src.latitude.values)
        np.testing.assert_allclose(labels.longitude.values, src.longitude.values)


def test_units_override_a_wrong_attribute(tmp_path, capsys):
    ds, _ = make_dataset(n_time=2, seed=7, ivt=True)
    merra = dress(ds, "merra2").drop_vars("truth")
    merra["UFLXQV"].attrs["units"] = "kg kg-1 m-1 s-1"  # wrong, as in a real file
    src = tmp_path / "merra.nc"
    merra.to_netcdf(src)
    out = tmp_path / "labels.nc"
    assert main(["label", str(src), "--out", str(out), "--classes", "ar"]) == 2
    err = capsys.readouterr().err
    assert "UFLXQV" in err and "--units UFLXQV=UNITS" in err
    argv = ["label", str(src), "--out", str(out), "--classes", "ar", "--no-progress"]
    assert main([*argv, "--units", "UFLXQV=kg m-1 s-1"]) == 0
    assert main([*argv, "--units", "nothing=kg"]) == 2
    assert "--units nothing=kg" in capsys.readouterr().err
    labels, _ = _label(merra, units={"UFLXQV": "kg m-1 s-1"}, classes="ar")
    assert (labels.values == 2).any()


def _part(ds, path, **changes):
    ds.assign_coords(**changes).to_netcdf(path)
    return str(path)


def test_joined_files_must_share_a_grid_and_not_repeat_times(tmp_path):
    ds, _ = make_dataset(n_time=4, seed=1)
    ds = ds[["TMQ", "PSL"]]
    a = _part(ds.isel(time=slice(0, 2)), tmp_path / "a.nc")
    b = _part(ds.isel(time=slice(2, 4)), tmp_path / "b.nc")
    assert open_fields([b, a]).sizes["time"] == 4  # put in time order
    shifted = ds.lat.values + np.where(np.arange(ds.sizes["lat"]) == 5, 0.5, 0.0)
    c = _part(ds.isel(time=slice(2, 4)), tmp_path / "c.nc", lat=shifted)
    with pytest.raises(ValueError, match=r"c\.nc: its grid differs from that of .*a\.nc: lat"):
        open_fields([a, c])
    d = _part(ds.isel(time=slice(1, 3)), tmp_path / "d.nc")
    with pytest.raises(ValueError, match=r"d\.nc: time 2000-01-01T03:00 is also in .*a\.nc"):
        open_fields([a, d])


@pytest.mark.parametrize("calendar", ["noleap", "360_day"])
def test_cftime_calendars_are_labelled(tmp_path, calendar):
    ds, _ = make_dataset(n_time=2, seed=3)
    times = xr.date_range("2001-02-28", periods=2, freq="6h", calendar=calendar, use_cftime=True)
    src = tmp_path / f"{calendar}.nc"
    ds.drop_vars("truth").assign_coords(time=times).to_netcdf(src)
    out = tmp_path / "labels.nc"
    assert main(["label", str(src), "--out", str(out), "--no-progress"]) == 0
    standard, _ = _label(ds.drop_vars("truth"))
    with xr.open_dataset(out, decode_times=xr.coders.CFDatetimeCoder(use_cftime=True)) as labels:
        assert labels.time.values[1] == times[1]
        assert labels.time.dt.calendar == calendar
        np.testing.assert_array_equal(labels.labels.values, standard.values)
    events = pd.read_csv(tmp_path / "labels.events.csv")
    assert events.time.iloc[0] == "2001-02-28 00:00:00" and len(events) > 0


def test_ivt_from_levels_against_an_analytic_profile():
    p = np.array([1000.0, 925.0, 850.0, 700.0, 500.0, 300.0, 200.0])  # hPa; 200 is left out
    coord = xr.DataArray(p, dims="plev", attrs={"units": "hPa"})
    a = 0.012 / 750.0
    q = xr.DataArray(a * (p - 250.0), dims="plev", coords={"plev": coord})  # kg kg-1
    u = xr.DataArray(25.0 - 0.02 * p, dims="plev", coords={"plev": coord})  # m s-1
    out = ivt_from_levels(u, 2 * u, q, level="plev")
    # q u = a (p - 250)(25 - 0.02 p) is a quadratic: its integral over 300-1000 hPa is exact,
    # and the trapezoid rule's error is f'' / 12 * sum(h^3) over the layers (h in hPa)
    f = np.polynomial.Polynomial([-250.0 * a, a]) * np.polynomial.Polynomial([25.0, -0.02])
    exact = f.integ()(1000.0) - f.integ()(300.0)
    layers = np.diff(np.array([300.0, 500.0, 700.0, 850.0, 925.0, 1000.0]))
    trapezoid = exact + f.deriv(2)(0.0) / 12.0 * np.sum(layers**3)
    assert float(out.IVTU) == pytest.approx(100.0 * trapezoid / 9.80665, rel=1e-9)
    assert float(out.IVTU) == pytest.approx(100.0 * exact / 9.80665, rel=0.03)
    assert float(out.IVTV) == pytest.approx(2 * float(out.IVTU))
    # below the surface (900 hPa) the layers carry nothing
    cut = ivt_from_levels(u, u, q, level="plev", surface_pressure=xr.DataArray(90000.0))
    above = ivt_from_levels(
        u.isel(plev=slice(2, None)), u, q.isel(plev=slice(2, None)), level="plev"
    )
    assert float(above.IVTU) < float(cut.IVTU) < float(out.IVTU)
    # relative humidity with temperature: 100 % at 20 C and 1000 hPa is 0.0147 kg kg-1
    q_sat = specific_humidity(xr.DataArray(100.0), xr.DataArray(293.15), 100000.0)
    assert float(q_sat) == pytest.approx(0.0147, abs=2e-4)


def test_rivers_from_winds_and_humidity_on_levels(fields_on_levels):
    ds, truth = fields_on_levels
    labels, _ = _label(ds)
    assert "rivers from transport (IVTU+IVTV" in labels.attrs["notes"]
    assert iou(labels.values, truth.values, 2) >= 0.5


@pytest.fixture(scope="module")
def fields_on_levels():
    """Synthetic fields whose transport is carried by winds and humidity on four levels."""
    ds, _ = make_dataset(n_time=2, seed=11, ivt=True)
    plev = xr.DataArray([1000.0, 850.0, 500.0, 300.0], dims="level", attrs={"units": "hPa"})
    shape = xr.DataArray([1.2, 1.0, 0.4, 0.1], dims="level", coords={"level": plev})
    # q (kg kg-1) so that (1/g) * integral of q dp over 1000-300 hPa is TMQ, and winds that
    # give back the components of IVT: (1/g) * integral of q u dp = IVTU
    weight = float(ivt_from_levels(shape * 0 + 1, shape * 0, shape, level="level").IVTU)
    q = (ds.TMQ / weight) * shape
    tmq = ds.TMQ.where(ds.TMQ > 1e-3, 1e-3)
    u = (ds.IVTU / tmq) * (shape * 0 + 1)
    v = (ds.IVTV / tmq) * (shape * 0 + 1)
    dims = ("time", "level", "lat", "lon")
    out = xr.Dataset(
        {
            name: var.transpose(*dims).drop_attrs().assign_attrs(units=units)
            for name, var, units in (("q", q, "kg kg-1"), ("u", u, "m s-1"), ("v", v, "m s-1"))
        }
    )
    return out, ds.truth


def _wrf_like(ds: xr.Dataset) -> xr.Dataset:
    """A regional cut of ``ds`` on a rotated curvilinear grid (south_north, west_east), as WRF
    writes it (XLAT, XLONG 2-D), sampled from the regular fields at each point."""
    j, i = np.meshgrid(np.arange(45), np.arange(60), indexing="ij")
    lat = 18.0 + 1.0 * j + 0.15 * i  # over East Asia, where seed 5 has a river
    lon = 90.0 + 1.5 * i - 0.1 * j
    pick = {
        "lat": xr.DataArray(lat, dims=("south_north", "west_east")),
        "lon": xr.DataArray(lon, dims=("south_north", "west_east")),
    }
    sampled = ds.interp(pick, method="nearest")
    return sampled.drop_vars(["lat", "lon"]).assign_coords(
        XLAT=(("south_north", "west_east"), lat), XLONG=(("south_north", "west_east"), lon)
    )


def test_curvilinear_grid_is_regridded_on_request_and_labels_come_back():
    ds, _ = make_dataset(n_time=2, seed=5, ivt=True)
    wrf = _wrf_like(ds[["IVT", "TMQ", "truth"]])
    with pytest.raises(ValueError, match="2-D.*--regrid DEG"):
        label_dataset(wrf.drop_vars("truth"))
    labels, _ = _label(wrf.drop_vars("truth"), regrid=1.0, classes="ar")
    assert labels.dims == ("time", "south_north", "west_east")
    assert (wrf.truth.values == 2).sum() > 100
    np.testing.assert_array_equal(labels.XLAT.values, wrf.XLAT.values)
    assert iou(labels.values, wrf.truth.values, 2) >= 0.5


def test_ten_metre_winds_give_the_maximum_wind_and_vorticity_is_found_by_standard_name():
    with xr.open_dataset(ERA5) as src:
        ds = src.isel(valid_time=slice(8, 10)).load()
    ds = ds.rename(vo="relvort")  # a name climnb does not know: found by its standard_name
    speed = xr.full_like(ds.msl, 5.0).where(ds.msl > 99500.0, 30.0)  # strong near the low
    ds["u10"] = speed.assign_attrs(units="m s-1")
    ds["v10"] = (0.0 * speed).assign_attrs(units="m s-1")
    labels, events = _label(ds)
    checks = labels.attrs["storm_checks"]
    assert "VORT850 as given" in checks and "max wind from UBOT, VBOT" in checks
    assert (events.max_wind == 30.0).any() and len(events)
