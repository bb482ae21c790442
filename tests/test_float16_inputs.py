"""A float16 store is read as the same numbers in float32: its unit conversions (hPa to Pa:
times 100, past float16's largest value, 65504) neither overflow nor warn, and it is labelled
as its float32 copy is."""

from __future__ import annotations

import contextlib
import io
import warnings

import numpy as np
import pytest
import xarray as xr

from climnb.cli import main


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    """The toy fields' first 4 steps, pressures in hPa, as float16 and as its float32 copy."""
    root = tmp_path_factory.mktemp("f16")
    fields = root / "fields.nc"
    with contextlib.redirect_stdout(io.StringIO()):
        assert main(["synth", "--out", str(fields), "--n-time", "4", "--seed", "3"]) == 0
    with xr.open_dataset(fields) as ds:
        ds = ds.load()
    for v in ds.variables.values():
        v.encoding = {}
    for name in ("PSL", "PS"):
        ds[name] = (ds[name] / 100).assign_attrs(units="hPa")
    half = ds.assign({n: v.astype("float16") for n, v in ds.data_vars.items() if n != "truth"})
    single = half.assign(
        {n: v.astype("float32") for n, v in half.data_vars.items() if n != "truth"}
    )
    half.to_zarr(root / "half.zarr", consolidated=False)
    single.to_zarr(root / "single.zarr", consolidated=False)
    return root


def _label(store, out) -> None:
    with contextlib.redirect_stdout(io.StringIO()):
        assert main(["label", str(store), "--out", str(out), "--no-progress"]) == 0


def test_a_float16_store_is_labelled_without_a_warning_as_its_float32_copy(stores):
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # "overflow encountered in multiply"
        _label(stores / "half.zarr", stores / "half.nc")
    _label(stores / "single.zarr", stores / "single.nc")
    with xr.open_dataset(stores / "half.nc") as a, xr.open_dataset(stores / "single.nc") as b:
        assert int(a.labels.max()) > 0  # storms or rivers found: the pressures were read
        np.testing.assert_array_equal(a.labels.values, b.labels.values)


def test_hpa_to_pa_of_float16_is_float32():
    from climnb.io.netcdf import normalize

    lat, lon = np.linspace(-89, 89, 4), np.linspace(0, 270, 4)
    psl = xr.DataArray(
        np.full((1, 4, 4), 1013.0, np.float16), dims=("time", "lat", "lon"), attrs={"units": "hPa"}
    )
    ds = xr.Dataset({"PSL": psl}, coords={"lat": lat, "lon": lon, "time": [0]})
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        out = normalize(ds, required=["PSL"])
        values = out.PSL.values
    assert out.PSL.dtype == np.float32
    np.testing.assert_allclose(values, 101300.0)
