"""``climnb tracks``: link the storms and rivers of a class mask over time into tracks."""

from __future__ import annotations

import re
from pathlib import Path

from climnb.atomic import atomic_path, remove_leftovers
from climnb.labels.schema import MASK_VARIABLES
from climnb.outputs import check_outputs

HELP = "link cyclones and rivers of labels or a prediction over time into tracks (CF NetCDF)"
EXAMPLE = "climnb tracks predictions.zarr --out tracks.nc --max-gap 1"


def add_arguments(parser):
    parser.add_argument(
        "inputs",
        nargs="+",
        metavar="INPUT",
        help="NetCDF files or Zarr stores of `climnb label` or `climnb predict`",
    )
    parser.add_argument("--out", required=True, help="CF trajectory NetCDF file to write")
    parser.add_argument(
        "--variable",
        help=f"the class mask (default: the first of {', '.join(MASK_VARIABLES)} found)",
    )
    parser.add_argument("--csv", help="also write one row per track and step as CSV")
    parser.add_argument(
        "--events",
        nargs="+",
        metavar="CSV",
        help="the event tables of `climnb label` (default: each input's .events.csv beside it, "
        "when there): cyclones then follow the storm tracks the labeller stitched",
    )
    parser.add_argument(
        "--max-gap",
        type=int,
        default=None,
        metavar="N",
        help="steps a track may miss and still be continued, as TempestExtremes' StitchNodes "
        "--maxgap; for detections that come and go (default: the gap the labeller's cyclone "
        "tracks allowed, written in the labels as storm_max_gap_h; else 0, consecutive steps)",
    )


def run(args) -> int:
    from climnb.store import expand, open_fields  # xarray: not for `climnb --help`
    from climnb.tracks import (  # xarray: not for `climnb --help`
        TrackConfig,
        check_mask,
        check_times,
        default_max_gap,
        track_events,
        track_summary,
        track_times,
        write_tracks,
    )

    if args.max_gap is not None and args.max_gap < 0:
        raise ValueError(f"--max-gap must be 0 or more steps, got {args.max_gap}")
    inputs = expand(args.inputs)
    out = check_outputs({"--out": args.out, "--csv": args.csv}, inputs)["--out"]
    for path in (out, *([Path(args.csv)] if args.csv else [])):  # a killed earlier run's
        remove_leftovers(path.parent, path.name)
    ds = open_fields(inputs)
    names = [args.variable] if args.variable else list(MASK_VARIABLES)
    name = next((n for n in names if n in ds.data_vars), None)
    if name is None:
        raise ValueError(
            f"{inputs[0]}: no class mask {' or '.join(names)}; it has "
            f"{', '.join(map(str, ds.data_vars)) or 'no variables'}"
        )
    mask = ds[name].load()
    try:
        check_mask(mask)
        check_times(track_times(mask.time.values))
    except ValueError as err:
        raise ValueError(f"{_owners(inputs, err)}: {err}") from None
    gap = default_max_gap(mask) if args.max_gap is None else args.max_gap
    storms, tables = _storm_tracks(inputs, args.events) if name == "labels" else (None, [])
    tracks = track_events(mask, TrackConfig(max_gap_steps=gap), storms=storms)
    times = track_times(mask.time.values)
    attrs = {
        "source": f"climnb tracks of {name} in {inputs[0]}",
        # the period the tracks were looked for in (ACDD): a verification judges no other
        "time_coverage_start": str(times[0]) if times else "",
        "time_coverage_end": str(times[-1]) if times else "",
    }
    write_tracks(tracks, out, attrs=attrs)
    if args.csv:
        with atomic_path(Path(args.csv)) as tmp:
            tracks.to_csv(tmp, index=False)
    summary = track_summary(tracks)
    counts = summary.class_name.value_counts()
    print(
        f"{len(summary)} tracks over {mask.sizes['time']} steps -> {out}\n"
        f"  tropical cyclones: {counts.get('tropical_cyclone', 0)}, "
        f"atmospheric rivers: {counts.get('atmospheric_river', 0)}; "
        f"longest {summary.lifetime_h.max() if len(summary) else 0:.0f} h"
        + (
            f"\n  cyclones follow the labeller's storm tracks in {', '.join(tables)}"
            if tables
            else ""
        )
    )
    return 0


def _storm_tracks(inputs, events):
    """The labels' event tables with stitched storm tracks (``--events``, else each input's
    ``.events.csv`` where it exists), as one table, and their paths; (None, []) without."""
    import pandas as pd  # not for `climnb --help`

    paths = (
        [Path(p) for p in events]
        if events
        else [Path(i).with_suffix(".events.csv") for i in inputs]
    )
    paths = [p for p in paths if events or p.is_file()]
    tables = []
    for p in paths:
        if not p.is_file():
            raise ValueError(f"--events {p}: no such file (the event table of `climnb label`)")
        table = pd.read_csv(p)
        missing = {"time", "class_id", "lat", "lon"} - set(table.columns)
        if missing:
            lacks = ", ".join(sorted(missing))
            raise ValueError(f"--events {p}: not an event table of `climnb label` (no {lacks})")
        if "storm_track" in table:
            tables.append((str(p), table))
    if not tables:
        return None, []
    return pd.concat([t for _, t in tables], ignore_index=True), [p for p, _ in tables]


def _owners(inputs, err: ValueError) -> str:
    """The input files a message is about: for a repeated time, the files that hold it."""
    from climnb.store import open_fields
    from climnb.tracks import track_times

    found = re.match(r"time (.+?) is repeated", str(err))
    if found is None or len(inputs) < 2:
        return ", ".join(map(str, inputs))
    holders = []
    for f in inputs:
        with open_fields([f]) as part:
            if found.group(1) in {str(t) for t in track_times(part.time.values)}:
                holders.append(str(f))
    return ", ".join(holders or map(str, inputs))
