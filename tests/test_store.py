"""climnb.io.files: NetCDF or Zarr in and out, output checks; the label command through it."""

from __future__ import annotations

import numpy as np
import pytest
import xarray as xr

from climnb.cli import main
from climnb.io.files import OutputError, check_output, open_fields, write


@pytest.fixture(scope="module")
def data(toy):
    return toy[0].isel(time=slice(0, 3))


def test_fields_round_trip_through_zarr_and_netcdf(data, tmp_path):
    west = data.drop_vars("truth").assign_coords(lon=(data.lon + 180) % 360 - 180).sortby("lon")
    write(west.isel(time=slice(0, 2)).chunk({"time": 1}), tmp_path / "a.zarr")
    write(west.isel(time=slice(2, 3)), tmp_path / "b.nc")
    ds = open_fields([tmp_path / "a.zarr", tmp_path / "b.nc"], required=["TMQ"])
    assert ds.TMQ.dims == ("time", "lat", "lon") and ds.sizes["time"] == 3
    assert ds.lon.values[0] == 0.0  # normalised to 0..360
    xr.testing.assert_allclose(ds.TMQ.load(), data.TMQ, rtol=1e-6)
    with pytest.raises(ValueError, match=r"a.zarr: missing variable\(s\) NOPE"):
        open_fields([tmp_path / "a.zarr", tmp_path / "b.nc"], required=["NOPE"])


@pytest.mark.parametrize("layout", ["steps", "blocks"])
def test_each_netcdf_file_is_opened_once_with_the_chunks_of_open_dataset(
    layout, data, tmp_path, monkeypatch
):
    fields = data.drop_vars("truth")
    sizes = (1, 48, 72) if layout == "steps" else (3, 48, 72)  # steps alone, or several a chunk
    encoding = {v: {"chunksizes": sizes, "zlib": True} for v in fields.data_vars}
    paths = [tmp_path / "a.nc", tmp_path / "b.nc"]
    for k, path in enumerate(paths):
        fields.assign_coords(time=fields.time + np.timedelta64(k, "D")).to_netcdf(
            path, encoding=encoding
        )
    opened = []
    store = xr.backends.NetCDF4DataStore
    real = store.open.__func__

    def counting(cls, path, *args, **kwargs):
        opened.append(str(path))
        return real(cls, path, *args, **kwargs)

    monkeypatch.setattr(store, "open", classmethod(counting))
    chunks = {"time": 1} if layout == "steps" else None  # else: the default, 3 steps a chunk
    ds = open_fields(paths, chunks=chunks, canonical=False)
    assert sorted(opened) == sorted(map(str, paths))  # each file once, not again to chunk it
    monkeypatch.undo()
    for k, path in enumerate(paths):  # the chunks xarray's own opener gives, then open_fields'
        part = ds.TMQ.isel(time=slice(3 * k, 3 * k + 3)).data
        own = xr.open_dataset(path, chunks={"time": 1} if layout == "steps" else {}).TMQ.data
        if layout == "steps":
            assert part.chunks == own.chunks == ((1, 1, 1), (48, 48), (72, 72))
        else:
            assert own.chunks == ((3,), (48, 48), (72, 72))
    again = open_fields(paths, chunks=chunks, canonical=False)  # the same files: the same names
    assert again.TMQ.data.name == ds.TMQ.data.name
    xr.testing.assert_identical(ds.load(), xr.open_mfdataset(paths).load())


def test_zarr_store_is_replaced_whole(data, tmp_path):
    out = tmp_path / "x.zarr"
    write(data[["TMQ"]], out)
    write(data[["PSL"]].isel(time=slice(0, 1)), out)
    with xr.open_zarr(out, consolidated=False) as ds:
        assert list(ds.data_vars) == ["PSL"] and ds.sizes["time"] == 1
    assert [p.name for p in tmp_path.iterdir()] == ["x.zarr"]  # no temporaries left


def test_check_output(tmp_path):
    src = tmp_path / "in.nc"
    src.write_text("x")
    (tmp_path / "dir").mkdir()
    (tmp_path / "file").write_text("x")
    assert check_output(tmp_path / "new" / "out.nc", [src]) == tmp_path / "new" / "out.nc"
    for out, message in [
        (src, "is an input"),
        (tmp_path / "." / "in.nc", "is an input"),
        (tmp_path / "dir", "is a directory"),
        (tmp_path / "file" / "out.nc", "not a directory"),
    ]:
        with pytest.raises(OutputError, match=message):
            check_output(out, [src])
    (tmp_path / "store.zarr").mkdir()
    with pytest.raises(OutputError, match="is inside the input"):
        check_output(tmp_path / "store.zarr" / "labels.nc", [tmp_path / "store.zarr"])


def test_label_command_writes_zarr_and_refuses_its_input(data, tmp_path, capsys):
    src = tmp_path / "fields.zarr"
    data.drop_vars("truth").chunk({"time": 1}).to_zarr(src, zarr_format=3, consolidated=False)
    out = tmp_path / "labels.zarr"
    assert main(["label", str(src), "--out", str(out), "--no-progress"]) == 0
    with xr.open_zarr(out, consolidated=False) as labels:
        assert labels.labels.dtype == np.uint8 and labels.sizes["time"] == 3
        assert set(np.unique(labels.labels.values)) <= {0, 1, 2}
    assert (tmp_path / "labels.events.csv").exists()
    capsys.readouterr()
    before = sorted(p.name for p in tmp_path.rglob("*"))
    assert main(["label", str(src), "--out", str(src), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "is an input" in err and len(err.strip().splitlines()) == 1
    nc = tmp_path / "l.nc"
    assert main(["label", str(src), "--out", str(nc), "--events", str(nc)]) == 2
    assert "--events" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.rglob("*")) == before
