"""Scores of labels against a known truth: pixel IoU and event recall / precision.

Used by the tests, the benchmark and the notebook on synthetic data, whose ``truth`` comes
from the generator's own event geometry.

* IoU of a class: pixels labelled that class in both, over pixels labelled it in either,
  summed over all time steps.
* Storms (class 1): a true storm is found when a detected centre lies within its radius (at
  least ``min_km``); a detected storm is right when it lies within the radius of a true one.
* Rivers (class 2): objects are the seam-joined connected components of each mask; a true
  river is found when at least ``overlap`` of its pixels are labelled river, and a detected
  river is right when at least ``overlap`` of its pixels are river in the truth.
* Agreement with another detector (:func:`agreement`, e.g. IPART's rivers from
  :mod:`climnb.labels.reference`): the IoU and matched rivers above, and where the two differ:
  how much of the other's river area and of its rivers lies under a transport threshold, the
  IoU over strong-transport pixels only, and how much of our own area the other detector's
  background absorbed.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import xarray as xr
from scipy import ndimage

from climnb.labels.components import label_components
from climnb.labels.sphere import great_circle_km, is_periodic

__all__ = ["iou", "storm_scores", "river_scores", "score", "agreement"]


def iou(labels, truth, class_id: int) -> float:
    """Intersection over union of ``class_id`` pixels, over all time steps."""
    a, b = np.asarray(labels) == class_id, np.asarray(truth) == class_id
    union = np.count_nonzero(a | b)
    return float(np.count_nonzero(a & b) / union) if union else 1.0


def storm_scores(found: pd.DataFrame, true: pd.DataFrame, *, min_km: float = 300.0) -> dict:
    """Recall and precision of storm centres; both tables need ``time, lat, lon``.

    ``true`` also needs ``radius_km`` (the generator's event table has it).
    """
    hit_true = hit_found = 0
    for time, t in true.groupby("time"):
        f = found[found.time == time]
        if len(f) == 0:
            continue
        d = great_circle_km(
            t.lat.to_numpy()[:, None],
            t.lon.to_numpy()[:, None],
            f.lat.to_numpy()[None, :],
            f.lon.to_numpy()[None, :],
        )
        near = d <= np.maximum(t.radius_km.to_numpy(), min_km)[:, None]
        hit_true += int(near.any(axis=1).sum())
        hit_found += int(near.any(axis=0).sum())
    return {
        "recall": _ratio(hit_true, len(true)),
        "precision": _ratio(hit_found, len(found)),
        "n_true": len(true),
        "n_found": len(found),
    }


def river_scores(labels, truth, lon, *, overlap: float = 0.5, class_id: int = 2) -> dict:
    """Recall and precision of river objects in (time, lat, lon) label and truth arrays."""
    labels, truth = np.asarray(labels), np.asarray(truth)
    periodic = is_periodic(lon)
    counts = np.zeros(4, int)  # true found, true, detected right, detected
    for pred_t, true_t in zip(labels, truth, strict=True):
        counts[:2] += _covered(true_t == class_id, pred_t == class_id, periodic, overlap)
        counts[2:] += _covered(pred_t == class_id, true_t == class_id, periodic, overlap)
    return {
        "recall": _ratio(counts[0], counts[1]),
        "precision": _ratio(counts[2], counts[3]),
        "n_true": int(counts[1]),
        "n_found": int(counts[3]),
    }


def _covered(objects: np.ndarray, other: np.ndarray, periodic: bool, overlap: float):
    labels, n = label_components(objects, periodic=periodic)
    if n == 0:
        return np.array([0, 0])
    size = np.bincount(labels.ravel(), minlength=n + 1)[1:]
    inside = np.bincount(labels.ravel(), weights=other.ravel(), minlength=n + 1)[1:]
    return np.array([int((inside >= overlap * size).sum()), n])


def _ratio(a: int, b: int) -> float:
    return float(a / b) if b else 1.0


def score(
    labels: xr.DataArray, truth: xr.DataArray, found: pd.DataFrame, true: pd.DataFrame
) -> pd.DataFrame:
    """All scores in a small table: one row per class with IoU, recall and precision.

    ``found`` is the event table of :func:`climnb.labels.label_dataset`, ``true`` the events
    of :func:`climnb.synthetic.make_dataset`.
    """
    labels, truth = labels.transpose("time", "lat", "lon"), truth.transpose("time", "lat", "lon")
    lab, tru = labels.values, truth.values
    tc = storm_scores(found[found.class_id == 1], true[true.class_id == 1])
    ar = river_scores(lab, tru, truth.lon.values)
    rows = [
        {"class_name": "tropical_cyclone", "iou": iou(lab, tru, 1), **tc},
        {"class_name": "atmospheric_river", "iou": iou(lab, tru, 2), **ar},
    ]
    return pd.DataFrame(rows).set_index("class_name")


def agreement(
    labels,
    reference,
    ivt,
    lon,
    *,
    threshold: float = 250.0,
    anomaly=None,
    absorbed: float = 1.0,
    class_id: int = 2,
) -> dict:
    """How climnb's rivers (``labels == class_id``) agree with another detector's.

    ``labels``, ``reference`` (its rivers: bool or the same class ids), ``ivt`` and ``anomaly``
    are (time, lat, lon) arrays; ``anomaly`` is the reference's IVT anomaly (IPART: IVT minus
    its THR reconstruction), where ``<= absorbed`` means the reference saw no anomaly there.

    Returns a dict of:

    * ``iou``, ``recall`` (share of the reference's rivers that ours match), ``precision``
      (share of ours the reference matches), ``n_reference``, ``n_ours`` (river objects);
    * ``iou_strong``: the IoU over pixels with ``ivt >= threshold`` only;
    * ``only_ours``, ``only_reference``: shares of the union that only one mask has;
    * ``only_reference_weak``: share of the reference-only pixels with ``ivt < threshold``;
    * ``reference_weak_rivers``: share of the reference's rivers whose IVT never reaches
      ``threshold`` (a fixed-threshold rule cannot find them);
    * ``recall_strong``: ``recall`` over the reference's other rivers;
    * ``only_ours_absorbed``: share of our-only pixels where ``anomaly <= absorbed`` (NaN
      without ``anomaly``).
    """
    ours = np.asarray(labels) == class_id
    ref = np.asarray(reference)
    ref = ref.astype(bool) if ref.dtype == bool else ref == class_id
    ivt = np.asarray(ivt, float)
    if not ours.shape == ref.shape == ivt.shape:
        raise ValueError(
            f"labels {ours.shape}, reference {ref.shape} and ivt {ivt.shape} must have the "
            "same (time, lat, lon) shape"
        )
    strong = ivt >= threshold
    union, only_ours, only_ref = ours | ref, ours & ~ref, ref & ~ours
    matched = river_scores(ours.astype(np.uint8), ref.astype(np.uint8), lon, class_id=1)
    periodic = is_periodic(lon)
    weak = found_strong = n_strong = 0
    for ours_t, ref_t, ivt_t in zip(ours, ref, ivt, strict=True):
        objects, n = label_components(ref_t, periodic=periodic)
        if n == 0:
            continue
        index = np.arange(1, n + 1)
        peak = ndimage.maximum(ivt_t, objects, index)
        size = ndimage.sum(np.ones_like(ivt_t), objects, index)
        inside = ndimage.sum(ours_t.astype(float), objects, index)
        is_strong = np.asarray(peak) >= threshold
        weak += int((~is_strong).sum())
        n_strong += int(is_strong.sum())
        found_strong += int((is_strong & (np.asarray(inside) >= 0.5 * np.asarray(size))).sum())
    absorbed_share = float("nan")
    if anomaly is not None and only_ours.any():
        absorbed_share = float((np.asarray(anomaly)[only_ours] <= absorbed).mean())
    n_union = np.count_nonzero(union)
    return {
        "iou": iou(ours, ref, True),
        "recall": matched["recall"],
        "precision": matched["precision"],
        "n_reference": matched["n_true"],
        "n_ours": matched["n_found"],
        "iou_strong": iou(ours[strong], ref[strong], True),
        "only_ours": _ratio(np.count_nonzero(only_ours), n_union),
        "only_reference": _ratio(np.count_nonzero(only_ref), n_union),
        "only_reference_weak": _ratio(
            np.count_nonzero(only_ref & ~strong), np.count_nonzero(only_ref)
        ),
        "reference_weak_rivers": _ratio(weak, weak + n_strong),
        "recall_strong": _ratio(found_strong, n_strong),
        "only_ours_absorbed": absorbed_share,
    }
