"""CF coordinates, and the caller's grid for callers that hold only its coordinates.

The one description of an input's grid and the one way back to it are
:func:`climnb.io.netcdf.input_grid` and :meth:`climnb.io.netcdf.InputGrid.restore` (names,
values, order, attributes, time's name and scalar coordinates, within 1e-4 degrees); the
functions here are that, for a result and a caller Dataset or DataArray, and the coordinate
names of :func:`climnb.io.netcdf.coord_names` as a pair.

Examples
--------
>>> import numpy as np, xarray as xr
>>> caller = xr.Dataset(coords={"latitude": [30.0, -30.0], "longitude": [-90.0, 90.0]})
>>> canonical = xr.DataArray(
...     [[1, 2], [3, 4]], coords={"lat": [-30.0, 30.0], "lon": [90.0, 270.0]}, dims=("lat", "lon")
... )
>>> out = to_caller_grid(canonical, caller)
>>> out.dims, out.values.tolist(), out.longitude.values.tolist()
(('latitude', 'longitude'), [[4, 3], [2, 1]], [-90.0, 90.0])
"""

from __future__ import annotations

import xarray as xr

from climnb.io.netcdf import COORD_ALIASES, LAT_ATTRS, LON_ATTRS, input_grid
from climnb.io.netcdf import coord_names as _coord_names

__all__ = ["to_caller_grid", "cf_coords", "coord_names", "LAT_ATTRS", "LON_ATTRS"]

Obj = xr.DataArray | xr.Dataset


def coord_names(ds: Obj) -> tuple[str, str]:
    """The names of the latitude and longitude coordinates of ``ds``
    (:func:`climnb.io.netcdf.coord_names`)."""
    names = _coord_names(ds)
    for dim in ("lat", "lon"):
        if dim not in names:
            raise ValueError(
                f"no {dim} coordinate: looked for CF attributes and {', '.join(COORD_ALIASES[dim])}"
                f"; found {', '.join(map(str, ds.coords)) or 'no coordinates'}"
            )
    return names["lat"], names["lon"]


def cf_coords(out: Obj) -> Obj:
    """``out`` with CF attributes on its canonical ``lat``/``lon`` (existing ones kept)."""
    return out.assign_coords(
        lat=out.lat.assign_attrs({**LAT_ATTRS, **out.lat.attrs}),
        lon=out.lon.assign_attrs({**LON_ATTRS, **out.lon.attrs}),
    )


def to_caller_grid(out: Obj, caller: Obj) -> Obj:
    """``out`` (on the canonical grid) on the grid of ``caller``
    (:meth:`climnb.io.netcdf.InputGrid.restore`)."""
    if isinstance(caller, xr.DataArray):
        caller = caller.coords.to_dataset()
    return input_grid(caller).restore(out)
