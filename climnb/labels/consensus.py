"""One consensus of several labellers' ``LABELS``: the majority, the union, or the per-class mean.

``LABELS`` is (time, labeller, lat, lon), as :func:`climnb.labels.expert.open_expert` reads it;
missing labellers (:data:`climnb.labels.layout.MISSING`) are left out; the mean is a soft
target."""

from __future__ import annotations

import numpy as np
import xarray as xr

from climnb.io.channels import CLASS_NAMES
from climnb.labels.layout import MISSING
from climnb.labels.schema import CONSENSUS

__all__ = ["consensus", "majority", "soft", "union"]

_N_CLASSES = len(CLASS_NAMES)


def _votes(labels: xr.DataArray) -> xr.DataArray:
    """Votes per class (class, time, lat, lon): how many labellers gave each pixel that class."""
    per_class = [(labels == c).sum("labeller") for c in range(_N_CLASSES)]
    return xr.concat(per_class, dim=xr.DataArray(np.arange(_N_CLASSES), dims="class_id"))


def majority(labels: xr.DataArray) -> xr.DataArray:
    """The class most labellers gave each pixel; a tie goes to the lower class id.

    Background (0) therefore wins every tie it is part of: two labellers who disagree on a
    pixel leave it background, unless one says storm and the other river (then storm, as a
    storm wins over a river in the truth too). Missing labellers do not vote.

    >>> da = xr.DataArray([[[[1, 1]], [[1, 0]], [[0, 0]]]], dims=("time", "labeller", "lat", "lon"))
    >>> majority(da).values.tolist()
    [[[1, 0]]]
    """
    out = _votes(labels).argmax("class_id").astype(np.uint8)
    return out.rename("LABELS").assign_attrs(consensus="majority")


def union(labels: xr.DataArray) -> xr.DataArray:
    """A pixel is a storm if any labeller says so, else a river if any says so, else 0.

    >>> da = xr.DataArray([[[[2, 0]], [[1, 0]]]], dims=("time", "labeller", "lat", "lon"))
    >>> union(da).values.tolist()
    [[[1, 0]]]
    """
    tc, ar = (labels == 1).any("labeller"), (labels == 2).any("labeller")
    out = xr.where(tc, 1, xr.where(ar, 2, 0)).astype(np.uint8)
    return out.rename("LABELS").assign_attrs(consensus="union")


def soft(labels: xr.DataArray) -> xr.DataArray:
    """Per-class mean of the labellers: the share of them that gave each pixel each class.

    Returns float32 (time, class_id, lat, lon) that sums to 1 over ``class_id`` (a soft target).

    >>> da = xr.DataArray([[[[1]], [[0]], [[-1]]]], dims=("time", "labeller", "lat", "lon"))
    >>> soft(da).values.ravel().tolist()
    [0.5, 0.5, 0.0]
    """
    votes = _votes(labels)
    present = (labels != MISSING).sum("labeller")
    share = (votes / present.where(present > 0)).fillna(0.0).astype(np.float32)
    share = share.transpose("time", "class_id", ...).assign_coords(
        class_name=("class_id", list(CLASS_NAMES))
    )
    return share.rename("LABELS").assign_attrs(consensus="mean")


def consensus(labels: xr.DataArray, how: str = "majority") -> xr.DataArray:
    """One of :data:`CONSENSUS`: ``majority``, ``union`` or ``mean`` (:func:`soft`)."""
    rules = {"majority": majority, "union": union, "mean": soft}
    if how not in rules:
        raise ValueError(f"consensus must be one of {', '.join(CONSENSUS)}, got {how!r}")
    return rules[how](labels)
