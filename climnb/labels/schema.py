"""The names label products share: one event-table schema, the class-mask variables, the
consensus rules. Light on purpose (no NumPy, no xarray), so that the command line can build its
help from these names without importing the science.

Event tables
------------
Every table of events in climnb takes its columns from :data:`COLUMNS` (one name, one dtype,
one unit wherever the column appears):

* :data:`MASK_EVENT_COLUMNS` - what any class mask gives (labels, a prediction, a truth): one
  row per connected region of a class and time step, its centroid and sizes on the sphere
  (:func:`climnb.labels.events.events_from_mask`);
* :data:`EVENT_COLUMNS` - the heuristic labels' table (:func:`climnb.labels.label_dataset`,
  ``climnb label --events``): the mask columns plus what the fields say of each event;
* :data:`TRACK_COLUMNS` - tracks (:func:`climnb.tracks.track_events`, ``climnb tracks``): the
  mask columns of each step of each track, with the track's id and its centre's speed.

:func:`conform` puts a DataFrame into one of these layouts (column order and dtypes; columns a
table does not have are NaN).

Examples
--------
>>> from climnb.labels.schema import COLUMNS, TRACK_COLUMNS
>>> COLUMNS["area_km2"].units, COLUMNS["class_id"].dtype
('km2', 'int64')
>>> TRACK_COLUMNS[:3]
('track_id', 'time', 'class_id')
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "Column",
    "COLUMNS",
    "MASK_EVENT_COLUMNS",
    "EVENT_COLUMNS",
    "TRACK_COLUMNS",
    "conform",
    "MASK_VARIABLES",
    "CONSENSUS",
]


@dataclass(frozen=True)
class Column:
    """One column of an event table.

    Attributes
    ----------
    dtype : pandas dtype of the column; ``"time"`` is the input's own time type
        (``datetime64`` for standard calendars, cftime objects for model calendars).
    units : UDUNITS string, ``""`` for identifiers and names.
    long_name : what the column holds.
    """

    dtype: str
    units: str
    long_name: str


#: Every column an event table may have (name -> dtype, units, meaning).
COLUMNS: dict[str, Column] = {
    "track_id": Column("int64", "", "track number, from 0 in order of formation"),
    "time": Column("time", "", "time step of the event"),
    "class_id": Column("int64", "", "class: 1 tropical cyclone, 2 atmospheric river"),
    "class_name": Column("str", "", "tropical_cyclone or atmospheric_river"),
    "lat": Column("float64", "degrees_north", "centre latitude (area-weighted on the sphere)"),
    "lon": Column("float64", "degrees_east", "centre longitude, 0..360 (or the input's range)"),
    "area_km2": Column("float64", "km2", "area of the region"),
    "length_km": Column("float64", "km", "greatest great-circle extent of the region"),
    "width_km": Column("float64", "km", "area / length"),
    "radius_km": Column("float64", "km", "storm radius (labels only)"),
    "min_psl": Column("float64", "Pa", "lowest sea-level pressure in the storm"),
    "max_wind": Column("float64", "m s-1", "strongest wind in the region (850 hPa, else 10 m)"),
    "max_ivt": Column("float64", "kg m-1 s-1", "strongest vapour transport in the river"),
    "vorticity": Column("float64", "s-1", "cyclonic relative vorticity at the storm centre"),
    "n_pixels": Column("int64", "1", "grid cells in the region"),
    "speed_kmh": Column("float64", "km h-1", "centre speed since the track's previous step"),
    "storm_track": Column(
        "int64", "", "the cyclone track the storm's centre was stitched into (labels), else -1"
    ),
}

#: Columns of the events of any class mask, one row per region and time step.
MASK_EVENT_COLUMNS = (
    "time",
    "class_id",
    "class_name",
    "lat",
    "lon",
    "area_km2",
    "length_km",
    "width_km",
    "n_pixels",
)

#: Columns of the heuristic labels' event table.
EVENT_COLUMNS = (
    *MASK_EVENT_COLUMNS[:-1],
    "radius_km",
    "min_psl",
    "max_wind",
    "max_ivt",
    "vorticity",
    "n_pixels",
    "storm_track",
)

#: Columns of tracks, one row per track and time step.
TRACK_COLUMNS = ("track_id", *MASK_EVENT_COLUMNS, "speed_kmh")

#: Variables that hold a class mask, in the order commands look for them.
MASK_VARIABLES = ("prediction", "labels", "LABELS", "truth")

#: Consensus rules of expert labels (:func:`climnb.labels.expert.consensus`).
CONSENSUS = ("majority", "union", "mean")


def conform(frame: pd.DataFrame, columns: tuple[str, ...] = EVENT_COLUMNS) -> pd.DataFrame:
    """``frame`` with exactly ``columns``, in that order and with their :data:`COLUMNS` dtypes.

    Columns ``frame`` lacks become NaN (an integer column must be there when the frame has
    rows); extra columns are dropped. Times of numpy's kind are held in microseconds (as
    pandas makes them; nanoseconds end in 2262, before some projections do), whatever
    resolution they were read with, so a table read back equals the one written; cftime
    dates stay as they are.

    >>> import pandas as pd
    >>> t = conform(pd.DataFrame({"class_id": [1.0], "lat": [10]}), ("class_id", "lat", "lon"))
    >>> t.dtypes.astype(str).tolist()
    ['int64', 'float64', 'float64']
    """
    out = frame.reindex(columns=list(columns))
    types = {c: COLUMNS[c].dtype for c in columns if COLUMNS[c].dtype not in ("time", "str")}
    types |= {
        c: "datetime64[us]"
        for c in columns
        if COLUMNS[c].dtype == "time" and out[c].dtype.kind == "M"
    }
    return out.astype(types)
