"""Kinematics of the 850 hPa wind on the sphere: relative vorticity and wind speed.

Relative vorticity in spherical coordinates,

    zeta = 1 / (R cos(phi)) * (dv/dlambda - d(u cos(phi))/dphi),

with centred differences (second order), periodic in longitude on a global grid and one-sided
at the first and last latitude. ``cos(phi)`` vanishes at the poles, where the formula is
singular, so rows within 1e-6 of a pole are NaN.

Examples
--------
Solid-body rotation ``u = U cos(phi)`` has ``zeta = 2 U sin(phi) / R``:

>>> import numpy as np
>>> lat, lon = np.linspace(-80, 80, 81), np.arange(0, 360, 2.0)
>>> u = 10 * np.cos(np.radians(lat))[:, None] * np.ones(lon.size)
>>> z = vorticity(u, np.zeros_like(u), lat, lon)
>>> bool(np.allclose(z[1:-1, 0], 2 * 10 * np.sin(np.radians(lat[1:-1])) / 6.371e6, rtol=1e-3))
True
"""

from __future__ import annotations

import numpy as np
import xarray as xr

from climnb.labels.sphere import EARTH_RADIUS_KM, is_periodic

__all__ = ["vorticity", "vorticity_rows", "relative_vorticity", "wind_speed"]

_R_M = EARTH_RADIUS_KM * 1e3


def vorticity(u: np.ndarray, v: np.ndarray, lat: np.ndarray, lon: np.ndarray) -> np.ndarray:
    """Relative vorticity (s-1) of winds ``u, v`` (m s-1) on a (..., lat, lon) grid.

    ``lat`` must be ascending or descending and ``lon`` evenly spaced; a global ``lon`` wraps.
    """
    return vorticity_rows(u, v, lat, lon, 0, np.shape(u)[-2])


def vorticity_rows(u, v, lat, lon, lo: int, hi: int) -> np.ndarray:
    """:func:`vorticity` of the latitude rows ``lo`` to ``hi - 1`` only: the same values, from
    those rows and their neighbours (on evenly spaced latitudes; otherwise computed whole)."""
    return _vorticity_rows(u, v, lat, lon, lo, hi)


def _vorticity_rows(u, v, lat, lon, lo, hi, *, flip=None, out=None) -> np.ndarray:
    """:func:`vorticity_rows`, with the sign of the rows ``flip`` (boolean, one per row of
    the grid) changed and written to ``out`` (rows ``lo`` to ``hi - 1``) when given: the
    divisor's sign is changed, which changes the quotient's sign exactly."""
    u, v = np.asarray(u), np.asarray(v)
    phi = np.radians(np.asarray(lat, dtype=np.float64))
    lam = np.radians(np.asarray(lon, dtype=np.float64))
    dtype = np.result_type(u, v, np.float32)
    cos = np.cos(phi).astype(dtype)[:, None]
    n = phi.size
    if (lo, hi) != (0, n) and not _even(phi) or (flip is not None and u.ndim != 2):
        zeta = vorticity(u, v, lat, lon)[..., lo:hi, :]
        if flip is not None:
            zeta *= np.where(flip[lo:hi], -1.0, 1.0).astype(zeta.dtype)[:, None]
        if out is None:
            return zeta
        out[...] = zeta
        return out
    zeta = _ddlon(np.asarray(v[..., lo:hi, :], dtype), lam)
    a, b = max(lo - 1, 0), min(hi + 1, n)  # the rows the latitude derivative reads
    ducos_dphi = _ddlat(np.asarray(u[..., a:b, :], dtype) * cos[a:b], phi, a)[..., lo - a :, :]
    divisor = (dtype.type(_R_M) * cos)[lo:hi]
    if flip is not None:
        divisor[flip[lo:hi]] *= -1
    out = zeta if out is None else out
    with np.errstate(divide="ignore", invalid="ignore"):
        np.subtract(zeta, ducos_dphi[..., : hi - lo, :], out=zeta)
        np.divide(zeta, divisor, out=out)
    out[..., np.abs(cos[lo:hi, 0]) < 1e-6, :] = np.nan
    return out


def _even(phi: np.ndarray) -> bool:
    step = np.diff(phi)
    return not (phi.size < 3 or np.ptp(step) > 1e-6 * abs(step[0]))


def _ddlat(f: np.ndarray, phi: np.ndarray, first: int = 0) -> np.ndarray:
    """``np.gradient(f, phi, axis=-2)`` (second order inside, first order at the ends) in
    ``f``'s own precision when the latitudes are evenly spaced; np.gradient's uneven-spacing
    formula otherwise. ``f`` may hold only the rows from ``first`` on (evenly spaced
    latitudes only): the rows it can difference come back, the first and last of ``f`` as
    well where they are the grid's."""
    step = np.diff(phi)
    if not _even(phi):
        return np.gradient(f, phi, axis=-2).astype(f.dtype, copy=False)
    out = np.empty_like(f)
    np.subtract(f[..., 2:, :], f[..., :-2, :], out=out[..., 1:-1, :])
    out[..., 1:-1, :] *= f.dtype.type(1.0 / (phi[2] - phi[0]))
    if first == 0:
        out[..., 0, :] = (f[..., 1, :] - f[..., 0, :]) * f.dtype.type(1.0 / step[0])
    if first + f.shape[-2] == phi.size:
        out[..., -1, :] = (f[..., -1, :] - f[..., -2, :]) * f.dtype.type(1.0 / step[-1])
    return out


def _ddlon(f: np.ndarray, lam: np.ndarray) -> np.ndarray:
    if is_periodic(np.degrees(lam)):
        step = (lam[-1] - lam[0]) / (lam.size - 1)
        out = np.empty_like(f)
        np.subtract(f[..., 2:], f[..., :-2], out=out[..., 1:-1])
        out[..., 0] = f[..., 1] - f[..., -1]
        out[..., -1] = f[..., 0] - f[..., -2]
        out *= f.dtype.type(1.0 / (2 * step))
        return out
    return np.gradient(f, lam, axis=-1).astype(f.dtype, copy=False)


def relative_vorticity(u: xr.DataArray, v: xr.DataArray) -> xr.DataArray:
    """Relative vorticity of DataArrays ``u, v`` with ``lat``/``lon`` dimensions (last two).

    Returns a DataArray named ``vorticity`` with units ``s-1``, NaN at the poles.
    """
    u, v = xr.broadcast(u, v)
    u = u.transpose(..., "lat", "lon")
    v = v.transpose(..., "lat", "lon")
    zeta = vorticity(u.values, v.values, u.lat.values, u.lon.values)
    return (
        u.copy(data=zeta)
        .rename("vorticity")
        .assign_attrs(
            units="s-1",
            long_name="relative vorticity",
            standard_name="atmosphere_relative_vorticity",
        )
    )


def wind_speed(u, v):
    """Wind speed ``hypot(u, v)`` (m s-1) of arrays or DataArrays."""
    speed = np.hypot(u, v)
    if isinstance(speed, xr.DataArray):
        speed = speed.rename("wind_speed").assign_attrs(units="m s-1", long_name="wind speed")
    return speed
