"""climnb's dropout layer (a cheaper mask than Keras' own): the rate and scale it promises,
the same mask in float32 and bfloat16, its gradient, checkpointed seed state, and model files."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("tensorflow", reason="the models need TensorFlow: pip install 'climnb[train]'")

import keras  # noqa: E402
import tensorflow as tf  # noqa: E402

from climnb.models.layers import LayerFactory, mask_dropout_layer, register_layers  # noqa: E402

MaskDropout = mask_dropout_layer()


def _ones(channels, dtype="float32"):
    return tf.ones((2, 96, 144, channels), dtype)


@pytest.mark.parametrize("channels", [32, 33], ids=["even-channels", "odd-channels"])
def test_keeps_one_minus_rate_scaled_by_its_inverse(channels):
    layer = MaskDropout(0.2, seed=1)
    y = np.asarray(layer(_ones(channels), training=True))
    assert y.shape == (2, 96, 144, channels)
    assert set(np.unique(y)) == {0.0, 1.25}
    # 884,736 draws or more: the kept share is within 5 standard deviations (0.002) of 0.8
    assert abs((y > 0).mean() - 0.8) < 5 * np.sqrt(0.16 / y.size)
    assert abs(y.mean() - 1.0) < 0.01  # unbiased
    assert (y > 0)[..., -1].mean() > 0.79  # the last channel (a slice when odd) is drawn too


def test_identity_at_inference_and_new_masks_each_call():
    layer = MaskDropout(0.2, seed=2)
    x = _ones(8)
    np.testing.assert_array_equal(np.asarray(layer(x, training=False)), np.asarray(x))
    state = np.asarray(layer.seed_generator.state).copy()
    a = np.asarray(layer(x, training=True))
    assert not np.array_equal(state, np.asarray(layer.seed_generator.state))  # checkpointed
    b = np.asarray(layer(x, training=True))
    assert 0.2 < (a != b).mean() < 0.4  # independent masks differ at 2 x 0.8 x 0.2 = 32 %


def test_same_mask_in_bfloat16_and_float32_and_gradient_is_the_mask():
    x = tf.random.stateless_normal((1, 48, 72, 16), seed=[0, 1])
    outputs = {}
    for dtype in ("float32", "mixed_bfloat16"):
        layer = MaskDropout(0.2, seed=3, dtype=dtype)
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = layer(x, training=True)
        outputs[dtype] = np.asarray(tf.cast(y, tf.float32)), np.asarray(tape.gradient(y, x))
    (y32, g32), (y16, g16) = outputs["float32"], outputs["mixed_bfloat16"]
    np.testing.assert_array_equal(y16 == 0, y32 == 0)  # the draws do not depend on the type
    np.testing.assert_allclose(y16, y32, rtol=2.0**-7)  # bfloat16 roundings (8-bit mantissa)
    np.testing.assert_array_equal(g32, np.where(y32 == 0, 0.0, 1.25))
    np.testing.assert_array_equal(g16, g32)


def test_layer_factory_uses_it_and_model_files_load_it(tmp_path):
    mk = LayerFactory(dropout=0.2)  # the paper Tiramisu's setting
    inputs = keras.Input((32, 48, 4))
    model = keras.Model(inputs, mk.conv_bn_relu(inputs, 8, 3, name="l1"))
    assert type(model.get_layer("l1_drop")).__name__ == "MaskDropout"
    path = tmp_path / "m.keras"
    model.save(path)
    register_layers()
    loaded = keras.models.load_model(path, compile=False)
    assert type(loaded.get_layer("l1_drop")).__name__ == "MaskDropout"
    assert loaded.get_layer("l1_drop").rate == 0.2
    x = np.random.default_rng(0).random((1, 32, 48, 4), dtype=np.float32)
    np.testing.assert_allclose(np.asarray(loaded(x)), np.asarray(model(x)), atol=1e-5)
