"""Scores of labels against a known truth: pixel IoU and event recall / precision.

Used by the tests, the benchmark and the notebook on synthetic data, whose ``truth`` comes
from the generator's own event geometry.

* IoU of a class: pixels labelled that class in both, over pixels labelled it in either,
  summed over all time steps. A class absent from both masks has no IoU (0 / 0): it is NaN,
  and a mean over classes leaves it out. This is the rule of the training and validation
  metric (:func:`climnb.models.metrics.iou_from_confusion`, as ``tf.metrics.mean_iou`` in the
  paper's code), so a figure means the same wherever climnb prints it.
* Storms (class 1): a true storm is found when a detected centre lies within its radius (at
  least ``min_km``); a detected storm is right when it lies within the radius of a true one.
* Rivers (class 2): objects are the seam-joined connected components of each mask; a true
  river is found when at least ``overlap`` of its pixels are labelled river, and a detected
  river is right when at least ``overlap`` of its pixels are river in the truth.
* Expert labels (:func:`expert_scores`, :func:`score_files`, ``climnb score``): the IoU per
  class of a mask against each labeller of :func:`climnb.labels.expert.open_expert` and
  against their consensus, on the steps both have, and of each labeller against each other
  (the inter-labeller agreement: the ceiling no detector can be blamed for missing).
* Agreement with another detector (:func:`agreement`, e.g. IPART's rivers from
  :mod:`climnb.labels.reference`): the IoU and matched rivers above, and where the two differ:
  how much of the other's river area and of its rivers lies under a transport threshold, the
  IoU over strong-transport pixels only, and how much of our own area the other detector's
  background absorbed.
"""

from __future__ import annotations

import warnings
from itertools import combinations
from pathlib import Path

import numpy as np
import pandas as pd
import xarray as xr
from scipy import ndimage

from climnb.io.channels import CLASS_NAMES
from climnb.io.netcdf import coord_names
from climnb.io.netcdf import open_fields as open_dataset
from climnb.labels.components import label_components
from climnb.labels.expert import MISSING, consensus, open_expert
from climnb.labels.schema import MASK_VARIABLES
from climnb.labels.sphere import great_circle_km, is_periodic

__all__ = [
    "iou",
    "class_iou",
    "network_teacher_truth",
    "RULED",
    "storm_scores",
    "river_scores",
    "score",
    "agreement",
    "expert_scores",
    "score_files",
]


def iou(labels, truth, class_id: int) -> float:
    """Intersection over union of ``class_id`` pixels, over all time steps.

    NaN when neither mask has the class (see the module's docstring).

    >>> iou([0, 1, 1], [1, 1, 0], 1), iou([0, 0], [0, 0], 2)
    (0.3333333333333333, nan)
    """
    a, b = np.asarray(labels) == class_id, np.asarray(truth) == class_id
    union = np.count_nonzero(a | b)
    return float(np.count_nonzero(a & b) / union) if union else float("nan")


def class_iou(labels, truth, n_classes: int = len(CLASS_NAMES)) -> tuple[np.ndarray, float]:
    """IoU of every class ``0 .. n_classes - 1`` and their mean, NaN classes left out.

    >>> per_class, mean = class_iou([0, 1, 1, 0], [0, 1, 0, 0])
    >>> per_class.round(3).tolist(), round(mean, 3)
    ([0.667, 0.5, nan], 0.583)
    """
    a = np.asarray(labels).ravel().astype(np.int64)
    b = np.asarray(truth).ravel().astype(np.int64)
    cm = np.bincount(a * n_classes + b, minlength=n_classes**2).reshape(n_classes, n_classes)
    tp = np.diag(cm)
    union = cm.sum(axis=0) + cm.sum(axis=1) - tp
    with np.errstate(invalid="ignore", divide="ignore"):
        per_class = np.where(union > 0, tp / np.maximum(union, 1), np.nan)
    present = ~np.isnan(per_class)
    return per_class, float(per_class[present].mean()) if present.any() else float("nan")


#: The name of a network followed by the river rules in :func:`network_teacher_truth`'s rows.
RULED = "network + river rules"


def network_teacher_truth(prediction, teacher, truth, ruled=None) -> dict[str, dict[str, float]]:
    """IoU of storms (``TC``) and rivers (``AR``) of a network's ``prediction`` against its
    ``teacher`` (the labels it learnt from) and against the ``truth``, and of the teacher
    against the truth: ``{"network vs teacher": {"TC": .., "AR": ..}, "network vs truth": ..,
    "teacher vs truth": ..}`` (:func:`class_iou`; NaN for a class in neither mask).

    With ``ruled``, the prediction put through the river definition's object rules
    (:func:`climnb.inference.postprocess.apply_river_rules`), two more rows: ``network + river
    rules vs teacher`` and ``network + river rules vs truth``.

    >>> network_teacher_truth([0, 2], [0, 2], [2, 2])["network vs truth"]["AR"]
    0.5
    >>> list(network_teacher_truth([0, 2], [0, 2], [2, 2], ruled=[0, 0]))[3:]
    ['network + river rules vs teacher', 'network + river rules vs truth']
    """
    pairs = [
        ("network vs teacher", prediction, teacher),
        ("network vs truth", prediction, truth),
        ("teacher vs truth", teacher, truth),
    ]
    if ruled is not None:
        pairs += [
            (f"{RULED} vs teacher", ruled, teacher),
            (f"{RULED} vs truth", ruled, truth),
        ]
    rows = {}
    for name, a, b in pairs:
        per_class, _ = class_iou(a, b)
        rows[name] = {"TC": float(per_class[1]), "AR": float(per_class[2])}
    return rows


def iou_by_step(reference: xr.DataArray, given: xr.DataArray) -> tuple[np.ndarray, pd.DataFrame]:
    """IoU per class at each time step of two (time, lat, lon) masks, and over the period.

    Returns an array (time, class) of per-step IoUs (NaN where a class is absent from both
    masks at that step) and a table with one row per class: the IoU of the whole period (from
    the summed counts, not a mean of steps), the mean and the worst step.

    >>> ref = xr.DataArray([[[0, 1]], [[0, 0]]], dims=("time", "lat", "lon"))
    >>> steps, table = iou_by_step(ref, ref)
    >>> steps[:, 1].tolist(), table["IoU (period)"].tolist()
    ([1.0, nan], [1.0, 1.0, nan])
    """
    a = reference.transpose("time", ...).values
    b = given.transpose("time", ...).values
    n = len(CLASS_NAMES)
    per_step = np.stack([class_iou(a[i], b[i], n)[0] for i in range(a.shape[0])])
    total = class_iou(a, b, n)[0]
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # a class absent at every step
        table = pd.DataFrame(
            {
                "class": list(CLASS_NAMES),
                "IoU (period)": total,
                "IoU (mean of steps)": np.nanmean(per_step, axis=0),
                "IoU (worst step)": np.nanmin(per_step, axis=0),
            }
        )
    return per_step, table


def confusion_table(labels, truth, n_classes: int = len(CLASS_NAMES)) -> pd.DataFrame:
    """Confusion per class: rows the reference (``truth``) class, columns the class ``labels``
    gave, each row as fractions of the reference class's pixels (recall on the diagonal).

    >>> confusion_table([0, 1, 1, 0], [0, 1, 0, 0]).round(2).values.tolist()[:2]
    [[0.67, 0.33, 0.0], [0.0, 1.0, 0.0]]
    """
    a = np.asarray(labels).ravel().astype(np.int64)
    b = np.asarray(truth).ravel().astype(np.int64)
    cm = np.bincount(b * n_classes + a, minlength=n_classes**2).reshape(n_classes, n_classes)
    with np.errstate(invalid="ignore", divide="ignore"):
        rows = cm / cm.sum(axis=1, keepdims=True)
    names = list(CLASS_NAMES[:n_classes])
    table = pd.DataFrame(rows, index=pd.Index(names, name="reference"), columns=names)
    table.columns.name = "given"
    return table


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
    of :func:`climnb.data.synthetic.make_dataset`.
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


# ---------------------------------------------------------------------------------------------
# Scores against expert labels (ClimateNet layout)
# ---------------------------------------------------------------------------------------------

#: Columns of the table :func:`expert_scores` returns.
EXPERT_COLUMNS = ("compared", "against", "steps", *CLASS_NAMES, "mean")


def _row(compared: str, against: str, a: np.ndarray, b: np.ndarray) -> dict:
    per_class, mean = class_iou(a, b)
    return {
        "compared": compared,
        "against": against,
        "steps": len(a),
        **dict(zip(CLASS_NAMES, per_class.tolist(), strict=True)),
        "mean": mean,
    }


def expert_scores(
    mask: xr.DataArray,
    expert: xr.Dataset | str | Path,
    *,
    rules: tuple[str, ...] = ("majority",),
    name: str = "mask",
) -> pd.DataFrame:
    """IoU per class of ``mask`` against each labeller and their consensus, and of the
    labellers against each other.

    Parameters
    ----------
    mask : class ids (time, lat, lon), e.g. heuristic labels or a prediction.
    expert : :func:`climnb.labels.expert.open_expert`'s Dataset (``LABELS`` with a
        ``labeller`` dimension), or what it opens (a ClimateNet folder or glob).
    rules : consensus rules to score against (``majority``, ``union``; see
        :func:`climnb.labels.expert.consensus`).
    name : what to call the mask in the table.

    Returns
    -------
    pandas.DataFrame
        :data:`EXPERT_COLUMNS`: one row per comparison; ``steps`` is the number of time steps
        compared (a labeller is scored on the steps it labelled). Rows of ``name`` against
        ``labeller N`` and against each rule come first, then ``labeller N`` against
        ``labeller M`` (the inter-labeller agreement). IoU is NaN for a class absent from
        both; ``mean`` leaves NaN classes out.

    Raises
    ------
    ValueError
        When the mask and the expert labels have no time in common or different grids.
    """
    if not isinstance(expert, xr.Dataset):
        expert = open_expert(expert)
    mask, labels = _common_steps(mask, expert.LABELS)
    rows = []
    present = (labels != MISSING).all(("lat", "lon")).values  # (time, labeller)
    names = [f"labeller {n}" for n in labels.labeller.values]
    m = mask.values
    for j, who in enumerate(names):
        rows.append(_row(name, who, m[present[:, j]], labels.values[present[:, j], j]))
    for rule in rules:
        agreed = consensus(labels, rule)
        if "class_id" in agreed.dims:
            raise ValueError(f"a mask is scored against a hard consensus, not {rule!r}")
        rows.append(_row(name, rule, m, agreed.values))
    for j, k in combinations(range(len(names)), 2):
        both = present[:, j] & present[:, k]
        if both.any():
            a, b = labels.values[both, j], labels.values[both, k]
            rows.append(_row(names[j], names[k], a, b))
    return pd.DataFrame(rows, columns=list(EXPERT_COLUMNS))


def _common_steps(mask: xr.DataArray, labels: xr.DataArray):
    mask = mask.transpose("time", "lat", "lon")
    index = mask.indexes["time"]
    if isinstance(index, xr.CFTimeIndex):  # CAM5's noleap calendar: its dates are real dates
        mask = mask.assign_coords(time=index.to_datetimeindex(unsafe=True, time_unit="ns"))
    common = np.intersect1d(mask.time.values, labels.time.values)
    if common.size == 0:
        raise ValueError(
            f"no time step in common: mask {_span(mask.time)}, expert labels {_span(labels.time)}"
        )
    for c in ("lat", "lon"):
        a, b = mask[c].values, labels[c].values
        if a.shape != b.shape or not np.allclose(a, b, atol=1e-6):
            raise ValueError(
                f"the grids differ: mask {mask.sizes['lat']}x{mask.sizes['lon']}, expert labels "
                f"{labels.sizes['lat']}x{labels.sizes['lon']} ({c} values)"
            )
    return mask.sel(time=common), labels.sel(time=common).transpose("time", "labeller", ...)


def _span(time: xr.DataArray) -> str:
    values = pd.DatetimeIndex(time.values)
    return f"{values.min():%Y-%m-%d %H:%M} .. {values.max():%Y-%m-%d %H:%M}"


def score_files(
    mask_path,
    expert_paths,
    *,
    variable: str | None = None,
    rules: tuple[str, ...] = ("majority",),
) -> pd.DataFrame:
    """:func:`expert_scores` of a mask file against ClimateNet-layout files.

    Parameters
    ----------
    mask_path : a NetCDF or Zarr file with class ids (time, lat, lon): ``climnb label``'s
        ``labels``, ``climnb predict``'s ``prediction``, ...
    expert_paths : the expert files (folder, glob or list; :func:`open_expert`).
    variable : the mask's variable (default: the first of :data:`MASK_VARIABLES` it has).
    rules : consensus rules to score against.

    Raises
    ------
    ValueError
        One line naming the file: no such variable, values other than 0, 1, 2, no time in
        common, or different grids.
    """
    mask = _read_mask(mask_path, variable)
    expert = open_expert(expert_paths)
    try:
        return expert_scores(mask, expert, rules=rules, name=Path(mask_path).name)
    except ValueError as err:
        raise ValueError(f"{mask_path}: {err}") from None


def _read_mask(path, variable: str | None) -> xr.DataArray:
    if not Path(path).exists():
        raise ValueError(f"{path}: no such file or directory")
    # the one opener: a Zarr store missing a chunk or a variable's metadata is refused, a
    # damaged chunk named when it is read, a repeated time refused, each naming the file
    ds = open_dataset(path, canonical=False)
    names = [variable] if variable else [v for v in MASK_VARIABLES if v in ds]
    if not names or names[0] not in ds:
        wanted = variable or " or ".join(MASK_VARIABLES)
        raise ValueError(f"{path}: has no variable {wanted} (choose one with --variable)")
    da = ds[names[0]]
    da = da.rename({v: k for k, v in coord_names(da).items() if v in da.dims or v in da.coords})
    if set(da.dims) != {"time", "lat", "lon"}:
        raise ValueError(f"{path}: {names[0]} has dimensions {da.dims}, expected time, lat, lon")
    da = da.load()
    values = da.values
    bad = ~np.isin(values, np.arange(len(CLASS_NAMES)))
    if bad.any():
        raise ValueError(
            f"{path}: {names[0]} holds values other than 0, 1, 2 (background, TC, AR): "
            f"{np.unique(values[bad])[:5].tolist()}"
        )
    return da
