"""Expert labelling in the notebook: proposals as editable outlines, corrections, ClimateNet files.

A person sees the heuristic labels and/or a network's prediction as outlines over the field
they come from (TMQ or the transport for rivers, PSL for storms) and corrects them: accepts,
deletes, draws, redraws an edge, changes the class, steps through time (each step keeps its own
outlines; **carry** copies the previous step's), undoes. **Save** rasterises the step's outlines
onto the grid and writes it in the ClimateNet layout that :mod:`climnb.labels.expert` reads
(``data-YYYY-MM-DD-HH-1_N.nc``: the step's fields, ``LABELS``, the labeller's number ``N`` and
name in the attributes), atomically; reopened, the labeller goes on where they stopped. Several
people labelling the same steps are several labellers (``climnb samples --labellers``,
``climnb score``).

The core is :mod:`climnb.labels.outlines` (its names are importable from here too): plain
functions, used by the widget and by scripts alike: :func:`outlines_from_mask`,
:func:`rasterise` (bad outlines refused in one line each), :func:`save_step` and
:func:`saved_steps`. :class:`Annotator` is the state of a labelling session (outlines per
step, undo) and its view (:meth:`Annotator.view`) on HoloViews' drawing tools (``PolyDraw``,
``PolyEdit``), which needs a live kernel: an HTML report shows a note saying so.

Examples
--------
>>> import numpy as np
>>> lat, lon = np.linspace(-88.75, 88.75, 72), np.arange(0, 360, 2.5)
>>> mask = np.zeros((72, 144), np.int8)
>>> mask[30:34, 140:144] = 2
>>> found = outlines_from_mask(mask, lat, lon)
>>> [o.cls for o in found]
[2]
"""

from __future__ import annotations

import dataclasses
import logging
import os
from collections.abc import Mapping, Sequence
from pathlib import Path

import holoviews as hv
import holoviews.plotting.bokeh  # noqa: F401  (registers the bokeh options set below)
import numpy as np
import pandas as pd
import xarray as xr

from climnb.labels.outlines import (
    AR,
    TC,
    AnnotateError,
    Outline,
    outlines_from_mask,
    rasterise,
    save_step,
    saved_steps,
)
from climnb.viz.explorer import JS_FLUSH_QUEUED, unstall
from climnb.viz.notebook import LIVE_ONLY, MAX_WIDTH, is_interactive

__all__ = [
    "TC",
    "AR",
    "AnnotateError",
    "Annotator",
    "Outline",
    "outlines_from_mask",
    "rasterise",
    "save_step",
    "saved_steps",
]

log = logging.getLogger(__name__)

PathLike = str | os.PathLike

#: Outline colours by class (the explorer's: storms red, rivers blue).
COLOURS = {TC: "#d62728", AR: "#1f77b4"}


def _by_class():
    """An outline's colour from its ``class`` value (an unknown class in grey)."""
    return hv.dim("class").categorize(COLOURS, default="#7f7f7f")


# ---------------------------------------------------------------------------------------------
# A labelling session
# ---------------------------------------------------------------------------------------------


class Annotator:
    """Correct proposals step by step and save them as one labeller's ClimateNet files.

    Parameters
    ----------
    fields : the steps to label (time, lat, lon), with the channels to show and save.
    proposals : masks (time, lat, lon) whose events are proposed as outlines, by name (e.g.
        ``{"teacher": labels, "network": prediction}``); the outlines of all are shown.
    folder : where the ClimateNet files go; steps this labeller saved there before come back as
        saved (the session resumes at the first step not saved).
    labeller : the ``N`` of the file names; name : the labeller's name, in every file.
    field : the channel shown first (``"TMQ"``; ``"IVT"``: the transport proxy of TMQ and the
        850 hPa wind; ``"PSL"`` for storms).

    Every edit (the widget's and a script's) goes through the methods below, so that undo,
    saving and the view agree.
    """

    def __init__(
        self,
        fields: xr.Dataset,
        proposals: Mapping[str, xr.DataArray] | None = None,
        folder: PathLike = "expert",
        *,
        labeller: int = 0,
        name: str = "",
        field: str = "TMQ",
    ):
        self.fields, self.folder = fields, Path(folder)
        self.labeller, self.name, self.field = int(labeller), name, field
        self.times = [pd.Timestamp(t) for t in fields.time.values]
        lat, lon = fields.lat.values, fields.lon.values
        self.outlines: list[list[Outline]] = []
        for t in range(len(self.times)):
            found = []
            for source, mask in (proposals or {}).items():
                step = mask.sel(time=fields.time[t]).values
                found += outlines_from_mask(step, lat, lon, source=source)
            self.outlines.append(found)
        self.saved: set[int] = set()
        for time, outlines in (saved_steps(self.folder, labeller, name) if name else {}).items():
            if time in self.times:
                t = self.times.index(time)
                self.outlines[t] = outlines
                self.saved.add(t)
        self.step = next((t for t in range(len(self.times)) if t not in self.saved), 0)
        self.new_class = AR
        self._undo: list[tuple[int, list[Outline]]] = []
        self._view = None

    # --- edits -------------------------------------------------------------------------------

    @property
    def current(self) -> list[Outline]:
        """The outlines of the step shown."""
        return self.outlines[self.step]

    def _change(self, outlines: list[Outline]) -> None:
        if outlines == self.current:
            return
        self._undo.append((self.step, list(self.current)))
        self.outlines[self.step] = outlines
        self.saved.discard(self.step)

    def _index(self, i: int) -> int:
        if not 0 <= i < len(self.current):
            raise IndexError(f"no outline {i} at this step: it has {len(self.current)}")
        return i

    def accept(self, i: int | None = None) -> None:
        """Accept outline ``i`` (all of the step's without ``i``) as it is."""
        which = range(len(self.current)) if i is None else [self._index(i)]
        self._change(
            [
                dataclasses.replace(o, source="accepted") if k in which else o
                for k, o in enumerate(self.current)
            ]
        )

    def delete(self, i: int) -> None:
        """Delete outline ``i``."""
        self._index(i)
        self._change([o for k, o in enumerate(self.current) if k != i])

    def draw(self, lon: Sequence[float], lat: Sequence[float], cls: int | None = None) -> None:
        """Add an outline of class ``cls`` (default: the class for new outlines)."""
        klass = self.new_class if cls is None else cls
        self._change([*self.current, Outline.make(lon, lat, klass)])

    def redraw(self, i: int, lon: Sequence[float], lat: Sequence[float]) -> None:
        """Give outline ``i`` a new edge (its class stays)."""
        old = self.current[self._index(i)]
        new = Outline.make(lon, lat, old.cls, "drawn")
        self._change([new if k == i else o for k, o in enumerate(self.current)])

    def set_class(self, i: int, cls: int) -> None:
        """Change outline ``i``'s class (1 storm, 2 river)."""
        old = self.current[self._index(i)]
        self._change(
            [
                dataclasses.replace(old, cls=int(cls)) if k == i else o
                for k, o in enumerate(self.current)
            ]
        )

    def carry(self) -> None:
        """Copy the previous step's outlines to this step (events move slowly)."""
        if self.step > 0:
            self._change(
                [dataclasses.replace(o, source="carried") for o in self.outlines[self.step - 1]]
            )

    def undo(self) -> bool:
        """Undo the last edit (going back to its step); False when there is none."""
        if not self._undo:
            return False
        self.step, outlines = self._undo.pop()
        self.outlines[self.step] = outlines
        self.saved.discard(self.step)
        return True

    def goto(self, step: int) -> None:
        """Show step ``step`` (its outlines as they were left)."""
        self.step = int(np.clip(step, 0, len(self.times) - 1))

    def smallest(self, cls: int) -> int | None:
        """Index of the step's smallest outline of class ``cls`` (``None``: none)."""
        found = [(o.area, k) for k, o in enumerate(self.current) if o.cls == cls]
        return min(found)[1] if found else None

    def missing(self, reference: xr.DataArray, cls: int) -> list[Outline]:
        """The events of class ``cls`` in ``reference`` (a (time, lat, lon) mask, e.g. the
        truth) at the step shown that the step's outlines leave mostly uncovered."""
        lat, lon = self.fields.lat.values, self.fields.lon.values
        ref = reference.sel(time=self.fields.time[self.step]).values
        mine = self.labels()
        found = [o for o in outlines_from_mask(ref, lat, lon, source="reference") if o.cls == cls]
        return [o for o in found if (mine[rasterise([o], lat, lon) == cls] == cls).mean() < 0.5]

    def overlapping(self, outline: Outline) -> list[int]:
        """Indices of the step's outlines of ``outline``'s class that share a grid point with it."""
        lat, lon = self.fields.lat.values, self.fields.lon.values
        inside = rasterise([outline], lat, lon) == outline.cls
        return [
            k
            for k, o in enumerate(self.current)
            if o.cls == outline.cls and (rasterise([o], lat, lon)[inside] == o.cls).any()
        ]

    def labels(self, step: int | None = None) -> np.ndarray:
        """The outlines of ``step`` (default: the one shown) rasterised onto the grid."""
        t = self.step if step is None else step
        return rasterise(self.outlines[t], self.fields.lat.values, self.fields.lon.values)

    def save(self, step: int | None = None) -> Path:
        """Save ``step`` (default: the one shown) as this labeller's ClimateNet file."""
        t = self.step if step is None else step
        path = save_step(
            self.folder,
            self.fields.isel(time=[t]),
            self.outlines[t],
            labeller=self.labeller,
            name=self.name,
        )
        self.saved.add(t)
        return path

    # --- the view ----------------------------------------------------------------------------

    def status(self) -> str:
        t = self.step
        kinds = [o.cls for o in self.current]
        state = "saved" if t in self.saved else "not saved"
        return (
            f"step {t + 1} of {len(self.times)} ({self.times[t]:%Y-%m-%d %H:%M}) · "
            f"{kinds.count(TC)} storms, {kinds.count(AR)} rivers · {state} · labeller "
            f"{self.labeller} ({self.name or 'no name'}) · {len(self.saved)} steps saved"
        )

    def sync(self, data: Mapping | None) -> None:
        """Take the drawing tools' outlines of the step shown (``{"xs", "ys", "class"}``, as
        HoloViews' ``PolyDraw`` stream holds them) as that step's outlines."""
        if not data or "xs" not in data:
            return
        classes = list(data.get("class", [])) + [self.new_class] * len(data["xs"])
        old = {(o.lon, o.lat, o.cls): o.source for o in self.current}
        outlines = []
        for xs, ys, klass in zip(data["xs"], data["ys"], classes, strict=False):
            if len(xs) < 3:
                continue
            klass = self.new_class if klass is None or not np.isfinite(klass) else int(klass)
            o = Outline.make(xs, ys, klass)
            outlines.append(dataclasses.replace(o, source=old.get((o.lon, o.lat, o.cls), "drawn")))
        self._change(outlines)

    def _field(self, t: int) -> xr.DataArray:
        step = self.fields.isel(time=t)
        if self.field.upper() == "IVT" and "IVT" not in step:
            from climnb.labels.ivt import ivt_proxy

            return ivt_proxy(step.TMQ, step.U850, step.V850).ivt.rename("IVT")
        return step[self.field]

    def element(self):
        """The step shown as HoloViews objects: the field, the outlines (editable) and the
        drawing streams ``(overlay, draw, edit, selection)``."""
        field = self._field(self.step)
        image = hv.Image(field, kdims=["lon", "lat"]).opts(
            cmap="viridis", colorbar=True, tools=["hover"]
        )
        polys = hv.Polygons(
            [{"lon": list(o.lon), "lat": list(o.lat), "class": o.cls} for o in self.current],
            kdims=["lon", "lat"],
            vdims=["class"],
        ).opts(
            color="class",
            cmap=[COLOURS[TC], COLOURS[AR]],
            clim=(0.5, 2.5),
            line_color=_by_class(),  # the edge in the class's colour too (Bokeh's default: black)
            fill_alpha=0.2,
            line_width=3,
            colorbar=False,
            tools=["tap"],
        )
        draw = hv.streams.PolyDraw(
            source=polys, drag=True, show_vertices=True, empty_value=self.new_class
        )
        edit = hv.streams.PolyEdit(source=polys, shared=True, vertex_style={"color": "black"})
        select = hv.streams.Selection1D(source=polys)
        width = MAX_WIDTH - 60
        lon = self.fields.lon.values
        half = float(lon[1] - lon[0]) / 2 if lon.size > 1 else 0.5
        title = (
            f"step {self.step + 1} of {len(self.times)} ({self.times[self.step]:%Y-%m-%d %H:%M})"
        )
        overlay = (image * polys * self._wrapped(lon.min() - half, lon.max() + half)).opts(
            width=width,
            height=width * 5 // 9,
            title=title,
            xlim=(float(lon.min()) - half, float(lon.max()) + half),
            active_tools=["poly_draw"],
        )
        return overlay, draw, edit, select

    def _wrapped(self, west: float, east: float):
        """The parts of outlines past the map's east or west edge, drawn again 360 degrees
        back on the map (dashed: the outline itself is the one to edit)."""
        paths = []
        for o in self.current:
            for shift in (-360.0, 360.0):
                lon = np.asarray(o.lon) + shift
                if lon.max() > west and lon.min() < east:
                    paths.append({"lon": [*lon, lon[0]], "lat": [*o.lat, o.lat[0]], "class": o.cls})
        return hv.Path(paths, kdims=["lon", "lat"], vdims=["class"]).opts(
            color=_by_class(),
            line_dash="dashed",
            line_width=2,
        )

    def view(self, *, live: bool | None = None):
        """The labelling widget (Panel): the map with editable outlines, and the controls.

        Draw: with the polygon tool, press and hold to start, click each vertex, press and
        hold to end; drag an outline to move it; click it and press Backspace to delete it.
        Edit an edge: with the vertex tool, press and hold an outline, drag its vertices. The
        buttons act on the outline selected (click it). Without a live kernel (an HTML report)
        a note says so instead.
        """
        import panel as pn

        if not (is_interactive() if live is None else live):
            return pn.pane.Markdown(
                "*This labelling widget edits outlines in a running kernel: open the notebook "
                f"in JupyterLab and run it to draw. {LIVE_ONLY}*",
                sizing_mode="stretch_width",
            )
        self._view = _View(self, pn)
        return self._view.layout


class _View:
    """The Panel layout of an :class:`Annotator`: every control pulls the drawing first."""

    def __init__(self, ann: Annotator, pn):
        self.ann, self.pn = ann, pn
        names = {"river": AR, "storm": TC}
        self.cls = pn.widgets.Select(label="class", options=names, value=ann.new_class, width=110)
        self.field = pn.widgets.Select(
            label="field", options=self._fields(), value=ann.field, width=110
        )
        self.step = pn.widgets.IntSlider(
            label="step", start=1, end=len(ann.times), value=ann.step + 1, width=180
        )
        buttons = {}
        for label, action in (
            ("accept", self.accept),
            ("delete", self.delete),
            ("set class", self.set_class),
            ("carry", self.carry),
            ("undo", self.undo),
            ("save", self.save),
        ):
            b = pn.widgets.Button(
                label=label, width=72, css_classes=[f"annotate-{label.replace(' ', '-')}"]
            )
            b.on_click(lambda event, act=action: self._act(act))
            buttons[label] = b
        self.buttons = buttons
        self.cls.param.watch(lambda e: self._act(self._new_class), "value")
        self.field.param.watch(lambda e: self._act(self._set_field), "value")
        self.step.param.watch(lambda e: self._act(self._goto), "value")
        self.message = pn.pane.Markdown(ann.status(), sizing_mode="stretch_width")
        self.plot = pn.pane.HoloViews(None, linked_axes=False)
        self._render()
        unstall(self.cls, self.field, self.step)  # changes reach the kernel (see unstall)
        for b in buttons.values():
            b.jscallback(clicks=JS_FLUSH_QUEUED)
        self.layout = pn.Column(
            pn.Row(self.step, self.field, self.cls),
            pn.Row(*buttons.values()),
            self.message,
            self.plot,
            width=MAX_WIDTH,
        )

    def _fields(self) -> list[str]:
        have = [c for c in ("TMQ", "PSL", "PRECT", "U850", "V850") if c in self.ann.fields]
        if {"TMQ", "U850", "V850"} <= set(self.ann.fields.data_vars):
            have.insert(1, "IVT")
        return have or list(self.ann.fields.data_vars)

    def _render(self) -> None:
        overlay, self.draw, self.edit, self.select = self.ann.element()
        self.plot.object = overlay
        if self.step.value != self.ann.step + 1:  # undo went back to another step
            self._quiet = True
            try:
                self.step.value = self.ann.step + 1
            finally:
                self._quiet = False

    def _pull(self) -> None:
        self.ann.sync(self.draw.data)

    def _act(self, action) -> None:
        if getattr(self, "_quiet", False):
            return
        try:
            self._pull()
            said = action()
            self.message.object = self.ann.status() + (f" · {said}" if said else "")
        except (AnnotateError, IndexError) as err:
            self.message.object = f"{self.ann.status()} · **{err}**"
        self._render()

    def _selected(self) -> int | None:
        index = self.select.index
        return int(index[0]) if index else None

    def _on_selected(self, fn) -> str | None:
        i = self._selected()
        if i is None or i >= len(self.ann.current):
            return "click an outline first"
        fn(i)
        return None

    def accept(self):
        i = self._selected()
        self.ann.accept(i)
        return "accepted" + (" all outlines of this step" if i is None else f" outline {i}")

    def delete(self):
        return self._on_selected(self.ann.delete)

    def set_class(self):
        return self._on_selected(lambda i: self.ann.set_class(i, self.cls.value))

    def carry(self):
        self.ann.carry()

    def undo(self):
        return None if self.ann.undo() else "nothing to undo"

    def save(self):
        return f"saved {self.ann.save().name}"

    def _new_class(self):
        self.ann.new_class = int(self.cls.value)

    def _set_field(self):
        self.ann.field = self.field.value

    def _goto(self):
        self.ann.goto(self.step.value - 1)
