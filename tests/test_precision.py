"""Compute precision: policy names, bfloat16 detection, the training setting, and a toy
bfloat16 forward/backward pass against float32 with the same weights."""

from __future__ import annotations

import logging

import numpy as np
import pytest

from climnb.models.precision import check_bf16_support, cpu_bf16_flags, policy_name
from climnb.train.config import TrainConfig


@pytest.mark.parametrize(
    "given, expected",
    [
        (False, "float32"),
        (None, "float32"),
        (True, "mixed_float16"),
        ("bf16", "mixed_bfloat16"),
        ("BFloat16", "mixed_bfloat16"),
        ("mixed_bfloat16", "mixed_bfloat16"),
        ("fp32", "float32"),
    ],
    ids=str,
)
def test_policy_name(given, expected):
    assert policy_name(given) == expected


def test_policy_name_rejects_unknown():
    with pytest.raises(ValueError, match="unknown precision 'int8'.*mixed_bfloat16"):
        policy_name("int8")


def test_cpu_bf16_flags_read_from_cpuinfo(tmp_path):
    with_bf16 = tmp_path / "with"
    with_bf16.write_text("processor : 0\nflags : fpu avx512f avx512_bf16 amx_tile\n")
    without = tmp_path / "without"
    without.write_text("processor : 0\nflags : fpu avx2 fma\n")
    assert cpu_bf16_flags(str(with_bf16)) == ("avx512_bf16",)
    assert cpu_bf16_flags(str(without)) == ()
    assert cpu_bf16_flags(str(tmp_path / "missing")) == ()


def test_emulated_bf16_warns(monkeypatch, caplog):
    import climnb.models.precision as precision

    monkeypatch.setattr(precision, "cpu_bf16_flags", lambda: ())
    with caplog.at_level(logging.WARNING, logger="climnb.models.precision"):
        assert not check_bf16_support(gpus=0)
    assert "emulate bfloat16" in caplog.text
    assert check_bf16_support(gpus=1)


def test_train_config_precision():
    from climnb.models.precision import resolve_precision

    # "auto" by default, decided by this machine's hardware (bfloat16 on AVX512_BF16 / AMX)
    assert TrainConfig("d").precision == resolve_precision("auto")[0]
    assert TrainConfig("d", precision="fp32").precision == "float32"
    bf16 = TrainConfig("d", precision="bf16")
    assert bf16.precision == "mixed_bfloat16" and not bf16.optimizer.mixed_precision
    assert TrainConfig.from_dict(bf16.to_dict()) == bf16
    # float16 always comes with loss scaling, however it is asked for
    assert TrainConfig("d", precision="mixed_float16").optimizer.mixed_precision
    # ... and the older float16 switch wins over "auto", on any hardware, and says so
    fp16 = TrainConfig("d", optimizer={"mixed_precision": True})
    assert fp16.precision == "mixed_float16"
    assert fp16.precision_reason == "loss scaling asked for (optimizer.mixed_precision): float16"
    with pytest.raises(ValueError, match="no loss scaling"):
        TrainConfig("d", precision="bf16", optimizer={"mixed_precision": True})
    with pytest.raises(ValueError, match="unknown precision"):
        TrainConfig("d", precision="half")


@pytest.fixture(scope="module")
def bf16_and_fp32():
    """The toy Tiramisu in float32 and in mixed_bfloat16 with the same weights."""
    pytest.importorskip("tensorflow", reason="models need TensorFlow: pip install 'climnb[train]'")
    from climnb.models import build_model

    shape = (32, 48, 16)
    fp32 = build_model("tiramisu", shape, preset="toy")
    bf16 = build_model("tiramisu", shape, preset="toy", mixed_precision="mixed_bfloat16")
    bf16.set_weights(fp32.get_weights())
    rng = np.random.default_rng(0)
    x = rng.random((2, *shape), dtype=np.float32)
    y = rng.integers(0, 3, size=(2, *shape[:2])).astype(np.int32)
    return fp32, bf16, x, y


def test_bf16_model_computes_in_bfloat16_with_float32_weights(bf16_and_fp32):
    _, bf16, x, _ = bf16_and_fp32
    assert bf16.get_layer("stem_conv").compute_dtype == "bfloat16"
    assert bf16.get_layer("stem_conv").kernel.dtype == "float32"  # master weights
    assert all(w.dtype == "float32" for w in bf16.trainable_weights)
    assert bf16(x, training=False).dtype == "float32"  # logits cast back


def test_bf16_forward_and_gradients_match_float32(bf16_and_fp32):
    import tensorflow as tf

    from climnb.models.losses import WeightedCrossEntropy

    fp32, bf16, x, y = bf16_and_fp32
    loss_fn = WeightedCrossEntropy()
    results = {}
    for name, model in (("fp32", fp32), ("bf16", bf16)):
        with tf.GradientTape() as tape:
            logits = model(x, training=True)
            loss = loss_fn(y, logits)
        grads = tape.gradient(loss, model.trainable_variables)
        results[name] = logits.numpy(), float(loss), grads
    (l32, loss32, g32), (l16, loss16, g16) = results["fp32"], results["bf16"]
    assert np.isfinite(loss16)
    # bfloat16 keeps 8 bits of mantissa: close to float32, but not equal
    assert not np.array_equal(l16, l32)
    np.testing.assert_allclose(l16, l32, atol=0.1 * np.abs(l32).max())
    assert abs(loss16 - loss32) < 0.02 * abs(loss32)
    for a in g16:
        assert a.dtype == tf.float32 and np.all(np.isfinite(a.numpy()))
    cosines = [
        float(tf.reduce_sum(a * b) / (tf.norm(a) * tf.norm(b) + 1e-30))
        for a, b in zip(g16, g32, strict=True)
    ]
    assert np.median(cosines) > 0.95


def test_bf16_train_step_updates_weights(bf16_and_fp32):
    from climnb.models.losses import WeightedCrossEntropy
    from climnb.train.optim import OptimizerConfig, make_optimizer, train_step

    _, bf16, x, y = bf16_and_fp32
    optimizer = make_optimizer(OptimizerConfig(larc=True))  # no loss scaling with bfloat16
    before = [w.numpy().copy() for w in bf16.trainable_weights]
    loss = train_step(bf16, optimizer, WeightedCrossEntropy(), x, y)
    assert np.isfinite(float(loss)) and int(optimizer.iterations) == 1
    assert any(
        not np.array_equal(b, a.numpy())
        for b, a in zip(before, bf16.trainable_weights, strict=True)
    )
