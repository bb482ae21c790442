"""Synthetic fields dressed as real files: ERA5, MERRA-2, CAM5 and generic IWV/IVT naming.

:func:`dress` takes a data set of :func:`climnb.data.synthetic.make_dataset` (with ``ivt=True``) and
returns it as the named source would write it - its variable names, units, coordinate names,
latitude order, longitude convention and, for ERA5, a pressure-level coordinate - so that the
tests and notebook 01 can show climnb reading files as they come, with a known truth:

==========  ===============================================================================
source      what it looks like
==========  ===============================================================================
``era5``    ``tcwv``, ``viwve``/``viwvn``, ``msl``, ``u``/``v``/``t``/``z`` on
            ``pressure_level`` (hPa; ``z`` geopotential in m2 s-2), ``tp`` in m per hour;
            ``latitude`` 90..-90, ``longitude`` 0..360, ``valid_time``
``merra2``  ``TQV``, ``UFLXQV``/``VFLXQV``, ``SLP``, ``U850``, ``V850``, ``T500``,
            ``PRECTOT`` (kg m-2 s-1); ``lon`` -180..180 (no ``T200``: no storms)
``cam5``    the 16 CAM5 channels as they are (``TMQ``, ``U850``, ...), ``lat``/``lon``
``ivt``     generic ``IWV`` (mm) and ``IVT`` only, longitude -180..180
``tmq``     ``TMQ`` only (the paper's final data set)
==========  ===============================================================================

Examples
--------
>>> from climnb.data.synthetic import make_dataset
>>> ds, _ = make_dataset(n_time=1, ivt=True)
>>> era5 = dress(ds, "era5")
>>> sorted(era5.data_vars), float(era5.latitude[0])
(['msl', 't', 'tcwv', 'tp', 'truth', 'u', 'v', 'viwve', 'viwvn', 'z'], 90.0)
"""

from __future__ import annotations

import numpy as np
import xarray as xr

from climnb.io.channels import CHANNEL_NAMES

__all__ = ["SOURCES", "dress"]

G = 9.80665
SOURCES = ("era5", "merra2", "cam5", "ivt", "tmq")
_LEVELS_HPA = np.array([200.0, 500.0, 850.0, 1000.0])


def dress(ds: xr.Dataset, source: str) -> xr.Dataset:
    """``ds`` (from ``make_dataset(ivt=True)``) named, ordered and in units as ``source`` has
    them; ``truth`` is kept (in the same layout) for scoring."""
    if source not in SOURCES:
        raise ValueError(f"unknown source {source!r}; choose one of {', '.join(SOURCES)}")
    if source in ("era5", "merra2", "ivt") and "IVT" not in ds:
        raise ValueError("dress needs the IVT of make_dataset(..., ivt=True)")
    out = {"era5": _era5, "merra2": _merra2, "cam5": _cam5, "ivt": _ivt, "tmq": _tmq}[source](ds)
    return out.assign_attrs(title=f"climnb synthetic fields dressed as {source}")


def _var(da: xr.DataArray, units: str, **attrs) -> xr.DataArray:
    return da.assign_attrs({"units": units, **attrs})


def _signed_lon(ds: xr.Dataset) -> xr.Dataset:
    """Longitudes -180..180, ascending (MERRA-2's convention)."""
    lon = (ds.lon.values + 180.0) % 360.0 - 180.0
    return ds.assign_coords(lon=("lon", lon, ds.lon.attrs)).sortby("lon")


def _on_levels(layers: list[xr.DataArray], units: str, name: str) -> xr.DataArray:
    level = xr.DataArray(
        _LEVELS_HPA,
        dims="pressure_level",
        attrs={"units": "hPa", "standard_name": "air_pressure", "long_name": "pressure"},
    )
    da = xr.concat(layers, dim=level).transpose("time", "pressure_level", "lat", "lon")
    return da.rename(name).assign_attrs(units=units)


def _era5(ds: xr.Dataset) -> xr.Dataset:
    t700 = (ds.T500 + ds.TREFHT) / 2
    z500 = (ds.Z200 + ds.Z1000) / 2
    out = xr.Dataset(
        {
            "tcwv": _var(
                ds.TMQ, "kg m**-2", long_name="Total column vertically-integrated water vapour"
            ),
            "viwve": _var(ds.IVTU, "kg m**-1 s**-1"),
            "viwvn": _var(ds.IVTV, "kg m**-1 s**-1"),
            "msl": _var(ds.PSL, "Pa"),
            "u": _on_levels([1.3 * ds.U850, 1.1 * ds.U850, ds.U850, ds.UBOT], "m s**-1", "u"),
            "v": _on_levels([1.3 * ds.V850, 1.1 * ds.V850, ds.V850, ds.VBOT], "m s**-1", "v"),
            "t": _on_levels([ds.T200, ds.T500, t700, ds.TREFHT], "K", "t"),
            "z": _on_levels(
                [G * ds.Z200, G * z500, G * (ds.Z1000 + 0.12 * (ds.Z200 - ds.Z1000)), G * ds.Z1000],
                "m**2 s**-2",
                "z",
            ),
            "tp": _var(ds.PRECT * 3600.0, "m", long_name="Total precipitation"),
            "truth": ds.truth,
        }
    )
    out = out.isel(lat=slice(None, None, -1)).rename(
        lat="latitude", lon="longitude", time="valid_time"
    )
    return out.transpose("valid_time", "pressure_level", "latitude", "longitude")


def _merra2(ds: xr.Dataset) -> xr.Dataset:
    out = xr.Dataset(
        {
            "TQV": _var(ds.TMQ, "kg m-2"),
            "UFLXQV": _var(ds.IVTU, "kg m-1 s-1"),
            "VFLXQV": _var(ds.IVTV, "kg m-1 s-1"),
            "SLP": _var(ds.PSL, "Pa"),
            "U850": _var(ds.U850, "m s-1"),
            "V850": _var(ds.V850, "m s-1"),
            "T500": _var(ds.T500, "K"),
            "PRECTOT": _var(ds.PRECT * 1000.0, "kg m-2 s-1"),
            "truth": ds.truth,
        }
    )
    return _signed_lon(out)


def _cam5(ds: xr.Dataset) -> xr.Dataset:
    return ds[[*CHANNEL_NAMES, "truth"]]


def _ivt(ds: xr.Dataset) -> xr.Dataset:
    out = xr.Dataset(
        {"IWV": _var(ds.TMQ, "mm"), "IVT": _var(ds.IVT, "kg m-1 s-1"), "truth": ds.truth}
    )
    return _signed_lon(out)


def _tmq(ds: xr.Dataset) -> xr.Dataset:
    return ds[["TMQ", "truth"]]
