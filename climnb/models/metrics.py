"""Intersection over union from a streaming confusion matrix, summable across ranks.

The state is one ``(n_classes, n_classes)`` matrix of pixel counts (rows: true class, columns:
predicted class). It only ever grows by addition, so the matrices of all ranks can be summed
with one allreduce and the IoU computed from the sum -- which is the IoU of the whole
evaluation set, not a mean of per-rank IoUs. The counts are float64: exact up to 2**53 pixels
(10**10 full-size samples), and float64 allreduce and ``assign_add`` run on every device.

A class with no pixels in the labels and none in the predictions has no IoU (0 / 0): it is NaN
per class and left out of the mean, as ``tf.metrics.mean_iou`` did in the paper's code. A
class that is predicted but absent from the labels has IoU 0.

Examples
--------
>>> import numpy as np
>>> cm = np.array([[3, 1, 0], [0, 2, 0], [0, 0, 0]])  # class 2 absent
>>> per_class, mean = iou_from_confusion(cm)
>>> per_class.round(3).tolist()  # 3 / (3+1+0), 2 / (2+0+1), 0 / 0
[0.75, 0.667, nan]
>>> round(mean, 4)
0.7083
"""

from __future__ import annotations

import numpy as np

from climnb.models.backend import import_tf

__all__ = ["iou_from_confusion", "confusion_matrix_np", "ConfusionMatrix"]


def iou_from_confusion(confusion) -> tuple[np.ndarray, float]:
    """Per-class IoU and their mean from a confusion matrix (rows true, columns predicted).

    IoU_c = TP_c / (TP_c + FP_c + FN_c); classes with an empty union are NaN and skipped by
    the mean; the mean of no classes at all is NaN.
    """
    cm = np.asarray(confusion, dtype=np.float64)
    if cm.ndim != 2 or cm.shape[0] != cm.shape[1]:
        raise ValueError(f"confusion matrix must be square, got shape {cm.shape}")
    tp = np.diag(cm)
    union = cm.sum(axis=0) + cm.sum(axis=1) - tp
    with np.errstate(invalid="ignore", divide="ignore"):
        per_class = np.where(union > 0, tp / union, np.nan)
    present = ~np.isnan(per_class)
    mean = float(per_class[present].mean()) if present.any() else float("nan")
    return per_class, mean


def confusion_matrix_np(labels, predictions, n_classes: int) -> np.ndarray:
    """Confusion matrix of integer arrays in NumPy (reference for tests and small data)."""
    labels = np.asarray(labels).ravel().astype(np.int64)
    predictions = np.asarray(predictions).ravel().astype(np.int64)
    idx = labels * n_classes + predictions
    return np.bincount(idx, minlength=n_classes**2).reshape(n_classes, n_classes).astype(float)


class ConfusionMatrix:
    """Streaming confusion matrix in a TensorFlow variable.

    Use from a training or evaluation loop::

        cm = ConfusionMatrix(n_classes=3)
        for x, y in batches:
            cm.update(y, model(x, training=False))   # logits or class ids
        total = hvd.allreduce(cm.state, op=hvd.Sum)  # sum over ranks (optional)
        per_class, mean_iou = cm.result(total)
        cm.reset()

    Parameters
    ----------
    n_classes : number of classes.
    """

    def __init__(self, n_classes: int = 3):
        self._tf = import_tf()
        self.n_classes = int(n_classes)
        self.state = self._tf.Variable(
            self._tf.zeros((self.n_classes, self.n_classes), self._tf.float64),
            trainable=False,
            name="confusion_matrix",
        )

    def batch_confusion(self, labels, predictions):
        """This batch's confusion matrix (float64); ``predictions`` may be logits."""
        tf = self._tf
        predictions = tf.convert_to_tensor(predictions)
        labels = tf.convert_to_tensor(labels)
        if predictions.shape.rank == labels.shape.rank + 1:
            predictions = tf.argmax(predictions, axis=-1)
        return tf.math.confusion_matrix(
            tf.reshape(tf.cast(labels, tf.int64), [-1]),
            tf.reshape(tf.cast(predictions, tf.int64), [-1]),
            num_classes=self.n_classes,
            dtype=tf.float64,
        )

    def update(self, labels, predictions):
        """Add a batch: integer ``labels`` and class-id ``predictions`` or logits."""
        return self.state.assign_add(self.batch_confusion(labels, predictions))

    def reset(self):
        """Zero the counts (at the start of each evaluation)."""
        self.state.assign(self._tf.zeros_like(self.state))

    def result(self, state=None) -> tuple[np.ndarray, float]:
        """Per-class IoU and mean IoU of ``state`` (default: this rank's counts).

        Pass the allreduce-summed state to get the IoU over all ranks.
        """
        state = self.state if state is None else state
        return iou_from_confusion(np.asarray(state))
