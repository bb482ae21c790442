"""No split shares a time step or a file name with another, whatever the options and inputs;
model calendars, repeated times and label files in `climnb samples`, `stage` and `tracks`."""

from __future__ import annotations

import json
import shutil

import pytest
import xarray as xr

from climnb.cli import main
from climnb.data.staging import StagingConfig, stage
from climnb.data.synthetic import make_dataset
from climnb.io.manifest import Manifest
from climnb.io.samples import SampleError
from climnb.io.sampleset import SampleSet, write_sample_set
from climnb.io.split import split_steps


@pytest.fixture(scope="module")
def ds():
    return make_dataset(n_time=40, seed=0)[0]


def _names(ss: SampleSet) -> dict[str, set[str]]:
    return {s: {f.name for f in ss.files(s)} for s in ss.splits}


@pytest.mark.parametrize("gap", [-24.0, float("nan"), float("-inf")])
def test_a_negative_or_undefined_gap_is_refused(ds, gap):
    with pytest.raises(ValueError, match="gap_hours"):
        split_steps(ds.time.values, gap_hours=gap)


def test_cli_refuses_a_negative_gap(ds, tmp_path, capsys):
    ds.to_netcdf(tmp_path / "f.nc")
    argv = ["samples", "--input", str(tmp_path / "f.nc"), "--out", str(tmp_path / "s")]
    assert main([*argv, "--gap-hours", "-24", "--no-progress"]) == 2
    assert "--gap-hours" in capsys.readouterr().err
    assert not (tmp_path / "s").exists()


def test_steps_without_time_get_names_unique_across_splits(ds, tmp_path):
    ss = write_sample_set(ds.drop_vars("time"), "truth", tmp_path / "s")
    names = _names(ss)
    assert sum(map(len, names.values())) == 40
    assert not (names["train"] & names["validation"] or names["train"] & names["test"])
    ss.check_disjoint()
    staged = tmp_path / "node{node}"
    stage(StagingConfig(source=str(tmp_path / "s"), dest=str(staged), samples_per_rank=40))
    m = Manifest.read(tmp_path / "node0")
    train, val = m.extra["ranks"]["train"]["0"], m.extra["ranks"]["validation"]["0"]
    assert not set(train) & set(val)  # staging never mixes validation files into training


def test_a_set_whose_splits_share_a_step_is_refused_where_staged(ds, tmp_path):
    src = tmp_path / "s"
    ss = write_sample_set(ds, "truth", src)
    leaked = ss.files("train")[0]
    shutil.copyfile(leaked, src / "validation" / leaked.name)  # a training step in validation
    m = Manifest.read(src / "validation")
    m.with_files({leaked.name: Manifest.read(src / "train").files[leaked.name]}).write(
        src / "validation"
    )
    with pytest.raises(SampleError, match=f"{leaked.name} is in both train/ and validation/"):
        SampleSet.open(src).check_disjoint()
    with pytest.raises(SampleError, match="must not share"):
        stage(StagingConfig(source=str(src), dest=str(tmp_path / "n{node}"), samples_per_rank=4))
    assert not (tmp_path / "n0").exists()


def test_a_manifest_listing_a_deleted_file_is_refused_by_stage_and_predict(ds, tmp_path):
    src = tmp_path / "s"
    ss = write_sample_set(ds, "truth", src)
    gone = ss.files("train")[3]
    gone.unlink()
    with pytest.raises(SampleError, match=f"missing, e.g. {gone.name}"):
        stage(StagingConfig(source=str(src), dest=str(tmp_path / "n{node}"), samples_per_rank=4))
    from climnb.inference.inputs import sample_files

    with pytest.raises(SampleError, match=f"{src / 'train'}.*missing, e.g. {gone.name}"):
        sample_files([src])


def test_absurd_samples_per_rank_is_refused_before_any_work(ds, tmp_path):
    src = tmp_path / "s"
    write_sample_set(ds, "truth", src)
    config = StagingConfig(source=str(src), dest=str(tmp_path / "n{node}"), samples_per_rank=10**7)
    with pytest.raises(ValueError, match="--samples-per-rank"):
        stage(config)
    assert not (tmp_path / "n0").exists()


@pytest.mark.parametrize("calendar", ["noleap", "360_day"])
def test_samples_and_tracks_on_model_calendars(ds, tmp_path, calendar, capsys):
    d = ds.copy()
    d["time"] = xr.date_range(
        "2000-02-27", periods=40, freq="3h", calendar=calendar, use_cftime=True
    )
    d.to_netcdf(tmp_path / "f.nc")
    out = tmp_path / "s"
    argv = ["samples", "--input", str(tmp_path / "f.nc"), "--out", str(out), "--split", "random"]
    assert main(argv) == 0
    names = {f.name for f in SampleSet.open(out).files()}
    assert len(names) == 40 and "data-2000-03-01-00-1.h5" in names
    assert ("data-2000-02-30-00-1.h5" in names) == (calendar == "360_day")
    assert ("data-2000-02-29-00-1.h5" in names) == (calendar == "360_day")  # noleap: no 29th
    assert main(["samples", "--input", str(tmp_path / "f.nc"), "--out", str(tmp_path / "b")]) == 0
    assert main(["tracks", str(tmp_path / "f.nc"), "--out", str(tmp_path / "t.nc")]) == 0
    from climnb.tracks import read_tracks

    tracks = read_tracks(tmp_path / "t.nc")
    assert len(tracks) and getattr(tracks.time.iloc[0], "calendar", None) == calendar


def test_360_day_names_hold_day_30(ds):
    from climnb.io.samples import sample_names

    d = ds.isel(time=slice(0, 24)).copy()
    d["time"] = xr.date_range(
        "2000-02-29", periods=24, freq="3h", calendar="360_day", use_cftime=True
    )
    names = sample_names(d)
    assert "data-2000-02-30-00-1.h5" in names and "data-2000-03-01-00-1.h5" in names


def test_repeated_times_are_refused_naming_the_file_and_time(ds, tmp_path, capsys):
    d = ds.copy()
    t = d.time.values.copy()
    t[5:9] = t[1:5]
    d["time"] = t
    d.to_netcdf(tmp_path / "dup.nc")
    assert main(["samples", "--input", str(tmp_path / "dup.nc"), "--out", str(tmp_path / "s")]) == 2
    err = capsys.readouterr().err
    assert "dup.nc" in err and "2000-01-01T03" in err and "same time twice" in err
    assert main(["tracks", str(tmp_path / "dup.nc"), "--out", str(tmp_path / "t.nc")]) == 2
    err = capsys.readouterr().err
    assert "dup.nc" in err and "2000-01-01T03:00 is repeated" in err
    assert not (tmp_path / "s").exists() and not (tmp_path / "t.nc").exists()


def test_overlapping_inputs_are_refused_naming_both_files(ds, tmp_path, capsys):
    ds.isel(time=slice(0, 20)).to_netcdf(tmp_path / "a.nc")
    ds.isel(time=slice(15, 40)).to_netcdf(tmp_path / "b.nc")
    files = [str(tmp_path / "a.nc"), str(tmp_path / "b.nc")]
    assert main(["samples", "--input", *files, "--out", str(tmp_path / "s")]) == 2
    err = capsys.readouterr().err
    assert "a.nc and" in err and "b.nc both hold time 2000-01-02T21" in err
    assert main(["tracks", *files, "--out", str(tmp_path / "t.nc")]) == 2
    err = capsys.readouterr().err
    assert "a.nc" in err and "b.nc" in err and ("repeated" in err or "also in" in err)


def test_tracks_refuse_a_field_that_is_not_a_mask(ds, tmp_path, capsys):
    ds.to_netcdf(tmp_path / "f.nc")
    argv = ["tracks", str(tmp_path / "f.nc"), "--variable", "TMQ", "--out", str(tmp_path / "t.nc")]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "f.nc" in err[0] and "TMQ is not a class mask" in err[0]


def test_samples_merges_the_label_file_of_climnb_label(ds, tmp_path, capsys):
    ds.drop_vars("truth").to_netcdf(tmp_path / "fields.nc")
    labels = ds.truth.rename("labels")
    labels.to_dataset().to_netcdf(tmp_path / "labels.nc")
    files = [str(tmp_path / "fields.nc"), str(tmp_path / "labels.nc")]
    assert main(["samples", "--input", *files, "--out", str(tmp_path / "s")]) == 0
    ds.rename(truth="labels").to_netcdf(tmp_path / "both.nc")
    assert (
        main(["samples", "--input", str(tmp_path / "both.nc"), "--out", str(tmp_path / "r")]) == 0
    )
    a, b = SampleSet.open(tmp_path / "s"), SampleSet.open(tmp_path / "r")
    assert _names(a) == _names(b)
    ma, mb = a.manifest("train"), b.manifest("train")
    assert [e.sha256 for e in ma.files.values()] == [e.sha256 for e in mb.files.values()]


def test_a_label_file_of_other_times_is_refused(ds, tmp_path, capsys):
    ds.drop_vars("truth").to_netcdf(tmp_path / "fields.nc")
    ds.truth.rename("labels").isel(time=slice(0, 30)).to_dataset().to_netcdf(tmp_path / "l.nc")
    files = [str(tmp_path / "fields.nc"), str(tmp_path / "l.nc")]
    assert main(["samples", "--input", *files, "--out", str(tmp_path / "s")]) == 2
    err = capsys.readouterr().err
    assert "l.nc (labels) and" in err and "fields.nc (fields) do not have the same times" in err


def test_split_file_times_in_manifest_json(ds, tmp_path):
    """The guard reads the manifests' times: a time in two splits under two names counts."""
    src = tmp_path / "s"
    ss = write_sample_set(ds, "truth", src)
    v = ss.files("validation")[0]
    t_train = next(iter(Manifest.read(src / "train").files.values())).time
    data = json.loads((src / "validation" / "manifest.json").read_text())
    data["files"][v.name]["time"] = t_train
    (src / "validation" / "manifest.json").write_text(json.dumps(data))
    with pytest.raises(SampleError, match=f"time {t_train} is in both"):
        SampleSet.open(src).check_disjoint()
