"""The fused batch-norm layer (climnb's default since it made a CPU training step faster):
the same results as Keras' own layer, in float32 and bfloat16, trains, and survives a bundle."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy as np
import pytest

pytest.importorskip("tensorflow", reason="the models need TensorFlow: pip install 'climnb[train]'")

import tensorflow as tf  # noqa: E402

from climnb.models import build_model  # noqa: E402

SHAPE = (32, 48, 16)


def _pair(name, precision="float32"):
    tf.keras.utils.set_random_seed(0)  # the same initial weights in every run: no flaky margins
    keras_bn = build_model(
        name, SHAPE, preset="toy", mixed_precision=precision, fused_batch_norm=False
    )
    fused = build_model(name, SHAPE, preset="toy", mixed_precision=precision)
    fused.set_weights(keras_bn.get_weights())
    return keras_bn, fused


def _forward_backward(model, x):
    with tf.GradientTape() as tape:
        logits = model(x, training=True)
        loss = tf.reduce_mean(tf.square(logits))
    grads = tape.gradient(loss, model.trainable_variables)
    return np.asarray(logits), [np.asarray(g) for g in grads]


def _relative(a_list, b_list):
    diff = sum(float(np.sum((a - b) ** 2)) for a, b in zip(a_list, b_list, strict=True))
    norm = sum(float(np.sum(a**2)) for a in a_list)
    return np.sqrt(diff / norm)


@pytest.mark.parametrize("name", ["tiramisu", "deeplab"])
def test_fused_batch_norm_matches_keras_in_float32(name):
    keras_bn, fused = _pair(name)
    kinds = {type(layer).__name__ for layer in fused.layers}
    assert "FusedBatchNormalization" in kinds and "BatchNormalization" not in kinds
    x = np.random.default_rng(0).random((2, *SHAPE), dtype=np.float32)
    y0, g0 = _forward_backward(keras_bn, x)
    y1, g1 = _forward_backward(fused, x)
    np.testing.assert_allclose(y1, y0, atol=2e-4 * np.abs(y0).max())
    assert _relative(g0, g1) < 1e-3  # BN's gradient sums cancel: order of additions shows
    # the moving statistics were updated alike (the biased variance, as Keras)
    for a, b in zip(keras_bn.non_trainable_variables, fused.non_trainable_variables, strict=True):
        np.testing.assert_allclose(np.asarray(b), np.asarray(a), rtol=1e-4, atol=1e-6)
    moved = [np.asarray(v) for v in fused.non_trainable_variables]
    assert any(np.abs(m).max() not in (0.0, 1.0) for m in moved)  # they did move
    np.testing.assert_allclose(
        np.asarray(fused(x, training=False)), np.asarray(keras_bn(x, training=False)), atol=1e-4
    )


def test_fused_batch_norm_in_bfloat16_trains_like_keras():
    keras_bn, fused = _pair("tiramisu", "mixed_bfloat16")
    x = np.random.default_rng(1).random((2, *SHAPE), dtype=np.float32)
    y0, g0 = _forward_backward(keras_bn, x)
    y1, g1 = _forward_backward(fused, x)
    assert y1.dtype == np.float32 and np.all(np.isfinite(y1))
    # bfloat16 has 8 bits of mantissa: the two agree to bfloat16's precision, not float32's
    assert np.abs(y1 - y0).max() < 0.05 * np.abs(y0).max()
    assert _relative(g0, g1) < 0.1


@pytest.mark.parametrize("channels", [8, 16], ids=["8-maps-in-float32", "16-maps-in-bfloat16"])
def test_fused_batch_norm_in_bfloat16_for_any_channel_count(channels):
    """oneDNN's fast bfloat16 batch norm wants channels in 16s; others normalise in float32.
    Either way: bfloat16 out, float32 statistics, float32's results to bfloat16 precision."""
    from climnb.models.layers import fused_batch_norm_layer

    x = tf.random.stateless_normal((2, 24, 36, channels), seed=[0, 2]) * 3.0 + 1.0
    w = tf.random.stateless_normal(x.shape, seed=[0, 3])
    out = {}
    for dtype in ("float32", "mixed_bfloat16"):
        layer = fused_batch_norm_layer()(dtype=dtype)
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = layer(x, training=True)
            loss = tf.reduce_sum(tf.cast(y, tf.float32) * w)
        out[dtype] = y, np.asarray(tape.gradient(loss, x)), np.asarray(layer.moving_mean)
    (y32, g32, m32), (y16, g16, m16) = out["float32"], out["mixed_bfloat16"]
    assert y16.dtype == tf.bfloat16 and m16.dtype == np.float32
    y16, y32 = np.asarray(tf.cast(y16, tf.float32)), np.asarray(y32)
    np.testing.assert_allclose(y16, y32, atol=0.02 * np.abs(y32).max())
    np.testing.assert_allclose(m16, m32, rtol=0.01, atol=1e-3)
    assert _relative([g32], [g16]) < 0.05


def test_fused_model_saves_and_loads_in_a_fresh_process(tmp_path):
    from climnb.bundle import save_bundle

    model = build_model("tiramisu", SHAPE, preset="toy")
    x = np.random.default_rng(2).random((1, *SHAPE), dtype=np.float32)
    _forward_backward(model, x)  # moving statistics away from their initial values
    expected = np.asarray(model(x, training=False))
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "expected.npy", expected)
    save_bundle(
        model,
        tmp_path / "bundle",
        channels=[f"c{i}" for i in range(SHAPE[2])],
        minval=np.zeros(SHAPE[2]),
        maxval=np.ones(SHAPE[2]),
        name="tiramisu",
        preset="toy",
    )
    code = textwrap.dedent(
        f"""
        import numpy as np
        from climnb.bundle import load_bundle
        from climnb.bundle import _load_keras
        from pathlib import Path
        root = Path({str(tmp_path)!r})
        saved = _load_keras(root / "bundle" / "model.keras")
        assert "FusedBatchNormalization" in {{type(l).__name__ for l in saved.layers}}
        x = np.load(root / "x.npy")
        got = np.asarray(saved(x, training=False))
        np.testing.assert_allclose(got, np.load(root / "expected.npy"), atol=1e-5)
        rebuilt = load_bundle(root / "bundle").model({SHAPE[0]}, {SHAPE[1]})
        np.testing.assert_allclose(np.asarray(rebuilt(x)), got, atol=1e-5)
        print("ok")
        """
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip().endswith("ok")
