"""climnb's canonical grid and names for a Dataset as it comes, and the way back to its own grid.

Canonical form: dimensions ``(time, lat, lon)``, latitude ascending (-90..90), longitude in
0..360 ascending, missing values as NaN, variables under climnb's (CAM5's) names in the
channels' units. :func:`normalize` brings a Dataset there and checks it; :func:`input_grid`
remembers a Dataset's own grid so that results can be put back on it
(:meth:`InputGrid.restore`). :mod:`climnb.io.netcdf` opens files and normalises them here.

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

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import xarray as xr

from climnb.io.regrid import Curvilinear, regrid_dataset
from climnb.io.variables import canonicalize, known_names

__all__ = [
    "normalize",
    "input_grid",
    "InputGrid",
    "coord_names",
    "time_steps",
    "missing_message",
    "CF_KEYS",
    "COORD_ALIASES",
    "DIMS",
    "FILL_LIMIT",
    "LAT_ATTRS",
    "LON_ATTRS",
    "TOL_DEG",
]

DIMS = ("time", "lat", "lon")
#: CF attributes of the latitude and longitude coordinates (results get them where the input's
#: coordinates have none).
LAT_ATTRS = {"standard_name": "latitude", "long_name": "latitude", "units": "degrees_north"}
LON_ATTRS = {"standard_name": "longitude", "long_name": "longitude", "units": "degrees_east"}
#: Names under which latitude, longitude and time are recognised, canonical first (after the
#: CF attributes, which are looked at first).
COORD_ALIASES = {
    "lat": ("lat", "latitude", "Latitude", "LAT", "nav_lat", "y_lat", "XLAT", "rlat"),
    "lon": ("lon", "longitude", "Longitude", "LON", "nav_lon", "x_lon", "XLONG", "rlon"),
    "time": ("time", "Time", "TIME", "valid_time", "t"),
}
#: The cf-xarray coordinate keys of latitude, longitude and time (also their words in messages).
CF_KEYS = {"lat": "latitude", "lon": "longitude", "time": "time"}
#: Values of this magnitude or more are missing (CAM5's undeclared 1e36 fill).
FILL_LIMIT = 1e30
_FILL_LIMIT = FILL_LIMIT
#: Coordinates closer than this (degrees) are the same (reanalysis rounding).
TOL_DEG = 1e-6


def coord_names(ds: xr.Dataset | xr.DataArray) -> dict[str, str]:
    """The names of latitude, longitude and time in ``ds`` (those it has), by CF attributes
    (``standard_name``, ``units``, ``axis``, through cf-xarray) first, then by name
    (:data:`COORD_ALIASES`): ``{"lat": "latitude", "lon": "longitude", "time": "valid_time"}``.
    """
    import cf_xarray  # noqa: F401  (registers the .cf accessor)

    try:
        cf = ds.cf.coordinates
    except Exception:  # cf-xarray cannot read some attribute combinations
        cf = {}
    names = set(ds.dims) | set(ds.coords)
    found = {}
    for canonical, aliases in COORD_ALIASES.items():
        cands = [c for c in cf.get(CF_KEYS[canonical], []) if c in names]
        cands += [a for a in aliases if a in names]
        cands.sort(key=lambda c: c not in ds.dims)  # a dimension first (GRIB: time, not valid_time)
        if cands:
            found[canonical] = str(cands[0])
    return found


def time_steps(ds: xr.Dataset | xr.DataArray) -> int:
    """The number of time steps of ``ds`` (1 without a time dimension), whatever its name."""
    name = coord_names(ds).get("time")
    return int(ds.sizes[name]) if name in ds.dims else 1


def _curvilinear(ds: xr.Dataset, names: Mapping[str, str]) -> bool:
    """Whether the latitude or longitude of ``ds`` is 2-D (a projected or curvilinear grid)."""
    return any(names.get(d) is not None and ds[names[d]].ndim > 1 for d in ("lat", "lon"))


def _refuse_2d(ds: xr.Dataset, names: Mapping[str, str], regrid: float | None) -> None:
    """Refuse a 2-D grid unless it is to be regridded, naming the option that does it."""
    if regrid is not None:
        return
    name = names["lat"] if ds[names["lat"]].ndim > 1 else names["lon"]
    raise ValueError(
        f"{'latitude' if name == names['lat'] else 'longitude'} {name!r} is 2-D "
        f"{tuple(map(str, ds[name].dims))}: a projected or curvilinear grid; give "
        "--regrid DEG (regrid=DEG) to label on a regular grid of DEG degrees, with the "
        "results put back on this grid"
    )


def _rename(ds: xr.Dataset, regrid: float | None = None) -> xr.Dataset:
    names = coord_names(ds)
    if _curvilinear(ds, names):
        _refuse_2d(ds, names, regrid)
        ds = regrid_dataset(ds, regrid, names["lat"], names["lon"])
        names = {**names, "lat": "lat", "lon": "lon"}
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
    units: Mapping[str, str] | None = None,
    regrid: float | None = None,
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
    units : units to take instead of a variable's ``units`` attribute, by the file's name or
        climnb's (``{"IVT": "kg m-1 s-1"}``, ``--units IVT=kg m-1 s-1``).
    regrid : for a projected or curvilinear grid (2-D latitude and longitude), the spacing
        (degrees) of the regular grid its fields are put on (:mod:`climnb.io.regrid`); such a
        grid is refused without it.

    Raises
    ------
    ValueError
        Naming the missing variables, coordinates or the wrong dimensions, what was found and
        how to map it.
    """
    if not isinstance(ds, xr.Dataset):
        raise ValueError(f"expected an xarray.Dataset, got {type(ds).__name__}")
    ds = _rename(ds, regrid)
    _require_coords(ds)
    ds, _ = canonicalize(ds, variables, units)
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
        "a variable of another name with variables={'NAME': 'TARGET'} in Python (climnb "
        "label: --rename NAME=TARGET)"
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
    if da.dtype == np.float16:  # sums and products of its values overflow at 65504
        da = da.astype(np.float32)
    if mask_fill and np.issubdtype(da.dtype, np.floating):
        da = da.where(np.abs(da) < _FILL_LIMIT)
    return da


def _wrap_lon(lon: np.ndarray) -> np.ndarray:
    """Longitudes in [0, 360), with rounding just below 0 or 360 taken as 0."""
    wrapped = np.asarray(lon, dtype=float) % 360.0
    wrapped[np.isclose(wrapped, 360.0, rtol=0, atol=TOL_DEG)] = 0.0
    return wrapped


def _fix_lon(ds: xr.Dataset) -> xr.Dataset:
    lon = ds.lon.values
    if lon.min() >= 0 and lon.max() < 360 and np.all(np.diff(lon) > 0):
        return ds
    wrapped = ds.assign_coords(lon=("lon", _wrap_lon(lon), ds.lon.attrs))
    wrapped = wrapped.sortby("lon")
    if np.any(np.diff(wrapped.lon.values) <= TOL_DEG):
        raise ValueError("longitudes repeat after wrapping to 0..360 (is 360 given as well as 0?)")
    return wrapped


@dataclass(frozen=True)
class InputGrid:
    """A Dataset's own grid: coordinate names, values (in their order) and attributes, the
    name of its time coordinate, its order of dimensions and its scalar coordinates (ERA5's
    ``number`` and ``expver``, a picked level).

    :meth:`restore` puts a result computed on the canonical grid back on it.
    """

    lat_name: str
    lon_name: str
    lat: np.ndarray
    lon: np.ndarray
    lat_attrs: dict
    lon_attrs: dict
    time_name: str = "time"
    dims: tuple[str, ...] = ()
    scalars: dict = field(default_factory=dict)
    curvilinear: Curvilinear | None = None

    def restore(self, da):
        """``da`` (a DataArray or Dataset on the canonical grid) on this grid's values, order
        and names."""
        if self.curvilinear is not None:
            return self._finish(self.curvilinear.restore(da))
        lat = da.lat.values
        rows = _match(lat, self.lat, "latitude")
        cols = _match(da.lon.values, _wrap_lon(self.lon), "longitude")
        out = da.isel(lat=rows, lon=cols)
        out = out.assign_coords(
            lat=("lat", self.lat, {**LAT_ATTRS, **self.lat_attrs}),
            lon=("lon", self.lon, {**LON_ATTRS, **self.lon_attrs}),
        )
        names = (("lat", self.lat_name), ("lon", self.lon_name))
        return self._finish(out.rename({k: v for k, v in names if k != v}))

    def _finish(self, out):
        """The input's name of time, its scalar coordinates and its order of dimensions."""
        if self.time_name != "time" and "time" in out.dims:
            out = out.rename(time=self.time_name)
        out = out.assign_coords({k: xr.Variable((), v, a) for k, (v, a) in self.scalars.items()})
        order = [d for d in self.dims if d in out.dims]
        if len(order) == len(out.dims):
            out = out.transpose(*order)
        return out


def _match(have: np.ndarray, want: np.ndarray, what: str) -> np.ndarray:
    """Index into ``have`` (ascending) of each value of ``want``, within rounding."""
    idx = np.clip(np.searchsorted(have, want), 0, have.size - 1)
    lower = np.clip(idx - 1, 0, have.size - 1)
    idx = np.where(np.abs(have[lower] - want) < np.abs(have[idx] - want), lower, idx)
    if not np.allclose(have[idx], want, rtol=0, atol=1e-4):
        raise ValueError(f"the result's {what}s do not match the input's")
    return idx


def input_grid(ds: xr.Dataset, regrid: float | None = None) -> InputGrid:
    """Remember the grid of ``ds`` as it comes (see :meth:`InputGrid.restore`); a projected
    or curvilinear grid needs ``regrid`` (see :func:`normalize`)."""
    names = coord_names(ds)
    if "lat" in names and "lon" in names and _curvilinear(ds, names):
        _refuse_2d(ds, names, regrid)
    if "lat" not in names or "lon" not in names:
        _require_coords(ds.rename({v: k for k, v in names.items() if v != k}))
    lat, lon = ds[names["lat"]], ds[names["lon"]]
    curvilinear = None
    if _curvilinear(ds, names):
        curvilinear = Curvilinear(
            names["lat"],
            names["lon"],
            lat.values,
            lon.values,
            tuple(map(str, lat.dims)),
            dict(lat.attrs),
            dict(lon.attrs),
        )
    own = [names[k] for k in ("time", "lat", "lon") if k in names]
    own += list(curvilinear.dims) if curvilinear else []
    first = next((v for v in ds.data_vars.values() if _holds(v, own, curvilinear)), None)
    dims = tuple(str(d) for d in (first.dims if first is not None else own) if d in own)
    scalars = {
        str(k): (c.values, dict(c.attrs))
        for k, c in ds.coords.items()
        if c.ndim == 0 and k not in names.values()
    }
    return InputGrid(
        names["lat"],
        names["lon"],
        lat.values,
        lon.values,
        dict(lat.attrs),
        dict(lon.attrs),
        time_name=names.get("time", "time"),
        dims=dims,
        scalars=scalars,
        curvilinear=curvilinear,
    )


def _holds(var: xr.DataArray, own: list[str], curvilinear) -> bool:
    """Whether ``var`` spans the grid's dimensions (the 2-D grid's, or latitude and longitude)."""
    need = set(curvilinear.dims) if curvilinear else set(own[-2:])
    return need <= set(var.dims)
