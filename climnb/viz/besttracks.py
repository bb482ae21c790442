"""Detected cyclone tracks over best tracks: the map and the verification table of a season.

Draws what :func:`climnb.stats.verify.verify_season` computed: each best-track storm as a
black line (solid where it reaches the reference wind, named at its first point), each
detected track as a red line (orange when it is a false alarm; grey when it lies outside the
period the best tracks cover, where it cannot be judged), over offline coastlines.
"""

from __future__ import annotations

import holoviews as hv
import holoviews.plotting.bokeh  # noqa: F401  (registers the bokeh options set below)
import numpy as np
import pandas as pd

from climnb.stats.verify import Season, verify_season
from climnb.viz.coastlines import coastline_path
from climnb.viz.notebook import MAX_WIDTH
from climnb.viz.tables import readable

__all__ = ["best_track_map", "season_view", "verification_table"]


def _lines(table: pd.DataFrame, key: str) -> list[np.ndarray]:
    return [g[["lon", "lat"]].to_numpy(float) for _, g in table.sort_values("time").groupby(key)]


def _box(*tables: pd.DataFrame, margin: float = 5.0):
    lat = np.concatenate([t.lat.to_numpy(float) for t in tables if len(t)] or [np.zeros(1)])
    lon = np.concatenate([t.lon.to_numpy(float) for t in tables if len(t)] or [np.zeros(1)])
    y = (max(lat.min() - margin, -90.0), min(lat.max() + margin, 90.0))
    return (0.0, 360.0) if np.ptp(lon) > 180 else (lon.min() - margin, lon.max() + margin), y


def best_track_map(season: Season, *, width: int = MAX_WIDTH, height: int = 380) -> hv.Overlay:
    """The season's detected tracks (red; false alarms orange; grey outside the verified
    period) over its best tracks (black, dashed for storms below the reference wind), with the
    storms' names."""
    v, obs, best = season.verification, season.tracks, season.best
    obs = obs[obs.class_id == 1] if "class_id" in obs else obs
    x_range, y_range = _box(obs, best)
    reference = set(v.storms.sid)
    alarms = set(v.tracks.track_id[v.tracks.false_alarm])
    judged = obs.track_id.isin(v.tracks.track_id)
    layers = [coastline_path(x_range, y_range)]
    if not judged.all():
        layers.append(
            hv.Path(
                _lines(obs[~judged], "track_id"), kdims=["lon", "lat"], label="not judged"
            ).opts(color="grey", line_width=2, alpha=0.6, show_legend=True)
        )
    obs = obs[judged]
    for ref, dash in ((True, "solid"), (False, "dashed")):
        sel = best[best.sid.isin(reference) == ref]
        layers.append(
            hv.Path(_lines(sel, "sid"), kdims=["lon", "lat"], label="best track").opts(
                color="black", line_width=2, line_dash=dash, show_legend=ref
            )
        )
    for alarm, color, label in ((False, "#d62728", "detected"), (True, "orange", "false alarm")):
        sel = obs[obs.track_id.isin(alarms) == alarm]
        layers.append(
            hv.Path(_lines(sel, "track_id"), kdims=["lon", "lat"], label=label).opts(
                color=color, line_width=3, alpha=0.8, show_legend=True
            )
        )
    first = best.sort_values("time").groupby("sid").first()
    first = first[first.index.isin(reference)].sort_values("lon")
    # names of storms formed near one another alternate above and below their first point
    for k, offset in ((0, 1.5), (1, -2.5)):
        some = first.iloc[k::2]
        layers.append(
            hv.Labels(
                (some.lon.to_numpy(float), some.lat.to_numpy(float), some.name.to_numpy(str)),
                kdims=["lon", "lat"],
                vdims="name",
            ).opts(text_font_size="9pt", text_color="black", yoffset=offset)
        )
    s = v.scores
    title = (
        f"{s['start']:%Y-%m-%d} to {s['end']:%Y-%m-%d}\nPOD {s['pod']:.2f} "
        f"({s['hits']}/{s['storms']} storms >= {s['min_wind_kt']:g} kt), "
        f"FAR {s['far']:.2f} ({s['false_alarms']}/{s['tracks']} tracks)"
    )
    return hv.Overlay(layers).opts(
        title=title,
        xlim=x_range,
        ylim=y_range,
        width=width,
        height=height,
        legend_position="bottom",
        xlabel="longitude (deg E)",
        ylabel="latitude (deg N)",
    )


def verification_table(season: Season) -> pd.DataFrame:
    """The per-storm list, for display: name, basin, peak wind, found or missed, the share of
    its 6-hourly points matched and the nearest detected centre."""
    storms = season.verification.storms
    return pd.DataFrame(
        {
            "storm": storms.name,
            "basin": storms.basin,
            "peak wind (kt)": storms.max_wind_kt.round().astype(int),
            "found": np.where(storms.detected, "yes", "missed"),
            "points matched": (
                storms.matched_points.astype(str) + " of " + storms.points.astype(str)
            ),
            "nearest (km)": storms.min_distance_km.round(),
        }
    )


def season_view(paths, best_track, config=None) -> tuple:
    """What notebook 01 shows of a real season: the per-storm table (readable) and the map of
    :func:`climnb.stats.verify.verify_season` on ``paths`` against ``best_track``, or one line
    saying what to give when either is missing."""
    if not (paths and best_track):
        return ("no season given: set storm_season (msl + vo850) and best_track (IBTrACS)",)
    season = verify_season(paths, best_track, config)
    return readable(verification_table(season)), best_track_map(season)
