"""The sample set: layout, manifests with content digests, block split, overwrite, checks."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import time

import h5py
import numpy as np
import pytest
from _stopping import stopping_after

from climnb.cli import main
from climnb.data.synthetic import make_dataset
from climnb.io.channels import CHANNEL_NAMES
from climnb.io.manifest import MANIFEST_NAME, Manifest
from climnb.io.samples import SampleError, write_sample, write_samples
from climnb.io.sampleset import SampleSet, write_sample_set
from climnb.io.split import split_steps
from climnb.io.stats import read_stats, write_stats

H = np.timedelta64(1, "h")


@pytest.fixture(scope="module")
def long_toy():
    """40 toy steps (5 days, 3-hourly): enough for a block split with 24 h gaps."""
    return make_dataset(n_time=40, seed=5)[0]


@pytest.fixture(scope="module")
def sample_set(long_toy, tmp_path_factory):
    return write_sample_set(long_toy, "truth", tmp_path_factory.mktemp("set") / "samples")


def sha(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_manifest_lists_digest_of_every_file(toy, tmp_path):
    ds = toy[0]
    files = write_samples(ds, ds.truth, tmp_path)
    m = Manifest.read(tmp_path)
    assert sorted(m.files) == [f.name for f in files]
    for f in files:
        e = m.files[f.name]
        assert e.sha256 == sha(f) and e.bytes == f.stat().st_size
        assert sum(e.class_counts) == 96 * 144
    assert m.channels == CHANNEL_NAMES
    assert m.grid == (96, 144)
    assert not (tmp_path / ".manifest.jsonl").exists()  # the journal was folded in


def test_single_write_is_journalled(toy, tmp_path):
    ds = toy[0]
    data = ds[list(ds.data_vars)[:16]].isel(time=0).to_dataarray("c").transpose(..., "c")
    path = write_sample(tmp_path / "data-x.h5", data.values, ds.truth[0].values)
    assert Manifest.read(tmp_path).files["data-x.h5"].sha256 == sha(path)


def test_sample_set_api(sample_set, long_toy):
    ss = SampleSet.open(sample_set.root)
    assert ss.splits == ("train", "validation", "test")
    assert ss.channels == read_stats(ss.stats_path).channels
    assert ss.grid == (96, 144)
    counts = {s: len(ss.files(s)) for s in ss.splits}
    assert counts == {"train": 18, "validation": 4, "test": 4}  # 14 steps in two 24 h gaps
    np.testing.assert_array_equal(ss.class_counts("train"), ss.stats().class_counts)
    assert ss.stats().summarises == ss.digest("train")
    assert ss.manifest("train").stats[1].sha256 == sha(ss.stats_path)
    ss.verify()
    split = ss.split()
    assert [len(p) for _, p in split.items()] == list(counts.values())


def test_block_split_keeps_a_day_between_sets(sample_set):
    ss = SampleSet.open(sample_set.root)
    times = {
        s: np.array([ss.manifest(s).files[f.name].time for f in ss.files(s)], "datetime64[s]")
        for s in ss.splits
    }
    for a, b in [("train", "validation"), ("train", "test"), ("validation", "test")]:
        gaps = np.abs(times[a][:, None] - times[b][None, :])
        assert gaps.min() >= 24 * H, (a, b, gaps.min())


def test_random_split_only_on_request():
    t = np.arange("2000-01-01", "2000-01-11", np.timedelta64(3, "h"), "datetime64[h]")
    train, val, _ = split_steps(t, method="random", seed=1)
    assert np.abs(t[train][:, None] - t[val][None, :]).min() < 24 * H  # neighbours mixed
    train, val, _ = split_steps(t)
    assert np.abs(t[train][:, None] - t[val][None, :]).min() >= 24 * H
    with pytest.raises(ValueError, match="too few for a block split"):
        split_steps(t[:8])


def test_flat_folder_split_by_blocks(sample_set, tmp_path, long_toy):
    write_samples(long_toy, long_toy.truth, tmp_path)
    split = SampleSet.open(tmp_path).split()
    assert (len(split.train), len(split.validation), len(split.test)) == (18, 4, 4)


def _fields(ds, path):
    ds.to_netcdf(path)
    return str(path)


def samples_cli(inputs, out, *extra):
    return main(["samples", "--input", *inputs, "--out", str(out), "--no-progress", *extra])


@pytest.fixture(scope="module")
def clean(long_toy, tmp_path_factory):
    """An uninterrupted ``climnb samples`` of ``long_toy``'s fields with the default options:
    what the interrupted and resumed runs must end byte-identical to (made once; a set does
    not depend on its input's path, so each test's own copy of the fields gives the same)."""
    root = tmp_path_factory.mktemp("clean")
    assert samples_cli([_fields(long_toy, root / "f.nc")], root / "clean") == 0
    return root / "clean"


def test_samples_refuses_non_empty_then_overwrites_whole_set(long_toy, tmp_path, capsys):
    src = _fields(long_toy, tmp_path / "f.nc")
    out = tmp_path / "out"
    assert samples_cli([src], out, "--split", "random", "--seed", "1") == 0
    before = {p: sha(p) for p in out.rglob("*") if p.is_file()}
    assert samples_cli([src], out, "--seed", "2") == 2
    assert "--overwrite" in capsys.readouterr().err
    assert {p: sha(p) for p in out.rglob("*") if p.is_file()} == before  # nothing changed
    assert samples_cli([src], out, "--run", "2", "--overwrite") == 0
    printed = capsys.readouterr().out
    ss = SampleSet.open(out)
    names = {s: {f.name for f in ss.files(s)} for s in ss.splits}
    assert f"train {len(names['train'])}, validation {len(names['validation'])}," in printed
    assert not names["train"] & names["validation"] and not names["train"] & names["test"]
    assert all(n.endswith("-2.h5") for s in names.values() for n in s)  # no run-1 file left
    assert sorted(p.name for p in tmp_path.iterdir()) == ["f.nc", "out"]  # nothing beside
    ss.verify()


def test_overwrite_never_deletes_an_input(long_toy, tmp_path, capsys):
    src = _fields(long_toy, tmp_path / "f.nc")
    before = sha(tmp_path / "f.nc")
    assert samples_cli([src], tmp_path, "--overwrite") == 2  # OUT holds the input
    assert "f.nc, not part of a sample set" in capsys.readouterr().err
    assert sha(tmp_path / "f.nc") == before and sorted(tmp_path.iterdir()) == [tmp_path / "f.nc"]
    assert samples_cli([src], tmp_path / "f.nc") == 2  # OUT is the input
    assert "exists and is not a directory" in capsys.readouterr().err
    assert sha(tmp_path / "f.nc") == before


def test_interrupted_overwrite_keeps_old_set(long_toy, tmp_path, monkeypatch):
    out = tmp_path / "out"
    write_sample_set(long_toy, "truth", out)
    before = {p: sha(p) for p in out.rglob("*") if p.is_file()}

    def killed(*a, **k):
        raise KeyboardInterrupt("job killed")

    monkeypatch.setattr("climnb.io.sampleset.compute_stats", killed)
    with pytest.raises(KeyboardInterrupt):
        write_sample_set(long_toy, "truth", out, run=3, overwrite=True)
    assert {p: sha(p) for p in out.rglob("*") if p.is_file()} == before
    # the interrupted run's files wait beside OUT for a rerun to resume
    (partial,) = tmp_path.glob(".out.*.partial")
    assert len(list(partial.glob("train/data-*-3.h5"))) == 18


def test_leftovers_of_a_killed_run_are_cleaned(long_toy, tmp_path):
    out = tmp_path / "out"
    (tmp_path / ".out.1234abcd.tmp" / "train").mkdir(parents=True)
    write_sample_set(long_toy, "truth", out)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


def test_inputs_without_time_get_distinct_names(toy, tmp_path):
    ds = toy[0]
    inputs = []
    for i in range(3):
        path = tmp_path / f"step{i}.nc"
        ds.isel(time=i).drop_vars("time").to_netcdf(path)
        inputs.append(str(path))
    out = tmp_path / "out"
    assert samples_cli(inputs, out, "--split", "random") == 0
    files = SampleSet.open(out).files()
    assert len(files) == 3 and len({f.name for f in files}) == 3


def test_empty_time_axis_is_refused(toy, tmp_path):
    with pytest.raises(SampleError, match="no time steps"):
        write_sample_set(toy[0].isel(time=slice(0, 0)), "truth", tmp_path / "out")
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    ("what", "value", "match"),
    [
        ("data", np.nan, "non-finite value.*nan"),
        ("data", np.inf, "non-finite value.*inf"),
        ("labels", 7, "value 7"),
        ("labels", -1, "value -1"),
        ("labels", 1.5, "value 1.5"),
    ],
    ids=["nan", "inf", "label7", "label-1", "label1.5"],
)
def test_writer_refuses_bad_values(toy, tmp_path, what, value, match):
    ds = toy[0].isel(time=[0, 1]).copy(deep=True)
    labels = ds.truth.astype(float)
    if what == "data":
        ds["TMQ"][1, 5, 7] = value
    else:
        labels[1, 5, 7] = value
    with pytest.raises(SampleError, match=match) as err:
        write_samples(ds, labels, tmp_path)
    assert "data-2000-01-01-03-1.h5" in str(err.value)  # names the file
    assert not list(tmp_path.glob("data-2000-01-01-03-1.h5"))


def test_flipped_bytes_are_caught(sample_set, tmp_path):
    import shutil

    root = tmp_path / "copy"
    shutil.copytree(sample_set.root, root)
    victim = SampleSet.open(root).files("train")[3]
    raw = bytearray(victim.read_bytes())
    raw[-200] ^= 0xFF  # one byte near the end: the file still opens
    victim.write_bytes(bytes(raw))
    with pytest.raises(SampleError, match=f"{victim.name}: content changed"):
        SampleSet.open(root).verify()


def _rewrite_stats(path, **changes):
    stats = read_stats(path)
    from dataclasses import replace

    write_stats(replace(stats, **changes), path)


def test_stats_channel_order_nan_and_digest_checked(sample_set, tmp_path):
    import shutil

    root = tmp_path / "copy"
    shutil.copytree(sample_set.root, root)
    ss = SampleSet.open(root)
    stats = read_stats(ss.stats_path)
    _rewrite_stats(ss.stats_path, channels=stats.channels[::-1])
    with pytest.raises(SampleError, match="do not match the files'"):
        ss.stats()
    _rewrite_stats(ss.stats_path, channels=stats.channels, summarises="0" * 64)
    with pytest.raises(SampleError, match="summarises other files"):
        ss.stats()
    maxval = stats.maxval.copy()
    maxval[6] = np.nan
    _rewrite_stats(ss.stats_path, maxval=maxval, summarises=stats.summarises)
    with pytest.raises(SampleError, match="maxval is nan for channel PS"):
        ss.stats()


def test_deepcam_stats_layout_reads(tmp_path):
    """stats.h5 exactly as DeepCAM's summarising script writes it: ``climate/count`` is one
    integer (the number of files), the rest float32 arrays of 16."""
    path = tmp_path / "stats.h5"
    rng = np.random.default_rng(0)
    with h5py.File(path, "w") as f:
        f["climate/count"] = 1460
        f["climate/mean"] = rng.random(16, dtype=np.float32)
        f["climate/sqmean"] = rng.random(16, dtype=np.float32) + 1
        f["climate/minval"] = -rng.random(16, dtype=np.float32)
        f["climate/maxval"] = rng.random(16, dtype=np.float32) + 2
    assert h5py.File(path)["climate/count"].shape == ()
    stats = read_stats(path)
    assert stats.count.tolist() == [1460] * 16 and len(stats.channels) == 16
    assert stats.class_counts is None and stats.summarises is None


def test_manifest_is_plain_json(sample_set):
    d = json.loads((sample_set.root / "train" / MANIFEST_NAME).read_text())
    assert d["format"].startswith("climnb-manifest/") and d["stats"]["path"] == "../stats.h5"


def tree_digests(root):
    return {str(p.relative_to(root)): sha(p) for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.mark.slow
def test_samples_killed_at_random_moments_then_rerun_equals_clean_run(long_toy, clean, tmp_path):
    """kill -9 at seeded random moments of ``climnb samples --overwrite``; after a final run
    the set is byte-identical to an uninterrupted run's, with nothing left beside it."""
    src = _fields(long_toy, tmp_path / "f.nc")

    def cmd(out):
        args = ["samples", "--input", src, "--out", str(out), "--overwrite", "--no-progress"]
        return [sys.executable, "-m", "climnb", *args]

    out = tmp_path / "killed"
    rng = np.random.default_rng(12)
    # three kills within a run's seconds (a kill after the run ended kills nothing);
    # benchmarks/bench_faults.py kills many more times
    for delay in rng.uniform(0.5, 4.0, size=3):
        p = subprocess.Popen(cmd(out), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(delay)
        p.kill()
        p.wait()
    # the final run: the same command, in this process (no interpreter to start and import)
    assert samples_cli([src], out, "--overwrite") == 0
    assert tree_digests(out) == tree_digests(clean)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["f.nc", "killed"]


def _interrupted_run(monkeypatch, *args, out):
    """``climnb samples`` interrupted after its files are written (while computing stats)."""

    def killed(*a, **k):
        raise KeyboardInterrupt("job killed")

    with monkeypatch.context() as m:
        m.setattr("climnb.io.sampleset.compute_stats", killed)
        assert samples_cli(*args) == 130  # Ctrl-C: one line, the partial folder kept
    (partial,) = out.parent.glob(f".{out.name}.*.partial")
    return partial


def test_rerun_with_other_options_never_mixes(long_toy, tmp_path, monkeypatch, capsys):
    src = _fields(long_toy, tmp_path / "f.nc")
    assert samples_cli([src], tmp_path / "clean", "--run", "2") == 0
    out = tmp_path / "out"
    partial = _interrupted_run(monkeypatch, [src], out, out=out)
    assert samples_cli([src], out, "--run", "2") == 2  # other options: refused, nothing made
    err = capsys.readouterr().err
    assert partial.name in err and "other inputs or options" in err and "--overwrite" in err
    assert not out.exists() and partial.is_dir()
    _fields(long_toy, tmp_path / "g.nc")  # another input file (same values, other mtime)
    assert samples_cli([str(tmp_path / "g.nc")], out) == 2  # other inputs: refused too
    assert samples_cli([src], out, "--run", "2", "--overwrite") == 0  # discards the partial
    assert tree_digests(out) == tree_digests(tmp_path / "clean")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["clean", "f.nc", "g.nc", "out"]


def test_resume_keeps_verified_files_and_rewrites_changed_ones(
    long_toy, clean, tmp_path, monkeypatch
):
    src = _fields(long_toy, tmp_path / "f.nc")
    out = tmp_path / "out"
    partial = _interrupted_run(monkeypatch, [src], out, out=out)
    files = sorted(partial.glob("*/data-*.h5"))
    flipped, lost = files[3], files[-1]
    with open(flipped, "r+b") as f:  # one flipped byte in the data array
        f.seek(flipped.stat().st_size // 2)
        byte = f.read(1)
        f.seek(-1, 1)
        f.write(bytes([byte[0] ^ 0xFF]))
    lost.unlink()
    (flipped.parent / f".{flipped.name}.0123abcd.tmp").write_bytes(b"half")  # a killed write
    inodes = {f.relative_to(partial): f.stat().st_ino for f in files if f not in (flipped, lost)}
    assert samples_cli([src], out) == 0
    assert tree_digests(out) == tree_digests(clean)
    assert {f: (out / f).stat().st_ino for f in inodes} == inodes  # kept, not rewritten
    assert sorted(p.name for p in tmp_path.iterdir()) == ["f.nc", "out"]


def test_sets_are_the_same_whatever_the_chunks(long_toy, tmp_path, monkeypatch):
    """Chunks of several steps (as a toy file opens; here 7, cut by the split's blocks and
    its 24 h gaps) write the very files that one step a chunk writes."""
    from climnb.io import netcdf

    src = _fields(long_toy, tmp_path / "f.nc")
    monkeypatch.setattr(netcdf, "CHUNK_BYTES", 7 * long_toy.TMQ[0].nbytes)
    several = netcdf.open_fields(src)
    assert several.TMQ.chunks[0] == (7, 7, 7, 7, 7, 5)
    write_sample_set(several, "truth", tmp_path / "several")
    write_sample_set(netcdf.open_fields(src, chunks={"time": 1}), "truth", tmp_path / "one")
    assert tree_digests(tmp_path / "several") == tree_digests(tmp_path / "one")


def test_bad_input_leaves_nothing_beside(long_toy, tmp_path):
    bad = long_toy.copy(deep=True)
    bad["TMQ"][39, 5, 5] = np.nan  # the last step: the other files were written before it
    with pytest.raises(SampleError, match="non-finite"):
        write_sample_set(bad, "truth", tmp_path / "out")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.slow
def test_samples_killed_then_same_command_resumes(long_toy, clean, tmp_path):
    """kill -9 at a seeded point (right after K files of the training split are journalled);
    the same command run again keeps those files (verified by digest, same inodes), writes the
    rest and ends byte-identical to an uninterrupted run."""
    src = _fields(long_toy, tmp_path / "f.nc")
    out = tmp_path / "out"
    k = int(np.random.default_rng(7).integers(3, 15))
    args = ["samples", "--input", src, "--out", str(out), "--no-progress"]
    p = subprocess.run(stopping_after(k, "kill", *args), timeout=300)
    assert p.returncode == -9 and not out.exists()
    (journal,) = tmp_path.glob(".out.*.partial/train/.manifest.jsonl")
    journal = journal.read_text().splitlines()
    assert len(journal) == k
    (partial,) = tmp_path.glob(".out.*.partial")
    names = [json.loads(j)["file"] for j in journal]
    inodes = {n: (partial / "train" / n).stat().st_ino for n in names}
    assert samples_cli([src], out) == 0  # the same command again (here: no interpreter to start)
    assert tree_digests(out) == tree_digests(clean)
    assert {n: (out / "train" / n).stat().st_ino for n in names} == inodes  # kept
    assert len(list(out.glob("*/data-*.h5"))) > len(names)  # and the rest written after
    assert sorted(p.name for p in tmp_path.iterdir()) == ["f.nc", "out"]


def test_resume_key_follows_inputs_and_options_without_reading_the_data(toy, tmp_path):
    import xarray as xr

    from climnb.io.setrun import run_key

    src = _fields(toy[0], tmp_path / "f.nc")
    parts = split_steps(None, n=toy[0].sizes["time"])

    def key(ds, **options):
        return run_key(
            ds, ds.truth, "truth", parts, **{"run": 1, "channels": CHANNEL_NAMES, **options}
        )

    lazy = xr.open_dataset(src)
    first = key(lazy)
    assert not lazy.TMQ.variable._in_memory  # a lazily opened file is not read for the key
    assert key(xr.open_dataset(src)) == first  # the same file: the same key
    assert key(lazy, run=2) != first and key(lazy, channels=CHANNEL_NAMES[:8]) != first
    loaded = xr.open_dataset(src).load()
    before = key(loaded)
    loaded["TMQ"][0, 0, 0] += 1  # data in memory: the values count
    assert key(loaded) != before
    _fields(toy[0], tmp_path / "f2.nc")
    (tmp_path / "f2.nc").replace(src)  # the same name, rewritten: another file
    assert key(xr.open_dataset(src)) != first
