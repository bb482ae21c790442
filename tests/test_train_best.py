"""The bundle holds the best validation's weights; early stopping on the validation block."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from _training import TINY, toy_config, write_toy_samples

pytest.importorskip("keras", reason="training needs TensorFlow/Keras: pip install 'climnb[train]'")

from climnb.bundle import load_bundle  # noqa: E402
from climnb.train.checkpoint import latest, load_checkpoint  # noqa: E402
from climnb.train.config import TrainConfig  # noqa: E402


@pytest.fixture(scope="module")
def samples(tmp_path_factory):
    """12 toy sample files (10 train, 1 validation, 1 test: 5 steps of 2 an epoch) and stats."""
    return write_toy_samples(tmp_path_factory.mktemp("samples"), n_time=12, seed=21)


# the validations must improve in 10 steps before the wreck: wider than _training.TINY, whose
# score stays flat that soon
SMALL = {"growth_rate": 6, "initial_filters": 8, "blocks": [1, 1, 2]}


def _config(samples, out, **kw):
    base = dict(
        model_overrides=SMALL,
        class_weighting="inverse_sqrt",
        lr_decay="none",
        checkpoint_every=1000,
    )
    return toy_config(samples, out, **{**base, **kw})


def _weights(bundle) -> list[np.ndarray]:
    return [np.asarray(w) for w in load_bundle(bundle).model().get_weights()]


@pytest.fixture(scope="module")
def wrecked(samples, tmp_path_factory):
    """2 epochs of 5 steps that learn, then 3 at a learning rate of 2 that wreck the weights:
    the last validation is not the best one."""
    from climnb.train.loop import train

    out = tmp_path_factory.mktemp("wrecked")
    schedule = {"learning_rate": 3e-3, "schedule": "piecewise", "boundaries": [10]}
    config = _config(samples, out, epochs=5, optimizer={**schedule, "factors": [700.0]})
    return config, train(config)


def test_the_bundle_holds_the_best_validation_weights(wrecked):
    config, result = wrecked
    val = pd.read_csv(config.out / "validation.csv")
    assert list(val.epoch) == [0, 1, 2, 3, 4]
    best = val.score.idxmax()
    assert val.best[best] and val.best.sum() >= 1
    assert val.score.iloc[-1] < val.score[best]  # the wrecked end is worse
    bundle = load_bundle(result.bundle)
    assert list(val.step) == [5, 10, 15, 20, 25]
    assert bundle.extra["steps"] == 25  # trained to the end
    assert bundle.extra["weights_step"] == int(val.step[best]) < 25
    assert bundle.extra["best_validation"]["epoch"] == int(val.epoch[best])
    assert bundle.extra["best_validation"]["iou_2"] == pytest.approx(val.iou_2[best])
    kept = load_checkpoint(latest(config.out / "best"))
    assert kept.state["step"] == int(val.step[best])
    for a, b in zip(_weights(result.bundle), kept.model_weights, strict=True):
        np.testing.assert_array_equal(a, b)
    # the last checkpoint holds the last step, for a resumed run to go on from
    last = load_checkpoint(latest(config.out / "checkpoints"))
    assert last.state["step"] == 25
    pairs = zip(last.model_weights, kept.model_weights, strict=True)
    assert any(not np.array_equal(a, b) for a, b in pairs)


def test_without_keep_best_the_bundle_holds_the_last_step(samples, tmp_path):
    from climnb.train.loop import train

    # the bundle is the last step's whatever the scores: the smallest network will do
    result = train(_config(samples, tmp_path, epochs=1, keep_best=False, model_overrides=TINY))
    assert load_bundle(result.bundle).extra["weights_step"] == 5
    assert not (tmp_path / "best").exists()
    last = load_checkpoint(latest(tmp_path / "checkpoints"))
    for a, b in zip(_weights(result.bundle), last.model_weights, strict=True):
        np.testing.assert_array_equal(a, b)


def test_patience_stops_early_and_a_rerun_trains_no_more(samples, tmp_path):
    from climnb.train.loop import train

    # a learning rate of 2 from step 6 on: the weights are wrecked, validations stop improving
    # (the smallest network will do: a flat score is no better either)
    optimizer = {"learning_rate": 3e-3, "schedule": "piecewise", "boundaries": [5]}
    optimizer = {**optimizer, "factors": [700.0]}
    config = _config(
        samples, tmp_path, epochs=10, patience=2, optimizer=optimizer, model_overrides=TINY
    )
    result = train(config)
    scores = list(result.validation.score)
    best = int(np.argmax(scores))  # the first of the best: later equal ones are not better
    assert len(scores) < 10, "stopped early"
    assert len(scores) == best + 1 + 2  # 2 validations without a better one, then stop
    assert result.history.step.max() == 5 * len(scores) and not result.stopped
    bundle = load_bundle(result.bundle)
    assert bundle.extra["early_stopped"] and bundle.extra["weights_step"] == 5 * (best + 1)
    again = train(config)
    assert again.finished_before and again.history.step.max() == 5 * len(scores)


def test_patience_is_checked():
    with pytest.raises(ValueError, match="patience must be at least 1"):
        TrainConfig(data_dir="x", patience=0)
