"""The segmentation explorer drawn fast: every map one pre-rendered RGBA image in a plain
bokeh figure (:class:`ExplorerApp`, :func:`explorer_app`).

The views are those of :func:`climnb.viz.explorer.segmentation_explorer`; the images are
drawn by :mod:`climnb.viz.rgba`. ``benchmarks/bench_explorer.py`` measures a move.

Examples
--------
>>> from climnb.data.synthetic import make_dataset
>>> ds, _ = make_dataset(n_time=2, seed=0)
>>> app = explorer_app(ds, ds.truth, ds.truth, prefetch=False)
>>> sorted(app.frame("TMQ", 1))
['field', 'masks']
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from time import thread_time

import holoviews as hv
import numpy as np
import pandas as pd
import xarray as xr

from climnb.io.channels import CLASS_NAMES, channel
from climnb.models.metrics import confusion_matrix_np, iou_from_confusion
from climnb.viz.coastlines import COLOR as COAST_COLOR
from climnb.viz.coastlines import coastline_xy
from climnb.viz.explorer import (
    DISAGREEMENT_NAMES,
    ExplorerConfig,
    check_grid,
    disagreement_title,
    unstall,
)
from climnb.viz.fields import CLASS_COLORS, COLORBAR_FORMAT
from climnb.viz.notebook import is_interactive
from climnb.viz.rgba import (
    DISAGREEMENT_RGB,
    as_uint32,
    block_reduce,
    class_rgba,
    colormap_rgba,
    disagreement_array,
    over,
    paint,
    palette,
)

__all__ = ["ExplorerApp", "explorer_app", "coastline_xy_or_empty"]


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
        config: ExplorerConfig = ExplorerConfig(),  # noqa: B008 (frozen)
        label_name: str = "label",
        prediction_name: str = "prediction",
        player: bool = False,
        cache_size: int = 64,
        prefetch: bool = True,
    ):
        check_grid(ds, labels, prediction)
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
        self._figures(coastlines=config.coastlines)
        self.layout = self._widgets(player)

    def _figures(self, *, coastlines: bool) -> None:
        """The bokeh figures (channel map with its colour bar, disagreement, label,
        prediction, IoU bars) and the sources a move updates."""
        from bokeh.models import ColorBar, ColumnDataSource, LinearColorMapper, PrintfTickFormatter
        from bokeh.plotting import figure

        config, label_name, prediction_name = self.config, self.label_name, self.prediction_name
        x_range = (self._extent["x"][0], self._extent["x"][0] + self._extent["dw"][0])
        y_range = (self._extent["y"][0], self._extent["y"][0] + self._extent["dh"][0])
        coast = coastline_xy_or_empty(x_range, y_range) if coastlines else None

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
        self.colorbar = ColorBar(
            color_mapper=self.mapper,
            width=10,
            formatter=PrintfTickFormatter(format=COLORBAR_FORMAT),
        )
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

    def _widgets(self, player: bool):
        """The channel selector and the time slider (or player), wired to :meth:`show`, and
        the layout that holds them above the figures."""
        import panel as pn

        config = self.config
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
        return pn.Column(pn.Row(self.channel_widget, self.time_widget), grid)

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
            code = disagreement_array(*small)
            dis = np.zeros((*code.shape, 4), np.uint8)
            for k in (1, 2, 3):
                paint(dis, code == k, DISAGREEMENT_RGB[k - 1], 1.0)
            counts = {k: int((code == k).sum()) for k in DISAGREEMENT_NAMES}
            alpha, contours = self.config.alpha, self.config.prediction_style == "contours"
            pred_main = (
                class_rgba(main[1], outline=True)
                if contours
                else class_rgba(main[1], alpha=alpha / 2)
            )
            return {
                "overlay": over(pred_main, class_rgba(main[0], alpha=alpha)),
                "label": as_uint32(class_rgba(small[0])),
                "prediction": as_uint32(class_rgba(small[1])),
                "disagreement": as_uint32(dis),
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
            return {"image": as_uint32(rgba), "clim": (lo, hi), "cmap": ch.cmap}

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
            self.mapper.update(palette=list(palette(field["cmap"])), tags=[field["cmap"]])
        self.mapper.update(low=field["clim"][0], high=field["clim"][1])
        if getattr(self, "_step_shown", None) != step:
            self.dis_source.data = {"image": [masks["disagreement"]], **self._extent}
            self.lab_source.data = {"image": [masks["label"]], **self._extent}
            self.pred_source.data = {"image": [masks["prediction"]], **self._extent}
            n = masks["counts"]
            self.dis_fig.title.text = disagreement_title(n)
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
