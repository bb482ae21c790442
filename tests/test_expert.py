"""Expert labels in the ClimateNet layout: the reader, the consensus rules, the factory."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import xarray as xr

from climnb.data.synthetic import make_dataset
from climnb.io.channels import CHANNEL_NAMES
from climnb.labels.components import label_components
from climnb.labels.expert import (
    MISSING,
    consensus,
    expert_name,
    majority,
    open_expert,
    parse_name,
    soft,
    union,
    write_expert_folder,
)

SYNTH = {"n_time": 3, "seed": 5}


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    """Three steps; labellers truth, dilate, miss_small; labeller 2 skipped step 2."""
    path = tmp_path_factory.mktemp("climatenet")
    write_expert_folder(path, skip=[(2, 2)], **SYNTH)
    return path


@pytest.fixture(scope="module")
def truth():
    return make_dataset(**SYNTH)[0].truth


@pytest.fixture(scope="module")
def expert(folder):
    return open_expert(folder)


def test_file_names_follow_the_layout(folder):
    names = sorted(p.name for p in folder.iterdir())
    assert len(names) == 3 * 3 - 1
    assert names[0] == "data-2000-01-01-00-1_0.nc"
    assert "data-2000-01-01-06-1_2.nc" not in names  # the skipped (step 2, labeller 2)
    assert parse_name(folder / names[-1]) == (pd.Timestamp("2000-01-01 06:00"), 1)
    assert expert_name(*parse_name(names[4])) == names[4]


def test_reader_stacks_labellers_with_missing_filled(expert, folder):
    assert expert.LABELS.dims == ("time", "labeller", "lat", "lon")
    assert expert.LABELS.shape == (3, 3, 96, 144)
    assert expert.labeller.values.tolist() == [0, 1, 2]
    assert expert.n_labellers.values.tolist() == [3, 3, 2]
    assert (expert.LABELS.isel(time=2, labeller=2) == MISSING).all()
    assert set(np.unique(expert.LABELS.isel(time=slice(0, 2)))) <= {0, 1, 2}
    assert (
        expert.file.values[2, 2] == ""
        and expert.file.values[0, 1] == folder.glob("data-2000-01-01-00-1_1.nc").__next__().name
    )
    # a glob and a list of files give the same
    xr.testing.assert_identical(open_expert(str(folder / "data-*.nc")), expert)
    files = sorted(folder.glob("data-*.nc"))
    xr.testing.assert_identical(open_expert(files), expert)


def test_labeller_styles_differ_as_documented(expert, truth):
    lab = expert.LABELS
    np.testing.assert_array_equal(lab.sel(labeller=0), truth)
    dilated, missed = lab.sel(labeller=1).values, lab.sel(labeller=2).values[:2]
    assert (dilated[truth.values > 0] > 0).all()  # the dilating labeller covers every event
    assert (dilated > 0).sum() > (truth.values > 0).sum()
    for t in range(2):
        # miss_small drops whole storms, and only storms
        _, n_true = label_components(truth.values[t] == 1)
        _, n_missed = label_components(missed[t] == 1)
        assert 0 < n_missed < n_true
        np.testing.assert_array_equal(missed[t] == 2, truth.values[t] == 2)
        assert (truth.values[t][missed[t] == 1] == 1).all()


def test_majority_is_truth_and_union_is_the_dilating_labeller(expert, truth):
    agreed = majority(expert.LABELS)
    np.testing.assert_array_equal(agreed[:2], truth[:2])
    # step 2 has two labellers: a tie keeps background, or storm over river where the
    # dilating labeller's storm overlaps a true river
    differ = agreed.values[2] != truth.values[2]
    assert (agreed.values[2][differ] == 1).all() and (truth.values[2][differ] == 2).all()
    np.testing.assert_array_equal(union(expert.LABELS), expert.LABELS.sel(labeller=1))
    assert majority(expert.LABELS).dims == ("time", "lat", "lon")


def test_majority_ties_go_to_the_lower_class():
    votes = [[[[0, 1, 1, 2]], [[1, 0, 2, 1]]]]  # two labellers, four pixels
    da = xr.DataArray(np.array(votes, np.int8), dims=("time", "labeller", "lat", "lon"))
    assert majority(da).values.tolist() == [[[0, 0, 1, 1]]]
    assert union(da).values.tolist() == [[[1, 1, 1, 1]]]


def test_soft_target_is_the_mean_of_present_labellers(expert):
    share = soft(expert.LABELS)
    assert share.dims == ("time", "class_id", "lat", "lon")
    np.testing.assert_allclose(share.sum("class_id"), 1.0, rtol=1e-6)
    for c in range(3):
        full = (expert.LABELS.isel(time=0) == c).mean("labeller")
        np.testing.assert_allclose(share.isel(time=0, class_id=c), full, rtol=1e-6)
        two = (expert.LABELS.isel(time=2, labeller=[0, 1]) == c).mean("labeller")
        np.testing.assert_allclose(share.isel(time=2, class_id=c), two, rtol=1e-6)
    xr.testing.assert_identical(consensus(expert.LABELS, "mean"), share)
    with pytest.raises(ValueError, match="consensus must be one of"):
        consensus(expert.LABELS, "vote")


def test_channels_come_with_the_labels(folder):
    ds = open_expert(folder, channels=True)
    fields = make_dataset(**SYNTH)[0]
    assert set(CHANNEL_NAMES) <= set(ds.data_vars)
    assert ds.TMQ.chunks is not None  # lazy: a folder of full-size steps does not fit memory
    np.testing.assert_array_equal(ds.TMQ.values, fields.TMQ.values)
    assert ds.TMQ.dims == ("time", "lat", "lon")


def _write(path, labels, lat=None, lon=None, name="LABELS"):
    lat = np.linspace(-90, 90, labels.shape[0]) if lat is None else lat
    lon = np.arange(labels.shape[1]) * 360.0 / labels.shape[1] if lon is None else lon
    xr.Dataset({name: (("lat", "lon"), labels)}, coords={"lat": lat, "lon": lon}).to_netcdf(path)


@pytest.mark.parametrize(
    "case, message",
    [
        ("no_labels", "has no variable LABELS"),
        ("bad_values", "values other than 0, 1, 2"),
        ("grid", "grid differs"),
        ("name", "not a ClimateNet file name"),
        ("twice", "also in"),
    ],
)
def test_reader_refuses_bad_folders(tmp_path, case, message):
    good = tmp_path / "data-2001-02-03-00-1_0.nc"
    _write(good, np.zeros((6, 8), np.int32))
    bad = tmp_path / "data-2001-02-03-00-1_1.nc"
    if case == "no_labels":
        _write(bad, np.zeros((6, 8), np.int32), name="labels")
    elif case == "bad_values":
        _write(bad, np.full((6, 8), 3, np.int32))
    elif case == "grid":
        _write(bad, np.zeros((5, 8), np.int32))
    elif case == "name":
        bad = tmp_path / "data-2001-02-03.nc"
        _write(bad, np.zeros((6, 8), np.int32))
    paths = [good, bad] if case != "twice" else [good, good]
    with pytest.raises(ValueError, match=message) as err:
        open_expert(paths)
    assert str(bad.name if case != "twice" else good.name) in str(err.value)


def test_factory_is_seeded(tmp_path):
    a = write_expert_folder(tmp_path / "a", n_time=1, seed=3, labellers=("rivers_only",))
    b = write_expert_folder(tmp_path / "b", n_time=1, seed=3, labellers=("rivers_only",))
    la, lb = open_expert(a).LABELS, open_expert(b).LABELS
    xr.testing.assert_identical(la, lb)
    assert 1 not in np.unique(la) and 2 in np.unique(la)
    with pytest.raises(ValueError, match="unknown labeller style"):
        write_expert_folder(tmp_path / "c", labellers=("sloppy",))


def test_layout_is_all_or_none_of_the_files(folder):
    from climnb.labels.expert import in_layout

    files = sorted(folder.glob("data-*.nc"))
    assert in_layout(files) and not in_layout(["fields.nc", "labels.nc"])
    with pytest.raises(ValueError, match="labels.nc: not in the ClimateNet layout"):
        in_layout([*files, "labels.nc"])


def test_step_files_take_each_steps_first_labeller(tmp_path):
    from climnb.labels.expert import step_files

    write_expert_folder(tmp_path, n_time=3, seed=0, labellers=("truth", "dilate"), skip=[(1, 0)])
    names = [p.name for p in step_files(tmp_path)]
    assert names == [
        "data-2000-01-01-00-1_0.nc",
        "data-2000-01-01-03-1_1.nc",  # labeller 0 skipped this step
        "data-2000-01-01-06-1_0.nc",
    ]


def test_notebook_01_labels_a_climatenet_folders_own_fields(tmp_path):
    """Notebook 01 given only ``expert``: its fields, one file a step, are what it labels."""
    from climnb.labels import LabelConfig, compute, label_dataset
    from climnb.labels.expert import step_files
    from climnb.labels.inputs import fields_to_label

    write_expert_folder(tmp_path, n_time=3, seed=0, labellers=("truth", "dilate"), skip=[(1, 0)])
    ds, events = fields_to_label(step_files(tmp_path), LabelConfig())
    made, _ = make_dataset(n_time=3, seed=0)
    assert events is None and ds.sizes == {"time": 3, "lat": 96, "lon": 144}
    np.testing.assert_array_equal(ds.time.values, made.time.values)
    np.testing.assert_allclose(ds.TMQ.values, made.TMQ.values)
    labels, _ = compute(*label_dataset(ds, LabelConfig()))
    assert labels.shape == (3, 96, 144) and set(np.unique(labels.values)) <= {0, 1, 2}


def test_samples_need_the_channels_and_a_known_rule(expert, folder):
    from climnb.labels.expert import expert_samples

    with pytest.raises(ValueError, match="channels=True"):
        expert_samples(expert, "majority")
    with pytest.raises(ValueError, match="each, majority, union, mean"):
        expert_samples(open_expert(folder, channels=True), "vote")
    samples = expert_samples(open_expert(folder, channels=True), "each")
    assert samples.ds.sizes["time"] == len(samples.names) == 3 * 3 - 1
    assert samples.ds.TMQ.chunks is not None  # fields stay lazy, read a sample at a time
