"""The events of any class mask: one row per connected region of a class and time step.

Labels, a network's prediction and a synthetic truth all give the same table, in the columns
:data:`climnb.labels.schema.MASK_EVENT_COLUMNS` (centroid and sizes on the sphere; regions
joined across the 0/360 seam on a global grid). The heuristic labels' own table
(:func:`climnb.labels.label_dataset`) has these columns and what the fields say besides; the
tracks of :func:`climnb.tracks.track_events` link these regions over time.

Examples
--------
>>> from climnb.data.synthetic import make_dataset
>>> ds, _ = make_dataset(n_time=2, seed=0)
>>> events = events_from_mask(ds.truth)
>>> sorted(events.class_name.unique())
['atmospheric_river', 'tropical_cyclone']
>>> list(events.columns) == list(MASK_EVENT_COLUMNS)
True
"""

from __future__ import annotations

import pandas as pd
import xarray as xr

from climnb.io.channels import CLASS_NAMES
from climnb.labels.components import label_components, measure
from climnb.labels.schema import MASK_EVENT_COLUMNS, conform
from climnb.labels.sphere import is_periodic

__all__ = ["events_from_mask", "MASK_EVENT_COLUMNS"]


def events_from_mask(mask: xr.DataArray, *, min_pixels: int = 1) -> pd.DataFrame:
    """One row per connected region of each class and time step of a (time, lat, lon) mask.

    Parameters
    ----------
    mask : class ids (0 background, 1 tropical cyclone, 2 atmospheric river) on a
        latitude/longitude grid in degrees.
    min_pixels : regions with fewer grid cells are left out.

    Returns
    -------
    pandas.DataFrame
        The columns :data:`~climnb.labels.schema.MASK_EVENT_COLUMNS` with their schema dtypes,
        ordered by time, class and region.
    """
    lat, lon = mask.lat.values.astype(float), mask.lon.values.astype(float)
    periodic = is_periodic(lon)
    values = mask.transpose("time", "lat", "lon").values
    rows = []
    for i, t in enumerate(mask.time.values):
        for k in range(1, len(CLASS_NAMES)):
            regions, n = label_components(values[i] == k, periodic=periodic)
            m = measure(regions, n, lat, lon)
            m = m[m.n_pixels >= min_pixels]
            rows.append(m.assign(time=t, class_id=k, class_name=CLASS_NAMES[k]))
    frame = pd.concat(rows, ignore_index=True) if rows else pd.DataFrame()
    return conform(frame, MASK_EVENT_COLUMNS)
