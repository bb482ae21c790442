"""Connected components on a latitude/longitude grid, joined across the 0/360 seam.

Small masks (an object's box) are labelled with :func:`scipy.ndimage.label`: scipy is already
a core dependency and its labeller is compiled and well tested; scikit-image's is slower here
and neither knows that longitude is periodic. Its cost is per grid point, though (about 2 ms
for a 768 x 1152 mask, however few of its points are set), so a large mask is labelled from
its runs (the pieces of a row that are all set; a few per cent of the grid for the
thresholds used here): runs of neighbouring rows that overlap are joined by
:func:`scipy.sparse.csgraph.connected_components`, and the components numbered in the order
of their first pixel, as :func:`scipy.ndimage.label` numbers them; a mask of many short runs
goes to :func:`scipy.ndimage.label`. Either way the labelled pixels come with the labels, so
that what follows touches only them. The seam is handled apart: labels that touch across the
first and last column (diagonally too, for 8-connectivity) are merged (a small union-find over
the label numbers after :func:`scipy.ndimage.label`; edges between the runs at either end of
a row otherwise). Components are never joined across the poles.

:func:`measure` gives each component's great-circle area, centroid, length and width:

* area: the sum of exact spherical cell areas (Earth radius 6371 km);
* centroid: the area-weighted mean of the pixels' unit vectors, so it is right across the seam;
* length: the great-circle distance between the two pixels farthest apart, found by a double
  sweep (the pixel farthest from the centroid, then the pixel farthest from that one), which is
  exact for convex and elongated shapes and a close lower bound otherwise;
* width: area / length, the mean width of a long object.

:func:`split_at_saddles` separates the objects of one mask that touch: each component is cut
into the basins of its independent maxima of a field (a marker-controlled watershed, flooded
level by level with :func:`scipy.ndimage.label` and :func:`scipy.ndimage.maximum_filter`,
periodic in longitude: :func:`scipy.ndimage.watershed_ift` gives other basins than a flooding
even on two parallel ridges, and scikit-image, whose watershed floods, is not a dependency),
with a one-pixel cut between basins so that labelling the mask again finds the same pieces.
A maximum is independent when its topographic prominence (its height above the highest
saddle that joins it to a higher maximum) is at least ``min_ratio`` of its height above the
component's lowest value, and the region above that saddle covers ``min_area_km2`` (IPART's
peak partition, Xu et al. 2020, GMD 13, 4639: ``single_dome`` with ``max_ph_ratio`` 0.6).
The saddles are read on ``levels`` equally spaced levels between each component's lowest
and highest value, from ``1 - min_ratio`` of its height down (a maximum joined higher up is
not independent).

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
from scipy import ndimage, sparse
from scipy.sparse import csgraph

from climnb.labels.sphere import cell_area_km2, great_circle_km

__all__ = [
    "label_components",
    "split_at_saddles",
    "measure",
    "label_pixels",
    "label_max",
    "MEASURE_COLUMNS",
]

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
    labels, n, _ = _label(mask, periodic, connectivity)
    return labels, n


def _label(mask, periodic: bool, connectivity: int, pixels: bool = False):
    """:func:`label_components`, and the labelled pixels (:func:`label_pixels`) when
    ``pixels`` (else None): from the runs of a large mask, they come at no cost."""
    if connectivity not in _STRUCTURES:
        raise ValueError(f"connectivity must be 4 or 8, got {connectivity!r}")
    if np.ndim(mask) != 2:
        raise ValueError(f"mask must be 2-D (lat, lon), got shape {np.shape(mask)}")
    if np.size(mask) >= _RUNS_FROM:
        out = _label_runs(mask, periodic, connectivity == 8)
        if out is not None:
            return out
    labels, n = ndimage.label(mask, structure=_STRUCTURES[connectivity], output=np.int32)
    if periodic and n > 1:
        labels, n = _join_seam(labels, n, diagonal=connectivity == 8)
    if not pixels:
        return labels, n, None
    where = np.flatnonzero(mask)  # the labelled pixels: faster than those of the labels
    return labels, n, (where, labels.ravel()[where])


#: The grid size from which :func:`_label_runs` labels a mask (below it,
#: :func:`scipy.ndimage.label`, whose cost per grid point is larger but whose cost per call
#: is smaller), and the most runs per grid point it takes on (a mask more broken than that
#: goes to :func:`scipy.ndimage.label`).
_RUNS_FROM, _RUNS_AT_MOST = 1 << 16, 1 / 32


def _label_runs(mask, periodic: bool, diagonal: bool):
    """What :func:`_label` gives, from the mask's runs (the pieces of a row that are all
    True) rather than from every grid point, or None for a mask of many short runs: runs in
    neighbouring rows that overlap (or touch diagonally, for 8-connectivity), and across the
    seam when ``periodic``, are joined by :func:`scipy.sparse.csgraph.connected_components`,
    and the components are numbered in the order of their first pixel, as
    :func:`scipy.ndimage.label` numbers them and as :func:`_join_seam` keeps them. Its cost
    grows with the mask's pixels, not the grid's."""
    mask = np.asarray(mask)
    nrow, ncol = mask.shape
    flat = np.flatnonzero(mask)  # raster order
    labels = np.zeros(mask.shape, np.int32)
    if flat.size == 0:
        return labels, 0, (flat, labels.ravel()[flat])
    row = flat // ncol
    col = flat - row * ncol
    start = np.ones(flat.size, bool)
    start[1:] = (flat[1:] != flat[:-1] + 1) | (col[1:] == 0)
    first = np.flatnonzero(start)
    if first.size > _RUNS_AT_MOST * mask.size:
        return None
    last = np.append(first[1:] - 1, flat.size - 1)
    r, c0, c1 = row[first], col[first], col[last]
    d = int(diagonal)
    # the runs of the next row that meet run k lie between lo[k] and hi[k] (runs are in
    # raster order, their starts and ends both increasing); a row's key leaves room for -1
    # and ncol
    width = ncol + 2
    k0, k1 = r * width + c0, r * width + c1
    lo = np.searchsorted(k1, (r + 1) * width + c0 - d, "left")
    hi = np.searchsorted(k0, (r + 1) * width + c1 + d, "right")
    count = np.maximum(hi - lo, 0)
    a = np.repeat(np.arange(first.size), count)
    b = np.repeat(lo - np.cumsum(count) + count, count) + np.arange(a.size)
    if periodic:
        ends = np.full(nrow + 2, -1)  # the run ending in the last column of each row
        starts = np.full(nrow + 2, -1)  # ... and starting in the first (rows shifted by one)
        ends[r[c1 == ncol - 1] + 1] = np.flatnonzero(c1 == ncol - 1)
        starts[r[c0 == 0] + 1] = np.flatnonzero(c0 == 0)
        for dr in range(-d, d + 1):
            e = ends[max(-dr, 0) + 1 : nrow + 1 - max(dr, 0)]
            s = starts[max(dr, 0) + 1 : nrow + 1 - max(-dr, 0)]
            both = (e >= 0) & (s >= 0)
            a, b = np.append(a, e[both]), np.append(b, s[both])
    graph = sparse.coo_matrix(
        (np.ones(a.size, bool), (a, b)), shape=(first.size, first.size)
    ).tocsr()
    n, component = csgraph.connected_components(graph, directed=False)
    # number the components in the order of their first run (raster order)
    _, head = np.unique(component, return_index=True)
    number = np.empty(n, np.int32)
    number[np.argsort(head, kind="stable")] = np.arange(1, n + 1, dtype=np.int32)
    idx = number[component][np.cumsum(start) - 1]
    labels.ravel()[flat] = idx
    return labels, n, (flat, idx)


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


def split_at_saddles(
    mask: np.ndarray,
    values: np.ndarray,
    lat: np.ndarray,
    lon: np.ndarray,
    *,
    min_ratio: float,
    min_area_km2: float = 0.0,
    levels: int = 16,
    periodic: bool = True,
    connectivity: int = 8,
    components: tuple[np.ndarray, int] | None = None,
) -> tuple[np.ndarray, int]:
    """Label the components of ``mask``, each cut into the basins of its independent maxima
    of ``values`` (see the module's docstring).

    Parameters
    ----------
    mask : boolean (lat, lon).
    values : the field whose maxima and saddles part the objects (lat, lon), finite on
        ``mask``.
    lat, lon : grid coordinates (degrees), for the areas.
    min_ratio : least prominence / height of an independent maximum (0..1); the highest
        maximum of a component is always independent.
    min_area_km2 : least area above its saddle of an independent maximum.
    levels : levels between a component's lowest and highest value the saddles are read on.
    periodic, connectivity : as :func:`label_components`.
    components : :func:`label_components` of ``mask`` where the caller has it already.

    Returns
    -------
    What :func:`label_components` returns, for the mask less the cuts between basins: a
    component with one independent maximum comes back whole.

    Examples
    --------
    Two ridges of 600 whose ends fall to 260, joined by a neck of 300, come apart; with a
    neck of 550 they stay one:

    >>> lat, lon = np.linspace(-90, 90, 73), np.arange(0, 360, 2.5)
    >>> values = np.zeros((73, 144))
    >>> values[50, 10:30] = values[54, 10:30] = 600.0
    >>> values[50, 10] = values[54, 10] = 260.0
    >>> values[51:54, 20] = 300.0
    >>> _, n = split_at_saddles(values > 250, values, lat, lon, min_ratio=0.6)
    >>> n
    2
    >>> values[51:54, 20] = 550.0
    >>> split_at_saddles(values > 250, values, lat, lon, min_ratio=0.6)[1]
    1
    """
    labels, n, _ = _split(
        mask,
        values,
        lat,
        lon,
        min_ratio=min_ratio,
        min_area_km2=min_area_km2,
        levels=levels,
        periodic=periodic,
        connectivity=connectivity,
        components=components,
    )
    return labels, n


def _split(
    mask,
    values,
    lat,
    lon,
    *,
    min_ratio,
    min_area_km2,
    levels,
    periodic,
    connectivity,
    components=None,
    pixels=None,
):
    """:func:`split_at_saddles`, and the labelled pixels of what it returns (``pixels``: those
    of ``components``, where the caller has them)."""
    if components is None:
        labels, n, pixels = _label(mask, periodic, connectivity, pixels=True)
    else:
        labels, n = components
    if pixels is None:
        pixels = label_pixels(labels)
    if n == 0:
        return labels, n, pixels
    values = np.asarray(values)
    structure = _STRUCTURES[connectivity]
    area = cell_area_km2(np.asarray(lat, float), np.asarray(lon, float))
    where, idx = pixels
    size = np.bincount(idx, weights=area[where // mask.shape[1]], minlength=n + 1)
    # two independent maxima need twice min_area_km2 above their saddles
    several = np.flatnonzero(size >= 2 * min_area_km2)
    several = several[several > 0]
    cut = np.zeros(mask.shape, bool)
    for k in several:
        inside = where[idx == k]
        r = np.arange(inside.min() // mask.shape[1], inside.max() // mask.shape[1] + 1)
        present = np.bincount(inside % mask.shape[1], minlength=mask.shape[1])
        c, wraps = _columns(np.flatnonzero(present), mask.shape[1], periodic)
        box = np.ix_(r, c)
        band = labels[box] == k
        v = np.where(band, values[box].astype(float), -np.inf)
        basins = _basins(band, v, area[r], min_ratio, min_area_km2, levels, wraps, structure)
        if basins is not None:
            cut[box] |= _cuts(basins, v, wraps, structure)
    if not cut.any():
        return labels, n, pixels
    return _label(mask & ~cut, periodic, connectivity, pixels=True)


def _columns(cols: np.ndarray, ncol: int, periodic: bool) -> tuple[np.ndarray, bool]:
    """The columns of the smallest box that holds an object whose pixels lie in the columns
    ``cols`` (ascending, of ``ncol``), in order, across the seam if it is shorter that way,
    and whether the box still wraps (an object all round the globe)."""
    if not periodic or cols.size == ncol:
        return np.arange(ncol), periodic
    gaps = np.diff(np.concatenate([cols, [cols[0] + ncol]]))
    widest = int(np.argmax(gaps))  # the object lies between the end of the widest gap ...
    start = cols[(widest + 1) % cols.size]
    span = ncol - int(gaps[widest]) + 1  # ... and its start, going round
    return (start + np.arange(span)) % ncol, False


def _basins(band, values, area, min_ratio, min_area_km2, levels, periodic, structure):
    """Watershed basins (int, 0 outside) of the independent maxima of one component ``band``
    (its box), or None when it has only one: from the maxima, the basins grow down the same
    levels; at each level a region that meets one basin joins it whole, and where a region
    meets several, its new pixels are taken by the basin next to them, step by step."""
    v = values[band]
    base, top = float(v.min()), float(v.max())
    if not top > base:
        return None
    seeds = _independent_maxima(
        band, values, area, base, top, min_ratio, min_area_km2, levels, periodic, structure
    )
    if len(seeds) < 2:
        return None
    basins = np.zeros(band.shape, np.int32)
    for i, rc in enumerate(seeds, start=1):
        basins[rc] = i
    mode = ("constant", "wrap" if periodic else "constant")
    connectivity = 8 if structure.all() else 4
    for j in range(levels - 1, -1, -1):
        if j == 0:  # the whole component, one region
            region, n = band.astype(np.int32), 1
        else:
            region, n = label_components(
                band & (values >= base + (top - base) * j / levels),
                periodic=periodic,
                connectivity=connectivity,
            )
        owner = np.zeros(n + 1, np.int64)  # the one basin a region meets; -1: several
        seen = basins > 0
        # the (region, basin) pairs met, in order (one key per pair: faster than axis=1)
        key = np.unique(region[seen].astype(np.int64) * (len(seeds) + 1) + basins[seen])
        pairs = np.stack([key // (len(seeds) + 1), key % (len(seeds) + 1)])
        pairs = pairs[:, pairs[0] > 0]  # a lower seed is not in this level's regions yet
        counts = np.bincount(pairs[0], minlength=n + 1)
        owner[pairs[0]] = pairs[1]
        owner[counts > 1] = -1
        one = (owner[region] > 0) & ~seen
        basins[one] = owner[region][one]
        contested = (owner[region] < 0) & (region > 0)
        while True:  # only from the region's own pixels (a lower seed lies outside it)
            near = ndimage.maximum_filter(
                np.where(region > 0, basins, 0), footprint=structure, mode=mode
            )
            new = contested & (basins == 0) & (near > 0)
            if not new.any():
                break
            basins[new] = near[new]
    return basins


def _independent_maxima(
    band, values, area, base, top, min_ratio, min_area_km2, levels, periodic, structure
):
    """(row, col) of the maxima of ``values`` on ``band`` whose prominence / height reaches
    ``min_ratio`` and whose region above their saddle covers ``min_area_km2``; the highest
    first. Saddles are read on the levels ``base + (top - base) * j / levels``."""
    height = top - base
    previous = None
    flat = np.flatnonzero(band)
    order = flat[np.argsort(values.ravel()[flat])[::-1]]  # the object's pixels, highest first
    alive = {}  # the peaks not yet joined to a higher one: (row, col) -> peak value
    found = []
    # a maximum joined above base + (1 - min_ratio) * height is not independent: start there
    for j in range(min(levels - 1, int(np.floor((1.0 - min_ratio) * levels))), -1, -1):
        level = base + height * j / levels
        if j == 0:  # the whole component, one region (every pixel is at least its base)
            above, n = band.astype(np.int32), 1
        else:
            above, n = label_components(
                band & (values >= level),
                periodic=periodic,
                connectivity=8 if structure.all() else 4,
            )
        groups: dict[int, list] = {}
        for rc, peak in alive.items():
            groups.setdefault(int(above[rc]), []).append((peak, rc))
        has = np.zeros(n + 1, bool)
        has[np.fromiter(groups, np.int64, len(groups))] = True
        new = np.flatnonzero(~has[1:]) + 1
        if new.size:
            first = np.zeros(n + 1, np.int64)  # each region's highest pixel: the first met
            first[above.ravel()[order[::-1]]] = order[::-1]
            for lab in new.tolist():
                rc = np.unravel_index(first[lab], band.shape)
                rc = (int(rc[0]), int(rc[1]))
                groups[lab] = [(float(values[rc]), rc)]
        alive = {}
        for members in groups.values():
            members.sort(reverse=True)
            alive[members[0][1]] = members[0][0]
            for peak, rc in members[1:]:  # joined to a higher peak at this level's saddle
                size = float((area[:, None] * (previous == previous[rc])).sum())
                if (peak - level) >= min_ratio * (peak - base) and size >= min_area_km2:
                    found.append(rc)
        previous = above
    (rc,) = alive  # at the lowest level the component is one: its highest peak
    return [rc, *found]


def _cuts(basins, values, periodic, structure) -> np.ndarray:
    """Pixels to clear so that no two basins touch: of two neighbours in different basins,
    the lower (the one with the smaller basin number where equal)."""
    cut = np.zeros(basins.shape, bool)
    nrow, ncol = basins.shape
    for dr, dc in zip(*np.nonzero(structure), strict=True):
        dr, dc = int(dr) - 1, int(dc) - 1
        if dr == dc == 0:
            continue
        other = np.roll(basins, (-dr, -dc), axis=(0, 1))
        ov = np.roll(values, (-dr, -dc), axis=(0, 1))
        valid = np.ones(basins.shape, bool)  # no neighbour across the poles (or the edges)
        if dr:
            valid[(nrow - 1) if dr > 0 else 0, :] = False
        if dc and not periodic:
            valid[:, (ncol - 1) if dc > 0 else 0] = False
        lower = (values < ov) | ((values == ov) & (basins < other))
        cut |= valid & (basins > 0) & (other > 0) & (other != basins) & lower
    return cut


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
    return pd.DataFrame(_measure(labels, n, lat, lon, min_area_km2=min_area_km2, pixels=pixels))


def _measure(labels, n, lat, lon, *, min_area_km2=0.0, pixels=None) -> dict[str, np.ndarray]:
    """:func:`measure`'s columns, as arrays (empty float arrays when ``n`` is 0)."""
    if n == 0:
        return {c: np.empty(0) for c in MEASURE_COLUMNS}
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
    xyz = xyz[order]  # each component's pixels together, in their order
    length = np.array(
        [_diameter(xyz[bounds[k] : bounds[k + 1]], centre[k]) for k in keep], dtype=float
    )
    length_safe = np.maximum(length, np.sqrt(area[keep]))  # a single pixel is as long as wide
    return {
        "label": keep,
        "n_pixels": count[keep],
        "area_km2": area[keep],
        "lat": clat[keep],
        "lon": clon[keep],
        "length_km": length_safe,
        "width_km": area[keep] / length_safe,
    }


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
