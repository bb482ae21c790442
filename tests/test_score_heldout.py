"""The demo's held-out headline: the network against its teacher and against the truth."""

from __future__ import annotations

import pytest

from climnb.data.synthetic import make_dataset
from climnb.demo import HELDOUT_FIELDS, HELDOUT_PREDICTION, HELDOUT_TEACHER, heldout_scores
from climnb.labels import LabelConfig, compute, label_dataset


@pytest.fixture
def heldout(tmp_path):
    ds, _ = make_dataset(n_time=2, seed=1000)
    (tmp_path / HELDOUT_FIELDS).parent.mkdir(parents=True)
    (tmp_path / HELDOUT_PREDICTION).parent.mkdir(parents=True)
    ds.to_netcdf(tmp_path / HELDOUT_FIELDS)
    return tmp_path, ds


def test_no_files_no_scores(tmp_path):
    assert heldout_scores(tmp_path) == {}


def test_a_perfect_copy_of_the_teacher(heldout):
    root, ds = heldout
    teacher, _ = compute(*label_dataset(ds, LabelConfig()))
    teacher.rename("prediction").to_dataset().to_netcdf(root / HELDOUT_PREDICTION)
    scores = heldout_scores(root)  # the teacher's labels made here (no teacher file)
    assert scores["model held-out IoU TC vs teacher"] == 1.0
    assert scores["model held-out IoU AR vs teacher"] == 1.0
    # the teacher's rivers pass its own rules: the rules change nothing
    assert scores["model + river rules held-out IoU AR vs teacher"] == 1.0
    assert scores["model + river rules held-out IoU TC vs teacher"] == 1.0
    for c in ("TC", "AR"):
        assert (
            scores[f"model held-out IoU {c} vs truth"]
            == scores[f"teacher held-out IoU {c} vs truth"]
        )
        assert 0.3 < scores[f"teacher held-out IoU {c} vs truth"] < 1.0


def test_teacher_file_and_truth_prediction(heldout):
    root, ds = heldout
    ds.truth.rename("prediction").to_dataset().to_netcdf(root / HELDOUT_PREDICTION)
    teacher = ds.truth.where(ds.truth != 1, 0).rename("labels")  # a teacher without storms
    teacher.to_dataset().to_netcdf(root / HELDOUT_TEACHER)
    scores = heldout_scores(root)
    assert scores["model held-out IoU TC vs truth"] == scores["model held-out IoU AR vs truth"]
    assert scores["model held-out IoU AR vs truth"] == 1.0
    assert scores["model held-out IoU TC vs teacher"] == 0.0
    assert scores["teacher held-out IoU TC vs truth"] == 0.0


def test_headlines_give_the_validation_the_bundle_holds(tmp_path):
    """The model bundle holds the best validation's weights, so the headline is that one's."""
    import pandas as pd

    from climnb.demo import headlines

    (tmp_path / "runs/toy").mkdir(parents=True)
    rows = [(28, 0, 0.6, 0.7, 0.5, True), (56, 1, 0.5, 0.6, 0.4, False)]
    columns = ["step", "epoch", "mean_iou", "iou_1", "iou_2", "best"]
    pd.DataFrame(rows, columns=columns).to_csv(tmp_path / "runs/toy/validation.csv", index=False)
    figures = headlines(tmp_path)
    assert figures["model validation IoU TC"] == 0.7 and figures["model validation IoU AR"] == 0.5
    assert figures["model validation epoch (the bundle's)"] == 1
    # a run folder from before keep-best (no best column): the last validation
    pd.DataFrame(rows, columns=columns).drop(columns="best").to_csv(
        tmp_path / "runs/toy/validation.csv", index=False
    )
    assert headlines(tmp_path)["model validation IoU TC"] == 0.6
