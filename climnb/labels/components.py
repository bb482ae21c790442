"""Connected components on a latitude/longitude grid, joined across the 0/360 seam.

Labelling uses :func:`scipy.ndimage.label`: scipy is already a core dependency, its labeller is
compiled, well tested and fast (about 10 ms for a 768 x 1152 mask), and a single time step fits
in memory, so neither scikit-image (no periodic option either) nor dask-image (for arrays
larger than memory) would add anything. No labeller in those libraries knows that longitude is
periodic, so the seam is handled afterwards: labels that touch across the first and last
column (diagonally too, for 8-connectivity) are merged with a small union-find over the label
numbers, which costs O(rows) and leaves the labeller itself untouched. Components are never
joined across the poles.

:func:`measure` gives each component's great-circle area, centroid, length and width:

* area: the sum of exact spherical cell areas (Earth radius 6371 km);
* centroid: the area-weighted mean of the pixels' unit vectors, so it is right across the seam;
* length: the great-circle distance between the two pixels farthest apart, found by a double
  sweep (the pixel farthest from the centroid, then the pixel farthest from that one), which is
  exact for convex and elongated shapes and a close lower bound otherwise;
* width: area / length, the mean width of a long object.

Examples
--------
>>> import numpy as np
>>> mask = np.zeros((5, 8), bool)
>>> mask[2, :2] = mask[2, -2:] = True  # one band cut by the seam
>>> labels, n = label_components(mask)
>>> n, sorted(set(labels[2].tolist()))
(1, [0, 1])
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy import ndimage

from climnb.labels.sphere import cell_area_km2, great_circle_km

__all__ = ["label_components", "measure", "label_pixels", "label_max", "MEASURE_COLUMNS"]

MEASURE_COLUMNS = ("label", "n_pixels", "area_km2", "lat", "lon", "length_km", "width_km")

_STRUCTURES = {
    4: ndimage.generate_binary_structure(2, 1),
    8: ndimage.generate_binary_structure(2, 2),
}


def label_components(
    mask: np.ndarray, *, periodic: bool = True, connectivity: int = 8
) -> tuple[np.ndarray, int]:
    """Label the connected components of a 2-D (lat, lon) boolean mask.

    Parameters
    ----------
    mask : boolean array (lat, lon).
    periodic : join components across the first and last longitude column.
    connectivity : 8 (diagonal neighbours touch) or 4.

    Returns
    -------
    labels : int32 array, 0 for background and 1..n for the components.
    n : number of components.
    """
    if connectivity not in _STRUCTURES:
        raise ValueError(f"connectivity must be 4 or 8, got {connectivity!r}")
    if np.ndim(mask) != 2:
        raise ValueError(f"mask must be 2-D (lat, lon), got shape {np.shape(mask)}")
    labels, n = ndimage.label(mask, structure=_STRUCTURES[connectivity], output=np.int32)
    if periodic and n > 1:
        labels, n = _join_seam(labels, n, diagonal=connectivity == 8)
    return labels, n


def _join_seam(labels: np.ndarray, n: int, diagonal: bool) -> tuple[np.ndarray, int]:
    first, last = labels[:, 0], labels[:, -1]
    pairs = [(first, last)]
    if diagonal:
        pairs += [(first[1:], last[:-1]), (first[:-1], last[1:])]
    a = np.concatenate([p[0] for p in pairs])
    b = np.concatenate([p[1] for p in pairs])
    touch = (a > 0) & (b > 0) & (a != b)
    if not touch.any():
        return labels, n
    parent = np.arange(n + 1)

    def find(x):
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for x, y in set(zip(a[touch].tolist(), b[touch].tolist(), strict=True)):
        rx, ry = find(x), find(y)
        if rx != ry:
            parent[max(rx, ry)] = min(rx, ry)
    roots = np.array([find(x) for x in range(n + 1)])
    _, lut = np.unique(roots, return_inverse=True)  # 0 stays 0: it is its own, smallest root
    return lut.astype(np.int32)[labels], int(lut.max())


def measure(
    labels: np.ndarray,
    n: int,
    lat: np.ndarray,
    lon: np.ndarray,
    *,
    min_area_km2: float = 0.0,
    pixels: tuple[np.ndarray, np.ndarray] | None = None,
) -> pd.DataFrame:
    """Area, centroid, length and width of each component with area >= ``min_area_km2``.

    ``pixels`` may pass :func:`pixels` of ``labels`` when the caller has them already.
    Returns a DataFrame with the columns of :data:`MEASURE_COLUMNS` (one row per component,
    ordered by label; ``lon`` in 0..360).
    """
    if n == 0:
        return pd.DataFrame({c: pd.Series(dtype=float) for c in MEASURE_COLUMNS})
    lat = np.asarray(lat, dtype=float)
    lon = np.asarray(lon, dtype=float)
    where, idx = pixels if pixels is not None else label_pixels(labels)
    ncol = labels.shape[1]
    r = where // ncol
    w = cell_area_km2(lat, lon)[r]
    area = np.bincount(idx, weights=w, minlength=n + 1)
    count = np.bincount(idx, minlength=n + 1)
    keep = np.flatnonzero(area >= min_area_km2)
    keep = keep[(keep > 0) & (count[keep] > 0)]
    if keep.size < n:  # the shapes of the small components are not needed: leave them out
        sel = np.zeros(n + 1, bool)
        sel[keep] = True
        m = sel[idx]
        where, idx, r, w = where[m], idx[m], r[m], w[m]
    c = where - r * ncol
    # unit vectors from per-row and per-column tables (the same values as unit_vectors, with
    # the trigonometry done once per row and column rather than once per pixel)
    phi, lam = np.radians(lat), np.radians(lon)
    cp = np.cos(phi)
    xyz = np.stack([cp[r] * np.cos(lam)[c], cp[r] * np.sin(lam)[c], np.sin(phi)[r]], axis=-1)
    centre = np.stack(
        [np.bincount(idx, weights=w * xyz[:, k], minlength=n + 1) for k in range(3)], axis=1
    )
    clat = np.degrees(np.arctan2(centre[:, 2], np.hypot(centre[:, 0], centre[:, 1])))
    clon = np.degrees(np.arctan2(centre[:, 1], centre[:, 0])) % 360.0
    order = np.argsort(idx, kind="stable")
    bounds = np.searchsorted(idx[order], np.arange(n + 2))
    length = np.array(
        [_diameter(xyz[order[bounds[k] : bounds[k + 1]]], centre[k]) for k in keep], dtype=float
    )
    length_safe = np.maximum(length, np.sqrt(area[keep]))  # a single pixel is as long as wide
    return pd.DataFrame(
        {
            "label": keep,
            "n_pixels": count[keep],
            "area_km2": area[keep],
            "lat": clat[keep],
            "lon": clon[keep],
            "length_km": length_safe,
            "width_km": area[keep] / length_safe,
        }
    )


def label_pixels(labels: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Flat indices of the labelled pixels and their labels (one pass over the grid)."""
    flat = labels.ravel()
    where = np.flatnonzero(flat)
    return where, flat[where]


def label_max(values: np.ndarray, labels: np.ndarray, index: np.ndarray) -> np.ndarray:
    """Maximum of ``values`` over each component in ``index`` (NaN for an empty one).

    Touches only labelled pixels, so it is much faster than :func:`scipy.ndimage.maximum`
    (which sorts the whole grid) when components are a small part of it.
    """
    where = np.flatnonzero(labels)
    out = np.full(int(labels.max(initial=0)) + 1, -np.inf)
    np.maximum.at(out, labels.ravel()[where], values.ravel()[where].astype(float))
    out[~np.isfinite(out)] = np.nan
    return out[np.asarray(index, dtype=int)]


def _diameter(xyz: np.ndarray, centre: np.ndarray) -> float:
    """Great-circle distance (km) between the two points farthest apart (double sweep)."""
    if len(xyz) < 2:
        return 0.0
    a = xyz[np.argmin(xyz @ centre)]  # farthest from the centroid: smallest dot product
    dots = xyz @ a
    b = xyz[np.argmin(dots)]
    return float(great_circle_km(*_latlon(a), *_latlon(b)))


def _latlon(p: np.ndarray) -> tuple[float, float]:
    return float(np.degrees(np.arcsin(np.clip(p[2], -1, 1)))), float(
        np.degrees(np.arctan2(p[1], p[0]))
    )
