"""``climnb label``: heuristic TC/AR labels for NetCDF files as they come (CAM5, ERA5, MERRA-2).

Output paths are checked before any work by the output rule of :mod:`climnb.outputs`: an output
equal to an input, the event table equal to the output, an output that is a directory, under a
file or cannot be written are refused with a one-line error (exit status 2), so an input is
never overwritten; a missing parent folder is created. Then the run takes the exclusive claim
on both outputs (:func:`climnb.atomic.claims`): a second run into the same ``--out`` started
at the same moment is refused with one line, never writing over the first's result.
"""

from __future__ import annotations

import contextlib
import logging
from dataclasses import replace
from pathlib import Path

from climnb.io.atomic import claims, remove_leftovers
from climnb.io.outputs import check_outputs
from climnb.labels.config import LabelConfig
from climnb.runtime.scheduler import dask_client

HELP = "label tropical cyclones and atmospheric rivers in NetCDF files (CAM5, ERA5, MERRA-2, ...)"
EXAMPLE = (
    "climnb label data/toy/fields.nc --out data/toy/labels.nc --workers 2\n"
    "  climnb label merra2.nc --out ar.nc --classes ar --rename my_ivt=IVT"
)

log = logging.getLogger(__name__)

MAX_REGRID = 10.0  # degrees: coarser grids hold no storm (and pyresample fails on them)


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
        "of a running scheduler (tcp://host:8786); see climnb.scheduler",
    )
    parser.add_argument("--no-progress", action="store_true", help="hide the progress bar")


def _pairs(items, option: str = "--rename", form: str = "OLD=NEW") -> dict[str, str]:
    out = {}
    for item in items:
        old, sep, new = item.partition("=")
        if not sep or not old.strip() or not new.strip():
            raise ValueError(f"{option} takes {form}, got {item!r}")
        out[old.strip()] = new.strip()
    return out


def _describe(files: list[str]) -> str:
    """The input files for an error message: all of a few, else the first and the last."""
    if len(files) <= 3:
        return ", ".join(files)
    return f"{files[0]} ... {files[-1]} ({len(files)} files)"


def _check_outputs(sources, out, events) -> None:
    """Refuse, before any work, outputs that would overwrite an input or cannot be written
    (the output rule of :func:`climnb.outputs.check_outputs`)."""
    check_outputs({"--out": out, "--events": events}, sources)


def run(args) -> int:
    if args.workers < 1:
        raise ValueError(f"--workers must be at least 1, got {args.workers}")
    if args.regrid is not None and not 0 < args.regrid <= MAX_REGRID:  # NaN fails it too
        raise ValueError(
            f"--regrid takes the spacing of the regular grid in degrees, more than 0 and at "
            f"most {MAX_REGRID:g} (e.g. 0.25 or 1), got {args.regrid:g}"
        )
    from climnb.io.files import expand_paths

    files = expand_paths(args.inputs)  # once: the globs as they are now
    out = Path(args.out)
    events_path = Path(args.events) if args.events else out.with_suffix(".events.csv")
    _check_outputs(files, out, events_path)
    with claims([out, events_path]):  # one run at a time into these outputs
        return _run(args, files, out, events_path)


def _run(args, files, out, events_path) -> int:
    # xarray and dask: imported here, so that `climnb --help` and `--version` stay fast
    from climnb.io.files import open_fields as open_dataset
    from climnb.io.netcdf import time_steps
    from climnb.io.plausible import check_plausible_input
    from climnb.labels.dataset import StepError, label_dataset
    from climnb.labels.writer import write_labels

    for path in (out, events_path):  # what a killed earlier run of this output left
        remove_leftovers(path.parent, path.name)
    config = LabelConfig.recipe(args.recipe, ar_percentile=args.ar_percentile)
    config = replace(config, tc=replace(config.tc, tracks=args.storm_tracks))
    renames = _pairs(args.rename)
    units = _pairs(args.units, "--units", "VAR=UNITS")
    ds = open_dataset(files, variables=renames, units=units, canonical=False, regrid=args.regrid)
    check_plausible_input(  # a wrong unit gives values of no atmosphere: refused here
        ds,
        source=_describe(files),
        variables=renames,
        units=units,
        regrid=args.regrid,
        names=("PSL", "TMQ", "IVT"),
    )
    try:  # what the input lacks or holds wrongly is found here: name the input files
        labels, events = label_dataset(
            ds, config, classes=args.classes, variables=renames, units=units, regrid=args.regrid
        )
    except ValueError as err:
        raise ValueError(f"{_describe(files)}: {err}") from None
    if args.scheduler and out.suffix == ".zarr":
        raise ValueError(f"--out {out}: --scheduler writes NetCDF only; give a .nc name")
    # the client first: the NetCDF writer then takes a lock the workers can share
    with _client(args) as client:
        try:
            table = write_labels(
                labels,
                events,
                out,
                events_path=events_path,
                workers=args.workers,
                client=client,
                progress=not args.no_progress,
            )
        except StepError as err:  # found while labelling a step: name the input files
            raise ValueError(f"{_describe(files)}: {err}") from None
    counts = table.class_name.value_counts()
    found = ", ".join(
        f"{name.replace('_', ' ')}s: {counts.get(name, 0)}"
        for name in labels.attrs["classes"].split()
    )
    checks = labels.attrs["storm_checks"]
    print(
        f"{time_steps(labels)} time steps labelled -> {out}\n"
        f"  {found} -> {events_path}\n"
        f"  {labels.attrs['notes']}" + (f"\n  storm checks: {checks}" if checks else "")
    )
    return 0


def _client(args):
    """A dask.distributed client for ``--scheduler`` (a context manager), else ``None``."""
    if not args.scheduler:
        return contextlib.nullcontext()
    options = {"n_workers": args.workers} if args.scheduler == "local" else {}
    client = dask_client(args.scheduler, **options)
    print(f"dask dashboard: {client.dashboard_link}", flush=True)
    return client
