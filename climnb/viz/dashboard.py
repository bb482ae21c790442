"""The live training dashboard: curves per rank and averaged, throughput, progress with ETA, the
latest validation prediction next to its label, and a stop button.

In JupyterLab, :class:`TrainingDashboard` shows ipywidgets (progress bar, status, stop button)
and HoloViews plots fed through ``Pipe`` streams (:func:`live_figures`: one DynamicMap per plot,
each returning the same layers on every update; the step axis spans the whole run and the
value axes are computed in the browser from the data shown). Awaited with
:meth:`TrainingDashboard.run`, training runs in a worker thread and the kernel's event loop
draws the updates and keeps answering the page (the plots' comms, the stop button). Under
papermill or any non-interactive run (``IPP_NONINTERACTIVE=1``, no kernel) the same calls print
text progress instead. :func:`training_figures` draws the records after the run (the report).
"""

from __future__ import annotations

import logging
import sys
import time
from pathlib import Path

import holoviews as hv
import holoviews.plotting.bokeh  # noqa: F401  (registers the bokeh options set below)
import numpy as np
import pandas as pd
from bokeh.models import DataRange1d

from climnb.io.channels import CLASS_NAMES
from climnb.viz.fields import CLASS_COLORS
from climnb.viz.notebook import is_interactive

log = logging.getLogger(__name__)

__all__ = [
    "TrainingDashboard",
    "training_figures",
    "live_figures",
    "merge_published",
    "is_interactive",
]

_CLASS_CMAP = ["#f7f7f7", CLASS_COLORS[1], CLASS_COLORS[2]]
#: The live curves' ranges are never sent from the kernel: HoloViews sets them once, when the
#: plot is built (see :func:`live_figures`).
_KERNEL_RANGES_OFF = {kind: {"apply_ranges": False} for kind in ("Curve", "Scatter", "Overlay")}


def merge_published(data: dict) -> tuple[pd.DataFrame, pd.DataFrame, dict | None]:
    """Steps and validations of all engines from ``{engine_id: published dict}``."""
    steps, vals, sample = [], [], None
    for published in data.values():
        if not published:
            continue
        steps += published.get("steps", [])
        vals += published.get("validations", [])
        sample = published.get("sample") or sample
    return pd.DataFrame(steps), pd.DataFrame(vals), sample


def training_figures(
    steps: pd.DataFrame,
    validations: pd.DataFrame,
    sample: dict | None = None,
    *,
    width: int = 260,
    height: int = 260,
) -> hv.Layout:
    """Loss per rank and averaged, validation IoU, throughput, and the latest prediction:
    three plots a row, each legend under its plot (a row fits a notebook cell)."""
    opts = {"width": width, "height": height, "show_grid": True, **_SMALL}
    panels = [
        # linear, as live: a loss from 2.3 to 1.5 on a log axis ran its ticks together
        _loss(steps).opts(title="training loss", **opts, **_legend_below(3)),
        _iou(validations).opts(title="validation IoU", ylim=(0, 1), **opts, **_legend_below(2)),
        _throughput(steps).opts(title="throughput", **opts),
    ]
    if sample is not None:
        panels += [
            _mask(sample[which], which).opts(width=width, height=height * 3 // 4)
            for which in ("label", "prediction")
        ]
    return hv.Layout(panels).cols(3)


#: Options of the dashboard's small plots: few ticks (more ran together, "1012 1416"), and a
#: margin so that the last validation's dot is not cut in half by the frame.
_SMALL = {"xticks": 4, "padding": (0.04, 0.05), "fontsize": {"legend": "7pt", "title": "10pt"}}


def _legend_below(columns: int) -> dict:
    """A legend under the plot, its entries side by side: inside, it hid the curves."""
    return {"legend_position": "bottom", "legend_cols": columns}


def _loss(steps: pd.DataFrame) -> hv.Overlay:
    if steps.empty:
        return hv.Overlay([hv.Curve([], "step", "loss")])
    curves = [
        hv.Curve(g, "step", "loss", label=f"rank {r}").opts(alpha=0.5)
        for r, g in steps.groupby("rank")
    ]
    if len(curves) > 2:  # one entry for all ranks: a legend of 8 ranks would fill the plot
        curves = [
            c.relabel("each rank" if i == 0 else "").opts(color="grey")
            for i, c in enumerate(curves)
        ]
    mean = steps.groupby("step", as_index=False).loss_avg.first()
    curves.append(
        hv.Curve(mean, "step", ("loss_avg", "loss"), label="average").opts(
            color="black", line_width=2
        )
    )
    return hv.Overlay(curves)


def _iou(validations: pd.DataFrame) -> hv.Overlay:
    if validations.empty:
        return hv.Overlay([hv.Curve([], "step", "IoU")])
    v = validations[validations["rank"] == validations["rank"].min()]
    curves = [hv.Curve(v, "step", ("mean_iou", "IoU"), label="mean").opts(color="black")]
    for k, name in enumerate(CLASS_NAMES):
        if f"iou_{k}" in v:
            color = CLASS_COLORS.get(k, "grey")
            curves.append(
                hv.Curve(v, "step", (f"iou_{k}", "IoU"), label=_SHORT.get(name, name)).opts(
                    color=color, line_dash="dashed"
                )
            )
    return hv.Overlay(curves)


def _throughput(steps: pd.DataFrame) -> hv.Curve:
    if steps.empty:
        return hv.Curve([], "step", ("samples_per_s", "samples/s (all ranks)"))
    s = steps[steps["rank"] == steps["rank"].min()].sort_values("step")
    rate = s.samples_per_s.rolling(5, min_periods=1).median()
    return hv.Curve((s.step, rate), "step", ("samples_per_s", "samples/s (all ranks)"))


def _mask(mask, title: str) -> hv.Image:
    mask = np.asarray(mask, np.float32)[::-1]  # row 0 is the southernmost latitude
    return hv.Image(mask, bounds=(0, -90, 360, 90), kdims=["lon", "lat"], vdims=["class"]).opts(
        cmap=_CLASS_CMAP,
        clim=(-0.5, 2.5),
        width=260,
        height=180,
        aspect=None,
        data_aspect=None,
        title=f"validation {title}",
        xticks=[0, 90, 180, 270, 360],  # bokeh's default ticks run together at this width
        yticks=[-60, 0, 60],
    )


def live_figures(
    pipes: dict, *, total_steps: int | None = None, width: int = 260, height: int = 240
) -> hv.Layout:
    """The dashboard's plots as DynamicMaps fed by ``pipes`` (``"curves"``: ``(steps,
    validations)``, ``"sample"``: the latest validation sample or ``None``).

    Every DynamicMap returns the same structure on every update (a fixed set of curves, the
    masks as images from the start), so the plots are built once and only their data change.
    The step axis spans the run, ``[0, total_steps]`` (the curves fill it from left to right;
    without ``total_steps`` it is computed in the browser like the value axes), and the loss
    and throughput axes are Bokeh ``DataRange1d``: BokehJS computes them from the data the
    page holds, so no update carries a range. (Ranges sent from the kernel were missed under
    load, and Bokeh sends a value only when it differs from the kernel's copy: the page kept
    a range a few steps short; see docs/jupyter.md.)
    """
    opts = {"width": width, "height": height, "show_grid": True, **_SMALL}
    if total_steps:  # a margin on the right, so that the last step's dot is not cut in half
        opts["xlim"] = (0, total_steps * (1 + _SMALL["padding"][0]))
    browser_x = () if total_steps else ("x",)
    axes = {**opts, "hooks": [_browser_ranges(*browser_x, "y")]}
    curves, sample = pipes["curves"], pipes["sample"]

    def loss(data):
        loss = _live_loss(data[0]).opts(_KERNEL_RANGES_OFF)
        return loss.opts(title="training loss", **axes, **_legend_below(2))

    def iou(data):
        iou = _live_iou(data[1]).opts(_KERNEL_RANGES_OFF)
        hooks = [_browser_ranges(*browser_x)]
        return iou.opts(
            title="validation IoU", ylim=(0, 1), **opts, hooks=hooks, **_legend_below(2)
        )

    def throughput(data):
        return _throughput(data[0]).opts(_KERNEL_RANGES_OFF).opts(title="throughput", **axes)

    def mask(which):
        def draw(data):
            shape = (2, 2) if data is None else np.shape(data[which])
            values = np.zeros(shape, np.uint8) if data is None else data[which]
            # framewise: the placeholder's 2 x 2 pixels and the sample's share the map's bounds
            mask = _mask(values, which).opts(framewise=True)
            return mask.opts(width=width, height=height * 3 // 4)

        return draw

    return hv.Layout(
        [
            hv.DynamicMap(loss, streams=[curves]),
            hv.DynamicMap(iou, streams=[curves]),
            hv.DynamicMap(throughput, streams=[curves]),
            hv.DynamicMap(mask("label"), streams=[sample]),
            hv.DynamicMap(mask("prediction"), streams=[sample]),
        ]
    ).cols(3)


def _browser_ranges(*axes: str):
    """A HoloViews hook that gives the plot's ``axes`` (``"x"``, ``"y"``) a Bokeh
    ``DataRange1d`` (BokehJS fits it to the data shown, 5 % margins), once, when it is built."""

    def hook(plot, element):
        for axis in axes:
            if not isinstance(getattr(plot.state, f"{axis}_range"), DataRange1d):
                computed = DataRange1d(range_padding=0.1)
                setattr(plot.state, f"{axis}_range", computed)
                plot.handles[f"{axis}_range"] = computed

    return hook


def _live_loss(steps: pd.DataFrame) -> hv.Overlay:
    """Each rank's loss (one thin grey curve, however many ranks) and the average (black)."""
    if steps.empty:
        lines, mean = [], pd.DataFrame({"step": [], "loss_avg": []})
    else:
        lines = [
            g.sort_values("step")[["step", "loss"]].to_numpy(float)
            for _, g in steps.groupby("rank")
        ]
        mean = steps.groupby("step", as_index=False).loss_avg.first()
    # one curve for every rank, broken between ranks (NaN): one legend entry, however many
    gap = np.full((1, 2), np.nan)
    joined = np.concatenate([part for line in lines for part in (line, gap)] or [gap])
    ranks = hv.Curve(joined, "step", "loss", label="each rank").opts(
        color="grey", alpha=0.6, line_width=1
    )
    average = hv.Curve(mean, "step", ("loss_avg", "loss"), label="average").opts(
        color="black", line_width=2
    )
    return hv.Overlay([ranks, average])


def _live_iou(validations: pd.DataFrame) -> hv.Overlay:
    """Mean (with dots) and per-class IoU of rank 0's validations: always the same layers."""
    if validations.empty:
        v = pd.DataFrame({"step": [], "mean_iou": []})
    else:
        v = validations[validations["rank"] == validations["rank"].min()]
    mean = (v["step"], v["mean_iou"])
    curves = [
        hv.Curve(mean, "step", "IoU", label="mean").opts(color="black"),
        hv.Scatter(mean, "step", "IoU").opts(color="black", size=5),  # the first point shows
    ]
    for k, name in enumerate(CLASS_NAMES):
        values = v[f"iou_{k}"] if f"iou_{k}" in v else np.full(len(v), np.nan)
        curves.append(
            hv.Curve((v["step"], values), "step", "IoU", label=_SHORT.get(name, name)).opts(
                color=CLASS_COLORS.get(k, "grey"), line_dash="dashed"
            )
        )
    return hv.Overlay(curves)


#: Class names as the IoU legend gives them (under a 260-pixel plot).
_SHORT = {"tropical_cyclone": "TC", "atmospheric_river": "AR"}


class TrainingDashboard:
    """Progress, live curves and a stop button for a run (see the module docstring).

    In a notebook, await :meth:`run` with the training function: it shows the dashboard, runs
    the training in a worker thread and draws every update on the kernel's event loop, so the
    kernel keeps handling the page's messages meanwhile (the plots' connections, the stop
    button), then says how the run ended and disables the stop button::

        dashboard = TrainingDashboard(config, total_steps)
        results = await dashboard.run(train_on_engines, engines, config)

    Elsewhere (a script, a test) use it as a context manager around the training call::

        with TrainingDashboard(config, total_steps, interactive=False) as dashboard:
            results = train_on_engines(engines, config, on_update=dashboard.update)

    Parameters
    ----------
    config : the run's :class:`climnb.train.config.TrainConfig` (for the stop file).
    total_steps : steps the run will take in all (for the progress bar and ETA).
    interactive : widgets and live plots (``True``) or printed progress (``False``);
        default: :func:`is_interactive`.
    print_every : seconds between printed progress lines (non-interactive).
    """

    def __init__(
        self,
        config,
        total_steps: int,
        *,
        interactive: bool | None = None,
        print_every: float = 10.0,
        stream=None,
    ):
        self.config, self.total = config, max(int(total_steps), 1)
        self.interactive = is_interactive() if interactive is None else interactive
        self.print_every, self.stream = print_every, stream or sys.stdout
        self.steps, self.validations, self.sample = pd.DataFrame(), pd.DataFrame(), None
        self._start, self._printed, self._seen_vals = time.monotonic(), 0.0, 0
        self._widgets = self._pipes = None
        self.finished = False
        Path(config.stop_file).unlink(missing_ok=True)

    async def run(self, train, *args, **kwargs):
        """Show the dashboard and await ``train(*args, on_update=..., **kwargs)``.

        ``train`` (e.g. :func:`climnb.train.engines.train_on_engines`) runs in a worker
        thread; its updates are drawn on the event loop. Returns what ``train`` returns. If
        the wait is interrupted, the ranks are asked to stop after their current step.
        """
        import asyncio

        loop = asyncio.get_running_loop()

        def on_update(data):
            loop.call_soon_threadsafe(self.update, data)

        self.show()
        error = None
        try:
            return await asyncio.to_thread(train, *args, on_update=on_update, **kwargs)
        except BaseException as err:
            error = err
            if not isinstance(err, Exception):  # interrupted: the thread trains on
                self.request_stop()
            raise
        finally:
            await asyncio.sleep(0)  # the updates the thread queued last are drawn first
            self.finish(error)

    def __enter__(self) -> TrainingDashboard:
        self.show()
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        self.finish(exc)

    # --- display -------------------------------------------------------------------------------

    def show(self):
        """Display the widgets and live plots (interactive), or nothing (printed progress)."""
        if not self.interactive:
            return None
        import ipywidgets as w
        from IPython.display import display

        bar = w.IntProgress(
            min=0, max=self.total, description="training", layout=w.Layout(width="260px")
        )
        # the status takes the rest of the row (ETA on one line where there is room)
        label = w.HTML("starting ...", layout=w.Layout(flex="1 1 auto", min_width="0"))
        stop = w.Button(
            description="stop",
            button_style="warning",
            icon="stop",
            tooltip="end training after the current step (the checkpoint is kept)",
        )
        stop.on_click(lambda _: self.request_stop())
        self._widgets = {"bar": bar, "label": label, "stop": stop}
        self._pipes = {
            "curves": hv.streams.Pipe(data=(self.steps, self.validations)),
            "sample": hv.streams.Pipe(data=self.sample),
        }
        plots = live_figures(self._pipes, total_steps=self.total)
        display(w.HBox([bar, label, stop], layout=w.Layout(width="100%")))
        display(plots)
        return plots

    def request_stop(self) -> None:
        """Ask the ranks to stop after their current step (they all stop at the same step)."""
        self.config.stop_file.parent.mkdir(parents=True, exist_ok=True)
        self.config.stop_file.touch()
        if self._widgets:
            self._widgets["stop"].disabled = True
            self._widgets["label"].value = "stopping after this step ..."

    # --- updates -------------------------------------------------------------------------------

    def update(self, data: dict) -> None:
        """Take the engines' published data (``{engine_id: dict}``) and refresh."""
        steps, vals, sample = merge_published(data)
        if len(steps) <= len(self.steps) and len(vals) <= len(self.validations):
            return
        new_sample = sample is not None and len(vals) > len(self.validations)
        self.steps, self.validations = steps, vals
        self.sample = sample if sample is not None else self.sample
        if self.interactive and self._widgets:
            self._refresh_widgets(new_sample)
        else:
            self._print()

    def finish(self, error: BaseException | None = None) -> None:
        """The run has ended (``error``: why it failed): final status, stop button disabled."""
        self.finished = True
        outcome = f"failed: {type(error).__name__}" if error else "finished"
        if self.step < self.total and not error:
            outcome = f"ended early ({outcome})"
        line = f"{self.status()} - {outcome} after {time.monotonic() - self._start:.0f} s"
        if self.interactive and self._widgets:
            self._refresh_widgets(True)
            w = self._widgets
            w["stop"].disabled = True
            w["label"].value = line
            w["bar"].bar_style = "danger" if error else "success"
        else:
            print(line, file=self.stream, flush=True)

    @property
    def step(self) -> int:
        return int(self.steps.step.max()) if len(self.steps) else 0

    def eta(self) -> float | None:
        """Seconds left, from the mean step time so far."""
        if not len(self.steps) or self.step == 0 or self.finished:
            return None
        elapsed = time.monotonic() - self._start
        return elapsed / self.step * max(self.total - self.step, 0)

    def status(self) -> str:
        s = f"step {self.step}/{self.total}"
        if len(self.steps):
            last = self.steps[self.steps.step == self.step].iloc[0]
            s += f", loss {last.loss_avg:.4f}, {last.samples_per_s:.1f} samples/s"
        if len(self.validations):
            s += f", val mean IoU {self.validations.iloc[-1].mean_iou:.3f}"
        eta = self.eta()
        return s + (f", ETA {eta:.0f} s" if eta is not None else "")

    def _refresh_widgets(self, new_sample: bool = False) -> None:
        self._widgets["bar"].value = min(self.step, self.total)
        self._widgets["label"].value = self.status()
        self._pipes["curves"].send((self.steps, self.validations))
        if new_sample and self.sample is not None:
            self._pipes["sample"].send(self.sample)

    def _print(self) -> None:
        now = time.monotonic()
        new_val = len(self.validations) > self._seen_vals
        if new_val or now - self._printed >= self.print_every or self.step >= self.total:
            self._printed, self._seen_vals = now, len(self.validations)
            print(self.status(), file=self.stream, flush=True)

    def figures(self) -> hv.Layout:
        """The plots as they stand (e.g. after training, for the report)."""
        return training_figures(self.steps, self.validations, self.sample)
