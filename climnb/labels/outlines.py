"""Event outlines: a class mask as polygons and back, and one labeller's ClimateNet files.

The core of labelling by hand (:mod:`climnb.viz.annotate` is its widget), plain functions that
scripts use too:

* :func:`outlines_from_mask`: a class mask as outlines (contours of each event, periodic in
  longitude: an event across the grid's seam is one outline in continuous longitudes);
* :func:`rasterise`: outlines back onto the grid (a grid point is inside an outline, or one
  of its copies 360 degrees east or west); bad outlines (self-intersecting, a jump across the
  dateline, outside the grid) are refused in one line each, naming the outline;
* :func:`save_step` / :func:`saved_steps`: the ClimateNet files of one labeller
  (:mod:`climnb.labels.layout`), never overwriting another labeller's.

Examples
--------
>>> import numpy as np
>>> lat, lon = np.linspace(-88.75, 88.75, 72), np.arange(0, 360, 2.5)
>>> mask = np.zeros((72, 144), np.int8)
>>> mask[30:34, 140:144] = mask[30:34, 0:3] = 2  # a river across the 0/360 seam
>>> (river,) = outlines_from_mask(mask, lat, lon)
>>> river.cls, min(river.lon) < 360 < max(river.lon)
(2, True)
>>> bool((rasterise([river], lat, lon) == mask).all())
True
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import shapely
import xarray as xr
from contourpy import LineType, contour_generator

from climnb.io.atomic import atomic_path
from climnb.io.channels import CHANNEL_NAMES, CLASS_NAMES
from climnb.labels.components import label_components
from climnb.labels.layout import expert_name, parse_name

__all__ = [
    "AR",
    "SOURCE",
    "TC",
    "AnnotateError",
    "Outline",
    "outlines_from_mask",
    "rasterise",
    "save_step",
    "saved_steps",
]

PathLike = str | os.PathLike

TC, AR = 1, 2
#: The ``source`` attribute of the files saved (the widget that draws them).
SOURCE = "climnb.viz.annotate"


class AnnotateError(ValueError):
    """An outline that cannot be rasterised, or a file that is not this labeller's."""


@dataclass(frozen=True)
class Outline:
    """One event's outline: a closed polygon in (longitude, latitude) degrees and its class.

    Longitudes are continuous along the outline (an outline across the seam runs past 360 or
    below 0); ``source`` says where it came from (a proposal's name, ``"drawn"``, or
    ``"accepted"`` once a person accepted a proposal).
    """

    lon: tuple[float, ...]
    lat: tuple[float, ...]
    cls: int
    source: str = "drawn"

    def to_dict(self) -> dict:
        return {
            "lon": list(self.lon),
            "lat": list(self.lat),
            "cls": self.cls,
            "source": self.source,
        }

    @classmethod
    def make(cls, lon, lat, klass: int, source: str = "drawn") -> Outline:
        return cls(
            tuple(round(float(x), 4) for x in lon),
            tuple(round(float(y), 4) for y in lat),
            int(klass),
            source,
        )

    @property
    def area(self) -> float:
        """Area in square degrees (for "the smallest river")."""
        return float(shapely.Polygon(zip(self.lon, self.lat, strict=True)).area)


# ---------------------------------------------------------------------------------------------
# Masks to outlines and back
# ---------------------------------------------------------------------------------------------


def _to_coord(index: np.ndarray, coord: np.ndarray) -> np.ndarray:
    """Fractional indices to coordinates, linear, extrapolated beyond the ends."""
    i = np.arange(coord.size)
    out = np.interp(index, i, coord)
    step0, step1 = coord[1] - coord[0], coord[-1] - coord[-2]
    out = np.where(index < 0, coord[0] + index * step0, out)
    return np.where(index > coord.size - 1, coord[-1] + (index - coord.size + 1) * step1, out)


def outlines_from_mask(
    mask: np.ndarray, lat: np.ndarray, lon: np.ndarray, *, source: str = "proposal"
) -> list[Outline]:
    """The outline of each event (4-connected region of one class) of a (lat, lon) mask.

    Each outline runs halfway between the event's grid points and the background's, so that
    :func:`rasterise` gives the event back (holes filled). An event across the grid's seam is
    one outline, in continuous longitudes.
    """
    mask = np.asarray(mask)
    lat, lon = np.asarray(lat, float), np.asarray(lon, float)
    out = []
    for klass in (TC, AR):
        regions, n = label_components(mask == klass, periodic=True, connectivity=4)
        for k in range(1, n + 1):
            region = regions == k
            shift = _unwrap_shift(region)
            ring = _outer_ring(np.roll(region, -shift, axis=1))
            x = _to_coord(ring[:, 0] - 1 + shift, lon)
            y = _to_coord(ring[:, 1] - 1, lat)
            out.append(Outline.make(x, y, klass, source))
    return out


def _unwrap_shift(region: np.ndarray) -> int:
    """Columns to roll ``region`` west by so that it does not touch the grid's east/west edge
    (0 unless it crosses the seam): the start of its widest run of empty columns."""
    used = region.any(axis=0)
    if not (used[0] and used[-1]) or used.all():
        return 0
    empty = np.flatnonzero(~used)
    return int(empty[0])


def _outer_ring(region: np.ndarray) -> np.ndarray:
    """The longest closed contour at 0.5 of ``region`` padded with background: (x, y) in
    the padded array's indices."""
    padded = np.pad(region.astype(float), 1)
    lines = contour_generator(z=padded, line_type=LineType.Separate).lines(0.5)
    return max(lines, key=len)


def _check(outline: Outline, i: int) -> shapely.Polygon:
    """The outline as a valid polygon, or one line saying what is wrong with outline ``i``."""
    name = f"outline {i} ({CLASS_NAMES[outline.cls] if 0 < outline.cls < 3 else outline.cls})"
    if outline.cls not in (TC, AR):
        raise AnnotateError(f"{name}: class must be 1 (storm) or 2 (river); change its class")
    lon, lat_ = np.asarray(outline.lon, float), np.asarray(outline.lat, float)
    if lon.size < 3 or not (np.isfinite(lon).all() and np.isfinite(lat_).all()):
        raise AnnotateError(f"{name}: needs at least 3 finite vertices; draw it again")
    jumps = np.abs(np.diff(np.append(lon, lon[0])))
    if jumps.max() > 180:
        k = int(jumps.argmax())
        raise AnnotateError(
            f"{name} crosses the dateline in wrapped coordinates (a jump of {jumps[k]:.0f} "
            f"degrees of longitude after vertex {k}): draw it in continuous longitudes, e.g. "
            "170 to 190, which are wrapped onto the grid"
        )
    if lon.max() - lon.min() >= 360:
        raise AnnotateError(f"{name} spans 360 degrees of longitude or more; draw it smaller")
    if lat_.min() < -90 or lat_.max() > 90:
        raise AnnotateError(
            f"{name} lies outside the grid: latitudes {lat_.min():.1f} to {lat_.max():.1f} "
            "go beyond the poles; draw it inside the map"
        )
    polygon = shapely.Polygon(zip(lon, lat_, strict=True))
    if not polygon.is_valid:
        why = shapely.is_valid_reason(polygon)
        raise AnnotateError(f"{name} is not a simple polygon ({why}): redraw its edge")
    return polygon


def rasterise(outlines: Sequence[Outline], lat: np.ndarray, lon: np.ndarray) -> np.ndarray:
    """Outlines onto the (lat, lon) grid: int8 classes, 0 where no outline covers a point.

    A grid point belongs to an outline when it lies inside it or inside its copy 360 degrees
    east or west (periodic in longitude). Rivers are painted first, storms over them (a storm
    inside a river stays a storm). Raises :class:`AnnotateError` in one line naming the first
    bad outline: self-intersecting, a jump across the dateline, beyond the poles, or covering
    no grid point.
    """
    lat, lon = np.asarray(lat, float), np.asarray(lon, float)
    lons, lats = np.meshgrid(lon, lat)
    out = np.zeros(lats.shape, np.int8)
    checked = [(i, o, _check(o, i)) for i, o in enumerate(outlines)]
    for klass in (AR, TC):
        for i, outline, polygon in checked:
            if outline.cls != klass:
                continue
            inside = np.zeros(lats.shape, bool)
            for shift in (-360.0, 0.0, 360.0):
                inside |= shapely.contains_xy(polygon, lons + shift, lats)
            if not inside.any():
                raise AnnotateError(
                    f"outline {i} ({CLASS_NAMES[klass]}) covers no grid point: it lies outside "
                    "the grid or between its points; draw it larger or inside the map"
                )
            out[inside] = klass
    return out


# ---------------------------------------------------------------------------------------------
# The ClimateNet files of one labeller
# ---------------------------------------------------------------------------------------------


def _owner(path: Path) -> str | None:
    with xr.open_dataset(path) as ds:
        return ds.attrs.get("labeller_name")


def save_step(
    folder: PathLike,
    fields: xr.Dataset,
    outlines: Sequence[Outline],
    *,
    labeller: int,
    name: str,
) -> Path:
    """Write one step's outlines as ``folder/data-YYYY-MM-DD-HH-1_N.nc`` (``N``: ``labeller``).

    ``fields`` is the step (one time) with its channels; the file holds them, ``LABELS`` (the
    rasterised outlines) and, in its attributes, the labeller's number and ``name`` and the
    outlines themselves (so a session reopens them as drawn). Written atomically; a file of
    that step and number saved by another name is refused in one line, untouched.
    """
    if not name:
        raise AnnotateError("give the labeller's name (name=): it goes into every file saved")
    folder = Path(folder)
    step = fields if "time" not in fields.dims else fields.isel(time=[0])
    time = pd.Timestamp(np.atleast_1d(step.time.values)[0])
    path = folder / expert_name(time, labeller)
    if path.exists() and (owner := _owner(path)) != name:
        raise AnnotateError(
            f"{path} is labeller {labeller}'s, saved by {owner or 'another tool'!r}, not "
            f"{name!r}: nothing overwritten; give another labeller number (labeller=)"
        )
    labels = rasterise(outlines, step.lat.values, step.lon.values)
    channels = [c for c in CHANNEL_NAMES if c in step] or [v for v in step.data_vars]
    one = step[channels].expand_dims("time") if "time" not in step.dims else step[channels]
    one = one.load()
    one["LABELS"] = (("lat", "lon"), labels.astype(np.int32))
    one["LABELS"].attrs = {
        "long_name": "expert class of each pixel",
        "flag_values": np.arange(len(CLASS_NAMES), dtype=np.int32),
        "flag_meanings": " ".join(CLASS_NAMES),
    }
    one.attrs = {
        "labeller": int(labeller),
        "labeller_name": name,
        "source": SOURCE,
        "outlines": json.dumps([o.to_dict() for o in outlines]),
    }
    folder.mkdir(parents=True, exist_ok=True)
    with atomic_path(path) as tmp:
        one.to_netcdf(tmp)
    return path


def saved_steps(folder: PathLike, labeller: int, name: str) -> dict[pd.Timestamp, list[Outline]]:
    """The steps ``name`` saved as labeller ``labeller`` in ``folder``, with their outlines (a
    file written by another tool in this labeller's name: the outlines of its ``LABELS``)."""
    out = {}
    for path in sorted(Path(folder).glob(f"data-*-1_{int(labeller)}.nc")):
        time, n = parse_name(path)
        if n != labeller:
            continue
        with xr.open_dataset(path) as ds:
            if ds.attrs.get("labeller_name") != name:
                continue
            stored = ds.attrs.get("outlines")
            if stored is not None:
                out[time] = [Outline.make(**_renamed(d)) for d in json.loads(stored)]
            else:
                labels = ds.LABELS.squeeze().values
                out[time] = outlines_from_mask(labels, ds.lat.values, ds.lon.values)
    return out


def _renamed(d: Mapping) -> dict:
    return {"lon": d["lon"], "lat": d["lat"], "klass": d["cls"], "source": d.get("source", "")}
