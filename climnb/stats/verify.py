"""Verification of cyclone tracks against best tracks: hits, misses, false alarms, POD, FAR.

The rules of the tracker studies (Zarzycki & Ullrich 2017, GRL 44, 1141; Bourdin et al. 2022,
GMD 15, 6759):

* the **reference** is every best-track storm whose wind reaches ``min_wind_kt`` (34 kt, a
  tropical storm) at a synoptic time (00, 06, 12, 18 UTC) inside the verified period;
* a best-track point is **matched** when a detected track point at the same time lies within
  ``radius_km`` (300 km) of it, great-circle distance; a storm is **hit** when any of its points
  in the period is matched, else **missed**;
* a detected track is a **false alarm** when none of its points in the period comes within
  ``radius_km`` of a best-track point (of any storm, whatever its wind) at the same time;
* POD = hits / reference storms; FAR = false alarms / tracks in the period.

The period is where the tracks were looked for (given, or their own first and last time) and
the best tracks have times: a track after the last best-track time cannot be judged. Only
cyclone tracks (class 1) are verified.

How a figure can mislead: a best-track file lists what the agencies saw, so a real but
unnamed depression a detector finds counts as a false alarm only if it never comes near any
listed storm; and with a few storms, one storm moves POD by 0.1.

Examples
--------
>>> import pandas as pd
>>> best = pd.DataFrame({"sid": ["A"] * 2, "name": ["ANA"] * 2, "basin": ["SI"] * 2,
...     "time": pd.to_datetime(["2026-01-01 00:00", "2026-01-01 06:00"]), "lat": [-15.0, -15.5],
...     "lon": [100.0, 99.0], "wind_kt": [40.0, 50.0], "pres_hpa": [990.0, 985.0],
...     "nature": ["TS", "TS"]})
>>> tracks = pd.DataFrame({"track_id": [0, 0, 1], "class_id": [1, 1, 1],
...     "time": pd.to_datetime(["2026-01-01 00:00", "2026-01-01 06:00", "2026-01-01 06:00"]),
...     "lat": [-15.5, -16.0, 30.0], "lon": [100.5, 99.0, 60.0]})
>>> v = verify_tracks(tracks, best)
>>> v.scores["hits"], v.scores["false_alarms"], v.scores["pod"], v.scores["far"]
(1, 1, 1.0, 0.5)
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy.stats import binomtest

from climnb.io.besttrack import read_best_tracks
from climnb.io.files import expand_paths, open_fields
from climnb.labels import compute, label_dataset
from climnb.labels.sphere import great_circle_km
from climnb.tracks import TrackConfig, default_max_gap, track_events

__all__ = [
    "Season",
    "Verification",
    "verify_season",
    "verify_tracks",
    "wilson_interval",
    "SYNOPTIC_HOURS",
]

SYNOPTIC_HOURS = (0, 6, 12, 18)


@dataclass(frozen=True)
class Verification:
    """What :func:`verify_tracks` found.

    Attributes
    ----------
    scores : ``hits``, ``misses``, ``false_alarms``, ``tracks``, ``storms`` (the reference),
        ``pod``, ``far``, their 95 % intervals ``pod_interval`` and ``far_interval`` (Wilson's
        score interval of a proportion: with ten storms one storm moves POD by 0.1, and the
        interval says how far the figure could be from the detector's long-run rate), and the
        settings ``radius_km``, ``min_wind_kt``, ``start``, ``end``.
    storms : one row per reference storm: ``sid, name, basin, max_wind_kt, detected,
        matched_points, points, min_distance_km, first_detected, track_ids``.
    tracks : one row per verified track: ``track_id, start, end, points, false_alarm,
        storms`` (the names it matched), ``min_distance_km``.
    """

    scores: dict
    storms: pd.DataFrame
    tracks: pd.DataFrame

    def table(self) -> str:
        """The scores and the per-storm list as text, as ``climnb verify`` prints them."""
        s = self.scores
        head = (
            f"period {s['start']:%Y-%m-%d %H:%M} to {s['end']:%Y-%m-%d %H:%M}; reference: "
            f"storms reaching {s['min_wind_kt']:g} kt; hit within {s['radius_km']:g} km\n"
            f"  storms {s['storms']}  hits {s['hits']}  misses {s['misses']}  "
            f"POD {s['pod']:.2f}{_interval(s['pod_interval'])}\n"
            f"  tracks {s['tracks']}  false alarms {s['false_alarms']}  "
            f"FAR {s['far']:.2f}{_interval(s['far_interval'])}\n"
        )
        rows = self.storms.assign(
            max_wind_kt=self.storms.max_wind_kt.map("{:.0f} kt".format),
            detected=np.where(self.storms.detected, "hit", "MISSED"),
            min_distance_km=self.storms.min_distance_km.map(
                lambda d: "" if np.isnan(d) else f"{d:.0f} km"
            ),
            matched=self.storms.matched_points.astype(str) + "/" + self.storms.points.astype(str),
        )[["name", "basin", "max_wind_kt", "detected", "matched", "min_distance_km"]]
        return head + rows.to_string(index=False)


def _interval(bounds) -> str:
    lo, hi = bounds
    return "" if np.isnan(lo) else f" (95 % interval {lo:.2f}-{hi:.2f})"


def wilson_interval(k: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """Wilson's score interval of the proportion ``k / n`` (NaN, NaN when ``n`` is 0).

    >>> [round(x, 2) for x in wilson_interval(6, 10)]
    [0.31, 0.83]
    """
    if n == 0:
        return (float("nan"), float("nan"))
    ci = binomtest(int(k), int(n)).proportion_ci(confidence, method="wilson")
    return (float(ci.low), float(ci.high))


def _timestamps(times) -> pd.DatetimeIndex:
    values = np.asarray(times)
    if values.dtype.kind == "O":  # cftime dates: best tracks are in the standard calendar
        values = [pd.Timestamp(t.isoformat()) if hasattr(t, "isoformat") else t for t in values]
    return pd.DatetimeIndex(values)


def verify_tracks(
    tracks: pd.DataFrame,
    best: pd.DataFrame,
    *,
    radius_km: float = 300.0,
    min_wind_kt: float = 34.0,
    start=None,
    end=None,
) -> Verification:
    """Verify cyclone tracks (rows of :func:`climnb.tracks.track_events`) against best tracks
    (rows of :func:`climnb.io.besttrack.read_best_tracks`); see the module for the rules."""
    if radius_km <= 0:
        raise ValueError(f"--radius-km must be above 0, got {radius_km}")
    obs, best, (lo, hi) = _in_period(tracks, best, start, end)
    pairs = _pairs(best, obs)
    near = pairs[pairs.km <= radius_km]
    storms = _storm_table(best, pairs, near, min_wind_kt)
    track_table = _track_table(obs, best, pairs, near)
    hits = int(storms.detected.sum())
    n_tracks, false_alarms = len(track_table), int(track_table.false_alarm.sum())
    scores = {
        "storms": len(storms),
        "hits": hits,
        "misses": len(storms) - hits,
        "pod": hits / len(storms) if len(storms) else float("nan"),
        "pod_interval": wilson_interval(hits, len(storms)),
        "tracks": n_tracks,
        "false_alarms": false_alarms,
        "far": false_alarms / n_tracks if n_tracks else 0.0,
        "far_interval": wilson_interval(false_alarms, n_tracks),
        "radius_km": float(radius_km),
        "min_wind_kt": float(min_wind_kt),
        "start": lo,
        "end": hi,
    }
    return Verification(scores, storms, track_table)


def _in_period(tracks: pd.DataFrame, best: pd.DataFrame, start, end):
    """``(cyclone track points, best-track points at synoptic times, (first, last time))`` of
    the period: where the tracks were looked for (their own times unless given) and the best
    tracks have times."""
    obs = tracks[tracks.class_id == 1].copy() if "class_id" in tracks else tracks.copy()
    obs["time"] = _timestamps(obs.time)
    best = best.copy()
    best["time"] = _timestamps(best.time)
    best = best[best.time.dt.hour.isin(SYNOPTIC_HOURS) & (best.time.dt.minute == 0)]
    if best.empty:
        raise ValueError("the best tracks have no point at 00, 06, 12 or 18 UTC")
    lo = pd.Timestamp(start) if start is not None else obs.time.min()
    hi = pd.Timestamp(end) if end is not None else obs.time.max()
    lo, hi = max(lo, best.time.min()), min(hi, best.time.max())
    if lo > hi:
        raise ValueError(
            f"the tracks ({start or obs.time.min()} to {end or obs.time.max()}) and the best "
            f"tracks ({best.time.min()} to {best.time.max()}) share no time: nothing to verify"
        )
    obs = obs[(obs.time >= lo) & (obs.time <= hi)].reset_index(drop=True)
    best = best[(best.time >= lo) & (best.time <= hi)].reset_index(drop=True)
    return obs, best, (lo, hi)


def _pairs(best: pd.DataFrame, obs: pd.DataFrame) -> pd.DataFrame:
    """Every pair of a best-track point (``b``) and a track point (``o``) at the same time, and
    its great-circle distance (``km``)."""
    pairs = best.reset_index(names="b").merge(
        obs.reset_index(names="o")[["o", "time", "track_id", "lat", "lon"]],
        on="time",
        suffixes=("", "_track"),
    )
    pairs["km"] = great_circle_km(pairs.lat, pairs.lon, pairs.lat_track, pairs.lon_track)
    return pairs


#: The columns of :attr:`Verification.storms` and :attr:`Verification.tracks`.
STORM_COLUMNS = (
    "sid",
    "name",
    "basin",
    "max_wind_kt",
    "detected",
    "matched_points",
    "points",
    "min_distance_km",
    "first_detected",
    "track_ids",
)
TRACK_COLUMNS = (
    "track_id",
    "start",
    "end",
    "points",
    "start_lat",
    "start_lon",
    "false_alarm",
    "storms",
    "min_distance_km",
)


def _storm_table(best, pairs, near, min_wind_kt: float) -> pd.DataFrame:
    """One row per reference storm (its wind reaches ``min_wind_kt``): hit or missed."""
    peak = best.groupby("sid").wind_kt.max()
    reference = peak.index[peak >= min_wind_kt]
    storms = []
    for sid in reference:
        points = best[best.sid == sid]
        hit = near[near.sid == sid]
        closest = pairs[pairs.sid == sid].km
        storms.append(
            {
                "sid": sid,
                "name": points.name.iloc[0],
                "basin": points.basin.iloc[0],
                "max_wind_kt": float(peak[sid]),
                "detected": bool(len(hit)),
                "matched_points": int(hit.b.nunique()),
                "points": len(points),
                "min_distance_km": float(closest.min()) if len(closest) else np.nan,
                "first_detected": hit.time.min() if len(hit) else pd.NaT,
                "track_ids": " ".join(map(str, sorted(hit.track_id.unique()))),
            }
        )
    return pd.DataFrame(storms, columns=list(STORM_COLUMNS))


def _track_table(obs, best, pairs, near) -> pd.DataFrame:
    """One row per detected track in the period: a false alarm or the storms it matched."""
    track_rows = []
    for tid, points in obs.groupby("track_id"):
        hit = near[near.track_id == tid]
        closest = pairs[pairs.track_id == tid].km
        track_rows.append(
            {
                "track_id": tid,
                "start": points.time.min(),
                "end": points.time.max(),
                "points": len(points),
                "start_lat": float(points.lat.iloc[0]),
                "start_lon": float(points.lon.iloc[0]),
                "false_alarm": not len(hit),
                "storms": " ".join(sorted(best.name[hit.b.unique()].unique())),
                "min_distance_km": float(closest.min()) if len(closest) else np.nan,
            }
        )
    return pd.DataFrame(track_rows, columns=list(TRACK_COLUMNS))


@dataclass(frozen=True)
class Season:
    """A season of storms verified (:func:`verify_season`): the verification, the detected
    tracks (rows of :func:`climnb.tracks.track_events`) and the best tracks of the period."""

    verification: Verification
    tracks: pd.DataFrame
    best: pd.DataFrame


def verify_season(
    paths, best_track, config=None, *, radius_km: float = 300.0, min_wind_kt: float = 34.0
) -> Season:
    """``climnb label``, ``climnb tracks`` and ``climnb verify`` in one call, in memory: the
    storms of the files ``paths`` (fields as they come, e.g. ERA5 ``msl`` and ``vo``) labelled
    with ``config`` (default settings), linked into tracks with the labels' gap along the
    labeller's stitched storm tracks, and verified
    against the best-track file ``best_track`` (IBTrACS CSV or NetCDF, HURDAT2)."""

    ds = open_fields(expand_paths(paths), canonical=False)
    labels, events = compute(*label_dataset(ds, config, classes="tc", grid="canonical"))
    obs = track_events(labels, TrackConfig(max_gap_steps=default_max_gap(labels)), storms=events)
    best = read_best_tracks(best_track)
    times = labels.time.values
    result = verify_tracks(
        obs, best, radius_km=radius_km, min_wind_kt=min_wind_kt, start=times[0], end=times[-1]
    )
    lo, hi = result.scores["start"], result.scores["end"]
    shown = best[(best.time >= lo) & (best.time <= hi)]
    return Season(result, obs, shown.reset_index(drop=True))
