"""How often each grid point lies inside a tropical cyclone or an atmospheric river.

The frequency of a class at a point is the fraction of the period's time steps at which the
point is inside that class: overall, by season (DJF, MAM, JJA, SON) or by month. It comes from
:func:`climnb.stats.groups.class_counts` (one lazy pass over the mask) and is written as CF
NetCDF or Zarr (:func:`write_frequency`) with ``cell_methods: "time: mean"`` and the period
in the attributes.

Examples
--------
>>> from climnb.data.synthetic import make_dataset
>>> ds, _ = make_dataset(n_time=4, seed=0)
>>> freq = frequency(ds.truth).compute()
>>> freq.frequency.dims, freq.frequency.attrs["cell_methods"]
(('class', 'lat', 'lon'), 'time: mean')
>>> bool(abs(freq.frequency.sel(class_id=2).mean() - (ds.truth == 2).mean()) < 1e-6)
True
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import xarray as xr

from climnb.io.channels import CLASS_NAMES
from climnb.io.files import write
from climnb.io.grid import cf_coords
from climnb.stats.groups import CLASS_IDS, class_counts
from climnb.stats.masks import MISSING, mask_classes

__all__ = ["frequency", "frequency_from_counts", "write_frequency", "period_attrs"]


def frequency(mask: xr.DataArray, by: str = "all") -> xr.Dataset:
    """Lazy frequency of each class at each point, over the whole period or per ``by`` group.

    Parameters
    ----------
    mask : a class mask (:func:`climnb.stats.masks.class_mask`), dims (time, lat, lon).
    by : ``"all"``, ``"season"`` or ``"month"`` (also ``"year"``).

    A missing value of the mask (:data:`climnb.stats.masks.MISSING`, NaN in the file) is
    neither background nor a class: each point's frequency is over its valid steps.

    Returns
    -------
    xarray.Dataset
        ``frequency`` (class, [by], lat, lon) float32 in [0, 1] (NaN for a season or month
        without steps) and ``steps`` ([by]), the number of time steps averaged; the class
        coordinate holds the class names and ``class_id``; CF attributes.
    """
    counts = class_counts(mask, by, classes=(*CLASS_IDS, MISSING))
    return frequency_from_counts(counts, mask, drop_group=by == "all")


def frequency_from_counts(
    counts: xr.Dataset, mask: xr.DataArray, *, drop_group: bool
) -> xr.Dataset:
    """The frequency Dataset of :func:`frequency` from counts of :func:`class_counts`."""
    dim = counts["steps"].dims[0]
    steps = counts.steps.where(counts.steps > 0)
    if MISSING in counts.class_id.values:  # missing values: each point over its valid steps
        missing = counts["count"].isel({"class": counts.class_id.values == MISSING})
        counts = counts.isel({"class": counts.class_id.values != MISSING})
        valid = counts.steps - missing.isel({"class": 0}, drop=True)
        steps = valid.where(valid > 0)
    freq = (counts["count"] / steps).astype(np.float32)
    freq = freq.transpose("class", dim, "lat", "lon")
    names = [CLASS_NAMES[int(k)] for k in counts.class_id.values]
    freq = freq.assign_coords({"class": np.array(names, object)})  # vlen strings: Zarr 3 spec
    out = xr.Dataset({"frequency": freq, "steps": counts.steps})
    if drop_group:
        out = out.isel({dim: 0}, drop=True)
    out["frequency"].attrs = {
        "long_name": "fraction of time steps inside the class",
        "units": "1",
        "cell_methods": "time: mean",
        "valid_range": np.array([0.0, 1.0], np.float32),
    }
    out["steps"].attrs = {"long_name": "number of time steps averaged", "units": "1"}
    out["class_id"].attrs = {
        "long_name": "class id of the mask",
        "flag_values": np.arange(1, len(CLASS_NAMES), dtype=np.uint8),
        "flag_meanings": " ".join(CLASS_NAMES[1:]),
    }
    out.attrs = {
        "title": "frequency of tropical cyclones and atmospheric rivers",
        "source": "climnb.stats.frequency",
        "Conventions": "CF-1.8",
        "mask_variable": str(mask.name),
        "mask_classes": " ".join(mask_classes(mask)),
        **period_attrs(mask.time),
    }
    return cf_coords(out)


def period_attrs(time: xr.DataArray) -> dict:
    """The period of ``time`` as attributes: first and last step, steps, calendar."""
    if time.size == 0:
        raise ValueError("the mask's time axis is empty")
    first, last = time.values[0], time.values[-1]
    calendar = getattr(first, "calendar", None) or time.encoding.get("calendar", "standard")
    return {
        "period_start": _iso(first),
        "period_end": _iso(last),
        "time_coverage_start": _iso(first),
        "time_coverage_end": _iso(last),
        "period_steps": int(time.size),
        "calendar": str(calendar),
    }


def _iso(t) -> str:
    if hasattr(t, "isoformat"):
        return t.isoformat()
    return str(np.datetime_as_string(np.datetime64(t, "s")))


def write_frequency(freq: xr.Dataset, path: str | os.PathLike) -> Path:
    """Write a frequency Dataset as NetCDF (or Zarr, for ``*.zarr``), atomically, in one pass."""
    encoding = {"frequency": {"dtype": "float32", "zlib": True}}
    return write(freq, Path(path), encoding=encoding)
