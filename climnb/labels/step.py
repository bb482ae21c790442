"""Label one time step: the storm and river masks of 2-D fields and their event table
(:func:`label_step`), what every label task of :func:`climnb.labels.dataset.label_dataset` runs.

Examples
--------
>>> from climnb.data.synthetic import make_dataset
>>> ds, _ = make_dataset(n_time=1, seed=0)
>>> fields = {n: ds[n].values[0] for n in ("TMQ", "U850", "V850", "PSL", "T200", "T500")}
>>> labels, events = label_step(fields, ds.lat.values, ds.lon.values)
>>> labels.dtype.name, sorted(events.class_name.unique())
('uint8', ['atmospheric_river', 'tropical_cyclone'])
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping

import numpy as np
import pandas as pd

from climnb.io.channels import CLASS_NAMES
from climnb.io.netcdf import FILL_LIMIT as _FILL_LIMIT
from climnb.labels.ar import detect_rivers, storm_surroundings, transport_rivers
from climnb.labels.config import LabelConfig
from climnb.labels.plan import plan_labels
from climnb.labels.schema import EVENT_COLUMNS
from climnb.labels.sphere import is_periodic
from climnb.labels.tc import detect_storms

__all__ = ["label_step", "fill_missing"]

_AR, _TC = CLASS_NAMES[2], CLASS_NAMES[1]


def label_step(
    fields: Mapping[str, np.ndarray],
    lat: np.ndarray,
    lon: np.ndarray,
    config: LabelConfig | None = None,
    *,
    classes: Iterable[str] | None = None,
    ivt_threshold: np.ndarray | None = None,
    storms_at: Collection[tuple[int, int]] | Mapping[tuple[int, int], int] | None = None,
    centres: Iterable[tuple[int, int, float, float]] | None = None,
) -> tuple[np.ndarray, pd.DataFrame]:
    """Label one time step of 2-D (lat, lon) fields on an ascending-latitude grid.

    Missing values (NaN) are filled with the field's median before detection, and pixels
    missing in any field are labelled background. ``classes`` (class names) default to what
    the fields allow (:func:`plan_labels`, whose settings are then used);
    ``ivt_threshold`` is a per-grid-point threshold for the transport method;
    ``storms_at`` the storm centres ``(row, col)`` to keep (those on a cyclone's track, as
    :func:`label_dataset` finds them; a mapping gives each its track's number, the events'
    ``storm_track``), None for every centre the checks pass; ``centres`` the storm centres
    ``(row, col, vorticity, min_psl)`` already found in these fields
    (:func:`climnb.labels.tc.find_centres`, in its order), not searched for again.

    Returns
    -------
    labels : uint8 (lat, lon), 0 background, 1 tropical cyclone, 2 atmospheric river; a
        cyclone wins where both are found.
    events : one row per river and storm (the columns of :data:`EVENT_COLUMNS` but ``time``).
    """
    config = config or LabelConfig()
    if classes is None:
        plan = plan_labels(fields, config)
        classes, config = plan.classes, plan.config
    fields, missing = fill_missing(fields)
    periodic = is_periodic(lon)
    shape = np.shape(next(iter(fields.values())))
    storms, storm_table = [], _EMPTY_STORMS
    if _TC in classes:
        storms, storm_table = detect_storms(
            fields, lat, lon, config.tc, periodic=periodic, keep=storms_at, centres=centres
        )
        if isinstance(storms_at, Mapping):
            storm_table["storm_track"] = [storms_at[s.row, s.col] for s in storms]
    storm_mask = np.zeros(shape, bool)
    for s in storms:  # each storm keeps its own mask; the union is the class mask
        storm_mask[s.rows, s.cols] = True
    river_mask, rivers = np.zeros(shape, bool), _EMPTY_RIVERS
    if _AR in classes:
        kwargs = dict(periodic=periodic, exclude=storm_mask)
        if config.ar.method == "transport":
            kwargs["exclude"] = storm_surroundings(
                storm_mask, lat, config.ar.storm_buffer_km, storms
            )
            river_mask, rivers = transport_rivers(
                fields, lat, lon, config.ar, threshold=ivt_threshold, **kwargs
            )
        else:
            river_mask, rivers = detect_rivers(fields, lat, lon, config.ar, **kwargs)
    labels = np.multiply(river_mask, 2, dtype=np.uint8)
    for s in storms:  # a cyclone wins where both are found
        labels[s.rows, s.cols] = 1
    if missing is not None:
        labels[missing] = 0
    events = _events([(storm_table, 1), (rivers, 2)])
    if events is not None:
        return labels, events
    parts = [
        t
        for t in (storm_table.assign(class_id=1), rivers.drop(columns="label").assign(class_id=2))
        if len(t)
    ]
    events = (
        pd.concat(parts, ignore_index=True)
        if parts
        else pd.DataFrame({"class_id": pd.Series(dtype=int)})
    )
    events["class_name"] = [CLASS_NAMES[c] for c in events.class_id]
    if "storm_track" not in events:
        events["storm_track"] = -1
    events["storm_track"] = events.storm_track.fillna(-1).astype(np.int64)
    return labels, events.reindex(columns=[c for c in EVENT_COLUMNS if c != "time"])


def _events(tables) -> pd.DataFrame | None:
    """The event table of ``tables`` ((table, class id) pairs), built from their columns at
    once: what concatenating them and filling ``class_name`` and ``storm_track`` gives, when
    all are numeric (int64 or float64) and one has rows; else None."""
    tables = [(t, k) for t, k in tables if len(t)]
    names = [c for c in EVENT_COLUMNS if c not in ("time", "class_id", "class_name")]
    if not tables or any(
        dtype not in (np.int64, np.float64)
        for t, _ in tables
        for c, dtype in t.dtypes.items()
        if c in names
    ):
        return None
    columns = {}
    for c in names:
        parts = [
            t[c].to_numpy() if c in t else np.full(len(t), -1 if c == "storm_track" else np.nan)
            for t, _ in tables
        ]
        columns[c] = np.concatenate(parts)
    track = columns["storm_track"]
    columns["storm_track"] = np.where(np.isnan(track), -1, track).astype(np.int64)
    class_id = np.concatenate([np.full(len(t), k, np.int64) for t, k in tables])
    frame = {"class_id": class_id, "class_name": [CLASS_NAMES[c] for c in class_id], **columns}
    return pd.DataFrame({c: frame[c] for c in EVENT_COLUMNS if c != "time"})


_EMPTY_STORMS = pd.DataFrame(
    {c: pd.Series(dtype=float) for c in ("lat", "lon", "n_pixels", "area_km2", "radius_km")}
)
_EMPTY_RIVERS = pd.DataFrame(
    {c: pd.Series(dtype=float) for c in ("label", "lat", "lon", "n_pixels", "area_km2")}
)


def _clean(f: np.ndarray) -> bool:
    """True when float32 ``f`` surely holds no missing value: the sum of its squares (one
    pass, BLAS) is finite only when no value is NaN or infinite and none reaches 1.8e19 in
    magnitude (its square overflows), far below the fill limit of 1e30. False says nothing:
    the two reductions of :func:`fill_missing` (NaN makes both comparisons false) decide."""
    if f.dtype != np.float32 or f.size == 0:
        return False
    flat = f.ravel()
    return bool(np.isfinite(np.dot(flat, flat)))


def fill_missing(fields):
    """Fields with missing values (NaN, inf, and CAM5's undeclared fill: magnitude 1e30 or
    more, as :func:`climnb.io.netcdf.normalize` treats it) set to the field's median, and the
    mask of the pixels missing in any field (None when none is)."""
    out, missing = {}, None
    for name, f in fields.items():
        f = np.asarray(f)
        if _clean(f) or f.size == 0 or (f.max() < _FILL_LIMIT and f.min() > -_FILL_LIMIT):
            out[name] = f
            continue
        with np.errstate(invalid="ignore"):
            bad = ~np.isfinite(f) | (np.abs(f) >= _FILL_LIMIT)
        if bad.any():
            if bad.all():
                raise ValueError(f"variable {name} has no valid values in a time step")
            f = np.where(bad, np.median(f[~bad]), f).astype(f.dtype)
            missing = bad if missing is None else missing | bad
        out[name] = f
    return out, missing
