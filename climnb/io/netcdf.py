"""Open NetCDF files as they come and put them on climnb's canonical grid and names.

Canonical form: dimensions ``(time, lat, lon)``, latitude ascending (-90..90), longitude in
0..360 ascending, missing values as NaN, variables under climnb's (CAM5's) names in the
channels' units. :func:`normalize` brings a Dataset there and checks it; :func:`open_dataset`
opens one or many files lazily (dask, one time step per chunk); :func:`input_grid` remembers a
Dataset's own grid so that results can be put back on it (:meth:`InputGrid.restore`).

* latitude, longitude and time are found from CF attributes (``standard_name``, ``units``,
  ``axis``, through cf-xarray), then by name (:data:`COORD_ALIASES`); 2-D (curvilinear)
  coordinates are refused with a message saying to regrid;
* variables are renamed, levels picked and units converted by
  :func:`climnb.io.variables.canonicalize` (ERA5, MERRA-2, CMIP and generic names; a
  ``variables=`` mapping for others);
* longitudes -180..180 are moved to 0..360 and sorted (rounding such as -5.9e-13 for 0 is
  tolerated); descending latitudes are flipped;
* a file without a time dimension gets one of length 1;
* ``_FillValue``/``missing_value`` become NaN when the file is decoded (xarray does this), and
  values of magnitude 1e30 or more (CAM5's undeclared 1e36 fill) are made NaN too;
* a missing variable or coordinate, or a variable with the wrong dimensions or not numeric
  (text, say), raises a ``ValueError`` that names what is missing, what was found and how to
  map it.

Examples
--------
>>> import numpy as np, xarray as xr
>>> ds = xr.Dataset({"TMQ": (("latitude", "longitude"), np.zeros((3, 4)))},
...                 coords={"latitude": [60.0, 0.0, -60.0], "longitude": [-90.0, 0.0, 90.0, 180.0]})
>>> out = normalize(ds, required=["TMQ"])
>>> out.TMQ.dims, out.lat.values.tolist(), out.lon.values.tolist()
(('time', 'lat', 'lon'), [-60.0, 0.0, 60.0], [0.0, 90.0, 180.0, 270.0])
>>> back = input_grid(ds).restore(out.TMQ)
>>> back.dims, back.latitude.values.tolist()
(('time', 'latitude', 'longitude'), [60.0, 0.0, -60.0])
"""

from __future__ import annotations

import glob
import logging
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import xarray as xr

from climnb.io.variables import canonicalize, known_names

__all__ = [
    "normalize",
    "open_dataset",
    "input_grid",
    "InputGrid",
    "expand_paths",
    "missing_message",
    "DIMS",
    "COORD_ALIASES",
]

log = logging.getLogger(__name__)

DIMS = ("time", "lat", "lon")
#: Names under which latitude, longitude and time are recognised, canonical first (after the
#: CF attributes, which are looked at first).
COORD_ALIASES = {
    "lat": ("lat", "latitude", "Latitude", "LAT", "nav_lat", "y_lat", "XLAT", "rlat"),
    "lon": ("lon", "longitude", "Longitude", "LON", "nav_lon", "x_lon", "XLONG", "rlon"),
    "time": ("time", "Time", "TIME", "valid_time", "t"),
}
_CF_KEYS = {"lat": "latitude", "lon": "longitude", "time": "time"}
#: Values of this magnitude or more are missing (CAM5's undeclared 1e36 fill).
FILL_LIMIT = 1e30
_FILL_LIMIT = FILL_LIMIT
_TOL_DEG = 1e-6  # coordinates closer than this are the same (reanalysis rounding)


def _coord_names(ds: xr.Dataset) -> dict[str, str]:
    """The file's names of latitude, longitude and time: CF attributes first, then names."""
    import cf_xarray  # noqa: F401  (registers the .cf accessor)

    try:
        cf = ds.cf.coordinates
    except Exception:  # cf-xarray cannot read some attribute combinations
        cf = {}
    names = set(ds.dims) | set(ds.coords)
    found = {}
    for canonical, aliases in COORD_ALIASES.items():
        cands = [c for c in cf.get(_CF_KEYS[canonical], []) if c in names]
        cands += [a for a in aliases if a in names]
        if cands:
            found[canonical] = str(cands[0])
    return found


def _rename(ds: xr.Dataset) -> xr.Dataset:
    names = _coord_names(ds)
    for dim in ("lat", "lon"):
        name = names.get(dim)
        if name is not None and ds[name].ndim > 1:
            raise ValueError(
                f"{_CF_KEYS[dim]} {name!r} is 2-D {tuple(map(str, ds[name].dims))}: a curvilinear "
                "grid; climnb needs a regular latitude/longitude grid: regrid first (for "
                "example with xESMF or cdo remapbil)"
            )
    mapping = {v: k for k, v in names.items() if v != k}
    clash = [k for k, v in names.items() if v != k and k in (set(ds.dims) | set(ds.variables))]
    if clash:
        ds = ds.drop_vars([c for c in clash if c in ds.variables])
    return ds.rename(mapping) if mapping else ds


def _require_coords(ds: xr.Dataset) -> None:
    for dim in ("lat", "lon"):
        if dim not in ds.dims:
            raise ValueError(
                f"no {dim} dimension: looked for CF standard_name/units/axis and the names "
                f"{', '.join(COORD_ALIASES[dim])}; found dimensions "
                f"{sorted(map(str, ds.dims))} and coordinates {sorted(map(str, ds.coords))}"
            )
        if dim not in ds.coords:
            raise ValueError(f"dimension {dim!r} has no coordinate values (degrees) in the data")


def normalize(
    ds: xr.Dataset,
    *,
    required: Iterable[str] | None = None,
    variables: Mapping[str, str] | None = None,
    mask_fill: bool = True,
) -> xr.Dataset:
    """Return ``ds`` on the canonical grid and names, checking that ``required`` variables exist.

    Parameters
    ----------
    ds : a Dataset with latitude, longitude and (optionally) time, in any naming that
        :mod:`climnb.io.variables` knows.
    required : climnb names of variables that must be present with dimensions (time, lat, lon)
        (extra dimensions of length 1, such as a single level, are dropped).
    variables : extra mapping from the file's variable names to climnb's.
    mask_fill : make values of magnitude :data:`FILL_LIMIT` or more NaN in the ``required``
        variables (a lazy pass over each); False leaves them for a caller that treats them as
        missing itself (the labeller does, in the same pass as NaN).

    Raises
    ------
    ValueError
        Naming the missing variables, coordinates or the wrong dimensions, what was found and
        how to map it.
    """
    if not isinstance(ds, xr.Dataset):
        raise ValueError(f"expected an xarray.Dataset, got {type(ds).__name__}")
    ds = _rename(ds)
    _require_coords(ds)
    ds, _ = canonicalize(ds, variables)
    required = list(required or [])
    missing = [v for v in required if v not in ds.data_vars]
    if missing:
        raise ValueError(missing_message(missing, ds))
    if "time" not in ds.dims:
        ds = ds.expand_dims("time")
    for name in required:
        ds[name] = _canonical_var(ds[name], name, mask_fill)
    ds = _fix_lon(ds)
    if ds.lat.size > 1 and ds.lat.values[0] > ds.lat.values[-1]:
        ds = ds.isel(lat=slice(None, None, -1))
    if np.any(np.diff(ds.lat.values) <= 0):
        raise ValueError("latitudes must be strictly monotonic")
    return ds


def missing_message(missing: Sequence[str], ds: xr.Dataset) -> str:
    """Say which variables are missing, under which names they are looked for, what was found
    and how to map a variable of another name."""
    looked = "; ".join(f"{m} as {', '.join(known_names(m))}" for m in missing)
    found = ", ".join(map(str, ds.data_vars)) or "no variables"
    return (
        f"missing variable(s) {', '.join(missing)} (looked for {looked}); found {found}; map "
        "a variable of another name with --rename NAME=TARGET (variables={'NAME': 'TARGET'})"
    )


def _canonical_var(da: xr.DataArray, name: str, mask_fill: bool = True) -> xr.DataArray:
    extra = [d for d in da.dims if d not in DIMS]
    squeezable = [d for d in extra if da.sizes[d] == 1]
    if len(squeezable) < len(extra) or not {"lat", "lon"} <= set(da.dims):
        raise ValueError(
            f"variable {name} has dimensions {dict(da.sizes)}; expected (time, lat, lon) "
            "(extra dimensions only of length 1)"
        )
    if not np.issubdtype(da.dtype, np.number):
        raise ValueError(
            f"variable {name} has dtype {da.dtype}; expected numbers (floating point or integer)"
        )
    da = da.squeeze(squeezable, drop=True)
    if "time" not in da.dims:
        da = da.expand_dims("time")
    da = da.transpose(*DIMS)
    if mask_fill and np.issubdtype(da.dtype, np.floating):
        da = da.where(np.abs(da) < _FILL_LIMIT)
    return da


def _wrap_lon(lon: np.ndarray) -> np.ndarray:
    """Longitudes in [0, 360), with rounding just below 0 or 360 taken as 0."""
    wrapped = np.asarray(lon, dtype=float) % 360.0
    wrapped[np.isclose(wrapped, 360.0, rtol=0, atol=_TOL_DEG)] = 0.0
    return wrapped


def _fix_lon(ds: xr.Dataset) -> xr.Dataset:
    lon = ds.lon.values
    if lon.min() >= 0 and lon.max() < 360 and np.all(np.diff(lon) > 0):
        return ds
    wrapped = ds.assign_coords(lon=("lon", _wrap_lon(lon), ds.lon.attrs))
    wrapped = wrapped.sortby("lon")
    if np.any(np.diff(wrapped.lon.values) <= _TOL_DEG):
        raise ValueError("longitudes repeat after wrapping to 0..360 (is 360 given as well as 0?)")
    return wrapped


@dataclass(frozen=True)
class InputGrid:
    """A Dataset's own horizontal grid: coordinate names, values (in their order) and attributes.

    :meth:`restore` puts a result computed on the canonical grid back on it.
    """

    lat_name: str
    lon_name: str
    lat: np.ndarray
    lon: np.ndarray
    lat_attrs: dict
    lon_attrs: dict

    def restore(self, da):
        """``da`` (a DataArray or Dataset on the canonical grid) on this grid's values, order
        and names."""
        lat = da.lat.values
        rows = _match(lat, self.lat, "latitude")
        cols = _match(da.lon.values, _wrap_lon(self.lon), "longitude")
        out = da.isel(lat=rows, lon=cols)
        out = out.assign_coords(
            lat=("lat", self.lat, self.lat_attrs), lon=("lon", self.lon, self.lon_attrs)
        )
        return out.rename(
            {k: v for k, v in (("lat", self.lat_name), ("lon", self.lon_name)) if k != v}
        )


def _match(have: np.ndarray, want: np.ndarray, what: str) -> np.ndarray:
    """Index into ``have`` (ascending) of each value of ``want``, within rounding."""
    idx = np.clip(np.searchsorted(have, want), 0, have.size - 1)
    lower = np.clip(idx - 1, 0, have.size - 1)
    idx = np.where(np.abs(have[lower] - want) < np.abs(have[idx] - want), lower, idx)
    if not np.allclose(have[idx], want, rtol=0, atol=1e-4):
        raise ValueError(f"the result's {what}s do not match the input's")
    return idx


def input_grid(ds: xr.Dataset) -> InputGrid:
    """Remember the horizontal grid of ``ds`` as it comes (see :meth:`InputGrid.restore`)."""
    names = _coord_names(ds)
    _rename(ds)  # refuses curvilinear grids
    if "lat" not in names or "lon" not in names:
        _require_coords(ds.rename({v: k for k, v in names.items() if v != k}))
    lat, lon = ds[names["lat"]], ds[names["lon"]]
    return InputGrid(
        names["lat"], names["lon"], lat.values, lon.values, dict(lat.attrs), dict(lon.attrs)
    )


def expand_paths(paths: str | os.PathLike | Sequence[str | os.PathLike]) -> list[str]:
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


_ZARR_MARKERS = ("zarr.json", ".zgroup", ".zarray")


def is_zarr(path: str | os.PathLike) -> bool:
    """A Zarr store: a ``*.zarr`` path, or a directory holding Zarr metadata."""
    p = str(path)
    return p.rstrip("/").endswith(".zarr") or (
        os.path.isdir(p) and any(os.path.exists(os.path.join(p, m)) for m in _ZARR_MARKERS)
    )


def _open_one(path: str, chunks) -> xr.Dataset:
    zarr = is_zarr(path)
    if os.path.isdir(path) and not zarr:
        raise ValueError(f"{path}: is a directory, not a NetCDF file or Zarr store")
    try:
        # dask from the start (chunks={} keeps the file's own), so that the arrays' names come
        # from the path and modification time: the same file gives the same dask token in any
        # process, which resuming an interrupted `climnb samples` relies on
        if zarr:
            return xr.open_zarr(path, consolidated=False, chunks=chunks or {})
        ds = xr.open_dataset(path, chunks=chunks or {})
        time = _coord_names(ds).get("time")
        if chunks is None and time in ds.dims and _steps_apart(ds, time):
            # one dask chunk per step straight from the file (not the file's whole contiguous
            # variable split afterwards): each step is then read by a task of its own
            ds.close()
            ds = xr.open_dataset(path, chunks={time: 1})
        return ds
    except Exception as err:  # backends raise many kinds (OSError, ValueError, ...)
        kind = "a Zarr store" if zarr else "NetCDF"
        raise ValueError(
            f"{path}: cannot be read as {kind} ({type(err).__name__}: {str(err).split('.')[0]})"
        ) from None


def _steps_apart(ds: xr.Dataset, time: str) -> bool:
    """Whether one step of every variable along ``time`` can be read alone without reading
    more of the file: stored contiguously or in chunks of one step (compressed chunks of
    several steps are better read whole)."""
    for var in ds.data_vars.values():
        if time not in var.dims or ds.sizes[time] < 2:
            continue
        sizes = var.encoding.get("chunksizes")
        if not var.encoding.get("contiguous") and not (sizes and sizes[var.dims.index(time)] == 1):
            return False
    return True


def open_dataset(
    paths: str | os.PathLike | Sequence[str | os.PathLike],
    *,
    required: Iterable[str] | None = None,
    chunks: dict | None = None,
    variables: Mapping[str, str] | None = None,
    canonical: bool = True,
) -> xr.Dataset:
    """Open one or many NetCDF files lazily (dask) and :func:`normalize` them.

    Parameters
    ----------
    paths : a file, a glob pattern, or a list of them; several files are joined along time.
    required : variables that must be present (see :func:`normalize`).
    chunks : dask chunks; default one time step per chunk and whole lat/lon fields.
    variables : extra mapping from the files' variable names to climnb's.
    canonical : False returns the files joined along time as they are (names, grid, units),
        for callers that normalise later and want results on the input's own grid.

    Raises
    ------
    FileNotFoundError
        For a path that does not exist.
    ValueError
        For a file that is not NetCDF or lacks what is required, naming the file.
    """
    files = expand_paths(paths)
    parts = []
    for f in files:
        ds = _open_one(f, chunks)
        time = _coord_names(ds).get("time", "time")
        ds = ds.chunk(chunks or ({time: 1} if time in ds.dims else {}))
        try:
            part = normalize(ds, required=required, variables=variables)
        except ValueError as err:
            raise ValueError(f"{f}: {err}") from None
        parts.append(part if canonical else ds)
    log.info(
        "opened %d file(s), %d time steps", len(files), sum(p.sizes.get("time", 1) for p in parts)
    )
    if len(parts) == 1:
        return parts[0]
    dim = "time" if canonical else _coord_names(parts[0]).get("time", "time")
    return xr.concat(
        parts, dim=dim, data_vars="minimal", coords="minimal", compat="override", join="override"
    )
