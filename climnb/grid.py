"""The caller's grid: put results computed on climnb's canonical grid back onto the input's.

climnb computes on one grid (:func:`climnb.io.netcdf.normalize`: ``lat`` ascending, ``lon``
0..360); a user's data may call its coordinates ``latitude``/``longitude``, run north to south
or use -180..180. :func:`to_caller_grid` returns a result with the input's coordinate names,
values, order and attributes (lazily: an index permutation of each block), and
:func:`cf_coords` gives canonical coordinates their CF attributes.

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

from climnb.io.netcdf import COORD_ALIASES

__all__ = ["to_caller_grid", "cf_coords", "coord_names", "LAT_ATTRS", "LON_ATTRS"]

#: CF attributes of the latitude and longitude coordinates.
LAT_ATTRS = {"standard_name": "latitude", "long_name": "latitude", "units": "degrees_north"}
LON_ATTRS = {"standard_name": "longitude", "long_name": "longitude", "units": "degrees_east"}

Obj = xr.DataArray | xr.Dataset


def coord_names(ds: Obj) -> tuple[str, str]:
    """The names of the latitude and longitude coordinates of ``ds`` (any of the aliases)."""
    names = []
    for dim in ("lat", "lon"):
        found = next((n for n in COORD_ALIASES[dim] if n in ds.coords), None)
        if found is None:
            raise ValueError(
                f"no {dim} coordinate: looked for {', '.join(COORD_ALIASES[dim])}; "
                f"found {', '.join(map(str, ds.coords)) or 'no coordinates'}"
            )
        names.append(found)
    return names[0], names[1]


def cf_coords(out: Obj) -> Obj:
    """``out`` with CF attributes on its canonical ``lat``/``lon`` (existing ones kept)."""
    return out.assign_coords(
        lat=out.lat.assign_attrs({**LAT_ATTRS, **out.lat.attrs}),
        lon=out.lon.assign_attrs({**LON_ATTRS, **out.lon.attrs}),
    )


def to_caller_grid(out: Obj, caller: Obj) -> Obj:
    """``out`` (on the canonical grid) on the latitude/longitude of ``caller``.

    Names, values, order and attributes of the caller's coordinates are restored; every
    caller point must be on the canonical grid (it is, when ``out`` was computed from
    ``caller`` normalised).
    """
    lat_name, lon_name = coord_names(caller)
    lat, lon = caller[lat_name], caller[lon_name]
    out = out.sel(lat=lat.values, lon=lon.values % 360.0)
    out = out.assign_coords(
        lat=("lat", lat.values, {**LAT_ATTRS, **lat.attrs}),
        lon=("lon", lon.values, {**LON_ATTRS, **lon.attrs}),
    )
    if (lat_name, lon_name) == ("lat", "lon"):
        return out
    return out.rename({"lat": lat_name, "lon": lon_name})
