"""Open CAM5 / ClimateNet NetCDF files lazily and put them on climnb's canonical grid.

Canonical form: dimensions ``(time, lat, lon)``, latitude ascending (-90..90), longitude in
0..360 ascending, missing values as NaN. :func:`normalize` brings a Dataset there and checks it;
:func:`open_dataset` opens one or many files lazily (dask, one time step per chunk) and
normalises them.

* coordinates called ``latitude``/``longitude``/``Time`` (and a few others) are renamed;
* longitudes -180..180 are moved to 0..360 and sorted; descending latitudes are flipped;
* a file without a time dimension gets one of length 1;
* ``_FillValue``/``missing_value`` become NaN when the file is decoded (xarray does this), and
  values of magnitude 1e30 or more (CAM5's undeclared 1e36 fill) are made NaN too;
* a missing variable or coordinate, or a variable with the wrong dimensions, raises a
  ``ValueError`` that names what is missing and what was found.

Examples
--------
>>> import numpy as np, xarray as xr
>>> ds = xr.Dataset({"TMQ": (("latitude", "longitude"), np.zeros((3, 4)))},
...                 coords={"latitude": [60.0, 0.0, -60.0], "longitude": [-90.0, 0.0, 90.0, 180.0]})
>>> out = normalize(ds, required=["TMQ"])
>>> out.TMQ.dims, out.lat.values.tolist(), out.lon.values.tolist()
(('time', 'lat', 'lon'), [-60.0, 0.0, 60.0], [0.0, 90.0, 180.0, 270.0])
"""

from __future__ import annotations

import glob
import logging
import os
from collections.abc import Iterable, Sequence

import numpy as np
import xarray as xr

__all__ = ["normalize", "open_dataset", "DIMS"]

log = logging.getLogger(__name__)

DIMS = ("time", "lat", "lon")
#: Names under which latitude, longitude and time are recognised, canonical first.
COORD_ALIASES = {
    "lat": ("lat", "latitude", "Latitude", "LAT", "nav_lat", "y_lat"),
    "lon": ("lon", "longitude", "Longitude", "LON", "nav_lon", "x_lon"),
    "time": ("time", "Time", "TIME", "t"),
}
_FILL_LIMIT = 1e30


def _rename(ds: xr.Dataset) -> xr.Dataset:
    names = set(ds.dims) | set(ds.coords)
    mapping = {}
    for canonical, aliases in COORD_ALIASES.items():
        if canonical in names:
            continue
        found = [a for a in aliases if a in names]
        if found:
            mapping[found[0]] = canonical
    return ds.rename(mapping) if mapping else ds


def _require_coords(ds: xr.Dataset) -> None:
    for dim in ("lat", "lon"):
        if dim not in ds.dims:
            raise ValueError(
                f"no {dim} dimension: looked for {', '.join(COORD_ALIASES[dim])}; "
                f"found dimensions {sorted(map(str, ds.dims))} and coordinates "
                f"{sorted(map(str, ds.coords))}"
            )
        if dim not in ds.coords:
            raise ValueError(f"dimension {dim!r} has no coordinate values (degrees) in the data")


def normalize(ds: xr.Dataset, *, required: Iterable[str] | None = None) -> xr.Dataset:
    """Return ``ds`` on the canonical grid, checking that ``required`` variables exist.

    Parameters
    ----------
    ds : a Dataset with latitude, longitude and (optionally) time.
    required : variables that must be present with dimensions (time, lat, lon) (extra
        dimensions of length 1, such as a single level, are dropped).

    Raises
    ------
    ValueError
        Naming the missing variables, coordinates or the wrong dimensions and what was found.
    """
    if not isinstance(ds, xr.Dataset):
        raise ValueError(f"expected an xarray.Dataset, got {type(ds).__name__}")
    ds = _rename(ds)
    _require_coords(ds)
    required = list(required or [])
    missing = [v for v in required if v not in ds.data_vars]
    if missing:
        raise ValueError(
            f"missing variable(s) {', '.join(missing)}; found {', '.join(map(str, ds.data_vars))}"
        )
    if "time" not in ds.dims:
        ds = ds.expand_dims("time")
    for name in required:
        ds[name] = _canonical_var(ds[name], name)
    ds = _fix_lon(ds)
    if ds.lat.size > 1 and ds.lat.values[0] > ds.lat.values[-1]:
        ds = ds.isel(lat=slice(None, None, -1))
    if np.any(np.diff(ds.lat.values) <= 0):
        raise ValueError("latitudes must be strictly monotonic")
    return ds


def _canonical_var(da: xr.DataArray, name: str) -> xr.DataArray:
    extra = [d for d in da.dims if d not in DIMS]
    squeezable = [d for d in extra if da.sizes[d] == 1]
    if len(squeezable) < len(extra) or not {"lat", "lon"} <= set(da.dims):
        raise ValueError(
            f"variable {name} has dimensions {dict(da.sizes)}; expected (time, lat, lon) "
            "(extra dimensions only of length 1)"
        )
    da = da.squeeze(squeezable, drop=True)
    if "time" not in da.dims:
        da = da.expand_dims("time")
    da = da.transpose(*DIMS)
    if np.issubdtype(da.dtype, np.floating):
        da = da.where(np.abs(da) < _FILL_LIMIT)
    return da


def _fix_lon(ds: xr.Dataset) -> xr.Dataset:
    lon = ds.lon.values
    if lon.min() >= 0 and lon.max() < 360 and np.all(np.diff(lon) > 0):
        return ds
    wrapped = ds.assign_coords(lon=(ds.lon % 360.0).assign_attrs(ds.lon.attrs))
    wrapped = wrapped.sortby("lon")
    if np.any(np.diff(wrapped.lon.values) <= 0):
        raise ValueError("longitudes repeat after wrapping to 0..360 (is 360 given as well as 0?)")
    return wrapped


def _expand(paths: str | os.PathLike | Sequence[str | os.PathLike]) -> list[str]:
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    out = []
    for p in map(str, paths):
        matches = sorted(glob.glob(p)) if glob.has_magic(p) else [p]
        if not matches or not all(os.path.exists(m) for m in matches):
            raise FileNotFoundError(f"no such file: {p}")
        out += matches
    if not out:
        raise FileNotFoundError("no input files given")
    return out


def open_dataset(
    paths: str | os.PathLike | Sequence[str | os.PathLike],
    *,
    required: Iterable[str] | None = None,
    chunks: dict | None = None,
) -> xr.Dataset:
    """Open one or many NetCDF files lazily (dask) and :func:`normalize` them.

    Parameters
    ----------
    paths : a file, a glob pattern, or a list of them; several files are joined along time.
    required : variables that must be present (see :func:`normalize`).
    chunks : dask chunks; default one time step per chunk and whole lat/lon fields.
    """
    files = _expand(paths)
    chunks = chunks or {"time": 1}
    parts = []
    for f in files:
        ds = xr.open_dataset(f, chunks=chunks)
        try:
            parts.append(normalize(ds, required=required))
        except ValueError as err:
            raise ValueError(f"{f}: {err}") from None
    log.info("opened %d file(s), %d time steps", len(files), sum(p.sizes["time"] for p in parts))
    if len(parts) == 1:
        return parts[0]
    return xr.concat(
        parts, dim="time", data_vars="minimal", coords="minimal", compat="override", join="override"
    )
