"""Open NetCDF files as they come and put them on climnb's canonical grid and names.

Canonical form: dimensions ``(time, lat, lon)``, latitude ascending (-90..90), longitude in
0..360 ascending, missing values as NaN, variables under climnb's (CAM5's) names in the
channels' units. :func:`normalize` brings a Dataset there and checks it; :func:`open_fields`
opens one or many files lazily (dask, as many whole time steps a chunk as fit
:data:`CHUNK_BYTES`); :func:`input_grid` remembers a Dataset's own grid so that results can be
put back on it (:meth:`InputGrid.restore`).

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

import errno
import glob
import logging
import math
import os
import re
import warnings
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import xarray as xr

from climnb.io.grib import is_grib, open_grib
from climnb.io.regrid import Curvilinear, regrid_dataset
from climnb.io.variables import canonicalize, known_names
from climnb.io.zarrstore import ZarrStoreError, check_store, guard_reads, is_zarr

__all__ = [
    "normalize",
    "open_fields",
    "input_grid",
    "InputGrid",
    "expand_paths",
    "coord_names",
    "time_steps",
    "time_chunk",
    "CHUNK_BYTES",
    "missing_message",
    "is_zarr",
    "DIMS",
    "LAT_ATTRS",
    "LON_ATTRS",
    "COORD_ALIASES",
]

log = logging.getLogger(__name__)

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
_CF_KEYS = {"lat": "latitude", "lon": "longitude", "time": "time"}
#: Values of this magnitude or more are missing (CAM5's undeclared 1e36 fill).
FILL_LIMIT = 1e30
_FILL_LIMIT = FILL_LIMIT
_TOL_DEG = 1e-6  # coordinates closer than this are the same (reanalysis rounding)
#: The most bytes of one variable's dask chunk that :func:`open_fields` makes by default: it
#: puts as many whole time steps in a chunk as fit (at least one). A full-size CAM5 field
#: (768 x 1152 float32, 3.4 MiB a step) stays at one step a chunk, which each label task then
#: reads alone (:class:`climnb.labels.dataset.StepInputs`); a toy field (96 x 144, 54 KiB a
#: step) gets some 70 steps a chunk, where one step a chunk cost dask's overhead per task
#: thousands of times (notebook 01 saving its 480 toy steps: 11-15 s -> about 1 s).
CHUNK_BYTES = 4 * 2**20


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
        cands = [c for c in cf.get(_CF_KEYS[canonical], []) if c in names]
        cands += [a for a in aliases if a in names]
        cands.sort(key=lambda c: c not in ds.dims)  # a dimension first (GRIB: time, not valid_time)
        if cands:
            found[canonical] = str(cands[0])
    return found


def time_steps(ds: xr.Dataset | xr.DataArray) -> int:
    """The number of time steps of ``ds`` (1 without a time dimension), whatever its name."""
    name = coord_names(ds).get("time")
    return int(ds.sizes[name]) if name in ds.dims else 1


def time_chunk(ds: xr.Dataset, time: str = "time", target: int | None = None) -> int:
    """Time steps per dask chunk for ``ds``: as many whole steps as fit ``target`` bytes
    (default :data:`CHUNK_BYTES`) in its largest variable along ``time`` (at least 1), evened
    out over the series (480 steps of up to 75 a chunk: 7 chunks of 69 or fewer, not 6 of 75
    and one of 30). Reads no data.

    Examples
    --------
    >>> import numpy as np, xarray as xr
    >>> toy = xr.Dataset({"TMQ": (("time", "lat", "lon"), np.zeros((480, 96, 144), "f4"))})
    >>> time_chunk(toy), time_chunk(toy.isel(lat=slice(0, 1), lon=slice(0, 1)))
    (69, 480)
    """
    n = int(ds.sizes.get(time, 0))
    step = max(  # from the shape and type: no backend is asked (or read)
        (v.size // n * v.dtype.itemsize for v in ds.data_vars.values() if time in v.dims and n),
        default=0,
    )
    if n < 2 or step == 0:
        return max(n, 1)
    fit = min(max((CHUNK_BYTES if target is None else target) // step, 1), n)
    return math.ceil(n / math.ceil(n / fit))  # the same steps in as few chunks, evened out


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


def expand_paths(paths: str | os.PathLike | Sequence[str | os.PathLike]) -> list[str]:
    """Input paths with globs expanded (sorted).

    Raises
    ------
    FileNotFoundError
        Naming a path that does not exist, a glob that matches nothing, a broken symbolic
        link (and where it points) or a loop of symbolic links.
    """
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    out = []
    for p in map(str, paths):
        matches = sorted(glob.glob(p)) if glob.has_magic(p) else [p]
        if not matches:
            raise FileNotFoundError(f"no such file: {p}")
        for m in matches:
            _check_exists(m)
        out += matches
    if not out:
        raise FileNotFoundError("no input files given")
    return out


def _check_exists(path: str) -> None:
    """Refuse a path that cannot be opened, saying why: missing, a broken link, a loop."""
    try:
        os.stat(path)
    except OSError as err:
        if err.errno == errno.ELOOP:
            raise FileNotFoundError(
                f"{path}: a loop of symbolic links (it never reaches a file); fix the link"
            ) from None
        if os.path.islink(path):
            raise FileNotFoundError(
                f"{path}: a broken symbolic link (to {os.readlink(path)}, which does not exist)"
            ) from None
        if err.errno == errno.ENOENT:
            raise FileNotFoundError(f"no such file: {path}") from None
        raise OSError(err.errno, err.strerror, path) from None


def _check_utf8(path: str) -> None:
    """Refuse a NetCDF file whose name is not UTF-8, which the NetCDF library takes names as
    (it would be called unreadable), saying how to rename it."""
    try:
        path.encode("utf-8")
    except UnicodeEncodeError:
        shown = str(os.fsencode(path))[2:-1]  # its bytes, the undecodable ones as \xNN
        raise ValueError(
            f"{shown}: the file name is not UTF-8 (Latin-1 or another encoding?), which the "
            "NetCDF library cannot open; rename it with a UTF-8 name (convmv -f latin1 -t "
            "utf8 --notest NAME)"
        ) from None


def _open_one(path: str, chunks) -> xr.Dataset:
    zarr = is_zarr(path)
    if os.path.isdir(path) and not zarr:
        raise ValueError(f"{path}: is a directory, not a NetCDF file or Zarr store")
    if not zarr and is_grib(path):
        try:
            return open_grib(path, chunks)
        except ImportError:
            raise
        except Exception as err:  # ecCodes raises many kinds
            raise ValueError(
                f"{path}: cannot be read as GRIB ({type(err).__name__}: {_gist(err)})"
            ) from None
    if zarr and os.path.isdir(path):
        _check_zarr(path)
    if not zarr:
        _check_utf8(path)
    try:
        # dask from the start (chunks={} keeps the file's own), so that the arrays' names come
        # from the path and modification time: the same file gives the same dask token in any
        # process, which resuming an interrupted `climnb samples` relies on
        if zarr:  # a chunk whose bytes are damaged is named when it is read
            return guard_reads(xr.open_zarr(path, consolidated=False, chunks=chunks or {}), path)
        # the engine named: guessing it loads every backend, cfgrib's imports ecCodes (~0.2 s)
        ds = xr.open_dataset(path, chunks={}, engine="netcdf4")
        time = coord_names(ds).get("time")
        if time in ds.dims and _steps_apart(ds, time):
            # the chunks straight from the file (not the file's whole contiguous variable split
            # afterwards): each chunk of steps is then read by a task of its own; stored chunks
            # of several steps are read whole and split or joined by open_fields
            wanted = chunks or {time: time_chunk(ds, time)}
            ds.close()
            ds = xr.open_dataset(path, chunks=wanted, engine="netcdf4")
        return ds
    except Exception as err:  # backends raise many kinds (OSError, ValueError, ...)
        kind = "a Zarr store" if zarr else "NetCDF"
        raise ValueError(
            f"{path}: cannot be read as {kind} ({type(err).__name__}: {_gist(err)})"
        ) from None


def _gist(err: BaseException) -> str:
    """The first sentence of an error's first line (a path's dots do not end it)."""
    lines = str(err).strip().splitlines()
    return re.split(r"\.(?:\s|$)", lines[0] if lines else "")[0] if lines else ""


def _check_zarr(path: str) -> None:
    """Refuse a store that lacks a chunk or a variable's metadata (read as zeros or skipped
    otherwise); a store that cannot be read at all is left to the opener's message."""
    try:
        check_store(path)
    except ZarrStoreError:  # names the store, the variable and what is missing
        raise
    except Exception:  # noqa: BLE001 - zarr's own errors: the opener below names them
        return


def _steps_apart(ds: xr.Dataset, time: str) -> bool:
    """Whether any steps of every variable along ``time`` can be read alone without reading
    more of the file: stored contiguously or in chunks of one step (compressed chunks of
    several steps are better read whole)."""
    for var in ds.data_vars.values():
        if time not in var.dims or ds.sizes[time] < 2:
            continue
        sizes = var.encoding.get("chunksizes")
        if not var.encoding.get("contiguous") and not (sizes and sizes[var.dims.index(time)] == 1):
            return False
    return True


def open_fields(
    paths: str | os.PathLike | Sequence[str | os.PathLike],
    *,
    required: Iterable[str] | None = None,
    chunks: dict | None = None,
    variables: Mapping[str, str] | None = None,
    units: Mapping[str, str] | None = None,
    canonical: bool = True,
    regrid: float | None = None,
) -> xr.Dataset:
    """Open one or many NetCDF files, Zarr stores or GRIB files lazily (dask) and
    :func:`normalize` them.

    Parameters
    ----------
    paths : a file, a glob pattern, or a list of them; several files are joined along time.
        They must share one grid (within 1e-6 degrees) and must not repeat a time.
    required : variables that must be present (see :func:`normalize`).
    chunks : dask chunks, e.g. ``{"time": 1}``; default whole lat/lon fields and as many whole
        time steps a chunk as fit :data:`CHUNK_BYTES` in the largest variable
        (:func:`time_chunk`): one step of a full-size 768 x 1152 field, tens of steps of a toy
        one. Stored chunks of several steps (compressed) are read whole, then split or joined.
    variables : extra mapping from the files' variable names to climnb's.
    units : units to take instead of the files' ``units`` attributes (see :func:`normalize`).
    canonical : False returns the files joined along time as they are (names, grid, units),
        for callers that normalise later and want results on the input's own grid.
    regrid : the spacing (degrees) a projected or curvilinear grid is put on (see
        :func:`normalize`).

    Raises
    ------
    FileNotFoundError
        For a path that does not exist.
    ValueError
        For a file that cannot be read or lacks what is required, naming the file; for files
        whose grids differ or whose times repeat, naming both files.
    """
    files = expand_paths(paths)
    parts = []
    for f in files:
        ds = _open_one(f, chunks)
        time = coord_names(ds).get("time", "time")
        ds = ds.chunk(chunks or ({time: time_chunk(ds, time)} if time in ds.dims else {}))
        try:
            part = normalize(ds, required=required, variables=variables, units=units, regrid=regrid)
        except ValueError as err:
            raise ValueError(f"{f}: {err}") from None
        _check_repeats(f, part)
        parts.append((f, part, ds))
    if len(parts) > 1:  # in time order, whatever the files' names
        _check_same_variables([(f, part) for f, part, _ in parts])
        parts.sort(key=lambda p: p[1].time.values[0] if p[1].sizes["time"] else 0)
        _check_joinable([(f, part) for f, part, _ in parts])
    log.info(
        "opened %d file(s), %d time steps",
        len(files),
        sum(part.sizes["time"] for _, part, _ in parts),
    )
    chosen = [part if canonical else raw for _, part, raw in parts]
    if len(chosen) == 1:
        return chosen[0]
    dim = "time" if canonical else coord_names(chosen[0]).get("time", "time")
    return xr.concat(
        chosen, dim=dim, data_vars="minimal", coords="minimal", compat="override", join="override"
    )


def _check_same_variables(parts: Sequence[tuple[str, xr.Dataset]]) -> None:
    """Refuse files (canonical) of which one lacks a variable along time that another holds:
    joined, its steps would hold no values of it (missing, not a field of another file)."""
    bounds = {
        str(v.attrs["bounds"])
        for _, ds in parts
        for v in ds.variables.values()
        if "bounds" in v.attrs
    }

    def fields(ds):  # the variables along time, not the coordinates' cell bounds
        return {n for n, v in ds.data_vars.items() if "time" in v.dims and n not in bounds}

    held = [(f, fields(ds)) for f, ds in parts]
    every = set().union(*(names for _, names in held))
    for f, names in held:
        lacking = sorted(every - names)
        if lacking:
            other = next(g for g, n in held if lacking[0] in n)
            raise ValueError(
                f"{f}: lacks variable(s) {', '.join(lacking)}, which {other} holds: files "
                "joined along time must hold the same variables; give the missing variable "
                "or leave the file out"
            )


def _check_joinable(parts: Sequence[tuple[str, xr.Dataset]]) -> None:
    """Refuse files (canonical) whose grids differ or whose times repeat or go back."""
    first, ref = parts[0]
    for f, ds in parts[1:]:
        for dim in ("lat", "lon"):
            a, b = ref[dim].values, ds[dim].values
            if a.shape != b.shape:
                raise ValueError(
                    f"{f}: its grid differs from that of {first}: {ds.sizes[dim]} "
                    f"{_CF_KEYS[dim]}s instead of {ref.sizes[dim]}; regrid one of them first"
                )
            bad = np.flatnonzero(~np.isclose(a, b, rtol=0, atol=_TOL_DEG))
            if bad.size:
                raise ValueError(
                    f"{f}: its grid differs from that of {first}: {_CF_KEYS[dim]} "
                    f"{b[bad[0]]:g} instead of {a[bad[0]]:g} (index {bad[0]}); regrid one of "
                    "them first"
                )
    seen: dict = {}
    last = None
    for f, ds in parts:
        if "time" not in ds.coords:  # no times (steps joined in file order): nothing to repeat
            continue
        times = ds.time.values
        for t in times:
            if t in seen:
                raise ValueError(
                    f"{f}: time {_fmt_time(t)} is also in {seen[t]}; give each time once "
                    "(leave out the overlapping file)"
                )
        if last is not None and times.size and times[0] < last[1]:
            raise ValueError(
                f"{f}: its times ({_fmt_time(times[0])} on) overlap those of {last[0]} (to "
                f"{_fmt_time(last[1])}); give each time once"
            )
        seen.update(dict.fromkeys(list(times), f))
        if times.size:
            last = (f, times[-1])


def _check_repeats(f: str, ds: xr.Dataset) -> None:
    """Refuse a file (canonical) that holds a time twice, naming it, the time and the steps."""
    if "time" not in ds.coords:
        return
    first: dict = {}
    for i, t in enumerate(ds.time.values):
        j = first.setdefault(t, i)
        if j != i:
            raise ValueError(
                f"{f}: time {_fmt_time(t)} is repeated (steps {j} and {i}): the same time "
                "twice; give each time once"
            )


def _fmt_time(t) -> str:
    return str(np.datetime_as_string(t, unit="m")) if isinstance(t, np.datetime64) else str(t)


def __getattr__(name: str):
    if name == "open_dataset":  # the name before the one door (climnb.io.files)
        warnings.warn(
            "climnb.io.netcdf.open_dataset is now climnb.io.files.open_fields; import that",
            DeprecationWarning,
            stacklevel=2,
        )
        return open_fields
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
