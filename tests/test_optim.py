"""LARC, gradient lag, schedules and loss scaling on numbers that can be checked by hand."""

from __future__ import annotations

import doctest
import math

import numpy as np
import pytest

pytest.importorskip(
    "tensorflow", reason="the optimisers need TensorFlow: pip install 'climnb[train]'"
)

import keras  # noqa: E402
import tensorflow as tf  # noqa: E402

from climnb.train.optim import (  # noqa: E402
    LarcAdam,
    OptimizerConfig,
    larc_factor,
    make_optimizer,
    make_schedule,
)


def lr_at(config, *steps):
    schedule = make_schedule(config)
    return [float(schedule(s)) for s in steps]


# --- schedules -----------------------------------------------------------------------------------


def test_constant_with_warmup():
    cfg = OptimizerConfig(learning_rate=0.01, warmup_steps=4)
    np.testing.assert_allclose(lr_at(cfg, 0, 1, 3, 4, 1000), [0.0025, 0.005, 0.01, 0.01, 0.01])


def test_polynomial_decay_after_warmup():
    cfg = OptimizerConfig(
        learning_rate=1.0,
        warmup_steps=10,
        schedule="poly",
        decay_steps=100,
        power=2.0,
        end_learning_rate=0.1,
    )
    # t = step - 10; lr = 0.9 * (1 - t/100)**2 + 0.1
    np.testing.assert_allclose(
        lr_at(cfg, 9, 10, 60, 110, 500), [1.0, 1.0, 0.9 * 0.25 + 0.1, 0.1, 0.1], rtol=1e-6
    )


def test_piecewise_decay():
    cfg = OptimizerConfig(
        learning_rate=0.1, schedule="piecewise", boundaries=(100, 200), factors=(0.5, 0.1)
    )
    np.testing.assert_allclose(
        lr_at(cfg, 0, 99, 100, 199, 200, 10**6), [0.1, 0.1, 0.05, 0.05, 0.01, 0.01], rtol=1e-6
    )


@pytest.mark.parametrize(
    "kwargs",
    [
        {"schedule": "cosine"},
        {"larc_mode": "trust"},
        {"boundaries": (1, 2), "factors": (0.5,)},
        {"boundaries": (5, 2), "factors": (0.5, 0.1)},
        {"learning_rate": 0.0},
    ],
    ids=["schedule", "larc-mode", "piece-lengths", "piece-order", "zero-lr"],
)
def test_config_validation(kwargs):
    with pytest.raises(ValueError):
        OptimizerConfig(**kwargs)


# --- LARC ----------------------------------------------------------------------------------------


def test_larc_factor_by_hand():
    v = np.array([[3.0, 0.0], [0.0, 4.0]])  # ||v|| = 5
    g = np.array([[0.0, 0.6], [0.8, 0.0]])  # ||g|| = 1
    # local rate = 0.002 * 5 / 1 = 0.01
    assert float(larc_factor(g, v, 0.1)) == pytest.approx(0.1)  # clipped: 0.01 / 0.1
    assert float(larc_factor(g, v, 0.005)) == pytest.approx(1.0)  # min(0.01, lr) = lr
    assert float(larc_factor(g, v, 0.1, eta=0.02)) == pytest.approx(1.0)
    assert float(larc_factor(g, v, 0.1, mode="scale")) == pytest.approx(0.01)
    assert float(larc_factor(10 * g, v, 0.1, mode="scale")) == pytest.approx(0.001)
    # a zero variable (fresh bias) or zero gradient falls back to epsilon
    eps = 1 / 16000
    assert float(larc_factor(g, 0 * v, 0.1)) == pytest.approx(eps / 0.1)
    assert float(larc_factor(0 * g, v, 1.0, mode="scale")) == pytest.approx(eps)
    with pytest.raises(ValueError, match="mode"):
        larc_factor(g, v, 0.1, mode="trust")


def _step(optimizer, init, grads):
    var = keras.Variable(np.array(init, np.float32))
    for g in grads:
        optimizer.apply([tf.constant(g, tf.float32)], [var])
    return var.numpy()


def test_larc_adam_equals_adam_on_rescaled_gradient():
    v0, g = [3.0, 4.0], [0.6, 0.8]  # factor 0.1 at lr 0.1 (see above)
    larc = _step(LarcAdam(learning_rate=0.1, larc=True, epsilon=1e-8), v0, [g])
    plain = _step(keras.optimizers.Adam(learning_rate=0.1, epsilon=1e-8), v0, [[0.06, 0.08]])
    np.testing.assert_allclose(larc, plain, rtol=1e-6)
    # Adam's first step moves each element by lr whatever the gradient scale: 3 - 0.1, 4 - 0.1
    np.testing.assert_allclose(larc, [2.9, 3.9], rtol=1e-5)


def test_larc_changes_the_second_adam_step():
    """Adam is scale-invariant only for a constant scale; LARC's per-step factor is not."""
    grads = [[0.6, 0.8], [6.0, 8.0]]
    larc = _step(LarcAdam(learning_rate=0.1, larc=True), [3.0, 4.0], grads)
    plain = _step(LarcAdam(learning_rate=0.1, larc=False), [3.0, 4.0], grads)
    # factors: 0.002 * 5 / 1 / 0.1 = 0.1, then 0.002 * ||(2.9, 3.9)|| / 10 / 0.1
    f2 = 0.002 * math.hypot(2.9, 3.9) / 10 / 0.1
    rescaled = _step(LarcAdam(learning_rate=0.1), [3.0, 4.0], [[0.06, 0.08], [6 * f2, 8 * f2]])
    np.testing.assert_allclose(larc, rescaled, rtol=1e-6)
    assert not np.allclose(larc, plain, rtol=1e-6)


# --- gradient lag ----------------------------------------------------------------------------


def test_gradient_lag_applies_the_previous_gradient():
    g1, g2, g3 = [1.0, -1.0], [-5.0, 5.0], [2.0, 3.0]
    lagged = LarcAdam(learning_rate=0.1, gradient_lag=True)
    var = keras.Variable(np.array([1.0, 1.0], np.float32))
    lagged.apply([tf.constant(g1)], [var])
    np.testing.assert_array_equal(var.numpy(), [1.0, 1.0])  # first step: zeros, no move
    lagged.apply([tf.constant(g2)], [var])
    # Adam at t = 2 with m = 0.1 g1, v = 0.001 g1^2: step = lr * (0.1/0.19) / sqrt(0.001/0.001999)
    step = 0.1 * (0.1 / (1 - 0.9**2)) / math.sqrt(0.001 / (1 - 0.999**2))
    np.testing.assert_allclose(var.numpy(), [1.0 - step, 1.0 + step], rtol=1e-5)  # along -g1
    lagged.apply([tf.constant(g3)], [var])
    # identical to an unlagged Adam fed (0, g1, g2)
    reference = _step(LarcAdam(learning_rate=0.1), [1.0, 1.0], [[0.0, 0.0], g1, g2])
    np.testing.assert_allclose(var.numpy(), reference, rtol=1e-6)
    assert any("lagged_gradient" in v.path for v in lagged.variables)  # checkpointed


def test_lag_and_larc_compose():
    cfg = OptimizerConfig(learning_rate=0.1, larc=True, gradient_lag=True)
    lagged = _step(make_optimizer(cfg), [3.0, 4.0], [[0.6, 0.8], [60.0, 80.0]])
    ref = _step(
        make_optimizer(OptimizerConfig(learning_rate=0.1, larc=True)),
        [3.0, 4.0],
        [[0.0, 0.0], [0.6, 0.8]],
    )
    np.testing.assert_allclose(lagged, ref, rtol=1e-6)


# --- mixed precision -------------------------------------------------------------------------


def test_dynamic_loss_scaling():
    cfg = OptimizerConfig(
        learning_rate=0.1,
        mixed_precision=True,
        initial_loss_scale=1024.0,
        loss_scale_growth_steps=2,
    )
    opt = make_optimizer(cfg)
    assert isinstance(opt, keras.optimizers.LossScaleOptimizer)
    assert float(opt.scale_loss(tf.constant(2.0))) == 2048.0
    var = keras.Variable(np.array([3.0, 4.0], np.float32))
    # a non-finite gradient: step skipped, scale halved
    opt.apply([tf.constant([np.inf, 1.0])], [var])
    np.testing.assert_array_equal(var.numpy(), [3.0, 4.0])
    assert float(opt.dynamic_scale) == 512.0
    # scaled gradients are unscaled before Adam: same as fp32 with the true gradient
    opt.apply([tf.constant([0.6, 0.8]) * 512.0], [var])
    np.testing.assert_allclose(
        var.numpy(),
        _step(make_optimizer(OptimizerConfig(0.1)), [3.0, 4.0], [[0.6, 0.8]]),
        rtol=1e-6,
    )
    opt.apply([tf.constant([0.6, 0.8]) * 512.0], [var])
    assert float(opt.dynamic_scale) == 1024.0  # grew after 2 good steps


@pytest.mark.parametrize("module", ["keras_optim"])
def test_docstring_examples(module):
    import importlib

    result = doctest.testmod(importlib.import_module(f"climnb.train.{module}"))
    assert result.failed == 0 and result.attempted > 0


def test_config_imports_without_tensorflow():
    import subprocess
    import sys

    code = (
        "import sys; from climnb.train.optim import OptimizerConfig; OptimizerConfig(larc=True); "
        "assert 'tensorflow' not in sys.modules"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
