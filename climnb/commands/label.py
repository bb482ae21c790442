"""``climnb label``: heuristic TC/AR labels for NetCDF files as they come (CAM5, ERA5, MERRA-2).

The options become a :class:`climnb.labels.files.LabelRequest` and one call of
:func:`climnb.labels.files.label_files` does the rest (the output rule, the claim on the
outputs, labelling, the atomic writes; a refused output or input exits with status 2 and one
line).
"""

from __future__ import annotations

import logging

from climnb.progress import NO_PROGRESS_HELP

HELP = "label tropical cyclones and atmospheric rivers in NetCDF files (CAM5, ERA5, MERRA-2, ...)"
EXAMPLE = (
    "climnb label data/toy/fields.nc --out data/toy/labels.nc --workers 2\n"
    "  climnb label merra2.nc --out ar.nc --classes ar --rename my_ivt=IVT"
)

log = logging.getLogger(__name__)


def add_arguments(parser):
    parser.add_argument(
        "inputs",
        nargs="+",
        metavar="INPUT",
        help="NetCDF file(s), glob pattern(s) or Zarr store(s), joined along time",
    )
    parser.add_argument(
        "--out", required=True, help="file to write the labels to: NetCDF, or Zarr (*.zarr)"
    )
    parser.add_argument("--events", help="CSV file for the event table (default: beside OUT)")
    parser.add_argument(
        "--recipe",
        choices=("default", "paper", "ivt"),
        default="default",
        help="'paper' uses the paper's percentile masks; 'ivt' draws rivers as IVT >= 250 "
        "objects (also from the proxy TMQ x |V850|); default: rivers from IVT when the input "
        "has it, else half-maximum edges of the moisture",
    )
    parser.add_argument(
        "--storm-tracks",
        choices=("auto", "on", "off"),
        default="auto",
        help="keep only the storms of cyclone tracks (TempestExtremes' StitchNodes rules: at "
        "least 54 h, gaps up to 24 h, formed over the ocean between 5 and 30 deg, 54 h over "
        "the ocean; docs/own-data.md); default 'auto': when there is no warm-core check (no "
        "T200, T500, as from ERA5's msl and vo) and the input spans 54 h",
    )
    parser.add_argument(
        "--classes",
        choices=("auto", "ar", "tc", "both"),
        default="auto",
        help="what to label (default: whatever the input supports)",
    )
    parser.add_argument(
        "--rename",
        action="append",
        default=[],
        metavar="OLD=NEW",
        help="take the input's variable OLD as climnb's NEW (e.g. pw=TMQ); repeatable",
    )
    parser.add_argument(
        "--units",
        action="append",
        default=[],
        metavar="VAR=UNITS",
        help="take UNITS for the input's variable VAR (or climnb's name) instead of its "
        "'units' attribute, when that is wrong or missing (e.g. IVT='kg m-1 s-1'); repeatable",
    )
    parser.add_argument(
        "--regrid",
        type=float,
        metavar="DEG",
        help="for projected or curvilinear grids (WRF, NAM): regrid the fields to a regular "
        "latitude/longitude grid of DEG degrees (pyresample) and put the labels back on the "
        "input's grid",
    )
    parser.add_argument("--ar-percentile", type=float, help="river percentile (default 95)")
    parser.add_argument(
        "--workers",
        type=int,
        default=1,
        help="worker processes labelling time steps in parallel, each reading its own steps "
        "(default 1: all in this process; starting them takes a few seconds); with "
        "--scheduler local, the LocalCluster's single-threaded worker processes",
    )
    parser.add_argument(
        "--scheduler",
        metavar="local|slurm|ADDRESS",
        help="label on dask.distributed: 'local' (a LocalCluster of --workers processes), "
        "'slurm' (dask-jobqueue's SLURMCluster as configured in jobqueue.yaml) or the address "
        "of a running scheduler (tcp://host:8786); see climnb.runtime.scheduler",
    )
    parser.add_argument("--no-progress", action="store_true", help=NO_PROGRESS_HELP)


def _pairs(items, option: str = "--rename", form: str = "OLD=NEW") -> dict[str, str]:
    out = {}
    for item in items:
        old, sep, new = item.partition("=")
        if not sep or not old.strip() or not new.strip():
            raise ValueError(f"{option} takes {form}, got {item!r}")
        out[old.strip()] = new.strip()
    return out


def run(args) -> int:
    # xarray and dask: imported here, so that `climnb --help` and `--version` stay fast
    from climnb.labels.files import LabelRequest, label_files

    request = LabelRequest(
        inputs=tuple(args.inputs),
        out=args.out,
        events=args.events,
        recipe=args.recipe,
        storm_tracks=args.storm_tracks,
        classes=args.classes,
        rename=_pairs(args.rename),
        units=_pairs(args.units, "--units", "VAR=UNITS"),
        regrid=args.regrid,
        ar_percentile=args.ar_percentile,
        workers=args.workers,
        scheduler=args.scheduler,
        progress=not args.no_progress,
    )
    print(label_files(request))
    return 0
