"""Label a whole data set: one dask task per time chunk, a lazy label array and an event table.

Examples
--------
>>> import dask
>>> from climnb.synthetic import make_dataset
>>> ds, _ = make_dataset(n_time=2, seed=0)
>>> labels, events = label_dataset(ds)
>>> labels.dims, labels.dtype.name, labels.chunks is not None
(('time', 'lat', 'lon'), 'uint8', True)
>>> labels, events = compute(labels, events)  # one pass computes both
>>> sorted(events.class_name.unique())
['atmospheric_river', 'tropical_cyclone']
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

import dask
import dask.array as da
import numpy as np
import pandas as pd
import xarray as xr

from climnb.channels import CLASS_NAMES
from climnb.io.netcdf import normalize
from climnb.labels.ar import detect_rivers
from climnb.labels.config import LabelConfig
from climnb.labels.sphere import is_periodic
from climnb.labels.tc import detect_storms

__all__ = [
    "required_variables",
    "label_step",
    "label_dataset",
    "compute",
    "save_labelled",
    "EVENT_COLUMNS",
]

log = logging.getLogger(__name__)

EVENT_COLUMNS = (
    "time",
    "class_id",
    "class_name",
    "lat",
    "lon",
    "area_km2",
    "length_km",
    "width_km",
    "radius_km",
    "min_psl",
    "max_wind",
    "max_ivt",
    "vorticity",
    "n_pixels",
)


def required_variables(config: LabelConfig | None = None) -> tuple[str, ...]:
    """The input variables that labelling with ``config`` needs."""
    config = config or LabelConfig()
    names = ["TMQ", "U850", "V850", "PSL", "T200", "T500", "PRECT"]
    if config.tc.thickness_rise_m is not None:
        names += ["Z200", "Z1000"]
    return tuple(names)


def label_step(
    fields: Mapping[str, np.ndarray],
    lat: np.ndarray,
    lon: np.ndarray,
    config: LabelConfig | None = None,
) -> tuple[np.ndarray, pd.DataFrame]:
    """Label one time step of 2-D (lat, lon) fields on an ascending-latitude grid.

    Missing values (NaN) are filled with the field's median before detection, and pixels
    missing in any field are labelled background.

    Returns
    -------
    labels : uint8 (lat, lon), 0 background, 1 tropical cyclone, 2 atmospheric river; a
        cyclone wins where both are found.
    events : one row per river and storm (the columns of :data:`EVENT_COLUMNS` but ``time``).
    """
    config = config or LabelConfig()
    fields, missing = _fill_missing(fields)
    periodic = is_periodic(lon)
    storms, storm_table = detect_storms(fields, lat, lon, config.tc, periodic=periodic)
    storm_mask = np.zeros(np.shape(fields["TMQ"]), bool)
    for s in storms:  # each storm keeps its own mask; the union is the class mask
        storm_mask[s.rows, s.cols] = True
    river_mask, rivers = detect_rivers(
        fields, lat, lon, config.ar, periodic=periodic, exclude=storm_mask
    )
    labels = np.where(storm_mask, np.uint8(1), np.where(river_mask, np.uint8(2), np.uint8(0)))
    if missing is not None:
        labels[missing] = 0
    events = pd.concat(
        [storm_table.assign(class_id=1), rivers.drop(columns="label").assign(class_id=2)],
        ignore_index=True,
    )
    events["class_name"] = [CLASS_NAMES[c] for c in events.class_id]
    return labels, events.reindex(columns=[c for c in EVENT_COLUMNS if c != "time"])


def _fill_missing(fields):
    out, missing = {}, None
    for name, f in fields.items():
        f = np.asarray(f)
        bad = ~np.isfinite(f)
        if bad.any():
            if bad.all():
                raise ValueError(f"variable {name} has no valid values in a time step")
            f = np.where(bad, np.median(f[~bad]), f).astype(f.dtype)
            missing = bad if missing is None else missing | bad
        out[name] = f
    return out, missing


def _label_block(names, lat, lon, config, times, *blocks):
    """Label a block of time steps: returns (labels (t, lat, lon), events)."""
    out = np.zeros((len(times), lat.size, lon.size), np.uint8)
    tables = []
    for k, time in enumerate(times):
        fields = {n: b[k] for n, b in zip(names, blocks, strict=True)}
        out[k], events = label_step(fields, lat, lon, config)
        tables.append(events.assign(time=time))
    events = pd.concat(tables, ignore_index=True) if tables else pd.DataFrame()
    return out, events.reindex(columns=list(EVENT_COLUMNS))


def label_dataset(
    ds: xr.Dataset, config: LabelConfig | None = None
) -> tuple[xr.DataArray, dask.delayed.Delayed]:
    """Label every time step of ``ds`` lazily.

    Parameters
    ----------
    ds : fields with dimensions time, lat, lon (any order of latitudes, longitudes -180..180 or
        0..360, extra variables allowed; see :func:`climnb.io.netcdf.normalize`). Numpy-backed
        data are chunked; dask-backed data are streamed one time chunk at a time.
    config : the settings (default :class:`LabelConfig`).

    Returns
    -------
    labels : lazy uint8 DataArray (time, lat, lon) on the normalised grid (ascending latitude,
        longitude 0..360), one dask task per ``config.time_chunk`` steps.
    events : a dask ``Delayed`` pandas DataFrame with the columns :data:`EVENT_COLUMNS`.
        Compute both with :func:`compute` (or ``dask.compute(..., optimize_graph=False)``),
        which labels each step once; a plain ``dask.compute(labels, events)`` optimises the
        two collections separately, fuses the shared per-step task into the array and so
        labels every step twice.

    Raises
    ------
    ValueError
        If a required variable, a coordinate or a dimension is missing or wrong.
    """
    config = config or LabelConfig()
    names = list(required_variables(config)) + [v for v in ("IVT",) if v in ds.data_vars]
    ds = normalize(ds, required=names)[names]
    ds = ds.chunk({"time": config.time_chunk, "lat": -1, "lon": -1})
    lat, lon = ds.lat.values.astype(float), ds.lon.values.astype(float)
    if lat.size < 3 or lon.size < 3:
        raise ValueError(f"grid {lat.size} x {lon.size} is too small to label (need 3 x 3)")
    token = dask.base.tokenize(ds, config)
    blocks, tables, start = [], [], 0
    for size in ds.chunks["time"]:
        times = ds.time.values[start : start + size]
        parts = [ds[n].data.blocks[start // config.time_chunk] for n in names]
        result = dask.delayed(_label_block, pure=True)(
            names,
            lat,
            lon,
            config,
            times,
            *parts,
            dask_key_name=f"label-step-{token}-{start}",
        )
        blocks.append(da.from_delayed(result[0], (size, lat.size, lon.size), np.uint8))
        tables.append(result[1])
        start += size
    labels = xr.DataArray(
        da.concatenate(blocks, axis=0),
        coords={"time": ds.time, "lat": ds.lat, "lon": ds.lon},
        dims=("time", "lat", "lon"),
        name="labels",
        attrs={
            "long_name": "heuristic class of each pixel",
            "flag_values": np.array([0, 1, 2], np.uint8),
            "flag_meanings": " ".join(CLASS_NAMES),
            "source": "climnb.labels.label_dataset",
        },
    )
    events = dask.delayed(_concat, pure=True)(tables)
    log.info(
        "labelling %d time steps of %d x %d in %d tasks",
        ds.sizes["time"],
        lat.size,
        lon.size,
        len(blocks),
    )
    return labels, events


def compute(*collections, **kwargs):
    """``dask.compute`` without graph optimisation, so that tasks shared by several collections
    (the labels and the event table of :func:`label_dataset`, or a NetCDF write and the event
    table) run once. Keyword arguments go to :func:`dask.compute` (``scheduler``, ...).
    """
    return dask.compute(*collections, optimize_graph=False, **kwargs)


def _concat(tables: list[pd.DataFrame]) -> pd.DataFrame:
    return pd.concat(tables, ignore_index=True).reindex(columns=list(EVENT_COLUMNS))


def save_labelled(ds: xr.Dataset, labels: xr.DataArray, events: pd.DataFrame | None, path):
    """Write the fields of ``ds`` with ``labels`` added (NetCDF) and the event table (CSV).

    Both atomically; the events go to ``path`` with the suffix ``.events.csv``. This is the
    input of the sample-file step (``climnb samples``, notebook 02).
    """
    from pathlib import Path

    from climnb.atomic import atomic_path

    path = Path(path)
    out = ds.assign(labels=labels.astype("uint8"))
    with atomic_path(path) as tmp:
        out.to_netcdf(tmp, encoding={"labels": {"dtype": "u1", "zlib": True}})
    if events is not None:
        with atomic_path(path.with_suffix(".events.csv")) as tmp:
            events.to_csv(tmp, index=False)
    return path
