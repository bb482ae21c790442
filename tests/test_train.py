"""The training loop: alone, over real MPI with two ranks, and on ipyparallel engines."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import numpy as np
import pandas as pd
import pytest
from _engines import check_srun_recorded, fake_slurm_allocation, no_engine_processes_left
from _training import toy_config, write_toy_samples

from climnb.train.checkpoint import latest, load_checkpoint
from climnb.train.config import TrainConfig


@pytest.fixture(scope="module")
def samples(tmp_path_factory):
    """20 toy sample files (16 train, 2 validation, 2 test) and their stats."""
    return write_toy_samples(tmp_path_factory.mktemp("samples"), n_time=20, seed=21)


def _config(samples, out, **kw):
    return toy_config(samples, out, **{"checkpoint_every": 3, **kw})


# --- configuration ----------------------------------------------------------------------------


def test_config_round_trip_and_errors(samples, tmp_path):
    config = _config(
        samples, tmp_path, optimizer={"larc": True, "boundaries": [5], "factors": [0.1]}
    )
    assert config.optimizer.larc and config.optimizer.boundaries == (5,)
    assert TrainConfig.from_dict(config.to_dict()) == config
    with pytest.raises(ValueError, match=r"unknown training settings \['epoch'\]"):
        TrainConfig.from_dict({"data_dir": "x", "epoch": 3})
    with pytest.raises(ValueError, match="batch_size must be at least 1"):
        _config(samples, tmp_path, batch_size=0)


def test_missing_data_is_named(tmp_path):
    from climnb.train.loop import train

    with pytest.raises(ValueError, match=f"{tmp_path}: no sample files"):
        train(TrainConfig(data_dir=str(tmp_path), out_dir=str(tmp_path / "run")))


# --- one process ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def single_run(samples, tmp_path_factory):
    from climnb.train.loop import train

    out = tmp_path_factory.mktemp("run")
    config = _config(samples, out, epochs=2)
    return config, train(config)


def test_single_process_trains_and_saves(single_run):
    config, result = single_run
    h = result.history
    assert result.size == 1 and len(h) == 2 * 8  # 16 training files, batch 2
    assert h.loss.iloc[-3:].mean() < h.loss.iloc[:3].mean()  # it learns
    assert {"loss", "loss_avg", "lr", "samples_per_s", "gflops"} <= set(h.columns)
    assert (h.gflops > 0).all()
    assert list(result.validation.epoch) == [0, 1]
    assert 0 <= result.validation.mean_iou.iloc[-1] <= 1
    written = pd.read_csv(config.out / "history.csv")
    assert list(written.step) == list(range(1, 17))
    assert latest(config.out / "checkpoints").name == "ckpt-00000016.npz"
    assert len(list((config.out / "checkpoints").glob("ckpt-*.npz"))) == 2  # keep 2


def test_bundle_predicts_without_horovod(single_run, samples):
    config, result = single_run
    code = (
        "import sys, xarray as xr\n"
        "from climnb.inference.predict import predict\n"
        "from climnb.data.synthetic import make_dataset\n"
        f"ds, _ = make_dataset(n_time=2, seed=99)\n"
        f"p = predict({result.bundle!r}, ds)\n"
        "print(p.dims, p.shape, sorted(set(p.values.ravel().tolist())) <= [0, 1, 2],"
        " 'horovod' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "('time', 'lat', 'lon') (2, 96, 144) True False"


def test_resume_continues_from_the_last_checkpoint(samples, tmp_path):
    from climnb.train.loop import train

    first = train(_config(samples, tmp_path, epochs=2, max_steps=5))
    assert len(first.history) == 5
    second = train(_config(samples, tmp_path, epochs=2))
    steps = list(second.history.step)
    assert steps == list(range(1, 17)), "steps 1-5 restored, 6-16 trained"
    np.testing.assert_allclose(second.history.loss.iloc[:5], first.history.loss)
    ckpt = load_checkpoint(latest(tmp_path / "checkpoints"))
    assert ckpt.state["step"] == 16 and ckpt.state["epoch"] == 2


def test_stop_file_ends_training_cleanly(samples, tmp_path):
    from climnb.train.loop import train

    config = _config(samples, tmp_path, epochs=3)

    def stop_at_two(record):
        if record["kind"] == "step" and record["step"] == 2:
            config.stop_file.touch()

    result = train(config, on_record=stop_at_two)
    assert result.stopped and len(result.history) == 3  # the step in flight completes
    assert latest(tmp_path / "checkpoints").name == "ckpt-00000003.npz"
    assert result.bundle is not None


def test_damaged_checkpoint_is_named(tmp_path):
    bad = tmp_path / "ckpt-00000007.npz"
    bad.write_bytes(b"not a checkpoint")
    with pytest.raises(ValueError, match="checkpoint .*ckpt-00000007.npz is damaged"):
        load_checkpoint(bad)


# --- two ranks over MPI -----------------------------------------------------------------------


# Two ranks of `climnb train` under mpirun ending with identical weights: asserted by
# test_train_staged.py's test_stage_first_then_train_in_one_command, on the run it pays for anyway
# (this was test_two_mpi_ranks_end_with_identical_weights, one more two-rank run); the engines
# below train over MPI without staging and compare their weights too.


# --- engines ----------------------------------------------------------------------------------


@pytest.mark.mpi
@pytest.mark.horovod
@pytest.mark.slow
def test_engines_train_with_dashboard_and_recover_from_a_killed_engine(
    samples, tmp_path, mpi_environ, monkeypatch, capsys
):
    from climnb.runtime.cluster import Engines, SlurmAllocation, detect_launcher
    from climnb.train.engines import TrainingError, train_on_engines
    from climnb.train.loop import plan
    from climnb.viz.dashboard import TrainingDashboard

    config = _config(samples, tmp_path / "run", epochs=4, checkpoint_every=2)
    total = plan(config, 2)["total_steps"]
    assert total == 4 * 4
    # 1. an engine dies mid-run: the error shows within seconds and the engines are stopped.
    # These engines also show what MPI engines are (this was test_cluster.py's
    # test_mpi_engines_run_horovod, which paid for two more engines loading TensorFlow).
    with Engines(n=2, launcher="mpi", threads_per_engine=1) as engines:
        table = engines.init_horovod()
        assert list(table["rank"]) == [0, 1] and set(table["size"]) == {2}
        assert list(table.engine_id) == list(table["rank"]), "MPI engine id is the rank"
        assert set(table.controller) == {"mpi"}
        assert list(table.columns[:5]) == ["rank", "local_rank", "size", "host", "engine_id"]
        assert engines.check_allreduce() == [3.0, 3.0]
        victim = int(table.loc[table["rank"] == 1, "pid"].iloc[0])
        dash = TrainingDashboard(config, total, interactive=False, print_every=0)
        killed = {}

        def kill_after_checkpoint(data):
            dash.update(data)
            if "at" not in killed and dash.step >= 5:
                os.kill(victim, signal.SIGKILL)
                killed["at"] = time.monotonic()

        with pytest.raises(TrainingError, match="died|failed"):
            train_on_engines(engines, config, on_update=kill_after_checkpoint, poll=0.2)
        assert time.monotonic() - killed["at"] < 30
        assert engines.client is None, "engines stopped"
    done_before = load_checkpoint(latest(config.out / "checkpoints")).state["step"]
    assert done_before >= 4
    assert "step " in capsys.readouterr().out  # printed progress when not interactive
    no_engine_processes_left()
    # 2. new engines resume from the last checkpoint and finish; weights agree on both ranks.
    # They start inside a Slurm allocation (a stand-in srun, see _engines.py), which Engines
    # detects and sizes itself from (this was test_cluster.py's test_slurm_allocation_uses_srun,
    # which paid for two more engines loading TensorFlow).
    srun_log = fake_slurm_allocation(tmp_path / "slurm", mpi_environ, monkeypatch)
    assert detect_launcher() == "slurm"
    assert SlurmAllocation.from_env() == SlurmAllocation("4242", 1, 2, 2)
    with Engines() as engines:  # everything from the allocation
        assert engines.launcher == "slurm" and engines.n == 2 and engines.threads == 1
        table = engines.init_horovod()
        assert list(table["rank"]) == [0, 1] and set(table["size"]) == {2}
        assert list(table.engine_id) == list(table["rank"]) and set(table.controller) == {"mpi"}
        dash = TrainingDashboard(config, total, interactive=False)
        results = train_on_engines(engines, config, on_update=dash.update)
    check_srun_recorded(srun_log)
    no_engine_processes_left()
    assert [r.rank for r in results] == [0, 1]
    assert results[0].checksum == results[1].checksum
    assert list(results[0].history.step) == list(range(1, total + 1))
    assert dash.step == total and len(dash.validations) >= 2


def test_dashboard_figures_hold_the_records():
    import holoviews as hv

    from climnb.viz.dashboard import merge_published, training_figures

    steps = [
        {"rank": r, "step": s, "loss": 1.0 / s + r, "loss_avg": 1.0 / s, "samples_per_s": 10.0}
        for r in (0, 1)
        for s in (1, 2, 3)
    ]
    vals = [{"rank": 0, "step": 3, "mean_iou": 0.5, "iou_0": 0.9, "iou_1": 0.2, "iou_2": 0.4}]
    sample = {"label": np.zeros((4, 6), np.uint8), "prediction": np.ones((4, 6), np.uint8)}
    merged = merge_published(
        {
            0: {"steps": steps[:3], "validations": vals, "sample": sample},
            1: {"steps": steps[3:], "validations": []},
        }
    )
    layout = training_figures(*merged)
    assert isinstance(layout, hv.Layout) and len(layout) == 5
    loss = layout[0]
    assert [c.label for c in loss] == ["rank 0", "rank 1", "average"]
    np.testing.assert_allclose(loss.get(2).dimension_values("loss"), [1, 1 / 2, 1 / 3])
    iou = layout[1]
    assert iou.get(0).dimension_values("IoU").tolist() == [0.5]
    assert layout[3].dimension_values("class").max() == 0
    assert layout[4].dimension_values("class").min() == 1


def test_stop_button_writes_the_stop_file(tmp_path):
    from climnb.viz.dashboard import TrainingDashboard

    config = TrainConfig(data_dir=str(tmp_path), out_dir=str(tmp_path / "run"))
    dash = TrainingDashboard(config, 10, interactive=False)
    assert not config.stop_file.exists()
    dash.request_stop()
    assert config.stop_file.exists()
