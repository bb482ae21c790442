"""Maps of input channels with class masks drawn over them.

The functions return HoloViews objects (the notebook decides how to show them) and never
call ``hv.extension``; tests compare the objects' types, dimensions and data.

Examples
--------
>>> from climnb.data.synthetic import make_dataset
>>> from climnb.viz.fields import channel_map
>>> ds, _ = make_dataset(n_time=1)
>>> channel_map(ds, "TMQ").vdims[0].name
'TMQ'
"""

from __future__ import annotations

from collections.abc import Sequence

import holoviews as hv
import holoviews.plotting.bokeh  # noqa: F401  (registers the bokeh options set below)
import numpy as np
import xarray as xr

from climnb.io.channels import CLASS_NAMES, channel

__all__ = ["channel_map", "mask_overlay", "channel_grid", "CLASS_COLORS", "COLORBAR_FORMAT"]

#: Colour bar ticks: up to six digits before an exponent ("102000 Pa", not "1.020e+5"), so
#: that a pressure's colour bar takes no more of a map's width than a humidity's.
COLORBAR_FORMAT = "%.6g"

#: Colours of the classes in every view: cyclones red, rivers blue (as in the paper's figures).
CLASS_COLORS = {1: "#d62728", 2: "#1f77b4"}


def _at_time(da: xr.DataArray, time: int | str | np.datetime64) -> xr.DataArray:
    if "time" not in da.dims:
        return da
    return da.isel(time=time) if isinstance(time, (int, np.integer)) else da.sel(time=time)


def channel_map(ds: xr.Dataset, name: str, *, time: int | str = 0, **opts) -> hv.Image:
    """An image of channel ``name`` at one ``time`` (an index or a time label).

    The colour map and the label (long name and units) come from :mod:`climnb.io.channels`.
    """
    if name not in ds:
        raise KeyError(f"channel {name!r} is not in the dataset; it has {', '.join(ds.data_vars)}")
    ch = channel(name)
    da = _at_time(ds[name], time)
    img = hv.Image(da, kdims=["lon", "lat"], vdims=[hv.Dimension(name, unit=ch.units)])
    return img.opts(
        cmap=ch.cmap,
        colorbar=True,
        cformatter=COLORBAR_FORMAT,
        title=f"{name} ({ch.units})",
        **opts,
    )


def mask_overlay(mask: xr.DataArray, *, time: int | str = 0, alpha: float = 0.6) -> hv.Image:
    """Class mask as a transparent image: background clear, cyclones red, rivers blue."""
    m = _at_time(mask, time).astype(np.float32)
    m = m.where(m > 0)  # NaN is drawn transparent
    cmap = [CLASS_COLORS[1], CLASS_COLORS[2]]
    img = hv.Image(m, kdims=["lon", "lat"], vdims=[hv.Dimension("class")])
    return img.opts(
        cmap=cmap,
        clim=(0.5, 2.5),
        alpha=alpha,
        colorbar=False,
        clipping_colors={"NaN": "transparent"},
    )


def channel_grid(
    ds: xr.Dataset,
    names: Sequence[str] = ("TMQ", "PSL", "U850", "PRECT"),
    *,
    mask: str | xr.DataArray | None = "truth",
    time: int | str = 0,
    width: int = 380,
    height: int = 220,
) -> hv.Layout:
    """A grid of channel maps at one time, each with the class mask overlaid (two columns:
    with the default ``width`` they fit a notebook cell, :data:`climnb.viz.notebook.MAX_WIDTH`).

    ``mask`` is the name of a mask variable in ``ds``, a mask DataArray, or ``None``.
    """
    if isinstance(mask, str):
        mask = ds[mask] if mask in ds else None
    panels = []
    for name in names:
        panel = channel_map(ds, name, time=time, width=width, height=height)
        if mask is not None:
            panel = panel * mask_overlay(mask, time=time)
        panels.append(panel)
    return hv.Layout(panels).cols(2)


def class_legend() -> str:
    """A one-line text legend of the mask colours."""
    return ", ".join(f"{CLASS_NAMES[k]}: {c}" for k, c in CLASS_COLORS.items())


def channel_over_time(
    ds: xr.Dataset,
    name: str,
    *,
    mask: str | xr.DataArray | None = "truth",
    width: int = 640,
    height: int = 320,
) -> hv.HoloMap:
    """Channel ``name`` with the mask overlaid, one frame per time step (a time slider)."""
    if isinstance(mask, str):
        mask = ds[mask] if mask in ds else None
    frames = {}
    for i, t in enumerate(ds.time.values):
        frame = channel_map(ds, name, time=i, width=width, height=height)
        if mask is not None:
            frame = frame * mask_overlay(mask, time=i)
        frames[np.datetime64(t, "s")] = frame
    return hv.HoloMap(frames, kdims=["time"])
