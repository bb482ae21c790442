"""What notebook 05 explores: the held-out fields and the segmentation compared with the truth."""

from __future__ import annotations

import numpy as np
import pytest
import xarray as xr

from climnb.channels import CHANNEL_NAMES
from climnb.viz.heldout import PREDICTION_FILE, heldout_fields, segment_heldout


def test_heldout_fields_made_once_then_read_between_times(tmp_path):
    path = tmp_path / "data" / "heldout.nc"
    ds = heldout_fields(path)
    assert path.exists() and ds.sizes["time"] == 8 and "truth" in ds
    stamp = path.stat().st_mtime_ns
    times = ds.time.values
    part = heldout_fields(path, str(times[2]), str(times[4]))
    assert path.stat().st_mtime_ns == stamp  # read, not made again
    np.testing.assert_array_equal(part.time.values, times[2:5])


def test_without_a_model_the_heuristic_labels_stand_in_and_say_so(toy, tmp_path):
    ds = toy[0].isel(time=slice(0, 2))
    seg = segment_heldout(ds, tmp_path / "no-model")
    assert seg.note.startswith("NO TRAINED MODEL") and "no-model" in seg.note
    assert seg.titles == {"label_name": "truth", "prediction_name": "heuristic labels"}
    xr.testing.assert_identical(seg.reference, ds.truth)
    expected = ds.climnb.label().load()
    np.testing.assert_array_equal(seg.prediction.values, expected.values)
    assert not list(tmp_path.iterdir())  # nothing written


def test_with_a_model_the_prediction_is_segmented_and_written(toy, tmp_path):
    keras = pytest.importorskip("keras")
    from climnb.bundle import save_bundle

    ds = toy[0].isel(time=slice(0, 2))
    inp = keras.Input((None, None, len(CHANNEL_NAMES)))
    conv = keras.layers.Conv2D(3, 1)
    model = keras.Model(inp, conv(inp))
    weights = np.zeros((1, 1, len(CHANNEL_NAMES), 3), "float32")
    conv.set_weights([weights, np.array([0.0, 0.0, 1.0], "float32")])  # class 2 everywhere
    lo = [float(ds[c].min()) for c in CHANNEL_NAMES]
    hi = [float(ds[c].max()) for c in CHANNEL_NAMES]
    bundle = save_bundle(
        model, tmp_path / "run" / "model", channels=CHANNEL_NAMES, minval=lo, maxval=hi,
        name="constant", preset="test", stride=16,
    )  # fmt: skip
    seg = segment_heldout(ds, bundle, batch_size=1)
    assert seg.note == f"segmented with constant (test) from {bundle}"
    assert seg.titles["prediction_name"] == "constant prediction"
    assert seg.prediction.shape == ds.truth.shape and np.all(seg.prediction.values == 2)
    with xr.open_dataset(tmp_path / "run" / PREDICTION_FILE) as written:
        np.testing.assert_array_equal(written[seg.prediction.name].values, 2)


def test_confusion_per_class_against_the_truth_and_the_teacher(toy, tmp_path):
    from climnb.viz.heldout import heldout_confusion, heldout_teacher

    ds = toy[0].isel(time=slice(0, 3))
    assert heldout_teacher(tmp_path / "none.nc", ds) is None
    teacher = ds.truth.where(ds.truth != 2, 0).rename("labels")  # a teacher without rivers
    teacher.to_dataset().to_netcdf(tmp_path / "teacher.nc")
    read = heldout_teacher(tmp_path / "teacher.nc", ds.isel(time=[2, 0]))
    np.testing.assert_array_equal(read.values, teacher.isel(time=[2, 0]).values)
    table = heldout_confusion(ds.truth, {"truth": ds.truth, "teacher": teacher, "none": None})
    assert list(table.index.get_level_values("against").unique()) == ["truth", "teacher"]
    assert table.columns.tolist()[-1] == "IoU"
    np.testing.assert_allclose(table.loc["truth", "IoU"], 1.0)
    assert table.loc[("teacher", "background"), "atmospheric_river"] > 0  # the rivers it lacks
    assert table.loc[("teacher", "tropical_cyclone"), "IoU"] == 1.0
    assert table.loc[("teacher", "atmospheric_river"), "IoU"] == 0.0
