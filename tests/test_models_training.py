"""A few optimisation steps of the toy networks on synthetic data lower the loss."""

from __future__ import annotations

import numpy as np
import pytest

tf = pytest.importorskip(
    "tensorflow", reason="training needs TensorFlow: pip install 'climnb[train]'"
)

from _training import TINY  # noqa: E402

from climnb.io.channels import CHANNEL_NAMES  # noqa: E402
from climnb.models import build_model  # noqa: E402
from climnb.models.losses import WeightedCrossEntropy  # noqa: E402
from climnb.models.metrics import ConfusionMatrix  # noqa: E402
from climnb.train.optim import OptimizerConfig, make_optimizer, train_step  # noqa: E402


@pytest.fixture(scope="module")
def batch(toy):
    """Two toy samples, channels min/max-normalised as the paper's loader does."""
    ds, _ = toy
    x = np.stack([ds[name].values[:2] for name in CHANNEL_NAMES], axis=-1).astype(np.float32)
    lo, hi = x.min(axis=(0, 1, 2)), x.max(axis=(0, 1, 2))
    x = (x - lo) / np.where(hi > lo, hi - lo, 1.0)
    y = ds["truth"].values[:2].astype(np.int32)
    assert set(np.unique(y)) == {0, 1, 2}
    return x, y


@pytest.mark.slow
def test_toy_tiramisu_learns_with_the_paper_tricks(batch):
    x, y = batch
    tf.keras.utils.set_random_seed(0)
    # the smallest Tiramisu (tests/_training.py): tracing the step is nearly all of the cost,
    # and grows with the layers (the toy preset's 63 took 13 s of CPU, TINY's 22 take 5 s);
    # the tricks (warm-up, LARC, gradient lag, weighted loss) are the same
    model = build_model("tiramisu", x.shape[1:], preset="toy", **TINY)
    config = OptimizerConfig(learning_rate=3e-3, warmup_steps=2, larc=True, gradient_lag=True)
    optimizer = make_optimizer(config)
    loss_fn = WeightedCrossEntropy()  # the paper's frequencies, inverse-sqrt weights
    step = tf.function(lambda a, b: train_step(model, optimizer, loss_fn, a, b))
    losses = [float(step(x, y)) for _ in range(8)]
    assert np.all(np.isfinite(losses))
    # the first two steps apply the zero lag buffer and a warm-up step; then it must descend
    assert np.mean(losses[-3:]) < 0.8 * losses[0], losses
    cm = ConfusionMatrix(3)
    cm.update(y, model(x, training=False))
    per_class, mean_iou = cm.result()
    assert np.asarray(cm.state).sum() == y.size
    assert 0.0 <= mean_iou <= 1.0


def test_mixed_precision_train_step(batch):
    x, y = batch
    x, y = x[:1, :32, :48], y[:1, :32, :48]  # float16 is emulated on CPU: keep it tiny
    model = build_model("deeplab", x.shape[1:], preset="toy", mixed_precision=True)
    optimizer = make_optimizer(OptimizerConfig(mixed_precision=True, larc=True))
    before = [w.numpy().copy() for w in model.trainable_weights]
    loss = train_step(model, optimizer, WeightedCrossEntropy(), x, y)
    assert np.isfinite(float(loss))
    assert int(optimizer.iterations) == 1  # finite scaled gradients: the step was taken
    after = model.trainable_weights
    assert all(w.dtype == "float32" for w in after)
    assert any(not np.array_equal(b, a.numpy()) for b, a in zip(before, after, strict=True))
