"""LarcAdam's grouped step (LARC's factors as one vector, the fused step's scalars once a
step) gives the same weights to the bit as the op-per-variable step, with fewer ops."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip(
    "tensorflow", reason="the optimisers need TensorFlow: pip install 'climnb[train]'"
)

import keras  # noqa: E402
import tensorflow as tf  # noqa: E402

from climnb.train.optim import OptimizerConfig, make_optimizer  # noqa: E402

SHAPES = [(5, 5, 3, 4), (4,), (1, 1, 4, 2), (3,)]


def _run(grouped, config, steps=4, compiled=True):
    """The variables and Adam moments after ``steps`` applies, and the compiled graph's op
    count."""
    rng = np.random.default_rng(2)
    init = [rng.standard_normal(s).astype(np.float32) for s in SHAPES]
    init[3][:] = 0.0  # a zero variable: LARC's epsilon branch
    variables = [keras.Variable(v) for v in init]
    optimizer = make_optimizer(config)
    inner = getattr(optimizer, "inner_optimizer", optimizer)
    inner.grouped = grouped
    grads = [
        [tf.constant(rng.standard_normal(s).astype(np.float32) * 10.0**k) for s in SHAPES]
        for k in range(-3, -3 + steps)
    ]
    grads[1][1] = tf.zeros(SHAPES[1])  # a zero gradient: LARC's epsilon branch
    n_ops = 0
    if compiled:
        apply = tf.function(lambda g: optimizer.apply(g, variables))
        n_ops = len(apply.get_concrete_function(grads[0]).graph.get_operations())
    for g in grads:
        apply(g) if compiled else optimizer.apply(g, variables)
    state = [v.numpy() for v in variables]
    state += [m.numpy() for m in inner._momentums + inner._velocities]
    return state, n_ops


CONFIGS = [
    OptimizerConfig(learning_rate=0.01),
    OptimizerConfig(learning_rate=0.1, larc=True, gradient_lag=True, warmup_steps=2),
    OptimizerConfig(learning_rate=0.001, larc=True, larc_mode="scale"),
    OptimizerConfig(learning_rate=0.1, larc=True, schedule="poly", decay_steps=3),
]


@pytest.mark.parametrize("config", CONFIGS, ids=["adam", "larc-lag-warmup", "scale", "poly"])
@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "tf.function"])
def test_grouped_step_is_the_per_variable_step_to_the_bit(config, compiled):
    grouped, grouped_ops = _run(True, config, compiled=compiled)
    plain, plain_ops = _run(False, config, compiled=compiled)
    for a, b in zip(grouped, plain, strict=True):
        np.testing.assert_array_equal(a, b)
    assert any(np.any(s != 0) for s in grouped[len(SHAPES) :])  # it did move
    if compiled:  # the scalars once a step; LARC's dozen ops a variable as a dozen a step
        saved = (15 if config.larc else 5) * len(SHAPES)
        assert grouped_ops < plain_ops - saved, (grouped_ops, plain_ops)


def test_grouped_step_under_float16_loss_scaling():
    config = OptimizerConfig(learning_rate=0.1, larc=True, mixed_precision=True)
    grouped, _ = _run(True, config)
    plain, _ = _run(False, config)
    for a, b in zip(grouped, plain, strict=True):
        np.testing.assert_array_equal(a, b)
