"""Geometry of a regular latitude/longitude grid on a spherical Earth.

Areas use the exact spherical cell area ``R^2 * dlon * (sin(lat_north) - sin(lat_south))`` with
cell edges half way between the grid latitudes (clipped at the poles), and
``EARTH_RADIUS_KM = 6371`` (the original label scripts had a 6170 km typo).

Examples
--------
>>> import numpy as np
>>> lat = np.linspace(-90, 90, 181)
>>> lon = np.arange(360.0)
>>> round(float(cell_area_km2(lat, lon).sum() * 360 / 4 / np.pi / EARTH_RADIUS_KM**2), 6)
1.0
"""

from __future__ import annotations

import numpy as np

__all__ = [
    "EARTH_RADIUS_KM",
    "cell_area_km2",
    "great_circle_km",
    "unit_vectors",
    "is_periodic",
    "lat_edges",
]

EARTH_RADIUS_KM = 6371.0


def lat_edges(lat: np.ndarray) -> np.ndarray:
    """Cell edges (degrees, ``len(lat) + 1``) half way between ascending latitudes."""
    lat = np.asarray(lat, dtype=float)
    mid = (lat[1:] + lat[:-1]) / 2
    first = lat[0] - (mid[0] - lat[0])
    last = lat[-1] + (lat[-1] - mid[-1])
    return np.clip(np.concatenate([[first], mid, [last]]), -90.0, 90.0)


def cell_area_km2(lat: np.ndarray, lon: np.ndarray) -> np.ndarray:
    """Area (km^2) of one grid cell in each latitude row; shape ``(len(lat),)``.

    The longitude spacing is taken as uniform, ``360 / len(lon)`` for a global grid.
    """
    dlon = np.radians(_lon_step(lon))
    edges = np.radians(lat_edges(lat))
    return EARTH_RADIUS_KM**2 * dlon * np.abs(np.diff(np.sin(edges)))


def great_circle_km(lat1, lon1, lat2, lon2):
    """Great-circle distance (km) between points given in degrees (haversine, broadcasts)."""
    p1, p2 = np.radians(lat1), np.radians(lat2)
    dl = np.radians(np.asarray(lon2) - np.asarray(lon1))
    h = np.sin((p2 - p1) / 2) ** 2 + np.cos(p1) * np.cos(p2) * np.sin(dl / 2) ** 2
    return 2 * EARTH_RADIUS_KM * np.arcsin(np.sqrt(np.clip(h, 0.0, 1.0)))


def unit_vectors(lat, lon) -> np.ndarray:
    """Cartesian unit vectors ``(..., 3)`` of points given in degrees."""
    phi, lam = np.radians(lat), np.radians(lon)
    cp = np.cos(phi)
    return np.stack([cp * np.cos(lam), cp * np.sin(lam), np.sin(phi)], axis=-1)


def is_periodic(lon: np.ndarray) -> bool:
    """True when evenly spaced longitudes go once round the globe (so the seam must wrap)."""
    lon = np.asarray(lon, dtype=float)
    if lon.size < 3:
        return False
    step = _lon_step(lon)
    return bool(abs(step * lon.size - 360.0) < 1e-3 * step)


def _lon_step(lon) -> float:
    lon = np.asarray(lon, dtype=float)
    return float((lon[-1] - lon[0]) / (lon.size - 1)) if lon.size > 1 else 360.0
