"""``climnb verify``: score cyclone tracks against best tracks (POD, FAR, per storm)."""

from __future__ import annotations

from pathlib import Path

from climnb.io.atomic import atomic_path, claims, remove_leftovers
from climnb.io.outputs import check_outputs

HELP = "verify cyclone tracks against best tracks (IBTrACS, HURDAT2): hits, misses, POD, FAR"
EXAMPLE = "climnb verify tracks.nc --best-track ibtracs.csv --csv verification.csv"


def add_arguments(parser):
    parser.add_argument("tracks", metavar="TRACKS", help="trajectory file of `climnb tracks`")
    parser.add_argument(
        "--best-track",
        required=True,
        metavar="FILE",
        help="IBTrACS v04 CSV or NetCDF, or HURDAT2 text",
    )
    parser.add_argument(
        "--radius-km",
        type=float,
        default=300.0,
        help="a best-track point is matched by a track point within this distance at the same "
        "time (default 300 km, as Zarzycki & Ullrich 2017)",
    )
    parser.add_argument(
        "--min-wind-kt",
        type=float,
        default=34.0,
        help="the reference: storms whose wind reaches this (default 34 kt, tropical storm)",
    )
    parser.add_argument("--start", help="first time verified (default: where both files start)")
    parser.add_argument("--end", help="last time verified (default: where either file ends)")
    parser.add_argument("--csv", help="write the per-storm table as CSV")
    parser.add_argument("--tracks-csv", help="write the per-track table (false alarms) as CSV")


def run(args) -> int:
    inputs = [Path(args.tracks), Path(args.best_track)]
    # before any work, against both inputs and each other
    outputs = check_outputs({"--csv": args.csv, "--tracks-csv": args.tracks_csv}, inputs)
    with claims(outputs.values()):  # one run at a time into these outputs
        return _run(args, outputs)


def _run(args, outputs) -> int:
    from climnb.io.besttrack import read_best_tracks  # pandas: not for `climnb --help`
    from climnb.stats.verify import verify_tracks
    from climnb.tracks import read_tracks, tracks_period

    for path in outputs.values():
        remove_leftovers(path.parent, path.name)
    tracks = read_tracks(args.tracks)
    start, end = tracks_period(args.tracks)
    best = read_best_tracks(args.best_track)
    result = verify_tracks(
        tracks,
        best,
        radius_km=args.radius_km,
        min_wind_kt=args.min_wind_kt,
        start=args.start or start,
        end=args.end or end,
    )
    print(result.table())
    for flag, table in (("--csv", result.storms), ("--tracks-csv", result.tracks)):
        if flag in outputs:
            with atomic_path(outputs[flag]) as tmp:
                table.to_csv(tmp, index=False)
            print(f"  -> {outputs[flag]}")
    return 0
