"""What notebook 05 explores: the held-out fields and the segmentation compared with the truth."""

from __future__ import annotations

import numpy as np
import pytest
import xarray as xr

import climnb.accessor  # noqa: F401  (ds.climnb)
from climnb.io.channels import CHANNEL_NAMES
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
    ds = toy[0].isel(time=slice(0, 2))
    bundle = _constant_bundle(tmp_path / "run" / "model", ds)  # class 2 everywhere
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


def test_independent_scores_of_a_constant_network_written_beside_it(tmp_path):
    """A network that marks every pixel a river: against any reference its storm IoU is 0 and
    its river IoU the reference's river share; the teacher's row is the teacher scored here."""
    import json

    from climnb.data.synthetic import make_dataset
    from climnb.demo import INDEPENDENT_SCORES, headlines, independent_figures
    from climnb.viz.heldout import INDEPENDENT_FILE, independent_scores

    bundle = _constant_bundle(tmp_path / "runs/toy/model", make_dataset(n_time=2, seed=0)[0])
    assert independent_scores(tmp_path / "none", n_time=3) is None
    assert independent_scores(bundle, n_time=0) is None
    assert not (tmp_path / "runs/toy" / INDEPENDENT_FILE).exists()

    table = independent_scores(bundle, n_time=3, seed=1000, n_lat=64, n_lon=144)
    ds, _ = make_dataset(n_time=3, seed=1000, n_lat=64, n_lon=144)
    teacher = ds.climnb.label().values
    assert table.index.tolist() == [
        "network vs teacher",
        "network vs truth",
        "teacher vs truth",
        "network + river rules vs teacher",
        "network + river rules vs truth",
    ]
    assert table.loc["network vs teacher", "TC"] == 0.0
    assert table.loc["network vs teacher", "AR"] == pytest.approx((teacher == 2).mean())
    assert table.loc["network vs truth", "AR"] == pytest.approx((ds.truth.values == 2).mean())
    for name, c in (("TC", 1), ("AR", 2)):  # counted here, not by the scores' own class_iou
        both = np.count_nonzero((teacher == c) & (ds.truth.values == c))
        either = np.count_nonzero((teacher == c) | (ds.truth.values == c))
        assert either > both > 0  # the teacher finds some of each class, not all
        assert table.loc["teacher vs truth", name] == pytest.approx(both / either, abs=1e-12)
    # with the rules: each hemisphere's river beyond 15 degrees is one object centred on the
    # pole, 1.4 times as long as wide, so the rules leave no river at all
    for row in ("network + river rules vs teacher", "network + river rules vs truth"):
        assert table.loc[row].tolist() == [0.0, 0.0]

    written = json.loads((tmp_path / "runs/toy" / INDEPENDENT_FILE).read_text())
    assert (written["n_time"], written["seed"], written["grid"]) == (3, 1000, [64, 144])
    figures = independent_figures(tmp_path / INDEPENDENT_SCORES)
    assert figures["model independent IoU AR vs teacher"] == table.loc["network vs teacher", "AR"]
    assert figures["teacher independent IoU TC vs truth"] == table.loc["teacher vs truth", "TC"]
    assert figures["model + river rules independent IoU AR vs truth"] == 0.0
    assert len(figures) == 10 and figures.items() <= headlines(tmp_path).items()


def _constant_bundle(path, ds):
    """A model bundle whose network says "river" everywhere (one 1x1 convolution)."""
    keras = pytest.importorskip("keras")
    from climnb.bundle import save_bundle

    inp = keras.Input((None, None, len(CHANNEL_NAMES)))
    conv = keras.layers.Conv2D(3, 1)
    model = keras.Model(inp, conv(inp))
    weights = np.zeros((1, 1, len(CHANNEL_NAMES), 3), "float32")
    conv.set_weights([weights, np.array([0.0, 0.0, 1.0], "float32")])  # class 2 everywhere
    lo = [float(ds[c].min()) for c in CHANNEL_NAMES]
    hi = [float(ds[c].max()) for c in CHANNEL_NAMES]
    return save_bundle(
        model, path, channels=CHANNEL_NAMES, minval=lo, maxval=hi,
        name="constant", preset="test", stride=16,
    )  # fmt: skip
