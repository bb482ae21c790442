"""Integrated vapour transport from fields on pressure levels, for inputs that lack it.

ERA5, NAM and CMIP files often hold winds and humidity on pressure levels but no vertically
integrated transport. :func:`ivt_from_levels` computes its components

    IVTU = (1 / g) * integral from p_top to p_bottom of q u dp,
    IVTV = (1 / g) * integral from p_top to p_bottom of q v dp      (kg m-1 s-1),

the definition of Zhu and Newell (1998) used by Guan and Waliser (2015, their eq. 1 with the
integral from 1000 to 300 hPa), by the trapezoid rule over the levels between
``bottom_hpa`` (1000) and ``top_hpa`` (300). Where surface pressure is given, levels below
the surface (pressure above the surface pressure) carry no transport: their integrand is set
to 0, so a column over high ground integrates only what lies above it (the layer between the
last level above ground and the first below it counts half, the trapezoid's share).

Specific humidity ``q`` (kg kg-1) is used as given; relative humidity ``r`` (%) with
temperature ``t`` (K) is turned into ``q`` with Bolton's (1980) saturation vapour pressure over
water, ``e_s = 6.112 exp(17.67 T_c / (T_c + 243.5))`` hPa, ``e = r / 100 e_s`` and
``q = 0.622 e / (p - 0.378 e)``.

References: Zhu, Y. and Newell, R. E. (1998), Mon. Wea. Rev. 126, 725-735; Guan, B. and
Waliser, D. E. (2015), J. Geophys. Res. Atmos. 120, 12514-12535; Bolton, D. (1980), Mon. Wea.
Rev. 108, 1046-1053.

Examples
--------
A profile with ``q u`` falling linearly with pressure integrates exactly:

>>> import numpy as np, xarray as xr
>>> p = xr.DataArray([1000.0, 850.0, 700.0, 500.0, 300.0], dims="level",
...                  attrs={"units": "hPa"})
>>> q = xr.DataArray(0.01 * (p.values - 200) / 800, dims="level", coords={"level": p})
>>> u = xr.full_like(q, 10.0)
>>> out = ivt_from_levels(u, 0 * u, q, level="level")
>>> round(float(out.IVTU), 3), round(0.01 * 10 * (0.5 * (1.0 + 0.125) * 70000) / 9.80665, 3)
(401.513, 401.513)
"""

from __future__ import annotations

import numpy as np
import xarray as xr

__all__ = ["ivt_from_levels", "specific_humidity", "G"]

G = 9.80665  # m s-2
_PA_PER = {"pa": 1.0, "hpa": 100.0, "mbar": 100.0, "millibar": 100.0, "mb": 100.0}


def _pressure_pa(coord: xr.DataArray) -> np.ndarray:
    units = str(coord.attrs.get("units", "")).strip().lower()
    values = np.asarray(coord.values, dtype=float)
    if units in _PA_PER:
        return values * _PA_PER[units]
    return values * (1.0 if np.nanmax(values) > 2000 else 100.0)


def specific_humidity(r: xr.DataArray, t: xr.DataArray, p_pa) -> xr.DataArray:
    """Specific humidity (kg kg-1) from relative humidity ``r`` (%), temperature ``t`` (K) and
    pressure ``p_pa`` (Pa), with Bolton's (1980) saturation vapour pressure over water."""
    tc = t - 273.15
    es = 611.2 * np.exp(17.67 * tc / (tc + 243.5))  # Pa
    e = r.clip(0, 100) / 100.0 * es
    return 0.622 * e / (p_pa - 0.378 * e)


def ivt_from_levels(
    u: xr.DataArray,
    v: xr.DataArray,
    q: xr.DataArray,
    *,
    level: str,
    surface_pressure: xr.DataArray | None = None,
    bottom_hpa: float = 1000.0,
    top_hpa: float = 300.0,
) -> xr.Dataset:
    """``IVTU`` and ``IVTV`` (kg m-1 s-1) from winds and specific humidity on pressure levels.

    Parameters
    ----------
    u, v, q : eastward and northward wind (m s-1) and specific humidity (kg kg-1), each with
        the pressure dimension ``level`` (units Pa or hPa by its ``units`` attribute).
    level : the name of the pressure dimension.
    surface_pressure : Pa, without the level dimension; levels below the surface count 0.
    bottom_hpa, top_hpa : the layer integrated over (1000-300 hPa).

    Raises
    ------
    ValueError
        If fewer than two levels lie in the layer.
    """
    p = _pressure_pa(u[level])
    inside = np.flatnonzero((p <= bottom_hpa * 100.0 + 1) & (p >= top_hpa * 100.0 - 1))
    if inside.size < 2:
        raise ValueError(
            f"IVT from levels needs at least two levels within {bottom_hpa:g}-{top_hpa:g} hPa; "
            f"the input's {level} has {', '.join(f'{x / 100:g}' for x in p)} hPa"
        )
    order = inside[np.argsort(p[inside])]  # top first
    pa = xr.DataArray(p[order], dims=level)
    u, v, q = (a.isel({level: order}).drop_vars(level, errors="ignore") for a in (u, v, q))
    above = None if surface_pressure is None else pa <= surface_pressure
    out = {}
    for name, wind in (("IVTU", u), ("IVTV", v)):
        flux = q * wind
        if above is not None:
            flux = flux.where(above, 0.0)
        out[name] = _trapezoid(flux, pa, level) / G
    return xr.Dataset(out)


def _trapezoid(f: xr.DataArray, p: xr.DataArray, level: str) -> xr.DataArray:
    """Trapezoid rule of ``f`` over ``p`` (Pa, increasing along ``level``)."""
    lo, hi = slice(None, -1), slice(1, None)
    mean = (f.isel({level: lo}) + f.isel({level: hi})) / 2
    dp = p.isel({level: hi}).values - p.isel({level: lo}).values
    return (mean * xr.DataArray(dp, dims=level)).sum(level)
