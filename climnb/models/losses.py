"""Class-weighted sparse categorical cross entropy, with weights from class frequencies.

Background is about 98.6 % of the pixels, so an unweighted loss learns to predict background
everywhere. The paper's code weighted each pixel's cross entropy by a per-class weight derived
from the class frequencies:

* ``"inverse_sqrt"`` (the original code): ``w_c = f_c**-0.5``, normalised to sum to 1;
* ``"inverse"``: ``w_c = 1 / f_c``, normalised to sum to 1 (an earlier version of that code);
* ``"deepcam"`` (MLPerf HPC DeepCAM): ``w_c = f_c**-0.125``, not normalised.

The frequencies default to DeepCAM's published ones (background 0.9863, TC 0.00046, AR 0.0133);
pass the ones of your data set (for example from its label counts) instead.

Targets are class ids, or *soft*: per-class shares (B, H, W, classes) float, such as the mean
of several expert labellers (:func:`climnb.labels.expert.soft`). A soft target ``t`` gives the
pixel the cross entropy ``-sum_c t_c log p_c`` and the weight ``sum_c t_c w_c``; for a one-hot
``t`` both are those of its class id, so the two kinds of target agree where labellers agree.

Examples
--------
>>> import numpy as np
>>> from climnb.models.losses import class_weights
>>> w = class_weights([0.25, 0.25, 0.5], "inverse_sqrt")
>>> np.round(w, 4).tolist()  # 2, 2, sqrt(2), normalised
[0.3694, 0.3694, 0.2612]
>>> class_weights([1 / 256, 1.0], "deepcam").tolist()  # 256**0.125 = 2
[2.0, 1.0]
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from climnb.models.backend import import_tf

__all__ = [
    "PAPER_FREQUENCIES",
    "WEIGHT_SCHEMES",
    "class_weights",
    "frequencies_from_counts",
    "is_soft",
    "weighted_cross_entropy",
    "soft_dice_loss",
    "WeightedCrossEntropy",
]

#: Class frequencies (background, tropical cyclone, atmospheric river) reported by DeepCAM.
PAPER_FREQUENCIES = (0.9863, 0.00046, 0.0133)
WEIGHT_SCHEMES = ("inverse_sqrt", "inverse", "deepcam")


def class_weights(
    frequencies: Sequence[float] | np.ndarray = PAPER_FREQUENCIES, scheme: str = "inverse_sqrt"
) -> np.ndarray:
    """Per-class loss weights from class frequencies (see the module docstring).

    Frequencies need not sum to 1 (counts work too for the normalised schemes), but every
    class needs a positive frequency: a class never seen cannot be weighted.
    """
    f = np.asarray(frequencies, dtype=np.float64)
    if f.ndim != 1 or f.size < 2:
        raise ValueError(f"need a 1-D array of at least two class frequencies, got {f!r}")
    if not np.all(np.isfinite(f)) or np.any(f <= 0):
        raise ValueError(
            f"class frequencies must be positive and finite, got {f.tolist()}; a class absent "
            "from the data set has no frequency to weight by -- give it a small floor value"
        )
    if scheme == "inverse_sqrt":
        w = f**-0.5
        return w / w.sum()
    if scheme == "inverse":
        w = 1.0 / f
        return w / w.sum()
    if scheme == "deepcam":
        return f**-0.125
    raise ValueError(f"unknown weighting scheme {scheme!r}; choose one of {WEIGHT_SCHEMES}")


def frequencies_from_counts(counts: Sequence[float] | np.ndarray) -> np.ndarray:
    """Class frequencies from per-class pixel counts (e.g. ``np.bincount(labels.ravel())``).

    >>> frequencies_from_counts([6, 1, 3]).tolist()
    [0.6, 0.1, 0.3]
    """
    c = np.asarray(counts, dtype=np.float64)
    if c.sum() <= 0:
        raise ValueError("counts sum to zero: no labelled pixels")
    return c / c.sum()


def weighted_cross_entropy(labels, logits, weights, reduction: str = "mean"):
    """Class-weighted sparse softmax cross entropy.

    Parameters
    ----------
    labels : integer class ids, shape ``(batch, h, w)`` (or with a trailing axis of 1); or a
        soft target: float per-class shares, shape ``(batch, h, w, n_classes)`` summing to 1
        (the pixel's weight is then ``sum_c t_c w_c``).
    logits : unnormalised scores, shape ``(batch, h, w, n_classes)``; cast to float32.
    weights : per-class weights, length ``n_classes``.
    reduction : ``"mean"``: ``sum(w[y] * ce) / n_pixels``, the paper's code
        (``SUM_BY_NONZERO_WEIGHTS``); ``"weighted_mean"``: ``sum(w[y] * ce) / sum(w[y])``, as
        PyTorch's ``CrossEntropyLoss(weight=...)`` in DeepCAM; ``"none"``: per-pixel values.

    Returns
    -------
    A float32 scalar tensor (or per-pixel tensor for ``"none"``).
    """
    tf = import_tf()
    logits = tf.cast(logits, tf.float32)
    labels = tf.convert_to_tensor(labels)
    table = tf.constant(np.asarray(weights), tf.float32)
    if is_soft(labels, logits):
        target = tf.cast(labels, tf.float32)
        ce = tf.nn.softmax_cross_entropy_with_logits(labels=target, logits=logits)
        w = tf.linalg.matvec(target, table)
    else:
        labels = _class_ids(tf, labels, logits)
        ce = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits)
        w = tf.gather(table, labels)
    if reduction == "none":
        return w * ce
    total = tf.reduce_sum(w * ce)
    if reduction == "mean":
        return total / tf.cast(tf.size(ce), tf.float32)
    if reduction == "weighted_mean":
        return total / tf.reduce_sum(w)
    raise ValueError(f"reduction must be 'mean', 'weighted_mean' or 'none', got {reduction!r}")


def soft_dice_loss(labels, logits, classes: Sequence[int] = (1, 2), smooth: float = 1.0):
    """One minus the mean soft Dice coefficient of ``classes`` (TC and AR), over the batch.

    Per class ``c``: ``(2 sum(p_c t_c) + smooth) / (sum(p_c) + sum(t_c) + smooth)``, sums over
    every pixel of the batch, ``p`` the softmax of ``logits`` and ``t`` the one-hot (or soft)
    target, in float32. A differentiable stand-in for the IoU that scores the network: it
    weighs an event's edge pixels by the event's size rather than by the pixel count of the
    map, so a pixel on a storm's boundary matters as much as the storm's share of the batch.
    ``smooth`` keeps a class absent from the batch finite (its term then pushes ``p_c`` to 0).
    Same ``labels`` and ``logits`` as :func:`weighted_cross_entropy`; a float32 scalar.
    """
    tf = import_tf()
    logits = tf.cast(logits, tf.float32)
    labels = tf.convert_to_tensor(labels)
    n = logits.shape[-1]
    if is_soft(labels, logits):
        target = tf.cast(labels, tf.float32)
    else:
        target = tf.one_hot(_class_ids(tf, labels, logits), n, dtype=tf.float32)
    p = tf.nn.softmax(logits, axis=-1)
    idx = list(classes)
    p, target = tf.gather(p, idx, axis=-1), tf.gather(target, idx, axis=-1)
    axes = list(range(logits.shape.rank - 1))
    inter = tf.reduce_sum(p * target, axis=axes)
    total = tf.reduce_sum(p, axis=axes) + tf.reduce_sum(target, axis=axes)
    dice = (2.0 * inter + smooth) / (total + smooth)
    return 1.0 - tf.reduce_mean(dice)


def _class_ids(tf, labels, logits):
    """Integer class ids as int32 ``(batch, h, w)``: a trailing axis of 1 dropped."""
    labels = tf.cast(labels, tf.int32)
    if labels.shape.rank == logits.shape.rank:
        labels = tf.squeeze(labels, axis=-1)
    return labels


def is_soft(labels, logits) -> bool:
    """Whether ``labels`` is a soft target for ``logits``: floats with a class axis as long as
    the logits' (class ids with a trailing axis of 1 are not)."""
    n = logits.shape[-1]
    return (
        labels.dtype.is_floating
        and labels.shape.rank == logits.shape.rank
        and labels.shape[-1] == n
        and n != 1
    )


@dataclass(frozen=True)
class WeightedCrossEntropy:
    """The weighted loss as a callable ``loss(labels, logits)``, usable as a Keras loss.

    Attributes
    ----------
    frequencies : class frequencies the weights derive from.
    scheme : ``"inverse_sqrt"``, ``"inverse"`` or ``"deepcam"``.
    reduction : ``"mean"`` or ``"weighted_mean"`` (see :func:`weighted_cross_entropy`).

    Examples
    --------
    >>> loss = WeightedCrossEntropy(scheme="deepcam")
    >>> np.round(loss.weights, 3).tolist()
    [1.002, 2.613, 1.716]
    """

    frequencies: tuple[float, ...] = PAPER_FREQUENCIES
    scheme: str = "inverse_sqrt"
    reduction: str = "mean"

    def __post_init__(self):
        object.__setattr__(self, "frequencies", tuple(float(f) for f in self.frequencies))
        class_weights(self.frequencies, self.scheme)  # validate early

    @property
    def weights(self) -> np.ndarray:
        """The per-class weights."""
        return class_weights(self.frequencies, self.scheme)

    def __call__(self, labels, logits):
        return weighted_cross_entropy(labels, logits, self.weights, self.reduction)
