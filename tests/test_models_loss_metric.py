"""Weighted cross entropy and IoU on examples small enough to check by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest

from climnb.models.losses import (
    PAPER_FREQUENCIES,
    WeightedCrossEntropy,
    class_weights,
    frequencies_from_counts,
)
from climnb.models.metrics import confusion_matrix_np, iou_from_confusion

# --- class weights (NumPy only) ----------------------------------------------------------------


def test_inverse_sqrt_weights_of_the_paper_frequencies():
    f = np.array(PAPER_FREQUENCIES)
    w = class_weights(f, "inverse_sqrt")
    raw = [1 / math.sqrt(x) for x in f]
    np.testing.assert_allclose(w, np.array(raw) / sum(raw))
    assert w.sum() == pytest.approx(1.0)
    # the rarest class (TC) weighs most: sqrt(0.9863 / 0.00046) = 46.3 x background
    assert w[1] / w[0] == pytest.approx(46.30, abs=0.01)


def test_deepcam_and_inverse_weights():
    np.testing.assert_allclose(class_weights([1.0, 2.0**-8, 2.0**-16], "deepcam"), [1, 2, 4])
    np.testing.assert_allclose(class_weights([0.5, 0.25, 0.25], "inverse"), [0.2, 0.4, 0.4])


def test_weights_from_data_stats():
    counts = np.bincount(np.array([0, 0, 0, 0, 2, 2, 1, 0]), minlength=3)
    f = frequencies_from_counts(counts)
    np.testing.assert_allclose(f, [5 / 8, 1 / 8, 2 / 8])
    np.testing.assert_allclose(class_weights(counts), class_weights(f))  # scale-free


@pytest.mark.parametrize(
    "freqs, scheme",
    [([0.9, 0.0, 0.1], "inverse_sqrt"), ([0.5, 0.5], "median"), ([1.0], "inverse")],
    ids=["absent-class", "unknown-scheme", "one-class"],
)
def test_bad_weights_rejected(freqs, scheme):
    with pytest.raises(ValueError):
        class_weights(freqs, scheme)


# --- the loss (TensorFlow) -----------------------------------------------------------------------


@pytest.fixture
def tiny():
    """Two pixels, three classes.

    pixel A: logits (0, 0, 0), label 1 -> p = 1/3, cross entropy ln 3
    pixel B: logits (ln 2, 0, 0), label 0 -> p = 2/4, cross entropy ln 2
    """
    pytest.importorskip("tensorflow")
    logits = np.array([[[[0.0, 0.0, 0.0], [math.log(2.0), 0.0, 0.0]]]], np.float32)
    labels = np.array([[[1, 0]]], np.int32)
    return labels, logits


def test_loss_on_a_tiny_example(tiny):
    from climnb.models.losses import weighted_cross_entropy

    labels, logits = tiny
    w = [1.0, 3.0, 1.0]
    mean = weighted_cross_entropy(labels, logits, w, "mean")
    assert float(mean) == pytest.approx((3 * math.log(3) + math.log(2)) / 2, rel=1e-6)
    wmean = weighted_cross_entropy(labels, logits, w, "weighted_mean")
    assert float(wmean) == pytest.approx((3 * math.log(3) + math.log(2)) / 4, rel=1e-6)
    per_pixel = np.asarray(weighted_cross_entropy(labels, logits, w, "none"))
    np.testing.assert_allclose(per_pixel, [[[3 * math.log(3), math.log(2)]]], rtol=1e-6)
    unweighted = weighted_cross_entropy(labels, logits, [1.0, 1.0, 1.0])
    assert float(unweighted) == pytest.approx((math.log(3) + math.log(2)) / 2, rel=1e-6)


def test_loss_callable_accepts_trailing_label_axis_and_float16(tiny):
    labels, logits = tiny
    loss = WeightedCrossEntropy(frequencies=(0.25, 0.25, 0.5), scheme="inverse")
    # weights 1/f normalised: (4, 4, 2) / 10
    expected = (0.4 * math.log(3) + 0.4 * math.log(2)) / 2
    assert float(loss(labels[..., None], logits.astype(np.float16))) == pytest.approx(
        expected, rel=1e-3
    )
    with pytest.raises(ValueError, match="reduction"):
        WeightedCrossEntropy(reduction="sum")(labels, logits)


def test_soft_dice_on_the_tiny_example(tiny):
    """Dice of classes 1 and 2 with smooth 1, by hand: p_A = (1/3, 1/3, 1/3), p_B = (1/2, 1/4,
    1/4). Class 1: (2/3 + 1) / (7/12 + 1 + 1) = 20/31; class 2: 1 / (7/12 + 1) = 12/19."""
    from climnb.models.losses import soft_dice_loss

    labels, logits = tiny
    expected = 1 - (20 / 31 + 12 / 19) / 2
    assert float(soft_dice_loss(labels, logits)) == pytest.approx(expected, rel=1e-6)
    one_hot = np.eye(3, dtype=np.float32)[labels]  # the same target, soft
    assert float(soft_dice_loss(one_hot, logits)) == pytest.approx(expected, rel=1e-6)


def test_a_soft_target_weighs_its_shares(tiny):
    """Pixel A's target half background, half storm: cross entropy -(ln 1/3 + ln 1/3) / 2 =
    ln 3, weight (1 + 3) / 2 = 2."""
    from climnb.models.losses import is_soft, weighted_cross_entropy

    _, logits = tiny
    soft = np.array([[[[0.5, 0.5, 0.0], [1.0, 0.0, 0.0]]]], np.float32)
    w = [1.0, 3.0, 1.0]
    per_pixel = np.asarray(weighted_cross_entropy(soft, logits, w, "none"))
    np.testing.assert_allclose(per_pixel, [[[2 * math.log(3), math.log(2)]]], rtol=1e-6)
    tf = pytest.importorskip("tensorflow")
    two = tf.zeros((1, 2, 2, 2))
    assert is_soft(tf.zeros((1, 2, 2, 2)), two)  # two classes: a soft target
    assert not is_soft(tf.zeros((1, 2, 2, 1)), tf.zeros((1, 2, 2, 1)))  # one class: ids
    assert not is_soft(tf.zeros((1, 2, 2, 1)), tf.zeros((1, 2, 2, 3)))  # ids, trailing axis
    assert not is_soft(tf.zeros((1, 2, 2, 3), tf.int32), tf.zeros((1, 2, 2, 3)))


# --- IoU ---------------------------------------------------------------------------------------


def test_iou_of_a_known_confusion_matrix():
    cm = np.array([[50, 2, 3], [1, 4, 0], [4, 0, 6]])
    per_class, mean = iou_from_confusion(cm)
    expected = [50 / (55 + 55 - 50), 4 / (5 + 6 - 4), 6 / (10 + 9 - 6)]
    np.testing.assert_allclose(per_class, expected)
    assert mean == pytest.approx(np.mean(expected))


def test_iou_with_absent_classes():
    # TC neither in labels nor predicted: no IoU, left out of the mean
    per_class, mean = iou_from_confusion([[8, 0, 0], [0, 0, 0], [1, 0, 1]])
    assert np.isnan(per_class[1])
    assert per_class[0] == pytest.approx(8 / 9) and per_class[2] == pytest.approx(1 / 2)
    assert mean == pytest.approx((8 / 9 + 1 / 2) / 2)
    # AR predicted but absent from the labels: IoU 0, counted
    per_class, mean = iou_from_confusion([[3, 0, 1], [0, 0, 0], [0, 0, 0]])
    np.testing.assert_allclose(per_class, [0.75, np.nan, 0.0])
    assert mean == pytest.approx(0.375)
    # nothing at all
    per_class, mean = iou_from_confusion(np.zeros((3, 3)))
    assert np.all(np.isnan(per_class)) and np.isnan(mean)


def test_iou_rejects_non_square():
    with pytest.raises(ValueError, match="square"):
        iou_from_confusion(np.zeros((2, 3)))


def test_streaming_confusion_matrix_sums_across_batches_and_ranks():
    pytest.importorskip("tensorflow")
    from climnb.models.metrics import ConfusionMatrix

    rng = np.random.default_rng(0)
    labels = rng.integers(0, 3, size=(4, 6, 8))
    preds = rng.integers(0, 3, size=(4, 6, 8))
    # two "ranks", each seeing two batches of one sample
    ranks = [ConfusionMatrix(3), ConfusionMatrix(3)]
    for i in range(4):
        ranks[i % 2].update(labels[i : i + 1], preds[i : i + 1])
    total = sum(np.asarray(r.state) for r in ranks)  # what hvd.allreduce(op=Sum) returns
    np.testing.assert_array_equal(total, confusion_matrix_np(labels, preds, 3))
    assert total.sum() == labels.size
    per_class, mean = ranks[0].result(total)
    np.testing.assert_allclose(per_class, iou_from_confusion(total)[0])
    ranks[0].reset()
    assert np.asarray(ranks[0].state).sum() == 0


def test_confusion_matrix_takes_logits():
    pytest.importorskip("tensorflow")
    from climnb.models.metrics import ConfusionMatrix

    logits = np.zeros((1, 1, 3, 3), np.float32)
    logits[0, 0, 0, 0] = logits[0, 0, 1, 2] = logits[0, 0, 2, 2] = 5.0  # predicts 0, 2, 2
    cm = ConfusionMatrix(3)
    cm.update(np.array([[[0, 2, 1]]]), logits)
    np.testing.assert_array_equal(np.asarray(cm.state), [[1, 0, 0], [0, 0, 1], [0, 0, 1]])
    per_class, mean = cm.result()
    np.testing.assert_allclose(per_class, [1.0, 0.0, 0.5])
