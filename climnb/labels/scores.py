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
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import xarray as xr

from climnb.labels.components import label_components
from climnb.labels.sphere import great_circle_km, is_periodic

__all__ = ["iou", "storm_scores", "river_scores", "score"]


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
