"""A ClimateNet-layout folder through the workflow: ``climnb samples --labellers``, the split on
time steps, the manifests' labeller fields, soft targets through the pipeline, the loss and
staging, and one real training run on them that ``climnb predict`` and ``climnb score`` take."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import xarray as xr
from _training import TINY

from climnb.cli import main
from climnb.io.samples import read_sample, read_soft_labels
from climnb.io.sampleset import SampleSet, StagedSet
from climnb.labels.expert import (
    LABELLERS,
    expert_name,
    majority,
    open_expert,
    soft,
    union,
    write_expert_folder,
)

GAP = 6.0  # hours between the sets: 16 steps of 3 h leave 10 / 2 / 2 steps
# labellers 0 truth, 1 dilate, 2 miss_small; labeller 1 skipped step 3, labeller 2 step 15
SKIP = [(3, 1), (15, 2)]


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    path = tmp_path_factory.mktemp("climatenet")
    write_expert_folder(path, n_time=16, seed=1, skip=SKIP)
    return path


@pytest.fixture(scope="module")
def expert(folder):
    return open_expert(folder)


@pytest.fixture(scope="module")
def sets(folder, tmp_path_factory):
    """The folder written with each ``--labellers`` value, and with none (``default``)."""
    root = tmp_path_factory.mktemp("sets")
    out = {}
    for how in (*LABELLERS, "default"):
        flag = [] if how == "default" else ["--labellers", how]
        source = str(folder / "data-*.nc") if how == "default" else str(folder)  # glob, folder
        argv = ["samples", "--input", source, "--out", str(root / how), "--gap-hours", str(GAP)]
        assert main([*argv, *flag, "--no-progress"]) == 0
        out[how] = SampleSet.open(root / how)
    return out


def _entries(ss: SampleSet):
    """(split, file, manifest entry) of every sample."""
    return [(s, f, ss.manifest(s).files[f.name]) for s in ss.splits for f in ss.files(s)]


def _time(entry):
    return np.datetime64(entry.time, "ns")


def test_default_is_majority(sets):
    default, chosen = _entries(sets["default"]), _entries(sets["majority"])
    assert [(s, f.name) for s, f, _ in default] == [(s, f.name) for s, f, _ in chosen]
    assert {e.consensus for *_, e in default} == {"majority"}
    for (_, a, _), (_, b, _) in zip(default, chosen, strict=True):
        np.testing.assert_array_equal(read_sample(a)[1], read_sample(b)[1])


def test_each_gives_one_sample_per_labeller_named_and_recorded(sets, expert):
    entries = _entries(sets["each"])
    steps = {_time(e) for *_, e in entries}
    present = expert.LABELS.isel(lat=0, lon=0) != -1
    expected = int(present.sel(time=sorted(steps)).sum())
    assert len(entries) == expected  # every labeller of every step kept, none invented
    for _, f, e in entries:
        assert f.name.endswith(f"-1_{e.labeller}.h5") and e.labellers is None
        want = expert.LABELS.sel(time=_time(e), labeller=e.labeller).values
        np.testing.assert_array_equal(read_sample(f)[1], want)
        assert read_soft_labels(f) is None


@pytest.mark.parametrize("how", ["majority", "union", "mean"])
def test_consensus_gives_one_sample_per_step(sets, expert, how):
    rule = {"majority": majority, "union": union, "mean": majority}[how]
    target = rule(expert.LABELS)
    shares = soft(expert.LABELS)
    for _, f, e in _entries(sets[how]):
        t = _time(e)
        labelled = expert.labeller.values[expert.LABELS.sel(time=t).isel(lat=0, lon=0) != -1]
        assert e.consensus == how and list(e.labellers) == labelled.tolist()
        assert e.labeller is None and f.name == expert_name(t, 0).replace("_0.nc", ".h5")
        labels = read_sample(f)[1]
        np.testing.assert_array_equal(labels, target.sel(time=t).values)
        if len(labelled) == 3:  # the factory's promises: majority = truth, union = dilate
            known = {"majority": 0, "mean": 0, "union": 1}[how]
            np.testing.assert_array_equal(labels, expert.LABELS.sel(time=t, labeller=known))
        stored = read_soft_labels(f)
        if how != "mean":
            assert stored is None
            continue
        want = shares.sel(time=t).transpose("lat", "lon", "class_id").values
        np.testing.assert_allclose(stored, want, atol=1e-7)
        np.testing.assert_array_equal(stored.argmax(-1), labels)  # class ids: the argmax


@pytest.mark.parametrize("how", LABELLERS)
def test_split_works_on_time_steps(sets, expert, how):
    ss = sets[how]
    ss.check_disjoint()
    entries = _entries(ss)
    split_of: dict = {}
    for s, _, e in entries:
        assert split_of.setdefault(_time(e), s) == s, f"{e.time} in two splits"
    names = [f.name for _, f, _ in entries]
    assert len(names) == len(set(names))  # unique across the splits
    # the gap is between steps: any two steps of different sets at least GAP hours apart
    steps = sorted(split_of)
    for a in steps:
        for b in steps:
            if split_of[a] != split_of[b]:
                assert abs(a - b) >= np.timedelta64(int(GAP), "h")
    # every labeller of a kept step is in its split; steps in the gaps have no sample at all
    per_step = pd.Series([_time(e) for *_, e in entries]).value_counts()
    n = expert.n_labellers.to_series()
    for t, count in per_step.items():
        assert count == (n[t] if how == "each" else 1)
    assert [len(ss.times(s)) for s in ss.splits] == [10, 2, 2]


def _pipeline(files, stats, *, shuffle, weights, augment=None):
    from climnb.train.pipeline import PipelineConfig, make_dataset

    cfg = PipelineConfig(batch_size=2, shuffle=shuffle, workers=0, prefetch=0, augment=augment)
    return make_dataset(files, stats, class_weights=weights, config=cfg)


def test_pipeline_feeds_soft_targets_to_training_and_class_ids_to_validation(sets):
    from climnb.train.pipeline import epoch_order, shard_files

    ss, weights = sets["mean"], np.array([0.1, 0.6, 0.3], np.float32)
    files = shard_files(ss.files("train"))
    x, y, w = next(iter(_pipeline(files, ss.stats(), shuffle=True, weights=weights)))
    assert y.dtype.name == "float32" and y.shape == (2, 96, 144, 3)
    order = epoch_order(len(files), seed=0, epoch=0)[:2]
    for k, i in enumerate(order):
        np.testing.assert_array_equal(y[k], read_soft_labels(files[i]))
    np.testing.assert_allclose(w, np.asarray(y) @ weights, rtol=1e-6)
    assert 0 < np.mean((np.asarray(y) > 0) & (np.asarray(y) < 1))  # labellers disagree somewhere
    # rolled along longitude, the shares move with the data
    from climnb.train.pipeline import roll_shifts

    _, rolled, _ = next(
        iter(_pipeline(files, ss.stats(), shuffle=True, weights=None, augment="roll"))
    )
    shifts = roll_shifts(2, 144, seed=0, epoch=0, batch=0)
    for k in range(2):
        np.testing.assert_array_equal(rolled[k], np.roll(y[k], shifts[k], axis=1))
    val = ss.files("validation")
    _, y, w = next(iter(_pipeline(val, ss.stats(), shuffle=False, weights=weights)))
    assert y.dtype.name == "int32" and y.shape == (2, 96, 144)
    np.testing.assert_array_equal(y[0], read_sample(val[0])[1])
    np.testing.assert_allclose(w[0], weights[np.asarray(y[0])])


def test_staging_carries_the_soft_targets(sets, tmp_path):
    from climnb.data.staging import StagingConfig, stage

    ss = sets["mean"]
    cfg = StagingConfig(
        source=str(ss.root),
        dest=str(tmp_path / "node{node}"),
        n_nodes=1,
        ranks_per_node=1,
        samples_per_rank=4,
        seed=0,
    )
    stage(cfg)
    staged = StagedSet.open(tmp_path / "node{node}")
    files = staged.files("train")
    source = {f.name: f for f in ss.files("train")}
    entries = staged.manifest().files
    for f in files:
        np.testing.assert_array_equal(read_soft_labels(f), read_soft_labels(source[f.name]))
        assert entries[f.name].consensus == "mean"  # the manifest's record travels too
        assert entries[f.name].labellers == ss.manifest("train").files[f.name].labellers
    _, y, _ = next(iter(_pipeline(files, staged.stats(), shuffle=True, weights=None)))
    assert y.shape[-1] == 3 and y.dtype.name == "float32"


@pytest.fixture(scope="module")
def tf():
    return pytest.importorskip("tensorflow")


def test_loss_of_a_one_hot_target_is_that_of_the_class_ids(tf):
    from climnb.models.losses import weighted_cross_entropy

    rng = np.random.default_rng(0)
    logits = rng.normal(size=(2, 4, 5, 3)).astype(np.float32)
    ids = rng.integers(0, 3, size=(2, 4, 5))
    one_hot = np.eye(3, dtype=np.float32)[ids]
    weights = [0.2, 0.5, 0.3]
    for reduction in ("mean", "weighted_mean", "none"):
        a = weighted_cross_entropy(ids, logits, weights, reduction)
        b = weighted_cross_entropy(one_hot, logits, weights, reduction)
        np.testing.assert_allclose(a, b, rtol=1e-6)
    # the class ids with a trailing axis of 1 are still class ids, not a soft target
    np.testing.assert_allclose(
        weighted_cross_entropy(ids[..., None], logits, weights),
        weighted_cross_entropy(ids, logits, weights),
    )


def test_loss_of_a_soft_target(tf):
    from climnb.models.losses import weighted_cross_entropy

    rng = np.random.default_rng(1)
    logits = rng.normal(size=(1, 3, 2, 3)).astype(np.float32)
    target = rng.dirichlet([1, 1, 1], size=(1, 3, 2)).astype(np.float32)
    weights = np.array([0.2, 0.5, 0.3])
    logp = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    ce, w = -(target * logp).sum(-1), target @ weights
    got = weighted_cross_entropy(target, logits, weights, "weighted_mean")
    np.testing.assert_allclose(got, (w * ce).sum() / w.sum(), rtol=1e-5)
    np.testing.assert_allclose(
        weighted_cross_entropy(target, logits, weights), (w * ce).mean(), rtol=1e-5
    )


def _train(data: Path, out: Path, config: Path, steps: int) -> pd.DataFrame:
    argv = [
        "train", "--data", str(data), "--out", str(out), "--config", str(config),
        "--max-steps", str(steps), "--batch-size", "2", "--threads", "1", "--epochs", "1",
        "--seed", "0",
    ]  # fmt: skip
    assert main(argv) == 0
    return pd.read_csv(out / "history.csv")


def test_mean_set_trains_on_soft_targets_and_is_scored(sets, folder, tmp_path, capsys, tf):
    """Real training on the ``mean`` set; its first loss is not that of the class ids (the
    ``majority`` set: the same files, inputs, weights and order, only ``y`` differs); the
    model predicts the held-out steps and ``climnb score`` scores them against each
    labeller."""
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"model_overrides": TINY}))  # the network's size proves nothing
    soft_run = _train(sets["mean"].root, tmp_path / "soft", config, steps=2)
    hard_run = _train(sets["majority"].root, tmp_path / "hard", config, steps=1)
    assert np.isfinite(soft_run.loss).all() and len(soft_run) == 2
    assert abs(soft_run.loss.iloc[0] - hard_run.loss.iloc[0]) > 1e-4 * hard_run.loss.iloc[0]
    validation = pd.read_csv(tmp_path / "soft" / "validation.csv")
    assert np.isfinite(validation.mean_iou).all()  # scored on the class ids

    prediction = tmp_path / "prediction.nc"
    test = sets["mean"].root / "test"
    argv = ["predict", "--model", str(tmp_path / "soft" / "model"), str(test)]
    assert main([*argv, "--out", str(prediction), "--no-progress"]) == 0
    scores = tmp_path / "scores.csv"
    capsys.readouterr()
    argv = ["score", str(prediction), "--expert", str(folder), "--csv", str(scores)]
    assert main(argv) == 0
    table = pd.read_csv(scores)
    against = table[table.compared == "prediction.nc"].against.tolist()
    assert against == ["labeller 0", "labeller 1", "labeller 2", "majority"]
    # the test block: 2 steps, the last of which labeller 2 skipped
    assert table[table.compared == "prediction.nc"].steps.tolist() == [2, 2, 1, 2]
    assert len(table) == 4 + 3  # and the three pairs of labellers
    with xr.open_dataset(prediction) as ds:
        assert ds.sizes["time"] == 2


def _one_line_error(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    return err[0]


def test_bad_input_is_one_line_naming_the_file_or_option(folder, tmp_path, capsys, toy):
    # a labeller on another grid
    mixed = tmp_path / "mixed"
    write_expert_folder(mixed, n_time=2, seed=1, labellers=("truth",))
    other = tmp_path / "other"
    write_expert_folder(other, n_time=2, seed=1, labellers=("truth", "dilate"), n_lat=48)
    (other / "data-2000-01-01-00-1_1.nc").rename(mixed / "data-2000-01-01-00-1_1.nc")
    out = tmp_path / "out"
    assert main(["samples", "--input", str(mixed), "--out", str(out)]) == 2
    line = _one_line_error(capsys)
    assert "data-2000-01-01-00-1_1.nc" in line and "grid" in line
    # --labellers on files that are not in the layout
    fields = tmp_path / "fields.nc"
    toy[0].to_netcdf(fields)
    assert main(["samples", "--input", str(fields), "--out", str(out), "--labellers", "each"]) == 2
    line = _one_line_error(capsys)
    assert "--labellers" in line and "fields.nc" in line
    # ClimateNet files mixed with other files
    argv = ["samples", "--input", str(folder / "data-*.nc"), str(fields), "--out", str(out)]
    assert main(argv) == 2
    assert "fields.nc" in _one_line_error(capsys)
    # a label variable the files lack
    argv = ["samples", "--input", str(folder), "--out", str(out), "--labels", "MASK"]
    assert main(argv) == 2
    line = _one_line_error(capsys)
    assert "MASK" in line and "data-2000-01-01-00-1_0.nc" in line
    assert not out.exists()
