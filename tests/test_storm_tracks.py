"""Storms on real data: closed contours, cyclone tracks, best tracks in, verification out."""

from __future__ import annotations

import io
from pathlib import Path

import holoviews as hv
import numpy as np
import pandas as pd
import pytest
import xarray as xr

import climnb.labels.dataset
import climnb.labels.tc
from climnb.cli import main
from climnb.data.synthetic import make_dataset
from climnb.io.besttrack import read_best_tracks
from climnb.io.netcdf import normalize
from climnb.labels import compute, label_dataset
from climnb.labels.config import LabelConfig, TCConfig
from climnb.labels.step import label_step
from climnb.labels.stitch import stitch_centres
from climnb.labels.tc import _closed, _Grid, detect_storms, find_centres, max_wind_near
from climnb.stats.verify import verify_tracks
from climnb.tracks import read_tracks

DATA = Path(__file__).parent / "data"
ERA5 = DATA / "era5_msl_vo850_2025-12_2026-01_tropics_2.5x2.5.nc"
IBTRACS = DATA / "ibtracs_2025-12-01_2026-01-14.csv"


# --- closed contours in great-circle distance ----------------------------------------------


def _low(spacing: float, depth: float = 600.0, radius_deg: float = 3.0, open_to=None):
    """A Gaussian low at 15 N 100 E on a regular grid of ``spacing`` degrees, optionally with
    a trough of equal depth running out to one side (``open_to``: "east")."""
    lat = np.arange(-30.0, 45.0 + spacing / 2, spacing)
    lon = np.arange(0.0, 360.0, spacing)
    la, lo = np.meshgrid(lat, lon, indexing="ij")
    d2 = ((la - 15.0) ** 2 + ((lo - 100.0) * np.cos(np.radians(15.0))) ** 2) / radius_deg**2
    psl = 101000.0 - depth * np.exp(-d2)
    if open_to == "east":  # a trough as deep as the low, out to 20 degrees east
        trough = (lo > 100.0) & (lo < 120.0)
        psl = np.where(
            trough, np.minimum(psl, 101000.0 - depth * np.exp(-(((la - 15) / 3) ** 2))), psl
        )
    grid = _Grid(lat, lon, True)
    r, c = np.unravel_index(np.argmin(psl), psl.shape)
    return psl, grid, r, c


@pytest.mark.parametrize("spacing", [0.25, 1.0, 2.5], ids=["0.25deg", "1deg", "2.5deg"])
def test_a_closed_low_is_closed_at_every_resolution(spacing):
    psl, grid, r, c = _low(spacing)
    assert _closed(psl, grid, r, c, 200.0, 5.5)
    assert not _closed(psl, grid, r, c, 700.0, 5.5)  # deeper than the low itself


@pytest.mark.parametrize("spacing", [0.25, 2.5], ids=["0.25deg", "2.5deg"])
def test_a_low_open_on_one_side_is_not_closed(spacing):
    psl, grid, r, c = _low(spacing, open_to="east")
    assert not _closed(psl, grid, r, c, 200.0, 5.5)


def test_the_closed_contour_radius_is_great_circle_not_grid_points():
    # a broad low: pressure rises 200 Pa only beyond 5.5 degrees of arc from the centre
    psl, grid, r, c = _low(1.0, depth=400.0, radius_deg=7.0)
    assert not _closed(psl, grid, r, c, 200.0, 5.5)
    assert _closed(psl, grid, r, c, 200.0, 12.0)


# --- stitching centres into cyclone tracks -------------------------------------------------


def _path(n, lat=-15.0, lon=80.0, dlon=-0.5, start="2026-01-01", freq="6h"):
    times = pd.date_range(start, periods=n, freq=freq)
    return pd.DataFrame({"time": times, "lat": lat, "lon": lon + dlon * np.arange(n)})


def test_a_long_path_over_the_ocean_is_a_cyclone():
    paths = stitch_centres(_path(12), TCConfig())
    assert paths.track_id.nunique() == 1 and paths.keep.all()


@pytest.mark.parametrize(
    ("centres", "why"),
    [
        (_path(9), "48 h: shorter than 54"),
        (_path(12, lat=-2.5), "formed on the equator"),
        (_path(12, lat=-35.0), "formed poleward of 30"),
        (_path(12, lat=23.0, lon=10.0), "a heat low over the Sahara"),
        (_path(12, lat=-25.0, lon=133.0, dlon=0.0), "a heat low over central Australia"),
    ],
    ids=["short", "equator", "poleward", "sahara", "australia"],
)
def test_paths_that_are_no_cyclone_are_dropped(centres, why):
    assert not stitch_centres(centres, TCConfig()).keep.any(), why


def test_a_low_formed_over_land_that_stays_at_sea_long_enough_is_kept():
    # born on the Kimberley coast's land cell, then four days over the Indian Ocean
    land = _path(2, lat=-22.0, lon=122.0, dlon=0.0)
    sea = _path(16, lat=-17.5, lon=119.0, start="2026-01-01T12")
    paths = stitch_centres(pd.concat([land, sea]), TCConfig())
    assert paths.track_id.nunique() == 1
    assert not paths.keep.any()  # genesis over land is not a cyclone's
    assert stitch_centres(sea, TCConfig()).keep.all()


def test_gaps_are_bridged_up_to_the_limit_and_hemispheres_never_join():
    path = _path(16)
    gap = stitch_centres(path.drop(index=[6, 7, 8, 9]), TCConfig())  # 30 h between centres
    assert gap.track_id.nunique() == 1 and gap.keep.all()
    split = stitch_centres(path.drop(index=[5, 6, 7, 8, 9]), TCConfig())  # 36 h: too long
    assert split.track_id.nunique() == 2
    other = _path(12, lat=4.0).assign(lat=lambda d: np.where(d.index % 2, 4.0, -4.0))
    assert stitch_centres(other, TCConfig()).track_id.nunique() >= 2


def test_a_jump_faster_than_a_storm_starts_a_new_path():
    path = _path(12)
    path.loc[6:, "lon"] += 12.0  # 1,300 km in 6 h
    assert stitch_centres(path, TCConfig()).track_id.nunique() == 2


def test_where_winds_are_given_a_track_must_blow_long_enough():
    """Zarzycki & Ullrich 2017: 10 m/s within 2 degrees at 10 six-hourly points (54 h)."""
    path = _path(12)
    assert stitch_centres(path.assign(wind=15.0), TCConfig()).keep.all()
    weak = path.assign(wind=np.where(np.arange(12) < 9, 15.0, 8.0))  # 9 windy points: 48 h
    assert not stitch_centres(weak, TCConfig()).keep.any()
    tenth = path.assign(wind=np.where(np.arange(12) < 10, 10.0, 8.0))  # 10 points at 10 m/s
    assert stitch_centres(tenth, TCConfig()).keep.all()
    assert stitch_centres(weak, TCConfig(min_wind_ms=None)).keep.all()  # rule switched off
    assert stitch_centres(path.assign(wind=np.nan), TCConfig()).keep.all()  # no winds


def test_the_wind_near_a_centre_is_the_strongest_within_the_radius():
    lat, lon = np.arange(-30.0, 31.0, 1.0), np.arange(0.0, 360.0, 1.0)
    u, v = np.zeros((lat.size, lon.size)), np.zeros((lat.size, lon.size))
    u[30, 2], v[30, 2] = 6.0, 8.0  # 10 m/s two degrees east of the centre at (30, 0)
    u[30, 357] = 30.0  # three degrees west, across the seam: outside the radius
    fields = {"U850": u, "V850": v}
    assert max_wind_near(fields, lat, lon, 30, 0, 2.0) == pytest.approx(10.0)
    assert max_wind_near(fields, lat, lon, 30, 0, 3.0) == pytest.approx(30.0)
    assert np.isnan(max_wind_near({}, lat, lon, 30, 0, 2.0))


# --- labels: tracks when there is no warm core -------------------------------------------


def test_tracks_apply_without_a_warm_core_only():
    ds, _ = make_dataset(n_time=4, seed=1)
    labels, _ = label_dataset(ds)  # T200 and T500: the warm core decides, no tracks
    assert "storm_max_gap_h" not in labels.attrs
    assert "kept on tracks" not in labels.attrs["notes"]
    msl_vo = ds[["PSL", "U850", "V850"]]
    short, _ = label_dataset(msl_vo, classes="tc")
    assert "storms not tracked: the input spans 9 h" in short.attrs["notes"]
    on, _ = label_dataset(msl_vo, LabelConfig(tc=TCConfig(tracks="on")), classes="tc")
    assert on.attrs["storm_max_gap_h"] == 24.0
    assert "winds of 10 m/s within 2 deg of the centre for at least 54 h" in on.attrs["notes"]
    assert int(compute(on)[0].max()) == 0  # 9 h: no storm lives long enough


def test_tracked_labels_are_the_searched_labels_of_the_tracked_centres(monkeypatch):
    """With tracks, each step's centres are searched for once (the first pass), and the labels
    and storms are what labelling the step alone, searching, gives for those on tracks."""
    ds = normalize(xr.open_dataset(ERA5).isel(valid_time=slice(40, 80)))
    config = LabelConfig(tc=TCConfig(tracks="on"))
    searches = []

    def counted(*args, **kwargs):
        searches.append(1)
        return find_centres(*args, **kwargs)

    with monkeypatch.context() as m:
        m.setattr(climnb.labels.tc, "find_centres", counted)
        m.setattr(climnb.labels.dataset, "find_centres", counted)
        labels, events = compute(*label_dataset(ds, config, classes="tc"))
    assert len(searches) == ds.sizes["time"]
    assert events.storm_track.nunique() >= 2  # some storms are on tracks, some are not
    lat, lon = ds.lat.values, ds.lon.values
    untracked = 0
    for k, time in enumerate(ds.time.values):
        fields = {n: ds[n].values[k] for n in ("PSL", "VORT850")}
        here = events[events.time == time]
        rows, cols = np.searchsorted(lat, here.lat), np.searchsorted(lon, here.lon)
        tracks = dict(zip(zip(rows, cols, strict=True), here.storm_track, strict=True))
        found = find_centres(fields, lat, lon, config.tc)  # as labelling the step searches
        tracked = {(r, c): (tracks[r, c], z, p) for r, c, z, p in found if (r, c) in tracks}
        assert len(tracked) == len(tracks)
        alone, table = label_step(fields, lat, lon, config, tracked=tracked)
        assert alone.tobytes() == labels.values[k].tobytes(), time
        expected = table.assign(time=time).reindex(columns=events.columns)
        pd.testing.assert_frame_equal(
            here.reset_index(drop=True), expected, check_exact=True, check_dtype=False
        )
        untracked += len(label_step(fields, lat, lon, config)[1]) - len(here)
    assert untracked > 0  # the test would tell a labelling that kept every centre


def test_centres_given_are_taken_as_they_are():
    ds, _ = make_dataset(n_time=1, seed=1)
    fields = {n: ds[n].values[0] for n in ds.data_vars}
    lat, lon, config = ds.lat.values, ds.lon.values, TCConfig()
    found = find_centres(fields, lat, lon, config)
    assert len(found) >= 2
    searched, table = detect_storms(fields, lat, lon, config)
    given, same = detect_storms(fields, lat, lon, config, centres=found)
    pd.testing.assert_frame_equal(table, same, check_exact=True)
    for a, b in zip(searched, given, strict=True):
        np.testing.assert_array_equal(a.rows, b.rows)
        np.testing.assert_array_equal(a.cols, b.cols)
    # not searched again: what is given is what is kept and recorded, and nothing else
    r, c, *_ = found[1]
    one, table = detect_storms(fields, lat, lon, config, centres=[(r, c, 1.0, 2.0)])
    assert [(s.row, s.col) for s in one] == [(r, c)]
    assert table.vorticity.tolist() == [1.0] and table.min_psl.tolist() == [2.0]
    assert detect_storms(fields, lat, lon, config, centres=[])[0] == []


# --- best tracks in ------------------------------------------------------------------------


def test_ibtracs_csv_as_ncei_writes_it():
    best = read_best_tracks(IBTRACS)
    assert best.sid.nunique() == 12 and len(best) == 418
    grant = best[best.name == "GRANT"]
    assert grant.wind_kt.max() == 119.0  # USA_WIND: the WMO column is blank (provisional)
    assert (best.lon >= 0).all() and (best.lon < 360).all()
    assert best[best.basin == "SP"].lon.between(140, 220).all()  # west of the dateline too


def test_hurdat2():
    text = (
        "AL062018,            FLORENCE,     79,\n"
        "20180917, 0000,  , TD, 34.5N,  81.9W,  25, 1007,\n"
        "20180917, 0600,  , TD, 35.6N,  82.3W,  25, 1008,\n"
    )
    path = Path(pytest.importorskip("tempfile").mkdtemp()) / "hurdat2.txt"
    path.write_text(text)
    best = read_best_tracks(path)
    assert list(best.name) == ["FLORENCE"] * 2 and list(best.nature) == ["TD", "TD"]
    assert best.lon.iloc[0] == pytest.approx(360 - 81.9) and best.wind_kt.iloc[0] == 25


def test_a_file_that_is_no_best_track_names_what_it_lacks(tmp_path):
    bad = tmp_path / "tracks.csv"
    bad.write_text("a,b\n1,2\n")
    with pytest.raises(ValueError, match="not an IBTrACS CSV: no column SID, ISO_TIME"):
        read_best_tracks(bad)
    with pytest.raises(FileNotFoundError, match="--best-track"):
        read_best_tracks(tmp_path / "missing.csv")


# --- verification --------------------------------------------------------------------------


def _best(rows):
    cols = ["sid", "name", "time", "lat", "lon", "wind_kt"]
    best = pd.DataFrame(rows, columns=cols).assign(basin="SI", pres_hpa=np.nan, nature="TS")
    best["time"] = pd.to_datetime(best.time)
    return best


def _tracks(rows):
    tracks = pd.DataFrame(rows, columns=["track_id", "time", "lat", "lon"]).assign(class_id=1)
    tracks["time"] = pd.to_datetime(tracks.time)
    return tracks


def test_hits_misses_and_false_alarms_by_hand():
    best = _best(
        [
            ("A", "ANA", "2026-01-01 00:00", -15.0, 100.0, 50.0),
            ("A", "ANA", "2026-01-01 06:00", -15.0, 95.0, 60.0),
            ("B", "BOB", "2026-01-01 00:00", -12.0, 60.0, 40.0),
            ("C", "CID", "2026-01-01 06:00", -10.0, 150.0, 25.0),  # a depression: no reference
            ("A", "ANA", "2026-01-01 03:00", -15.0, 99.5, 55.0),  # interpolated: not synoptic
        ]
    )
    km = 111.2  # about a degree of latitude
    tracks = _tracks(
        [
            (0, "2026-01-01 06:00", -15.0 - 2.6, 95.0),  # ANA at 289 km: a hit
            (1, "2026-01-01 00:00", -12.0 - 2.8, 60.0),  # BOB at 311 km: no hit
            (2, "2026-01-01 06:00", -10.0, 150.5),  # near the depression: no false alarm
            (3, "2026-01-01 00:00", -15.0, 95.0),  # ANA's later place, 6 h early
        ]
    )
    v = verify_tracks(tracks, best)
    assert (v.scores["storms"], v.scores["hits"], v.scores["misses"]) == (2, 1, 1)
    assert v.scores["pod"] == 0.5
    alarms = v.tracks.set_index("track_id").false_alarm
    assert alarms.to_dict() == {0: False, 1: True, 2: False, 3: True}
    assert v.scores["far"] == pytest.approx(0.5)
    ana = v.storms.set_index("name").loc["ANA"]
    assert ana.detected and ana.matched_points == 1 and ana.points == 2
    assert ana.min_distance_km == pytest.approx(2.6 * km, rel=0.01)
    wider = verify_tracks(tracks, best, radius_km=320.0)
    assert wider.scores["hits"] == 2 and wider.scores["far"] == pytest.approx(0.25)
    stronger = verify_tracks(tracks, best, min_wind_kt=45.0)
    assert list(stronger.storms.name) == ["ANA"]


def test_the_map_greys_the_tracks_it_cannot_judge_and_names_each_storm():
    from climnb.stats.verify import Season
    from climnb.viz.besttracks import best_track_map

    best = _best(
        [
            ("A", "ANA", "2026-01-01 00:00", -15.0, 100.0, 50.0),
            ("A", "ANA", "2026-01-01 06:00", -15.5, 99.0, 50.0),
            ("B", "BOB", "2026-01-01 00:00", -15.0, 101.0, 40.0),  # formed beside ANA
        ]
    )
    tracks = _tracks(
        [
            (0, "2026-01-01 00:00", -15.0, 100.0),
            (0, "2026-01-01 06:00", -15.5, 99.0),
            (1, "2026-01-03 00:00", -20.0, 60.0),  # after the best tracks: not judged
            (1, "2026-01-03 06:00", -20.5, 59.0),
        ]
    )
    v = verify_tracks(tracks, best, start="2026-01-01", end="2026-01-03 06:00")
    assert list(v.tracks.track_id) == [0]
    overlay = best_track_map(Season(v, tracks, best))
    paths = {p.label: p for p in overlay if isinstance(p, hv.Path)}
    assert len(paths["not judged"].split()) == 1  # track 1, drawn grey
    assert len(paths["detected"].split()) == 1 and len(paths["false alarm"].split()) == 0
    labels = [layer for layer in overlay if isinstance(layer, hv.Labels)]
    offsets = {str(layer.data.name.iloc[0]): layer.opts.get().kwargs["yoffset"] for layer in labels}
    assert offsets["ANA"] != offsets["BOB"]  # names of neighbours do not overlap


def test_verification_only_judges_the_shared_period():
    best = _best([("A", "ANA", "2026-01-01 00:00", -15.0, 100.0, 50.0)])
    later = _tracks([(0, "2026-01-02 00:00", 40.0, 10.0), (1, "2026-01-01 00:00", -15.0, 100.0)])
    v = verify_tracks(later, best)
    assert v.scores["tracks"] == 1 and v.scores["false_alarms"] == 0
    with pytest.raises(ValueError, match="share no time"):
        verify_tracks(later.iloc[:1], best)


# --- the real season: ERA5 at 2.5 degrees against IBTrACS ----------------------------------


@pytest.fixture(scope="module")
def season(tmp_path_factory):
    """``climnb label``, ``climnb tracks`` and ``climnb verify`` with their defaults on the
    first half of the 2025-26 Southern-Hemisphere season (ERA5 msl and 850 hPa vorticity)."""
    tmp = tmp_path_factory.mktemp("season")
    assert main(["label", str(ERA5), "--out", str(tmp / "labels.nc"), "--no-progress"]) == 0
    assert main(["tracks", str(tmp / "labels.nc"), "--out", str(tmp / "tracks.nc")]) == 0
    argv = ["verify", str(tmp / "tracks.nc"), "--best-track", str(IBTRACS)]
    argv += ["--csv", str(tmp / "storms.csv"), "--tracks-csv", str(tmp / "tracks.csv")]
    return tmp, main(argv)


def test_the_season_is_verified_against_best_tracks(season, capsys):
    tmp, code = season
    assert code == 0
    storms = pd.read_csv(tmp / "storms.csv")
    tracks = pd.read_csv(tmp / "tracks.csv")
    assert len(storms) == 10  # the storms of at least 34 kt
    pod = storms.detected.mean()
    far = tracks.false_alarm.mean()
    # floors below the figures of docs/own-data.md (POD 0.60, FAR 0.33 on this cut)
    assert pod >= 0.5, storms[["name", "detected", "min_distance_km"]]
    assert far <= 0.4, tracks
    # the strongest storms are found, and near their best-track positions
    strong = storms[storms.max_wind_kt >= 100].set_index("name")
    assert strong.detected.all() and (strong.min_distance_km < 100).all()


def test_each_cyclone_track_is_one_storm(season):
    """The tracks follow the labeller's stitched storm tracks: JENNA filling while DUDZAI
    forms 1,000 km away (9-10 January) stay two tracks, and no track is a fragment of one."""
    tmp, _ = season
    tracks = pd.read_csv(tmp / "tracks.csv").fillna({"storms": ""})
    assert not tracks.storms.str.contains(" ").any(), tracks[["track_id", "start", "storms"]]
    named = tracks[tracks.storms != ""]
    assert named.storms.is_unique, named[["track_id", "start", "storms"]]
    assert {"JENNA", "DUDZAI"} <= set(named.storms)


def _spans(obs):
    """When each track starts and ends."""
    return sorted(map(tuple, obs.groupby("track_id").time.agg(["min", "max"]).to_numpy()))


def test_tracks_take_the_labellers_event_table_from_where_it_is_given(season, tmp_path, capsys):
    tmp, _ = season
    alone = tmp_path / "labels.nc"  # the labels without their table beside them
    alone.write_bytes((tmp / "labels.nc").read_bytes())
    n = {}
    for name, extra in (
        ("overlap", []),
        ("given", ["--label-events", str(tmp / "labels.events.csv")]),
    ):
        assert main(["tracks", str(alone), "--out", str(tmp_path / f"{name}.nc"), *extra]) == 0
        out = capsys.readouterr().out
        assert ("follow the labeller's storm tracks" in out) == (name == "given")
        n[name] = _spans(read_tracks(tmp_path / f"{name}.nc"))
    assert n["given"] == _spans(read_tracks(tmp / "tracks.nc"))
    assert n["overlap"] != n["given"]  # by overlap JENNA's track goes on as DUDZAI's
    missing = ["--label-events", str(tmp_path / "none.csv")]
    assert main(["tracks", str(alone), "--out", str(tmp_path / "x.nc"), *missing]) == 2
    assert "--label-events" in capsys.readouterr().err and not (tmp_path / "x.nc").exists()


def test_statistics_count_the_same_cyclone_tracks_as_the_tracks_command(season):
    """`climnb stats` tracking the labels itself follows the stitched tracks and bridges the
    labeller's gaps, as `climnb tracks` does: the same landfalls either way."""
    tmp, _ = season
    box = ["--region", "australia=-45:-10,110:155"]
    out = {}
    for route, extra in (("here", []), ("given", ["--tracks", str(tmp / "tracks.nc")])):
        out[route] = tmp / f"events_{route}.csv", tmp / f"landfall_{route}.csv"
        argv = ["stats", str(tmp / "labels.nc"), *box, *extra]
        assert main([*argv, "--events", str(out[route][0]), "--landfall", str(out[route][1])]) == 0
    for here, given in zip(out["here"], out["given"], strict=True):
        pd.testing.assert_frame_equal(pd.read_csv(here), pd.read_csv(given))
    landfall = pd.read_csv(out["here"][1])
    assert landfall[landfall.class_name == "tropical_cyclone"].landfalling_events.sum() >= 1


#: Where the heat lows of this season sit (lat, lon boxes), which pressure and vorticity alone
#: label as cyclones: the Chaco, the Yunnan plateau, Iran, interior Australia, southern Africa.
HEAT_LOWS = {
    "chaco": ((-28, -18), (295, 305)),
    "yunnan": ((22, 30), (97, 107)),
    "iran": ((25, 35), (50, 62)),
    "central_australia": ((-28, -20), (125, 138)),
    "southern_africa": ((-27, -15), (15, 30)),
}


@pytest.mark.parametrize("box", HEAT_LOWS.values(), ids=HEAT_LOWS.keys())
def test_no_heat_low_is_labelled_a_cyclone(season, box):
    tmp, _ = season
    (lat0, lat1), (lon0, lon1) = box
    with xr.open_dataset(tmp / "labels.nc") as ds:
        inside = ds.labels.sel(latitude=slice(lat1, lat0), longitude=slice(lon0, lon1))
        assert int((inside == 1).sum()) == 0


def test_storms_are_found_only_in_the_genesis_band(season):
    tmp, _ = season
    events = pd.read_csv(tmp / "labels.events.csv")
    assert len(events) and (events.lat.abs() <= 30).all()


def test_the_verification_table_is_printed(tmp_path, capsys):
    tracks = tmp_path / "tracks.nc"
    from climnb.tracks import write_tracks

    obs = pd.DataFrame(
        {
            "track_id": [0, 0],
            "time": pd.to_datetime(["2025-12-20 00:00", "2025-12-20 06:00"]),
            "class_id": 1,
            "class_name": "tropical_cyclone",
            "lat": [-12.5, -12.7],
            "lon": [107.5, 106.5],
            "area_km2": 1e5,
            "length_km": np.nan,
            "width_km": np.nan,
            "n_pixels": 3,
            "speed_kmh": np.nan,
        }
    )
    write_tracks(obs, tracks)
    assert main(["verify", str(tracks), "--best-track", str(IBTRACS)]) == 0
    out = capsys.readouterr().out
    assert "GRANT" in out and "hit" in out and "POD 1.00 (95 % interval 0.21-1.00)" in out
    assert main(["verify", str(tracks), "--best-track", str(IBTRACS), "--csv", str(IBTRACS)]) == 2


def test_read_best_tracks_from_a_stream():
    text = IBTRACS.read_text()
    assert read_best_tracks(io.StringIO(text)).sid.nunique() == 12


def test_the_accessor_verifies_a_mask(season):
    import climnb.accessor  # noqa: F401

    tmp, _ = season
    with xr.open_dataset(tmp / "labels.nc") as ds:
        ds = ds.load()
    storms = pd.read_csv(tmp / "labels.events.csv", parse_dates=["time"])
    v = ds.climnb.verify("labels", IBTRACS, storms=storms)
    command = pd.read_csv(tmp / "storms.csv")
    tracks = pd.read_csv(tmp / "tracks.csv")
    assert v.scores["storms"] == len(command)
    assert v.scores["hits"] == int(command.detected.sum())
    assert v.scores["false_alarms"] == int(tracks.false_alarm.sum())  # the same tracks
    lo, hi = v.scores["far_interval"]
    assert lo < v.scores["far"] < hi


# --- the NAM analysis: no cyclone poleward of the latitude bound ---------------------------


def test_nam_lows_poleward_of_the_bound_are_not_cyclones():
    from climnb.io.files import open_fields

    ds = open_fields([DATA / "nam_florence_subset.grib2"], canonical=False, regrid=1.0)
    anywhere = LabelConfig(tc=TCConfig(max_abs_lat=90.0))
    _, lows = compute(*label_dataset(ds, anywhere, regrid=1.0, classes="tc"))
    # three extratropical lows at 50-56 N pass the warm-core check with no latitude bound
    assert len(lows) == 3 and (lows.lat >= 50).all()
    labels, storms = compute(*label_dataset(ds, regrid=1.0, classes="tc"))
    assert storms.empty and int((labels == 1).sum()) == 0
    # Florence's remnant (1007 hPa near 34.5N 81.9W, a tropical depression over land three
    # days after landfall) is no tropical cyclone at the 34 kt of a tropical storm either
    assert not ((lows.lat - 34.5).abs().lt(3) & (lows.lon - 278.1).abs().lt(3)).any()
