"""Event views: an event table linked to a map, and simple statistics over time.

An *event table* has one row per event and time step with at least ``time``, ``class_name``,
``lat`` and ``lon`` (the tables of :func:`climnb.labels.label_dataset` and of
:mod:`climnb.data.synthetic` both do); :func:`climnb.labels.events.events_from_mask` makes one from
any class mask (labels or a network's prediction) in the columns of the one event schema,
:mod:`climnb.labels.schema`.

* :func:`event_map` gives the table and a map linked to it: select a row and the map shows that
  step centred on the event (across the 0/360 seam too), with the mask and a marker;
* :func:`counts_over_time` and :func:`area_distribution` summarise the table;
* :func:`event_view` lays them out together.

Examples
--------
>>> from climnb.data.synthetic import make_dataset
>>> ds, _ = make_dataset(n_time=2, seed=0)
>>> events = events_from_mask(ds.truth)
>>> sorted(events.class_name.unique())
['atmospheric_river', 'tropical_cyclone']
>>> table, dmap = event_map(ds, ds.truth, events)
>>> type(table).__name__, type(dmap).__name__
('Table', 'DynamicMap')
"""

from __future__ import annotations

import holoviews as hv
import holoviews.plotting.bokeh  # noqa: F401  (registers the bokeh options set below)
import numpy as np
import pandas as pd
import xarray as xr

from climnb.io.channels import CLASS_NAMES
from climnb.labels.events import events_from_mask  # re-exported: it lived here before
from climnb.tracks import track_summary
from climnb.viz.coastlines import clip_lines, joined
from climnb.viz.explorer import coastlines, field_image, mask_image
from climnb.viz.fields import CLASS_COLORS
from climnb.viz.notebook import MAX_WIDTH, is_interactive
from climnb.viz.tables import TIME_FORMAT, bokeh_columns

__all__ = [
    "events_from_mask",
    "event_table",
    "event_map",
    "centred_window",
    "counts_over_time",
    "area_distribution",
    "event_view",
    "track_paths",
    "track_table",
    "TABLE_COLUMNS",
    "EVENTS_LIVE_ONLY",
]

#: Columns shown in the table where the event table has them.
TABLE_COLUMNS = (
    "track_id",
    "time",
    "class_name",
    "lat",
    "lon",
    "area_km2",
    "length_km",
    "radius_km",
    "speed_kmh",
)
_COLORS = {CLASS_NAMES[k]: c for k, c in CLASS_COLORS.items()}
_SHORT = {"tropical_cyclone": "TC", "atmospheric_river": "AR"}
#: Every layer of the event map takes its ranges from the frame shown (so a selection zooms).
_FRAMEWISE = {kind: {"framewise": True} for kind in ("Image", "Path", "Points", "Overlay")}
#: The statistics' axes are their own (their ``events`` axes would otherwise be linked).
_AXISWISE = {kind: {"axiswise": True} for kind in ("Curve", "Histogram", "Overlay")}
#: The event map's title where no kernel draws the zoom (an executed report).
EVENTS_LIVE_ONLY = "selecting an event zooms the map in a running kernel"


def event_table(
    events: pd.DataFrame, *, height: int = 260, width: int = MAX_WIDTH, selectable: bool = True
) -> hv.Table:
    """The event table as an ``hv.Table`` (rows selectable): times to the minute, class names
    whole, numbers with their units at their precision (:mod:`climnb.viz.tables`)."""
    cols = [c for c in TABLE_COLUMNS if c in events.columns]
    frame = events[cols].reset_index(drop=True).copy()
    frame["time"] = pd.to_datetime(frame["time"]).dt.strftime(TIME_FORMAT)
    return hv.Table(frame).opts(
        height=height, width=width, selectable=selectable, hooks=[_readable_columns]
    )


def _readable_columns(plot, element) -> None:
    """Headers with units, numbers at their precision, each column as wide as its longest
    text (Bokeh shared the width out evenly, which cut "2000-01-01 03:00" to "2000-01-0")."""
    bokeh_columns(plot.handles["table"], element.dframe())


def centred_window(da: xr.DataArray, lat: float, lon: float, half_deg: float) -> xr.DataArray:
    """A (lat, lon) window of ``half_deg`` latitude around a point, centred in longitude.

    Longitudes wrap: the window's ``lon`` coordinate runs continuously through the point
    (values may leave 0..360), so an event on the seam sits in the middle of the map.
    """
    half_lon = min(180.0, half_deg / max(np.cos(np.radians(min(abs(lat), 80.0))), 0.2))
    offset = (da.lon.values - lon + 180.0) % 360.0 - 180.0
    cols = np.flatnonzero(np.abs(offset) <= half_lon)
    cols = cols[np.argsort(offset[cols])]
    window = da.isel(lon=cols).sel(lat=slice(lat - half_deg, lat + half_deg))
    return window.assign_coords(lon=("lon", lon + offset[cols], da.lon.attrs))


def track_paths(
    tracks: pd.DataFrame,
    *,
    x_range: tuple[float, float] = (0.0, 360.0),
    y_range: tuple[float, float] = (-90.0, 90.0),
    line_width: float = 2.0,
) -> hv.Overlay:
    """Tracks (rows of :func:`climnb.tracks.track_events`) as lines through their centres,
    cyclones red and rivers blue, with a dot where each formed; cut to a lon/lat box (in the
    box's longitude convention, so windows across the seam show them too)."""
    layers = []
    for name, color in _COLORS.items():
        sel = tracks[tracks.class_name == name].sort_values(["track_id", "time"])
        lines = [g[["lon", "lat"]].to_numpy(float) for _, g in sel.groupby("track_id")]
        starts = [line[:1] for line in lines]
        layers.append(
            hv.Path(
                joined(clip_lines(lines, x_range, y_range)), kdims=["lon", "lat"], label=name
            ).opts(color=color, line_width=line_width, show_legend=False)
        )
        first = np.concatenate(starts) if starts else np.empty((0, 2))
        x0, x1 = sorted(x_range)
        first[:, 0] = (first[:, 0] - x0) % 360.0 + x0  # into the box's convention
        keep = (first[:, 0] <= x1) & (first[:, 1] >= min(y_range)) & (first[:, 1] <= max(y_range))
        layers.append(
            hv.Points(first[keep], kdims=["lon", "lat"]).opts(
                color=color, size=6, line_color="white"
            )
        )
    return hv.Overlay(layers)


def _extent(coord: xr.DataArray) -> tuple[float, float]:
    return float(coord.min()), float(coord.max())


def event_map(
    ds: xr.Dataset,
    mask: xr.DataArray,
    events: pd.DataFrame,
    *,
    channel: str = "TMQ",
    half_deg: float = 20.0,
    width: int = MAX_WIDTH,
    height: int = 340,
    tracks: pd.DataFrame | None = None,
    live: bool = True,
) -> tuple[hv.Table, hv.DynamicMap | hv.Overlay]:
    """The event table and a map linked to it by a ``Selection1D`` stream.

    With no row selected the map shows the whole globe at the first step; selecting a row
    shows that row's step, centred on the event (``half_deg`` degrees of latitude each side),
    with the mask regions and a marker at the event's centre. Coastlines are drawn on both;
    ``tracks`` (rows of :func:`climnb.tracks.track_events`; by default ``events`` itself
    when it has a ``track_id`` column) are drawn as lines through the centres.

    The zoom is drawn by the kernel: with ``live=False`` (for a static report) the rows are
    not selectable and the map is the globe, titled to say so.
    """
    if tracks is None and "track_id" in events:
        tracks = events
    table = event_table(events, selectable=live, width=width)
    rows = events.reset_index(drop=True)  # unrounded, same order as the table

    def draw(index):
        if not index:
            field = field_image(ds, channel, 0) * mask_image(mask, 0) * coastlines(ds)
            if tracks is not None:
                field = field * track_paths(tracks)
            title = f"{channel}: select an event" if live else f"{channel}: {EVENTS_LIVE_ONLY}"
            return field.opts(_FRAMEWISE).opts(width=width, height=height, title=title)
        ev = rows.iloc[index[0]]
        t = ds.indexes["time"].get_loc(pd.Timestamp(ev.time))
        sub = xr.Dataset(
            {channel: centred_window(ds[channel].isel(time=t), ev.lat, ev.lon, half_deg)}
        )
        lab = centred_window(mask.isel(time=t), ev.lat, ev.lon, half_deg)
        marker = hv.Points([(ev.lon, ev.lat)], ["lon", "lat"]).opts(
            marker="x", size=14, color="black", line_width=3
        )
        title = (  # short enough for the map's width
            f"{_SHORT.get(ev.class_name, ev.class_name)} {pd.Timestamp(ev.time):%Y-%m-%d %H:%M} "
            f"at {abs(ev.lat):.1f}{'N' if ev.lat >= 0 else 'S'} {ev.lon % 360:.1f}E"
        )
        view = field_image(sub, channel, 0).opts(framewise=True) * mask_image(lab, 0)
        view = view * coastlines(sub)
        if tracks is not None:
            view = view * track_paths(tracks, x_range=_extent(sub.lon), y_range=_extent(sub.lat))
        view = view * marker
        return view.opts(_FRAMEWISE).opts(width=width, height=height, title=title)

    if not live:
        return table, draw([])
    return table, hv.DynamicMap(draw, streams=[hv.streams.Selection1D(source=table)])


def counts_over_time(
    events: pd.DataFrame, *, times=None, width: int = MAX_WIDTH, height: int = 200
) -> hv.Overlay:
    """Number of events of each class at each step (steps without events count zero)."""
    ev = events.assign(time=pd.to_datetime(events["time"]))
    counts = ev.groupby(["time", "class_name"]).size().unstack(fill_value=0)
    index = pd.DatetimeIndex(times) if times is not None else counts.index
    counts = counts.reindex(index=index, fill_value=0)
    curves = [
        hv.Curve(
            (counts.index.values, counts.get(name, pd.Series(0, index)).values),
            "time",
            "events",
            label=name,
        ).opts(color=color)
        for name, color in _COLORS.items()
    ]
    return hv.Overlay(curves).opts(  # from zero, the legend beside the plot
        width=width,
        height=height,
        title="events per step",
        legend_position="right",
        ylim=(0, max(1, int(counts.to_numpy().max(initial=0))) * 1.15),
    )


def area_distribution(
    events: pd.DataFrame, *, bins: int = 15, width: int = MAX_WIDTH, height: int = 200
) -> hv.Overlay:
    """Histograms of event area (log10 km²) per class; needs an ``area_km2`` column."""
    if "area_km2" not in events:
        raise KeyError(
            "the event table has no area_km2 column; make one with "
            "events_from_mask(mask) or climnb.labels.label_dataset"
        )
    area = events["area_km2"].astype(float)
    logs = np.log10(area[area > 0])
    edges = np.histogram_bin_edges(logs, bins=bins) if logs.size else np.linspace(4, 7, bins + 1)
    hists = []
    for name, color in _COLORS.items():
        sel = logs[events.loc[logs.index, "class_name"] == name]
        freq, _ = np.histogram(sel, bins=edges)
        hists.append(
            hv.Histogram(
                (edges, freq),
                kdims=[hv.Dimension("log10_area", label="log10 area", unit="km²")],
                vdims=["events"],
                label=name,
            ).opts(color=color, alpha=0.6)
        )
    return hv.Overlay(hists).opts(  # the legend beside the plot, not over the bars
        width=width, height=height, title="event areas", legend_position="right"
    )


def event_view(
    ds: xr.Dataset,
    mask: xr.DataArray,
    events: pd.DataFrame,
    *,
    channel: str = "TMQ",
    tracks: pd.DataFrame | None = None,
    live: bool | None = None,
) -> hv.Layout:
    """Event table, the linked map (with tracks and coastlines), event counts over time, the
    area distribution and, with tracks, a table of their lifetimes and speeds.

    ``events`` may be the rows of :func:`climnb.tracks.track_events` (one per track and step):
    the table then shows the track ids and the map draws the tracks. ``live``: whether a
    kernel draws the selected event (default :func:`climnb.viz.notebook.is_interactive`; in an
    executed report the map stays on the globe and says so, see :func:`event_map`).
    """
    if tracks is None and "track_id" in events:
        tracks = events
    live = is_interactive() if live is None else live
    table, dmap = event_map(ds, mask, events, channel=channel, tracks=tracks, live=live)
    stats = [counts_over_time(events, times=ds.time.values)]
    if "area_km2" in events:
        stats.append(area_distribution(events))
    # Not ``shared_axes=False`` on the layout: HoloViews then keeps the map's first ranges
    # however framewise its layers are, so a selection would retitle the map but not zoom it.
    stats = [s.opts(_AXISWISE) for s in stats]
    if tracks is not None:
        stats.append(track_table(tracks))
    # one column, each view as wide as a notebook cell: the tables' columns whole, the map large
    return hv.Layout([table, dmap, *stats]).cols(1)


def track_table(tracks: pd.DataFrame, *, height: int = 220, width: int = MAX_WIDTH) -> hv.Table:
    """One row per track: class, start, lifetime, distance and top speed (each number at its
    unit's precision, :mod:`climnb.viz.tables`). Each column is as wide as its text and the
    table no wider than a notebook cell: the steps (the lifetime says it) and the mean speed
    (distance over lifetime) are left out, or the last column was cut behind a scroll bar."""
    summary = track_summary(tracks).reset_index()
    cols = ["track_id", "class_name", "start", "lifetime_h", "distance_km", "max_speed_kmh"]
    frame = summary[cols].copy()
    frame["start"] = pd.to_datetime(frame["start"]).dt.strftime(TIME_FORMAT)
    return hv.Table(frame, label="tracks").opts(
        height=height, width=width, hooks=[_readable_columns]
    )
