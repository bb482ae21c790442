"""Storm detection on real reanalysis against best tracks, and the sensitivity of each rule.

Labels a real ERA5 file (msl and 850 hPa vorticity; by default the tropical cut of the first
half of the 2025-26 Southern-Hemisphere season that the tests use), links the labelled storms
into tracks and verifies them against IBTrACS (:mod:`climnb.stats.verify`: 300 km, same
6-hourly time, storms of at least 34 kt) - the same steps as ``climnb label``, ``climnb
tracks`` and ``climnb verify`` with their defaults - first with the defaults, then with one rule
changed at a time. Prints POD and FAR next to the goals (POD >= 0.85, FAR <= 0.15), and the
baseline: the detector without any track rule.

How the figures can mislead: ten reference storms (one storm moves POD by 0.1); the best
tracks list what agencies named or numbered, so a real but unlisted depression that a detector
finds is a false alarm; the rules' values come from the literature (docs/own-data.md), not
from these storms, and the table shows what each costs or gains here only.

    .venv/bin/python benchmarks/bench_storms.py [--era5 FILE] [--best-track FILE] [--quick]
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from dataclasses import replace
from pathlib import Path

import _quiet  # noqa: F401  (before the libraries: their start-up logs and warnings off)
import numpy as np

from climnb.io.besttrack import read_best_tracks
from climnb.io.files import open_fields
from climnb.labels import compute, label_dataset
from climnb.labels.config import LabelConfig, TCConfig
from climnb.stats.verify import verify_tracks
from climnb.tracks import TrackConfig, default_max_gap, track_events

DATA = Path(__file__).resolve().parents[1] / "tests" / "data"
ERA5 = DATA / "era5_msl_vo850_2025-12_2026-01_tropics_2.5x2.5.nc"
IBTRACS = DATA / "ibtracs_2025-12-01_2026-01-14.csv"

#: One rule changed at a time: (name, the TCConfig fields).
VARIANTS = [
    ("defaults", {}),
    ("no track rules (per-step detector only)", {"tracks": "off"}),
    ("closed contour 100 Pa", {"pressure_rise_pa": 100.0}),
    ("closed contour 400 Pa (TECA)", {"pressure_rise_pa": 400.0}),
    ("closed contour within 4 deg", {"pressure_rise_deg": 4.0}),
    ("vorticity >= 3.5e-5 (Vitart 1997)", {"min_vorticity": 3.5e-5}),
    ("vorticity >= 1e-4", {"min_vorticity": 1e-4}),
    ("lifetime >= 24 h", {"min_lifetime_h": 24.0}),
    ("lifetime >= 48 h (TECA)", {"min_lifetime_h": 48.0}),
    ("lifetime >= 72 h", {"min_lifetime_h": 72.0}),
    ("gaps up to 12 h", {"max_gap_h": 12.0}),
    ("gaps up to 36 h", {"max_gap_h": 36.0}),
    ("genesis at any latitude", {"genesis_lat": (0.0, 90.0)}),
    ("genesis over land allowed", {"genesis_over_ocean": False}),
    ("no time over the ocean asked", {"min_ocean_h": 0.0}),
    ("no ocean rule at all", {"genesis_over_ocean": False, "min_ocean_h": 0.0}),
]
#: Not a rule of the labeller: `climnb tracks` linking the storm masks by overlap and distance
#: alone instead of along the labeller's stitched tracks.
BY_OVERLAP = "tracks by mask overlap, not stitched ids"
QUICK = ("defaults", "no track rules (per-step detector only)", "no ocean rule at all")


def run(ds, best, tc: TCConfig, *, stitched_ids: bool = True) -> dict:
    labels, events = compute(*label_dataset(ds, LabelConfig(tc=tc), grid="canonical"))
    config = TrackConfig(max_gap_steps=default_max_gap(labels))
    obs = track_events(labels, config, storms=events if stitched_ids else None)
    v = verify_tracks(obs, best, start=labels.time.values[0], end=labels.time.values[-1])
    return v.scores


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--era5", type=Path, default=ERA5)
    parser.add_argument("--best-track", type=Path, default=IBTRACS)
    parser.add_argument("--quick", action="store_true", help="defaults and two variants only")
    args = parser.parse_args(argv)
    logging.disable(logging.INFO)
    ds = open_fields([args.era5], canonical=False).load()
    best = read_best_tracks(args.best_track)
    print(f"{args.era5.name}: {ds.sizes}; best tracks {args.best_track.name}")
    print("goal: POD >= 0.85 and FAR <= 0.15 (storms >= 34 kt, 300 km, same 6-hourly time)\n")
    print(f"{'variant':42s} {'POD':>5s} {'hits':>7s} {'FAR':>5s} {'alarms':>7s} {'s':>5s}")
    base = None
    for name, fields in [*VARIANTS, (BY_OVERLAP, {})]:
        if args.quick and name not in QUICK:
            continue
        t0 = time.perf_counter()
        s = run(ds, best, replace(TCConfig(), **fields), stitched_ids=name != BY_OVERLAP)
        base = s if base is None else base
        print(
            f"{name:42s} {s['pod']:5.2f} {s['hits']:>3d}/{s['storms']:<3d} {s['far']:5.2f} "
            f"{s['false_alarms']:>3d}/{s['tracks']:<3d} {time.perf_counter() - t0:5.1f}",
            flush=True,
        )
    pod_ok, far_ok = base["pod"] >= 0.85, base["far"] <= 0.15
    (p0, p1), (f0, f1) = base["pod_interval"], base["far_interval"]
    print(
        f"\ndefaults: POD {base['pod']:.2f} (95 % interval {p0:.2f}-{p1:.2f}; goal 0.85: "
        f"{'met' if pod_ok else 'not met'}), FAR {base['far']:.2f} (95 % interval "
        f"{f0:.2f}-{f1:.2f}; goal 0.15: {'met' if far_ok else 'not met'})"
    )
    return 0 if np.isfinite(base["pod"]) else 1


if __name__ == "__main__":
    sys.exit(main())
