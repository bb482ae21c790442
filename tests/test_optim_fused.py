"""LarcAdam's fused Adam step (TensorFlow's ``ResourceApplyAdam``) is Keras' Adam step.

Not to the bit: Keras computes ``1 - beta_2`` in Python (0.001 in float32), the kernel in
float32 (``1 - float32(0.999)`` = 0.00099998713), so the second moment differs by 1.3e-5 and
the step by ~6e-6 relative; the tolerances below are 10x that, far below what a wrong
constant, a missing bias correction or a swapped moment would give.
"""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip(
    "tensorflow", reason="the optimisers need TensorFlow: pip install 'climnb[train]'"
)

import keras  # noqa: E402
import tensorflow as tf  # noqa: E402

from climnb.train.optim import LarcAdam, OptimizerConfig, make_optimizer  # noqa: E402

SHAPES = [(5, 5, 3, 4), (4,), (1, 1, 4, 2)]


def _run(fused, config, steps=4, compiled=False):
    """Moves of the variables, Adam moments and graph op types after ``steps`` applies."""
    rng = np.random.default_rng(1)
    init = [rng.standard_normal(s).astype(np.float32) for s in SHAPES]
    variables = [keras.Variable(v) for v in init]
    optimizer = make_optimizer(config)
    optimizer.fused = fused
    grads = [
        [tf.constant(rng.standard_normal(s).astype(np.float32) * 10.0**k) for s in SHAPES]
        for k in range(-2, -2 + steps)
    ]
    apply = optimizer.apply
    op_types = set()
    if compiled:
        apply = tf.function(lambda g: optimizer.apply(g, variables))
        graph = apply.get_concrete_function(grads[0]).graph
        op_types = {op.type for op in graph.get_operations()}
    for g in grads:
        apply(g) if compiled else apply(g, variables)
    moments = [m.numpy() for m in optimizer._momentums + optimizer._velocities]
    return [v.numpy() - v0 for v, v0 in zip(variables, init, strict=True)], moments, op_types


@pytest.mark.parametrize(
    "config",
    [
        OptimizerConfig(learning_rate=0.01),
        OptimizerConfig(learning_rate=0.1, larc=True, gradient_lag=True, warmup_steps=2),
    ],
    ids=["adam", "larc-lag-warmup"],
)
@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "tf.function"])
def test_fused_step_is_keras_adam_step(config, compiled):
    fused, fused_moments, fused_ops = _run(True, config, compiled=compiled)
    plain, plain_moments, plain_ops = _run(False, config, compiled=compiled)
    for a, b in zip(fused + fused_moments, plain + plain_moments, strict=True):
        scale = np.abs(b).max()
        np.testing.assert_allclose(a, b, rtol=0, atol=1e-4 * scale)
    assert np.abs(fused[0]).min() > 0  # every weight moved
    if compiled:
        assert "ResourceApplyAdam" in fused_ops
        assert "ResourceApplyAdam" not in plain_ops


def test_amsgrad_takes_keras_code():
    rng = np.random.default_rng(0)
    var = keras.Variable(rng.standard_normal((3, 2)).astype(np.float32))
    grad = tf.constant(rng.standard_normal((3, 2)).astype(np.float32))
    optimizer = LarcAdam(learning_rate=0.1, amsgrad=True)
    graph = tf.function(lambda g: optimizer.apply([g], [var])).get_concrete_function(grad).graph
    assert "ResourceApplyAdam" not in {op.type for op in graph.get_operations()}
    reference = keras.Variable(var.numpy())
    keras.optimizers.Adam(learning_rate=0.1, amsgrad=True).apply([grad], [reference])
    optimizer.apply([grad], [var])
    np.testing.assert_allclose(var.numpy(), reference.numpy(), rtol=1e-6)


def test_loss_scaled_fused_step_matches_keras():
    config = OptimizerConfig(learning_rate=0.01, mixed_precision=True, initial_loss_scale=256.0)
    rng = np.random.default_rng(2)
    results = []
    for fused in (True, False):
        var = keras.Variable(np.ones((4, 4), np.float32))
        optimizer = make_optimizer(config)
        optimizer.inner_optimizer.fused = fused
        for _ in range(3):
            g = rng.standard_normal((4, 4)).astype(np.float32) * 256.0
            optimizer.apply([tf.constant(g)], [var])
        results.append(var.numpy() - 1.0)
        rng = np.random.default_rng(2)
    np.testing.assert_allclose(results[0], results[1], rtol=1e-4)
    assert np.abs(results[0]).min() > 0
