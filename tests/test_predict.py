"""Inference: the model bundle, padding, grid conventions, sample files and the CLI.

Most tests use a *pointwise* network (one 1x1 convolution with fixed weights), whose output at a
pixel depends only on that pixel's normalised channels: the expected classes can then be
computed in NumPy, so padding, cropping, normalisation and grid handling are checked exactly.
"""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
import xarray as xr

from climnb.bundle import META_FILE, MODEL_FILE, BundleError, load_bundle, save_bundle
from climnb.cli import main
from climnb.data.synthetic import make_dataset
from climnb.inference.predict import pad_fields, predict
from climnb.io.channels import CHANNEL_NAMES

keras = pytest.importorskip(
    "keras", reason="inference needs TensorFlow/Keras: pip install 'climnb[train]'"
)

# logits = W . normalised channels: class 1 where TMQ is high, class 2 where PSL is low
_W = np.zeros((16, 3), np.float32)
_W[CHANNEL_NAMES.index("TMQ"), 1] = 10.0
_W[CHANNEL_NAMES.index("PSL"), 2] = -10.0
_B = np.array([0.0, -7.0, 2.0], np.float32)


@pytest.fixture(scope="module")
def data(toy):
    ds, _ = toy
    return ds.isel(time=slice(0, 5))


@pytest.fixture(scope="module")
def stats(data):
    lo, hi = data.min(), data.max()
    return (
        np.array([float(lo[c]) for c in CHANNEL_NAMES]),
        np.array([float(hi[c]) for c in CHANNEL_NAMES]),
    )


@pytest.fixture(scope="module")
def pointwise(tmp_path_factory, stats):
    inp = keras.Input((None, None, 16))
    conv = keras.layers.Conv2D(3, 1, name="pointwise")
    model = keras.Model(inp, conv(inp))
    conv.set_weights([_W[None, None], _B])
    path = tmp_path_factory.mktemp("bundles") / "pointwise"
    return save_bundle(
        model,
        path,
        channels=CHANNEL_NAMES,
        minval=stats[0],
        maxval=stats[1],
        name="pointwise",
        preset="test",
        stride=16,
        extra={"epoch": 3},
    )


def expected(ds, stats):
    x = np.stack([ds[c].values for c in CHANNEL_NAMES], axis=-1).astype(np.float64)
    x = (x - stats[0]) / (stats[1] - stats[0])
    return (x @ _W + _B).argmax(axis=-1).astype(np.uint8)


def test_bundle_files_and_metadata(pointwise, stats):
    assert sorted(p.name for p in pointwise.iterdir()) == [META_FILE, MODEL_FILE]
    meta = json.loads((pointwise / META_FILE).read_text())
    assert meta["channels"] == list(CHANNEL_NAMES)
    assert meta["model"]["stride"] == 16 and meta["model"]["n_classes"] == 3
    assert meta["extra"] == {"epoch": 3}
    b = load_bundle(pointwise)
    np.testing.assert_array_equal(b.minval, stats[0])
    assert b.input_shape == (None, None, 16) and b.class_names[1] == "tropical_cyclone"


def test_save_replaces_a_bundle_whole(pointwise, stats, tmp_path):
    model = load_bundle(pointwise).model()
    path = tmp_path / "b"
    for epoch in (1, 2):
        save_bundle(
            model,
            path,
            channels=CHANNEL_NAMES,
            minval=stats[0],
            maxval=stats[1],
            name="pointwise",
            preset="test",
            stride=8,
            extra={"epoch": epoch},
        )
    assert load_bundle(path).extra == {"epoch": 2}
    assert [p.name for p in tmp_path.iterdir()] == ["b"]  # no temporaries left behind
    with pytest.raises(BundleError, match="one value per channel"):
        save_bundle(
            model,
            tmp_path / "c",
            channels=CHANNEL_NAMES,
            minval=[0.0],
            maxval=[1.0],
            name="x",
            preset="y",
            stride=8,
        )


def test_load_bundle_errors(tmp_path):
    with pytest.raises(BundleError, match="no such directory"):
        load_bundle(tmp_path / "missing")
    with pytest.raises(BundleError, match="climnb.json"):
        load_bundle(tmp_path)


def test_pad_fields_wraps_longitude_and_reflects_latitude():
    x = np.arange(5 * 6, dtype=np.float32).reshape(1, 5, 6, 1)
    padded, (rows, cols) = pad_fields(x, 4)
    assert padded.shape == (1, 8, 8, 1)
    np.testing.assert_array_equal(padded[:, rows, cols], x)
    # one column each side: the last column before the first, the first after the last
    np.testing.assert_array_equal(padded[0, rows, 0, 0], x[0, :, -1, 0])
    np.testing.assert_array_equal(padded[0, rows, -1, 0], x[0, :, 0, 0])
    # latitude: 3 rows added, 1 before (reflecting row 1) and 2 after (rows 3, 2)
    np.testing.assert_array_equal(padded[0, 0, cols, 0], x[0, 1, :, 0])
    np.testing.assert_array_equal(padded[0, -2:, cols, 0], x[0, [3, 2], :, 0])


@pytest.mark.parametrize(
    "shape", [(96, 144), (90, 140), (37, 61)], ids=lambda s: "x".join(map(str, s))
)
def test_predict_matches_pointwise_network(pointwise, data, stats, shape):
    south = (96 - shape[0]) // 2  # keep the tropics and mid-latitudes, where the events are
    ds = data.isel(lat=slice(south, south + shape[0]), lon=slice(0, shape[1]))
    pred = predict(pointwise, ds, batch_size=2)
    assert pred.dims == ("time", "lat", "lon") and pred.dtype == np.uint8
    xr.testing.assert_equal(pred.lat, ds.lat)
    np.testing.assert_array_equal(pred.values, expected(ds, stats))
    assert {1, 2} <= set(np.unique(pred.values))  # the test network finds both classes


def test_predict_lazy_input_and_probabilities(pointwise, data, stats):
    out = predict(pointwise, data.chunk({"time": 1}), probabilities=True, batch_size=3)
    assert set(out.data_vars) == {"prediction", "probability"}
    p = out.probability
    assert p.dims == ("time", "lat", "lon", "class") and p.dtype == np.float32
    np.testing.assert_allclose(p.sum("class"), 1.0, rtol=1e-5)
    np.testing.assert_array_equal(p.argmax("class").values, out.prediction.values)
    np.testing.assert_array_equal(out.prediction.values, expected(data, stats))


def test_predict_other_grid_conventions(pointwise, data):
    canonical = predict(pointwise, data)
    flipped = data.isel(lat=slice(None, None, -1)).roll(lon=72, roll_coords=True)
    flipped = flipped.assign_coords(lon=(flipped.lon + 180) % 360 - 180)  # -180..180
    flipped = flipped.rename(lat="latitude", lon="longitude")
    pred = predict(pointwise, flipped)
    assert pred.dims == ("time", "latitude", "longitude")  # the caller's names
    np.testing.assert_array_equal(pred.latitude.values, flipped.latitude.values)
    np.testing.assert_array_equal(pred.longitude.values, flipped.longitude.values)
    back = pred.rename(latitude="lat", longitude="lon")
    back = back.assign_coords(lon=back.lon % 360).sortby(["lat", "lon"])
    np.testing.assert_array_equal(back.values, canonical.values)
    assert predict(pointwise, flipped, grid="canonical").lon.values[0] == 0.0


def test_missing_channels_are_named(pointwise, data, tmp_path):
    with pytest.raises(BundleError, match=r"lacks channel\(s\) PSL, ZBOT"):
        predict(pointwise, data.drop_vars(["PSL", "ZBOT"]))
    path = tmp_path / "fields.nc"
    data.drop_vars("PSL").isel(time=slice(0, 1)).to_netcdf(path)
    with pytest.raises(BundleError, match=rf"^{path}: the input lacks channel\(s\) PSL that"):
        predict(pointwise, [path])


def test_predict_sample_files(pointwise, data, tmp_path):
    from climnb.io.samples import write_samples

    write_samples(data, data.truth, tmp_path)
    pred = predict(pointwise, tmp_path)
    xr.testing.assert_equal(pred.drop_vars("file"), predict(pointwise, data))
    assert pred.file.size == data.sizes["time"]


@pytest.fixture()
def sample_set(toy, tmp_path):
    from climnb.io.sampleset import write_sample_set

    ds, _ = toy
    return ds, write_sample_set(ds, "truth", tmp_path / "set", method="random", seed=1)


def test_predict_reads_sample_sets_through_sampleset(pointwise, sample_set, stats):
    """A split set's root, a split folder and files given one by one: the same predictions
    as from the fields at those times (one owner of the layout: SampleSet)."""
    ds, ss = sample_set
    for source, files in [
        (ss.root, sorted(ss.files(None), key=lambda f: f.name)),
        (ss.folder("train"), ss.files("train")),
        ([str(f) for f in ss.files("test")], ss.files("test")),
    ]:
        pred = predict(pointwise, source)
        assert pred.file.values.tolist() == [str(f) for f in files]
        want = predict(pointwise, ds.sel(time=pred.time.values))
        xr.testing.assert_equal(pred.drop_vars("file"), want)


def test_predict_checks_sample_files_against_their_manifest(pointwise, sample_set):
    from climnb.io.samples import SampleError

    _, ss = sample_set
    victim = ss.files("train")[1]
    data = bytearray(victim.read_bytes())
    data[len(data) // 2] ^= 0xFF  # one flipped byte in the middle of the fields, same size
    victim.write_bytes(bytes(data))
    pred = predict(pointwise, ss.folder("train"))  # lazy: size and listing are fine
    with pytest.raises(SampleError, match=f"{victim}: content changed since it was written"):
        pred.compute()
    victim.write_bytes(bytes(data[:-100]))  # truncated: refused before any work
    with pytest.raises(SampleError, match=f"{victim}: {len(data) - 100} bytes, its manifest"):
        predict(pointwise, ss.folder("train"))
    stray = ss.folder("train") / "data-2100-01-01-00-1.h5"
    stray.write_bytes(ss.files("test")[0].read_bytes())
    with pytest.raises(SampleError, match=f"{stray}: not listed in the manifest"):
        predict(pointwise, [stray])
    empty = ss.root.parent / "empty"
    (empty / "test").mkdir(parents=True)  # a split folder, but no files
    with pytest.raises(SampleError, match=f"{empty}: no sample files"):
        predict(pointwise, empty)


def test_fixed_size_network_is_rebuilt_for_other_grids(data, stats, tmp_path):
    from climnb.models import build_model

    model = build_model("tiramisu", (96, 144, 16), preset="toy")
    path = save_bundle(
        model,
        tmp_path / "t",
        channels=CHANNEL_NAMES,
        minval=stats[0],
        maxval=stats[1],
        name="tiramisu",
        preset="toy",
    )
    bundle = load_bundle(path)
    assert bundle.stride == 16 and bundle.input_shape == (96, 144, 16)
    other, _ = make_dataset(n_time=1, n_lat=100, n_lon=150, seed=2)  # not multiples of 16
    pred = predict(bundle, other)
    assert pred.shape == (1, 100, 150)
    rebuilt = bundle.model(112, 160)
    assert rebuilt.input_shape == (None, 112, 160, 16)
    for a, b in zip(rebuilt.get_weights(), bundle.model().get_weights(), strict=True):
        np.testing.assert_array_equal(a, b)


def test_cli_writes_netcdf(pointwise, data, stats, tmp_path, capsys):
    src = tmp_path / "in.nc"
    data.to_netcdf(src)
    out = tmp_path / "out.nc"
    argv = ["predict", "--model", str(pointwise), str(src), "--out", str(out), "--no-progress"]
    assert main(argv) == 0
    assert "5 steps segmented" in capsys.readouterr().out
    with xr.open_dataset(out) as saved:
        assert saved.prediction.dtype == np.uint8
        np.testing.assert_array_equal(saved.prediction.values, expected(data, stats))
    assert main(["predict", "--model", str(tmp_path), str(src), "--out", str(out)]) == 2
    assert "not a climnb model bundle" in capsys.readouterr().err


def test_predict_is_lazy_with_cf_attributes(pointwise, data, stats):
    import dask.array as dsa

    out = predict(pointwise, data, batch_size=2, probabilities=True)
    assert isinstance(out.prediction.data, dsa.Array) and isinstance(
        out.probability.data, dsa.Array
    )
    assert out.prediction.chunks[0] == (2, 2, 1)  # one task per batch of steps
    p = out.prediction
    assert p.attrs["flag_meanings"] == "background tropical_cyclone atmospheric_river"
    np.testing.assert_array_equal(p.attrs["flag_values"], [0, 1, 2])
    assert out.lat.attrs["units"] == "degrees_north" and out.lon.attrs["units"] == "degrees_east"
    assert out.attrs["Conventions"].startswith("CF-")
    np.testing.assert_array_equal(p.values, expected(data, stats))


def test_no_time_steps_is_an_error(pointwise, data):
    with pytest.raises(BundleError, match="no time steps"):
        predict(pointwise, data.isel(time=slice(0, 0)))


@pytest.mark.parametrize("suffix", [".nc", ".zarr"])
def test_cli_streams_to_netcdf_or_zarr_on_the_input_grid(
    pointwise, data, stats, tmp_path, capsys, suffix, monkeypatch
):
    """Input -180..180 with descending latitude (as a Zarr store): the output keeps that grid.
    Each batch's forward pass runs once (the class shares printed beside the write once ran
    every batch twice)."""
    import climnb.inference.predict

    batches, real = [], climnb.inference.predict.predict_batch

    def counted(bundle, x, **kwargs):
        batches.append(x.shape[0])
        return real(bundle, x, **kwargs)

    monkeypatch.setattr(climnb.inference.predict, "predict_batch", counted)
    flipped = data.isel(lat=slice(None, None, -1)).roll(lon=72, roll_coords=True)
    flipped = flipped.assign_coords(lon=(flipped.lon + 180) % 360 - 180)
    flipped = flipped.rename(lat="latitude", lon="longitude").drop_vars("truth")
    src = tmp_path / "in.zarr"
    flipped.chunk({"time": 2}).to_zarr(src, zarr_format=3, consolidated=False)
    out = tmp_path / f"out{suffix}"
    argv = ["predict", "--model", str(pointwise), str(src), "--out", str(out)]
    assert main([*argv, "--batch-size", "2", "--probabilities", "--no-progress"]) == 0
    assert sorted(batches) == [1, 2, 2]  # 5 steps in batches of 2, each run once
    printed = capsys.readouterr().out
    assert "5 steps segmented" in printed
    shares = dict(re.findall(r"(\w+) ([\d.]+)%", printed))
    want = np.bincount(expected(data, stats).ravel(), minlength=3) / expected(data, stats).size
    for name, share in zip(
        ["background", "tropical_cyclone", "atmospheric_river"], want, strict=True
    ):
        assert float(shares[name]) == pytest.approx(100 * share, abs=0.006)
    opened = xr.open_zarr(out, consolidated=False) if suffix == ".zarr" else xr.open_dataset(out)
    with opened as saved:
        assert saved.prediction.dtype == np.uint8
        np.testing.assert_array_equal(saved.latitude.values, flipped.latitude.values)
        np.testing.assert_array_equal(saved.longitude.values, flipped.longitude.values)
        back = saved.prediction.rename(latitude="lat", longitude="lon")
        back = back.assign_coords(lon=back.lon % 360).sortby(["lat", "lon"])
        np.testing.assert_array_equal(back.values, expected(data, stats))
        np.testing.assert_allclose(saved.probability.sum("class"), 1.0, rtol=1e-5)
        assert saved.prediction.attrs["flag_meanings"].split()[1] == "tropical_cyclone"
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["in.zarr", out.name])


def _tree(path):
    return {p: p.stat().st_mtime_ns for p in sorted(path.rglob("*"))}


@pytest.mark.parametrize(
    "case",
    [
        "out-is-input",
        "out-is-input-store",
        "out-is-directory",
        "out-not-writable",
        "batch-0",
        "memory-below-runtime",
    ],
)
def test_cli_refuses_bad_outputs_before_any_work(pointwise, data, tmp_path, capsys, case):
    src = tmp_path / "in.nc"
    data.isel(time=slice(0, 1)).to_netcdf(src)
    store = tmp_path / "in.zarr"
    data.isel(time=slice(0, 1)).to_zarr(store, zarr_format=3, consolidated=False)
    (tmp_path / "folder").mkdir()
    (tmp_path / "file").write_text("x")
    inputs, extra = [str(src)], []
    out = {
        "out-is-input": src,
        "out-is-input-store": store,
        "out-is-directory": tmp_path / "folder",
        "out-not-writable": tmp_path / "file" / "out.nc",  # (root ignores permission bits)
        "batch-0": tmp_path / "out.nc",
        "memory-below-runtime": tmp_path / "out.nc",
    }[case]
    if case == "out-is-input-store":
        inputs = [str(store)]
    if case == "batch-0":
        extra = ["--batch-size", "0"]
    if case == "memory-below-runtime":
        extra = ["--memory", "0.5"]
    before = _tree(tmp_path)
    argv = ["predict", "--model", str(pointwise), *inputs, "--out", str(out), *extra]
    code = main([*argv, "--no-progress"])
    err = capsys.readouterr().err
    assert code == 2
    assert len(err.strip().splitlines()) == 1, err
    message = {
        "out-is-input": "is an input",
        "out-is-input-store": "is an input",
        "out-is-directory": "is a directory",
        "out-not-writable": "cannot write in",
        "batch-0": "--batch-size must be at least 1",
        "memory-below-runtime": "--memory 0.5 GB is less than the runtime",
    }[case]
    assert message in err and (case in ("batch-0", "memory-below-runtime") or str(out) in err)
    assert _tree(tmp_path) == before, "nothing written or changed"


def test_cli_help_names_the_bundle_training_writes(capsys):
    with pytest.raises(SystemExit):
        main(["predict", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert "RUN/model" in out
    assert "--memory GB" in out and "does not grow with the number of steps" in out


def test_accessor_predict_on_the_callers_grid(pointwise, data, stats):
    import climnb.accessor  # noqa: F401

    flipped = data.isel(lat=slice(None, None, -1)).rename(lat="latitude")
    pred = flipped.climnb.predict(pointwise, batch_size=2)
    assert pred.dims == ("time", "latitude", "lon")
    np.testing.assert_array_equal(pred.values[:, ::-1], expected(data, stats))


def test_cli_river_rules_write_the_ruled_prediction(pointwise, data, stats, tmp_path, capsys):
    """--river-rules: the predicted rivers the river definition rejects become background
    (the pointwise network's "rivers" are low-pressure blobs: most go), storms stay."""
    from climnb.inference.postprocess import apply_river_rules

    raw = xr.DataArray(expected(data, stats), coords=data.truth.coords, dims=data.truth.dims)
    ruled = apply_river_rules(raw, data).values
    assert (ruled == 2).sum() < (raw.values == 2).sum()
    np.testing.assert_array_equal(ruled == 1, raw.values == 1)
    src, out = tmp_path / "in.nc", tmp_path / "out.nc"
    data.to_netcdf(src)
    argv = ["predict", "--model", str(pointwise), str(src), "--out", str(out), "--no-progress"]
    assert main([*argv, "--river-rules"]) == 0
    assert "river rules: river objects >= 2000 km long" in capsys.readouterr().out
    with xr.open_dataset(out) as saved:
        np.testing.assert_array_equal(saved.prediction.values, ruled)
        assert "poleward" in saved.prediction.attrs["river_rules"]
    with pytest.raises(SystemExit):
        main(["predict", "--help"])
    assert "--river-rules" in capsys.readouterr().out


def test_river_rules_on_the_callers_grid_and_missing_variables(pointwise, data, stats, tmp_path):
    import climnb.accessor  # noqa: F401
    from climnb.inference.postprocess import apply_river_rules

    flipped = data.isel(lat=slice(None, None, -1)).rename(lat="latitude")
    pred = flipped.climnb.predict(pointwise, batch_size=2, river_rules=True)
    assert pred.dims == ("time", "latitude", "lon") and pred.chunks[0] == (2, 2, 1)
    raw = predict(pointwise, data, grid="canonical").load()
    np.testing.assert_array_equal(pred.values[:, ::-1], apply_river_rules(raw, data).values)
    # a network on two channels: the rules' V850 is not among them and not in the input
    inp = keras.Input((None, None, 2))
    small = save_bundle(
        keras.Model(inp, keras.layers.Conv2D(3, 1)(inp)),
        tmp_path / "two",
        channels=["TMQ", "PSL"],
        minval=[0.0, 9e4],
        maxval=[80.0, 1.1e5],
        name="two",
        preset="test",
        stride=16,
    )
    lacking = data[["TMQ", "PSL", "U850"]]
    assert predict(small, lacking).shape == data.truth.shape  # fine without the rules
    with pytest.raises(BundleError, match="river rules: .*missing V850"):
        predict(small, lacking, river_rules=True)


def test_cli_no_range_check_accepts_channels_far_outside_their_training_range(
    pointwise, data, stats, tmp_path, capsys
):
    """A channel far from its training range is refused naming the flag; with the flag the
    prediction is written, as the network computes it."""
    far = data.assign(U850=data.U850 + 300.0)  # in range of nothing the network saw
    src, out = tmp_path / "far.nc", tmp_path / "out.nc"
    far.to_netcdf(src)
    argv = ["predict", "--model", str(pointwise), str(src), "--out", str(out), "--no-progress"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "U850" in err and "--no-range-check" in err and not out.exists()
    assert main([*argv, "--no-range-check"]) == 0
    with xr.open_dataset(out) as saved:
        np.testing.assert_array_equal(saved.prediction.values, expected(far, stats))
