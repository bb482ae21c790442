"""Training never keeps or saves a NaN, and a damaged checkpoint is set aside for the one before."""

from __future__ import annotations

import json
import shutil
import zipfile

import h5py
import numpy as np
import pytest
from _training import TINY, config_file, toy_config, write_toy_samples

from climnb.cli import main
from climnb.data.synthetic import make_dataset
from climnb.io.samples import DATA
from climnb.train.checkpoint import CheckpointError, latest, load_checkpoint, load_latest


@pytest.fixture(scope="module")
def samples(tmp_path_factory):
    return write_toy_samples(tmp_path_factory.mktemp("samples"), n_time=20, seed=5)


def _config(data, out, **kw):
    return toy_config(data, out, **{"checkpoint_every": 1, "keep_checkpoints": 3, **kw})


def test_one_nan_sample_stops_training_naming_step_and_file(samples, tmp_path, capsys):
    from climnb.train.inputs import RankData as _Data

    data = tmp_path / "samples"
    shutil.copytree(samples, data)
    config = _config(data, tmp_path / "run")
    # the 4th training file read in epoch 0 gets one NaN, written by hand (the writer refuses)
    from climnb.train.pipeline import epoch_order

    train = sorted(_Data.prepare(config).train)
    order = epoch_order(len(train), seed=config.seed, epoch=0)
    victim = train[order[3]]
    with h5py.File(victim, "r+") as f:
        f[DATA][10, 20, 0] = np.nan
    argv = ["train", "--data", str(data), "--out", config.out_dir, "--threads", "1"]
    argv += ["--batch-size", "2", "--epochs", "1", "--checkpoint-every", "1"]
    argv += ["--config", str(config_file(tmp_path / "c.json"))]
    assert main(argv) != 0
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert "not finite at step 2 (epoch 0)" in err and victim.name in err, err
    assert "ckpt-00000001.npz" in err
    out = config.out
    assert not (out / "model").exists(), "no model bundle saved"
    assert [p.name for p in (out / "checkpoints").glob("ckpt-*")] == ["ckpt-00000001.npz"]
    kept = load_checkpoint(latest(out / "checkpoints"))  # the last good one, all finite
    assert kept.state["step"] == 1
    assert all(np.isfinite(w).all() for w in kept.model_weights)


def _damage(path, how):
    raw = bytearray(path.read_bytes())
    if how == "truncated":
        path.write_bytes(raw[: len(raw) // 2])
    elif how == "flipped":  # bytes inside the largest array's data: its CRC-32 no longer matches
        with zipfile.ZipFile(path) as z:
            big = max(z.infolist(), key=lambda i: i.compress_size)
        middle = big.header_offset + 100 + big.compress_size // 2  # past both headers
        for i in range(middle, middle + 8):
            raw[i] ^= 0xFF
        path.write_bytes(bytes(raw))
    elif how == "empty":
        path.write_bytes(b"")
    elif how == "garbage":
        path.write_bytes(b"not a checkpoint" * 100)


@pytest.fixture(scope="module")
def trained(samples, tmp_path_factory):
    from climnb.train.loop import train

    out = tmp_path_factory.mktemp("run")
    result = train(_config(samples, out, max_steps=3))
    return out, result


@pytest.mark.parametrize("how", ["truncated", "flipped", "empty", "garbage"])
def test_damaged_checkpoint_falls_back_to_the_previous_one(trained, tmp_path, how, caplog):
    src, _ = trained
    folder = tmp_path / "checkpoints"
    shutil.copytree(src / "checkpoints", folder)
    assert [p.name for p in sorted(folder.glob("ckpt-*"))] == [
        "ckpt-00000001.npz",
        "ckpt-00000002.npz",
        "ckpt-00000003.npz",
    ]
    newest = folder / "ckpt-00000003.npz"
    _damage(newest, how)
    with pytest.raises(CheckpointError, match="ckpt-00000003.npz is damaged"):
        load_checkpoint(newest)
    with caplog.at_level("WARNING"):
        ckpt = load_latest(folder)
    assert ckpt.state["step"] == 2
    assert "ckpt-00000003.npz is damaged" in caplog.text
    assert (folder / "ckpt-00000003.npz.damaged").exists(), "set aside, not deleted"


def test_resume_after_a_damaged_checkpoint_continues_from_the_one_before(
    samples, trained, tmp_path
):
    from climnb.train.loop import train

    src, first = trained
    out = tmp_path / "run"
    shutil.copytree(src, out)
    _damage(out / "checkpoints" / "ckpt-00000003.npz", "flipped")
    result = train(_config(samples, out, max_steps=5))
    assert list(result.history.step) == [1, 2, 3, 4, 5]  # 1-2 restored, 3-5 trained again
    np.testing.assert_allclose(result.history.loss.iloc[:3], first.history.loss.iloc[:3], rtol=1e-5)
    ckpt = load_checkpoint(latest(out / "checkpoints"))
    assert ckpt.path.name == "ckpt-00000005.npz"
    assert (ckpt.state["epoch"], ckpt.state["step_in_epoch"]) == (0, 5)  # counts on after resume


def test_a_rerun_removes_what_a_killed_run_left_half_written(samples, trained, tmp_path):
    """kill -9 during a checkpoint or bundle write leaves hidden temporaries (seen in
    benchmarks/bench_faults.py); the next run removes them before writing anything."""
    from climnb.train.loop import train

    src, _ = trained
    out = tmp_path / "run"
    shutil.copytree(src, out)
    left = [
        out / "checkpoints" / ".ckpt-00000004.npz.1a2b3c4d.tmp",
        out / ".model.5e6f7a8b.tmp",
        out / ".model.9c0d1e2f.old",
    ]
    left[0].write_bytes(b"half a checkpoint")
    for d in left[1:]:
        d.mkdir()
        (d / "model.keras").write_bytes(b"half a model")
    train(_config(samples, out, max_steps=4))
    assert not [p for p in left if p.exists()]
    assert not list(out.rglob(".*.tmp")) and not list(out.rglob(".*.old"))
    assert (out / "checkpoints" / "ckpt-00000004.npz").exists()


def test_non_finite_weights_are_never_checkpointed(tmp_path):
    class Model:
        def get_weights(self):
            return [np.ones(3), np.array([1.0, np.inf])]

    class Optimizer:
        variables = []

    from climnb.train.checkpoint import save_checkpoint

    with pytest.raises(CheckpointError, match="not finite"):
        save_checkpoint(tmp_path, 1, Model(), Optimizer(), {})
    assert not list(tmp_path.iterdir())


def test_a_label_out_of_range_is_refused_naming_the_file(samples, tmp_path, capsys):
    """A hand-written sample file with class 7: one error line naming it, no run folder."""
    from climnb.io.samples import LABELS

    data = tmp_path / "samples"
    shutil.copytree(samples, data)
    for path in data.glob("data-*.h5"):
        with h5py.File(path, "r+") as f:
            f[LABELS][10, 10] = 7
    argv = ["train", "--data", str(data), "--out", str(tmp_path / "run"), "--threads", "1"]
    argv += [
        "--batch-size",
        "2",
        "--max-steps",
        "1",
        "--config",
        str(config_file(tmp_path / "c.json")),
    ]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert str(data) in err and ".h5: climate/labels_0 has values outside 0..2" in err, err
    assert not (tmp_path / "run").exists()


def test_the_sample_set_as_run_folder_is_refused_before_any_work(samples, tmp_path):
    from climnb.train.loop import train

    data = tmp_path / "samples"
    shutil.copytree(samples, data)
    before = sorted(p.relative_to(data) for p in data.rglob("*"))
    with pytest.raises(ValueError, match=r"folder .*samples/\. \(--out, out_dir\) is the sample"):
        train(_config(data, f"{data}/."))
    assert sorted(p.relative_to(data) for p in data.rglob("*")) == before


# --- one rank's bad file stops every rank (climnb.train.together) ---------------------------

_SETTINGS = {"model_overrides": TINY, "read_workers": 0}


def _mpirun_train(tmp_path, env, *argv, timeout=240):
    """``mpirun -np 2 climnb train ARGV``: (exit status, {rank: stderr}); a run still going
    after ``timeout`` seconds (ranks waiting for each other) is killed and fails the test."""
    import os
    import signal
    import subprocess
    import sys

    logs = tmp_path / "logs"
    (tmp_path / "settings.json").write_text(json.dumps(_SETTINGS))
    cmd = ["mpirun", "-np", "2", "--bind-to", "none", "--output-filename", str(logs)]
    cmd += [sys.executable, "-m", "climnb", "train", *argv, "--out", str(tmp_path / "run")]
    cmd += ["--epochs", "1", "--batch-size", "2", "--threads", "1"]
    cmd += ["--config", str(tmp_path / "settings.json")]
    proc = subprocess.Popen(cmd, env=env, start_new_session=True, stdout=subprocess.DEVNULL)
    try:
        code = proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        pytest.fail(f"the ranks still ran after {timeout} s: one waits for the other")
    errs = {int(f.parent.name.split(".")[1]): f.read_text() for f in logs.glob("*/rank.*/stderr")}
    return code, errs


@pytest.fixture(scope="module")
def shared_master(tmp_path_factory):
    """The split sample set the two MPI tests start from, written once (each damages a copy)."""
    from climnb.io.sampleset import write_sample_set

    ds, _ = make_dataset(n_time=40, seed=8)
    return write_sample_set(ds, "truth", tmp_path_factory.mktemp("master") / "shared").root


def _shared_set(master, tmp_path):
    from climnb.io.sampleset import SampleSet

    shutil.copytree(master, tmp_path / "shared")
    return SampleSet.open(tmp_path / "shared")


@pytest.mark.mpi
@pytest.mark.horovod
def test_a_bad_staged_file_on_rank_1_stops_both_ranks_naming_it(shared_master, tmp_path, mpi_env):
    from climnb.data.staging import StagingConfig, stage
    from climnb.io.sampleset import StagedSet

    ss = _shared_set(shared_master, tmp_path)
    pattern = str(tmp_path / "local" / "node{node}")
    stage(StagingConfig(str(ss.root), pattern, n_nodes=2, ranks_per_node=1, samples_per_rank=4))
    victim = StagedSet.open(pattern, node=1).files("train")[0]
    data = bytearray(victim.read_bytes())
    data[len(data) // 2] ^= 0xFF  # same size: only the hash sees it
    victim.write_bytes(bytes(data))
    argv = ["--data", str(ss.root), "--staged", pattern, "--ranks-per-node", "1"]
    code, errs = _mpirun_train(tmp_path, mpi_env, *argv)
    assert code != 0
    assert set(errs) == {0, 1}, errs
    for rank, err in errs.items():  # both say which rank and which file, in one line
        line = [ln for ln in err.splitlines() if ln.startswith("climnb train: error")]
        assert len(line) == 1 and f"rank 1 of 2: {victim}" in line[0], (rank, err[-2000:])
    assert not (tmp_path / "run" / "model").exists()


@pytest.mark.mpi
@pytest.mark.horovod
def test_a_damaged_file_on_one_rank_aborts_every_rank(shared_master, tmp_path, mpi_env):
    ss = _shared_set(shared_master, tmp_path)
    shard = sorted(ss.files("train"))[1::2]  # rank 1's files (climnb.train.pipeline.shard_files)
    for f in shard:  # a damaged HDF5 header, same size: found only when the reader opens it
        data = bytearray(f.read_bytes())
        data[0:8] = b"garbage!"
        f.write_bytes(bytes(data))
    code, errs = _mpirun_train(tmp_path, mpi_env, "--data", str(ss.root))
    assert code != 0
    line = [ln for ln in errs.get(1, "").splitlines() if ln.startswith("climnb train: error")]
    assert len(line) == 1, errs
    assert "(rank 1 of 2)" in line[0] and "aborting every rank" in line[0]
    assert any(str(f) in line[0] for f in shard), line[0]
    assert not (tmp_path / "run" / "model").exists()
