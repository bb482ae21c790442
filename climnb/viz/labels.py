"""Views of label generation: the thresholded vapour transport and labels over time.

The functions return HoloViews objects and never call ``hv.extension``.

Examples
--------
>>> from climnb.data.synthetic import make_dataset
>>> from climnb.labels import compute, label_dataset
>>> from climnb.viz.labels import ivt_threshold_map, labels_over_time
>>> ds, _ = make_dataset(n_time=2)
>>> type(ivt_threshold_map(ds)).__name__
'Overlay'
>>> labels, _ = compute(*label_dataset(ds))
>>> labels_over_time(ds, labels).kdims[0].name
'time'
"""

from __future__ import annotations

import holoviews as hv
import numpy as np
import xarray as xr

from climnb.io.netcdf import normalize
from climnb.labels.ar import river_strength
from climnb.labels.config import ARConfig
from climnb.viz.fields import channel_over_time, mask_overlay

__all__ = ["ivt_threshold_map", "labels_over_time", "river_agreement"]

#: Colours of :func:`river_agreement`'s overlap map: only ours, only the reference's, both.
AGREEMENT_COLOURS = {1: "#ff7f0e", 2: "#1f77b4", 3: "#2ca02c"}


def ivt_threshold_map(
    ds: xr.Dataset,
    *,
    time: int = 0,
    config: ARConfig | None = None,
    width: int = 640,
    height: int = 320,
) -> hv.Overlay:
    """The damped river-strength field (IVT proxy by default) and the pixels above its threshold.

    The title gives the per-step percentile threshold; pixels above it are shaded grey.
    """
    config = config or ARConfig()
    step = ds.isel(time=time) if "time" in ds.dims else ds
    fields = {k: step[k].values for k in ("TMQ", "U850", "V850", "IVT") if k in step}
    strength = river_strength(fields, step.lat.values, config)
    threshold = float(np.percentile(strength, config.percentile))
    name = "IVT proxy" if config.field == "ivt" and "IVT" not in fields else config.field.upper()
    da = xr.DataArray(strength, coords={"lat": step.lat, "lon": step.lon}, dims=("lat", "lon"))
    image = hv.Image(da, kdims=["lon", "lat"], vdims=[hv.Dimension("strength", label=name)])
    above = da.where(da > threshold).notnull().astype(np.float32)
    shade = hv.Image(above.where(above > 0), kdims=["lon", "lat"], vdims=["above"])
    title = f"damped {name}; {config.percentile:g}th percentile = {threshold:.3g} (grey: above)"
    return image.opts(cmap="YlGnBu", colorbar=True, width=width, height=height, title=title) * (
        shade.opts(cmap=["#555555"], alpha=0.35, clipping_colors={"NaN": "transparent"})
    )


def labels_over_time(
    ds: xr.Dataset,
    labels: xr.DataArray,
    *,
    channel: str = "TMQ",
    width: int = 640,
    height: int = 320,
) -> hv.HoloMap:
    """Channel ``channel`` with the label masks overlaid (TC red, AR blue), with a time slider."""
    ds = normalize(ds)  # the labels are on the normalised grid
    missing = set(labels.time.values) - set(ds.time.values)
    if missing:
        raise ValueError(f"labels have {len(missing)} time steps that the dataset lacks")
    return channel_over_time(
        ds.sel(time=labels.time), channel, mask=labels, width=width, height=height
    )


def river_agreement(
    ivt: xr.DataArray,
    ours: xr.DataArray,
    reference: xr.DataArray,
    *,
    time: int = 0,
    threshold: float = 250.0,
    names: tuple[str, str] = ("climnb", "IPART"),
    anomaly: xr.DataArray | None = None,
    dropped: xr.DataArray | None = None,
    width: int = 760,
    height: int = 300,
) -> hv.Layout:
    """Side-by-side maps of one step: IVT with its ``threshold`` contour, and where two river
    masks agree (green) or only ``ours`` (orange) or only ``reference`` (blue) has a river;
    with ``anomaly`` (the reference's IVT anomaly, e.g. IPART's THR anomaly) a third map of it,
    with the outline of ``dropped`` (e.g. :func:`climnb.labels.reference.oversized_candidates`)
    in magenta. One map a row, as wide as a notebook cell: their titles say what the colours
    mean, whole.

    ``ours`` may hold class ids (rivers are 2) or booleans; ``reference`` booleans; all are
    (time, lat, lon) on the same grid.
    """
    step = {k: da.isel(time=time) for k, da in (("ivt", ivt), ("a", ours), ("b", reference))}
    a = step["a"] == 2 if step["a"].dtype != bool else step["a"]
    both = a.astype(np.int8) + 2 * step["b"].astype(np.int8)
    both = both.where(both > 0).rename("agreement")
    field = step["ivt"].rename("IVT")
    image = hv.Image(field, kdims=["lon", "lat"], vdims=[hv.Dimension("IVT", unit="kg m-1 s-1")])
    edge = hv.operation.contours(image, levels=[threshold], filled=False).opts(
        color="black", line_width=1
    )
    overlap = hv.Image(both, kdims=["lon", "lat"], vdims=["agreement"]).opts(
        cmap=list(AGREEMENT_COLOURS.values()),
        clim=(0.5, 3.5),
        clipping_colors={"NaN": "white"},
        width=width,
        height=height,
    )
    ours_name, ref_name = names
    title = (
        f"orange: {ours_name} only, blue: {ref_name} only, green: both; line: IVT = {threshold:g}"
    )
    image = image.opts(cmap="YlGnBu", colorbar=True, width=width, height=height, title="IVT")
    layout = image * edge + (overlap * edge).opts(title=title)
    if anomaly is not None:
        field = anomaly.isel(time=time).rename("anomaly")
        shown = hv.Image(field, kdims=["lon", "lat"], vdims=["anomaly"]).opts(
            cmap="RdBu_r", clim=(-500, 500), colorbar=True, width=width, height=height
        )
        shown = shown * edge
        name = f"{ref_name}'s IVT anomaly"
        if dropped is not None:
            mask = dropped.isel(time=time).astype(np.float32).rename("dropped")
            outline = hv.Image(mask, kdims=["lon", "lat"], vdims=["dropped"])
            shown = shown * hv.operation.contours(outline, levels=[0.5], filled=False).opts(
                color="magenta", line_width=1.5
            )
            name += "; magenta: dropped as too large"
        layout = layout + shown.opts(title=name)
    return layout.cols(1)


def sources_view(found, sources, *, width: int = 640, height: int = 320) -> hv.Layout:
    """IVT with the labels on top (red storms, blue rivers), one panel a source, of
    :func:`climnb.labels.inputs.label_as_they_come`'s result ``found``."""
    style = dict(cmap="YlGnBu", colorbar=True, width=width, height=height)
    views = [
        hv.Image(found.ivt[source], ["lon", "lat"]).opts(title=f"{source}: IVT and labels", **style)
        * mask_overlay(found.labels[source])
        for source in sources
    ]
    return hv.Layout(views).cols(1)
