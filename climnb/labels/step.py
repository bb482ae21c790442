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

from collections.abc import Iterable, Mapping

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
    tracked: Mapping[tuple[int, int], tuple[int, float, float]] | None = None,
) -> tuple[np.ndarray, pd.DataFrame]:
    """Label one time step of 2-D (lat, lon) fields on an ascending-latitude grid.

    Missing values (NaN) are filled with the field's median before detection, and pixels
    missing in any field are labelled background. ``classes`` (class names) default to what
    the fields allow (:func:`plan_labels`, whose settings are then used);
    ``ivt_threshold`` is a per-grid-point threshold for the transport method;
    ``tracked`` the storm centres on a cyclone's track, as :func:`label_dataset` finds them:
    ``{(row, col): (track, vorticity, min_psl)}``, in the order and with the values
    :func:`climnb.labels.tc.find_centres` gave in these fields. Only these become storms,
    without searching again, and the track's number is their events' ``storm_track``. None
    searches, and keeps every centre the checks pass (``storm_track`` -1).

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
        centres = None if tracked is None else [(*rc, z, p) for rc, (_, z, p) in tracked.items()]
        storms, storm_table = detect_storms(
            fields, lat, lon, config.tc, periodic=periodic, centres=centres
        )
        if tracked is not None:
            storm_table["storm_track"] = [tracked[s.row, s.col][0] for s in storms]
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
    return labels, _events(storm_table, rivers)


def _events(storms: pd.DataFrame, rivers: pd.DataFrame) -> pd.DataFrame:
    """The event table of a step: the storms' rows, then the rivers', in the columns of
    :data:`EVENT_COLUMNS` but ``time`` (NaN where neither table has one; ``storm_track`` -1
    where there is no track), in the dtypes and values ``pandas.concat`` of the tables with
    rows gives. Without rows, every column is float64 but ``class_id`` and ``storm_track``."""
    tables = [(t, k) for t, k in ((storms, 1), (rivers, 2)) if len(t)]
    sizes = [len(t) for t, _ in tables]
    class_id = np.repeat(np.array([k for _, k in tables], np.int64), sizes)
    frame = {"class_id": class_id, "class_name": [CLASS_NAMES[c] for c in class_id]}
    for c in EVENT_COLUMNS:
        if c not in frame and c != "time":
            frame[c] = _column([t[c] if c in t else None for t, _ in tables], sizes)
    track = frame["storm_track"]
    if isinstance(track, pd.Series):
        frame["storm_track"] = track.fillna(-1).astype(np.int64)
    else:  # numbers; no track (NaN) is -1
        frame["storm_track"] = np.where(np.isnan(track), -1, track).astype(np.int64)
    return pd.DataFrame(frame)


def _column(parts: list[pd.Series | None], sizes: list[int]) -> np.ndarray | pd.Series:
    """One column of several tables (``parts``, None where a table lacks it; ``sizes``, their
    rows) one after the other, as ``pandas.concat`` puts it: in the parts' common type, NaN
    where a table lacks it (integers then float64); all NaN where none has it. Numbers are put
    together here, any other type by ``pandas.concat`` itself."""
    given = [p for p in parts if p is not None]
    if not given:
        return np.full(sum(sizes), np.nan)
    if not all(isinstance(p.dtype, np.dtype) and p.dtype.kind in "iuf" for p in given):
        frames = [
            pd.DataFrame(index=pd.RangeIndex(n)) if p is None else p.to_frame("c")
            for p, n in zip(parts, sizes, strict=True)
        ]
        return pd.concat(frames, ignore_index=True)["c"]
    dtype = np.result_type(*(p.dtype for p in given))
    if len(given) < len(parts) and dtype.kind != "f":
        dtype = np.dtype(np.float64)
    return np.concatenate(
        [
            np.full(n, np.nan, dtype) if p is None else p.to_numpy(dtype)
            for p, n in zip(parts, sizes, strict=True)
        ]
    )


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
