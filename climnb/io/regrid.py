"""Projected and curvilinear grids (WRF, NAM) onto a regular latitude/longitude grid, on request.

climnb labels on a regular latitude/longitude grid. A file whose latitude and longitude are
2-D (a Lambert conformal NAM grid, a WRF domain, an ocean model's tripolar grid) is refused
unless a spacing is given (``--regrid DEG``, ``regrid=DEG``); then :func:`regrid_dataset` puts
every field with the grid's two dimensions on the regular grid of that spacing that covers the
input's box, and :class:`Curvilinear` puts results back on the input's own points.

Resampling uses pyresample (``kd_tree``: nearest neighbour, each regular cell takes the value of
the nearest input point within ``radius`` km, else NaN). pyresample installs from PyPI wheels
everywhere; xESMF (conservative and bilinear weights) needs the ESMF library, which only conda
provides, so it is not used. Nearest neighbour keeps each field's values (no smoothing of
pressure minima or vorticity maxima); at a spacing finer than the input's it repeats values.
The neighbour search runs once per grid; the resampling itself is a lazy index per time step.
The way back takes, for each input point, the regular cell that holds it (nearest centre).

Wind components on a projected grid are often relative to the grid (GRIB ``uvRelativeToGrid
= 1``, NAM): they are resampled as they are, not rotated to east/north; vorticity and wind
speed do not depend on the rotation, directions (the poleward transport of rivers) do.

Examples
--------
>>> import numpy as np, xarray as xr
>>> y, x = np.meshgrid(np.arange(5.0), np.arange(6.0), indexing="ij")
>>> ds = xr.Dataset({"PSL": (("y", "x"), 1e5 + x)},
...                 coords={"latitude": (("y", "x"), 30 + y + 0.1 * x),
...                         "longitude": (("y", "x"), 250 + x + 0.1 * y)})
>>> out = regrid_dataset(ds, 1.0, "latitude", "longitude")
>>> out.PSL.dims, out.sizes["lat"], out.sizes["lon"]
(('lat', 'lon'), 6, 7)
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import xarray as xr

__all__ = ["regrid_dataset", "target_grid", "Curvilinear"]

_KM_PER_DEG = 111.2


def target_grid(lat2d: np.ndarray, lon2d: np.ndarray, deg: float):
    """The regular latitudes and longitudes (ascending, spacing ``deg``) covering the points."""
    if not deg > 0:
        raise ValueError(f"--regrid takes a spacing in degrees above 0, got {deg}")
    lon2d = _unwrapped(lon2d)
    lat = np.arange(np.floor(np.nanmin(lat2d) / deg), np.ceil(np.nanmax(lat2d) / deg) + 1) * deg
    lon = np.arange(np.floor(np.nanmin(lon2d) / deg), np.ceil(np.nanmax(lon2d) / deg) + 1) * deg
    lat = lat[(lat >= -90) & (lat <= 90)]
    return lat, lon


def _unwrapped(lon2d: np.ndarray) -> np.ndarray:
    """Longitudes without a jump of 360 inside the domain (a domain across 0 or 180)."""
    lon = np.asarray(lon2d, float) % 360.0
    if np.nanmax(lon) - np.nanmin(lon) > 180.0:  # across 0: use -180..180
        lon = (lon + 180.0) % 360.0 - 180.0
    return lon


def _neighbours(lat2d, lon2d, lat, lon, radius_km: float) -> np.ndarray:
    """For each regular cell (flat), the flat index of its nearest input point, or -1."""
    from pyresample import geometry, kd_tree

    signed = (np.asarray(lon2d, float) + 180.0) % 360.0 - 180.0  # pyresample's convention
    src = geometry.SwathDefinition(lons=signed, lats=np.asarray(lat2d, float))
    lons, lats = np.meshgrid(lon, lat)
    dst = geometry.GridDefinition(lons=(lons + 180.0) % 360.0 - 180.0, lats=lats)
    valid_in, valid_out, index, _ = kd_tree.get_neighbour_info(
        src, dst, radius_of_influence=radius_km * 1e3, neighbours=1
    )
    inputs = np.flatnonzero(valid_in)
    out = np.full(lats.size, -1, np.int64)
    found = np.flatnonzero(valid_out)
    ok = index < inputs.size  # pyresample marks "none within the radius" by the input size
    out[found[ok]] = inputs[index[ok]]
    return out


def regrid_dataset(ds: xr.Dataset, deg: float, lat_name: str, lon_name: str) -> xr.Dataset:
    """The variables of ``ds`` with the 2-D grid's dimensions on a regular grid of ``deg``
    degrees (``lat``, ``lon``; nearest neighbour, lazily for dask arrays); others kept."""
    lat2d, lon2d = ds[lat_name], ds[lon_name]
    ydim, xdim = lat2d.dims
    lat, lon = target_grid(lat2d.values, lon2d.values, deg)
    spacing = _spacing_km(lat2d.values, lon2d.values)
    index = _neighbours(lat2d.values, lon2d.values, lat, lon, max(spacing, deg * _KM_PER_DEG))
    missing = index < 0
    take = np.where(missing, 0, index)
    shape = (lat.size, lon.size)

    def resample(block: np.ndarray) -> np.ndarray:
        flat = block.reshape(*block.shape[:-2], -1)
        out = np.take(flat, take, axis=-1)
        if np.issubdtype(out.dtype, np.floating):
            out[..., missing] = np.nan
        return out.reshape(*block.shape[:-2], *shape)

    grid_vars = {}
    for name, var in ds.data_vars.items():
        if {ydim, xdim} <= set(var.dims):
            var = var.transpose(..., ydim, xdim)
            if np.issubdtype(var.dtype, np.integer):
                var = var.astype(np.float32)
            grid_vars[name] = xr.apply_ufunc(
                resample,
                var,
                input_core_dims=[[ydim, xdim]],
                output_core_dims=[["lat", "lon"]],
                dask="parallelized",
                output_dtypes=[var.dtype],
                dask_gufunc_kwargs={"output_sizes": {"lat": lat.size, "lon": lon.size}},
                keep_attrs=True,
            )
    rest = ds.drop_vars([*grid_vars, lat_name, lon_name]).drop_dims([ydim, xdim], errors="ignore")
    attrs_lat = {"standard_name": "latitude", "units": "degrees_north"}
    attrs_lon = {"standard_name": "longitude", "units": "degrees_east"}
    out = xr.Dataset(grid_vars, attrs=ds.attrs).assign_coords(
        lat=("lat", lat, attrs_lat), lon=("lon", lon, attrs_lon)
    )
    return xr.merge([rest, out], compat="override")


def _spacing_km(lat2d: np.ndarray, lon2d: np.ndarray) -> float:
    """The input's largest spacing between neighbours (km), for the search radius."""
    lat, lon = np.radians(lat2d), np.radians(_unwrapped(lon2d))
    dy = np.hypot(np.diff(lat, axis=0), np.diff(lon, axis=0) * np.cos(lat[1:]))
    dx = np.hypot(np.diff(lat, axis=1), np.diff(lon, axis=1) * np.cos(lat[:, 1:]))
    return float(max(np.nanmax(dy), np.nanmax(dx)) * 6371.0)


@dataclass(frozen=True)
class Curvilinear:
    """A 2-D grid as it comes: its coordinates (names, values, attributes) and dimensions."""

    lat_name: str
    lon_name: str
    lat: np.ndarray
    lon: np.ndarray
    dims: tuple[str, str]
    lat_attrs: dict
    lon_attrs: dict

    def restore(self, da):
        """``da`` (canonical ``lat``/``lon``) at this grid's points: the cell holding each."""
        rows = _nearest(da.lat.values, self.lat)
        cols = _nearest_lon(da.lon.values, self.lon)
        out = da.isel(
            lat=xr.DataArray(rows, dims=self.dims), lon=xr.DataArray(cols, dims=self.dims)
        ).drop_vars(["lat", "lon"])
        return out.assign_coords(
            {
                self.lat_name: (self.dims, self.lat, self.lat_attrs),
                self.lon_name: (self.dims, self.lon, self.lon_attrs),
            }
        )


def _nearest(have: np.ndarray, want: np.ndarray) -> np.ndarray:
    idx = np.clip(np.searchsorted(have, want), 1, have.size - 1)
    lower = idx - 1
    return np.where(np.abs(have[lower] - want) <= np.abs(have[idx] - want), lower, idx)


def _nearest_lon(have: np.ndarray, want: np.ndarray) -> np.ndarray:
    diff = np.abs((want[..., None] % 360.0) - (have % 360.0))
    return np.argmin(np.minimum(diff, 360.0 - diff), axis=-1)
