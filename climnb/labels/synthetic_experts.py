"""A synthetic ClimateNet folder: labellers who depart from the truth in known ways.

Steps of :func:`climnb.data.synthetic.make_dataset`, each labelled by the labellers of
:data:`STYLES`, for tests, docstrings and notebooks.

>>> import tempfile
>>> paths = write_expert_folder(tempfile.mkdtemp(), n_time=1, labellers=("truth", "dilate"))
>>> [p.name for p in paths]
['data-2000-01-01-00-1_0.nc', 'data-2000-01-01-00-1_1.nc']
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from scipy import ndimage

from climnb.data.synthetic import make_dataset
from climnb.io.atomic import atomic_path
from climnb.io.channels import CHANNEL_NAMES
from climnb.labels.components import label_components
from climnb.labels.layout import expert_name

__all__ = ["STYLES", "write_expert_folder"]

PathLike = str | os.PathLike


def _dilate(truth: np.ndarray, pixels: int = 1) -> np.ndarray:
    """Grow every class by ``pixels`` (periodic in longitude); storms win over rivers."""
    out = truth.copy()
    pad = pixels
    for c in (2, 1):
        mask = np.pad(truth == c, ((0, 0), (pad, pad)), mode="wrap")
        grown = ndimage.binary_dilation(mask, iterations=pixels)[:, pad:-pad]
        out[grown] = c
    return out


def _miss_small(truth: np.ndarray) -> np.ndarray:
    """Leave out the storms smaller than the mean storm of the step (never the largest)."""
    out = truth.copy()
    comps, n = label_components(truth == 1)
    if n:
        sizes = np.bincount(comps.ravel(), minlength=n + 1)[1:]
        small = np.flatnonzero(sizes < sizes.mean()) + 1
        out[np.isin(comps, small)] = 0
    return out


def _rivers_only(truth: np.ndarray) -> np.ndarray:
    """Label the rivers but no storms (a labeller who skips the storm class)."""
    return np.where(truth == 1, 0, truth).astype(truth.dtype)


#: How each synthetic labeller departs from the truth, by name.
STYLES = {
    "truth": lambda t: t.copy(),
    "dilate": _dilate,
    "miss_small": _miss_small,
    "rivers_only": _rivers_only,
}


def write_expert_folder(
    folder: PathLike,
    *,
    labellers: Sequence[str] = ("truth", "dilate", "miss_small"),
    skip: Sequence[tuple[int, int]] = (),
    **kwargs,
) -> list[Path]:
    """Write a ClimateNet-layout folder of synthetic steps labelled by several labellers.

    Parameters
    ----------
    folder : where to write ``data-YYYY-MM-DD-HH-1_N.nc`` (created if missing).
    labellers : the style (:data:`STYLES`) of labeller ``N = 0, 1, ...``: ``truth`` copies the
        generator's truth, ``dilate`` grows both classes by one pixel (storms over rivers),
        ``miss_small`` leaves out the storms smaller than the step's mean storm,
        ``rivers_only`` labels no storms. With the default three, the majority is the truth
        and the union is the ``dilate`` labeller's mask.
    skip : ``(time index, labeller)`` pairs not written, for steps fewer labellers labelled.
    kwargs : passed to :func:`climnb.data.synthetic.make_dataset` (``n_time``, ``seed``, sizes...).

    Returns
    -------
    list of Path
        The files written, sorted by time then labeller. The fields and the truth are those of
        ``make_dataset(**kwargs)``.
    """
    unknown = [s for s in labellers if s not in STYLES]
    if unknown:
        raise ValueError(f"unknown labeller style(s) {unknown}; known: {', '.join(STYLES)}")
    ds, _ = make_dataset(**kwargs)
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    skip = {(int(t), int(n)) for t, n in skip}
    paths = []
    for t in range(ds.sizes["time"]):
        step = ds.isel(time=[t])
        truth = step.truth.values[0]
        for n, style in enumerate(labellers):
            if (t, n) in skip:
                continue
            path = folder / expert_name(step.time.values[0], n)
            one = step[list(CHANNEL_NAMES)]
            one["LABELS"] = (("lat", "lon"), STYLES[style](truth).astype(np.int32))
            one.attrs = {"labeller": n, "style": style, "source": "climnb.labels.expert"}
            with atomic_path(path) as tmp:
                one.to_netcdf(tmp)
            paths.append(path)
    return paths
