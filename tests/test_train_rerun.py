"""A finished training run is left as it is by a rerun; a lost bundle is rewritten from the last
checkpoint without training; a bundle records the model overrides, so it predicts on any grid."""

from __future__ import annotations

import hashlib
import shutil

import numpy as np
import pytest
from _training import TINY, config_file, write_toy_samples

pytest.importorskip("keras", reason="training needs TensorFlow/Keras: pip install 'climnb[train]'")

from climnb.bundle import load_bundle  # noqa: E402
from climnb.cli import main  # noqa: E402
from climnb.data.synthetic import make_dataset  # noqa: E402


def _digest(folder) -> dict[str, str]:
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """A finished two-step run with model overrides, and its argv."""
    root = tmp_path_factory.mktemp("rerun")
    data = write_toy_samples(root / "samples", n_time=20, seed=5)
    config = config_file(root / "config.json")
    argv = [
        "train", "--data", str(data), "--out", str(root / "run"), "--config", str(config),
        "--max-steps", "2", "--batch-size", "2", "--threads", "1", "--epochs", "1",
    ]  # fmt: skip
    assert main(argv) == 0
    return root / "run", argv


def test_rerun_of_a_finished_run_changes_nothing(run, capsys):
    out, argv = run
    before = _digest(out)
    capsys.readouterr()
    assert main(argv) == 0
    said = capsys.readouterr().out
    assert "had finished" in said and "left as it is" in said, said
    assert _digest(out) == before  # weights, checkpoints, history: the same bytes


def test_a_lost_bundle_is_rewritten_from_the_checkpoint_without_training(run, tmp_path):
    out, argv = run
    copy = tmp_path / "run"
    shutil.copytree(out, copy)
    weights = load_bundle(out / "model").model().get_weights()
    checkpoints = _digest(copy / "checkpoints")
    shutil.rmtree(copy / "model")
    argv = [a if a != str(out) else str(copy) for a in argv]
    assert main(argv) == 0
    bundle = load_bundle(copy / "model")
    assert bundle.extra["steps"] == 2
    for a, b in zip(weights, bundle.model().get_weights(), strict=True):
        np.testing.assert_array_equal(a, b)
    assert _digest(copy / "checkpoints") == checkpoints  # no step trained, none saved


def test_bundle_records_overrides_and_predicts_on_another_grid(run):
    from climnb.inference.predict import predict

    out, _ = run
    bundle = load_bundle(out / "model")
    assert bundle.overrides == TINY
    other, _ = make_dataset(n_time=2, n_lat=64, n_lon=160, seed=9)  # not the training grid
    pred = predict(bundle, other).load()
    assert pred.shape == (2, 64, 160)
    assert set(np.unique(pred.values)) <= {0, 1, 2}
