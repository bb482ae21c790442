"""Scores against expert labels: the Python functions and ``climnb score``."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import xarray as xr

from climnb.cli import main
from climnb.data.synthetic import make_dataset
from climnb.labels.expert import open_expert, write_expert_folder
from climnb.labels.scores import EXPERT_COLUMNS, class_iou, expert_scores, iou
from climnb.models.metrics import confusion_matrix_np, iou_from_confusion

SYNTH = {"n_time": 3, "seed": 5}


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """A ClimateNet folder (labellers truth, dilate, miss_small; labeller 2 skipped step 2) and
    a mask file holding the truth of the same steps and one step more."""
    root = tmp_path_factory.mktemp("score")
    write_expert_folder(root / "expert", skip=[(2, 2)], **SYNTH)
    ds = make_dataset(n_time=4, seed=5)[0]
    ds[["truth"]].rename(truth="labels").to_netcdf(root / "labels.nc")
    return root


def test_absent_class_is_nan_and_left_out_of_the_mean():
    assert np.isnan(iou(np.zeros(4), np.zeros(4), 1))
    per_class, mean = class_iou([0, 0, 2, 2], [0, 0, 2, 0])
    assert np.isnan(per_class[1]) and mean == pytest.approx((2 / 3 + 1 / 2) / 2)


def test_class_iou_follows_the_training_metric():
    rng = np.random.default_rng(0)
    a, b = rng.integers(0, 3, 500), rng.integers(0, 2, 500)  # class 2 never in b
    ours, mean = class_iou(a, b)
    theirs, their_mean = iou_from_confusion(confusion_matrix_np(b, a, 3))
    np.testing.assert_allclose(ours, theirs)
    assert mean == pytest.approx(their_mean)
    assert class_iou(a, a)[0].tolist() == [1.0, 1.0, 1.0]


def test_expert_scores_of_the_truth(files):
    mask = xr.open_dataset(files / "labels.nc").labels
    expert = open_expert(files / "expert")
    table = expert_scores(mask, expert, rules=("majority", "union"), name="truth")
    assert list(table.columns) == list(EXPERT_COLUMNS)
    rows = table.set_index(["compared", "against"])
    assert rows.loc[("truth", "labeller 0")][["background", "mean"]].tolist() == [1.0, 1.0]
    assert rows.loc[("truth", "labeller 0"), "steps"] == 3  # the fourth step is not expert's
    assert rows.loc[("truth", "labeller 2"), "steps"] == 2  # labeller 2 skipped a step
    assert rows.loc[("truth", "labeller 2"), "tropical_cyclone"] < 1.0  # small storms missed
    assert rows.loc[("truth", "labeller 2"), "atmospheric_river"] == 1.0
    assert rows.loc[("truth", "labeller 1"), "tropical_cyclone"] < 1.0  # dilated
    scores = list(EXPERT_COLUMNS[2:])  # the union of these labellers is the dilating one
    np.testing.assert_allclose(
        rows.loc[("truth", "union")][scores], rows.loc[("truth", "labeller 1")][scores]
    )
    # inter-labeller agreement: every pair, on the steps both labelled
    pairs = table[table.compared.str.startswith("labeller")]
    assert list(zip(pairs.compared, pairs.against, pairs.steps, strict=True)) == [
        ("labeller 0", "labeller 1", 3),
        ("labeller 0", "labeller 2", 2),
        ("labeller 1", "labeller 2", 2),
    ]
    same = rows.loc[("labeller 0", "labeller 2")]
    assert same.tropical_cyclone == rows.loc[("truth", "labeller 2")].tropical_cyclone


def test_mask_times_in_a_model_calendar_match(files):
    mask = xr.open_dataset(files / "labels.nc").labels
    noleap = mask.convert_calendar("noleap")
    assert isinstance(noleap.indexes["time"], xr.CFTimeIndex)
    expert = open_expert(files / "expert")
    pd.testing.assert_frame_equal(expert_scores(noleap, expert), expert_scores(mask, expert))


def test_expert_scores_refuses_a_soft_consensus(files):
    mask = xr.open_dataset(files / "labels.nc").labels
    with pytest.raises(ValueError, match="hard consensus"):
        expert_scores(mask, open_expert(files / "expert"), rules=("mean",))


def test_score_command_prints_and_writes_csv(files, tmp_path, capsys):
    out = tmp_path / "scores.csv"
    argv = ["score", str(files / "labels.nc"), "--expert", str(files / "expert" / "data-*.nc")]
    assert main([*argv, "--csv", str(out), "--consensus", "majority", "union"]) == 0
    printed = capsys.readouterr().out
    assert "labeller 0" in printed and "union" in printed and "NaN" in printed
    table = pd.read_csv(out)
    assert len(table) == 3 + 2 + 3
    assert table.iloc[0].compared == "labels.nc" and table.iloc[0]["mean"] == 1.0


def _mask(path, **kwargs):
    ds = make_dataset(**{**SYNTH, **kwargs})[0]
    ds[["truth"]].rename(truth="labels").to_netcdf(path)
    return path


@pytest.mark.parametrize(
    "case, message",
    [
        ("times", "no time step in common"),
        ("grid", "grids differ"),
        ("variable", "has no variable"),
        ("values", "values other than 0, 1, 2"),
        ("no_labels", "has no variable LABELS"),
    ],
)
def test_score_command_bad_input(files, tmp_path, capsys, case, message):
    mask = tmp_path / "mask.nc"
    expert = str(files / "expert")
    extra = []
    if case == "times":
        _mask(mask, start="2010-01-01")
    elif case == "grid":
        _mask(mask, n_lat=95)
    elif case == "variable":
        _mask(mask)
        extra = ["--variable", "prediction"]
    elif case == "values":
        coords = {"lat": [-45.0, -15.0, 15.0, 45.0], "lon": [0.0, 90.0, 180.0, 270.0]}
        seven = xr.Dataset({"labels": (("time", "lat", "lon"), np.full((1, 4, 4), 7))}, coords)
        seven.to_netcdf(mask)  # coordinates: a mask without them is refused for that first
    elif case == "no_labels":
        _mask(mask)
        bad = tmp_path / "expert"
        bad.mkdir()
        xr.Dataset({"TMQ": (("lat", "lon"), np.zeros((4, 4)))}).to_netcdf(
            bad / "data-2000-01-01-00-1_0.nc"
        )
        expert = str(bad)
    assert main(["score", str(mask), "--expert", expert, *extra]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0]
    assert ("data-2000-01-01-00-1_0.nc" if case == "no_labels" else "mask.nc") in err[0]
