"""Integrated vapour transport (IVT): the vertical integral and a single-level proxy.

IVT is the column integral of the horizontal moisture flux,

    IVT = (1 / g) * integral of q * (u, v) dp   (kg m-1 s-1),

from the top level down to the surface. :func:`ivt` computes it by the trapezoidal rule where
specific humidity and winds exist on pressure levels.

The 16-channel CAM5 data of the climate segmentation data set has winds only at 850 hPa and
at the lowest model level, so the original labels used a single-level proxy (and, for the final
data set, TMQ itself). :func:`ivt_proxy` is that proxy: precipitable water (the column integral
of q, TMQ) moved by the 850 hPa wind,

    IVT_proxy = TMQ * (U850, V850),

which is exact if all of the column's vapour moved with the 850 hPa wind. Most vapour lies
below about 700 hPa, where the 850 hPa wind represents the flow well, so the proxy has the
spatial pattern of IVT; it overestimates IVT where the wind weakens with height and is best
used, as here, with a relative (percentile) threshold rather than the 250 kg m-1 s-1 of IVT-based
catalogues.

Examples
--------
>>> from climnb.data.synthetic import make_dataset
>>> ds, _ = make_dataset(n_time=1, n_tc=0, n_ar=1)
>>> proxy = ivt_proxy(ds.TMQ, ds.U850, ds.V850)
>>> proxy.ivt.attrs["units"], proxy.ivt.dims
('kg m-1 s-1', ('time', 'lat', 'lon'))
"""

from __future__ import annotations

import numpy as np
import xarray as xr

__all__ = ["G", "ivt", "ivt_proxy"]

G = 9.80665  # m s-2

_PA_PER_UNIT = {"pa": 1.0, "hpa": 100.0, "mbar": 100.0, "millibar": 100.0, "mb": 100.0}


def _as_dataset(u, v, name: str) -> xr.Dataset:
    attrs = {"units": "kg m-1 s-1"}
    return xr.Dataset(
        {
            "ivtu": u.assign_attrs(attrs, long_name=f"eastward {name}"),
            "ivtv": v.assign_attrs(attrs, long_name=f"northward {name}"),
            "ivt": np.hypot(u, v).assign_attrs(attrs, long_name=f"{name} magnitude"),
        }
    )


def ivt_proxy(tmq: xr.DataArray, u850: xr.DataArray, v850: xr.DataArray) -> xr.Dataset:
    """Single-level IVT proxy ``TMQ * (U850, V850)`` for the 16-channel CAM5 data.

    Returns a Dataset with ``ivtu``, ``ivtv`` and ``ivt`` (magnitude), in kg m-1 s-1.
    """
    return _as_dataset(tmq * u850, tmq * v850, "vapour transport proxy (TMQ x 850 hPa wind)")


def ivt(
    q: xr.DataArray,
    u: xr.DataArray,
    v: xr.DataArray,
    *,
    level: str = "plev",
    surface_pressure: xr.DataArray | None = None,
) -> xr.Dataset:
    """Vertically integrated vapour transport from fields on pressure levels.

    Parameters
    ----------
    q, u, v : specific humidity (kg kg-1) and winds (m s-1) with a pressure dimension ``level``.
    level : name of the pressure coordinate; its ``units`` attribute may be Pa (default) or
        hPa/mbar.
    surface_pressure : optional surface pressure (Pa); the column is cut at the surface:
        pressures above it are clipped to it, so layers below ground have no thickness.

    Returns
    -------
    xarray.Dataset with ``ivtu``, ``ivtv`` and ``ivt`` (magnitude), kg m-1 s-1.
    """
    for name, arr in (("q", q), ("u", u), ("v", v)):
        if level not in arr.dims:
            raise ValueError(
                f"{name} has no pressure dimension {level!r}; its dimensions are {arr.dims}"
            )
    p = q[level]
    units = str(p.attrs.get("units", "Pa")).strip().lower()
    if units not in _PA_PER_UNIT:
        raise ValueError(f"pressure coordinate {level!r} has units {units!r}; use Pa or hPa")
    p_pa = p * _PA_PER_UNIT[units]
    order = np.argsort(p_pa.values)  # integrate upwards in pressure: top first
    p_pa = p_pa.isel({level: order})
    if surface_pressure is not None:  # the column ends at the surface
        p_pa = np.minimum(p_pa, surface_pressure)
    qu = (q * u).isel({level: order})
    qv = (q * v).isel({level: order})
    return _as_dataset(
        _trapezoid(qu, p_pa, level) / G, _trapezoid(qv, p_pa, level) / G, "vapour transport"
    )


def _trapezoid(f: xr.DataArray, p: xr.DataArray, level: str) -> xr.DataArray:
    """Trapezoidal integral of ``f`` over ``p`` (both ordered by increasing pressure)."""
    f, p = (a.drop_vars(level, errors="ignore") for a in (f, p))
    lo, hi = slice(None, -1), slice(1, None)
    mean = (f.isel({level: lo}) + f.isel({level: hi})) / 2
    return (mean * (p.isel({level: hi}) - p.isel({level: lo}))).sum(level)
