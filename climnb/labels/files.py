"""``climnb label`` as one call: files in, labels and their event table out.

:func:`label_files` checks the outputs before any work (the output rule of
:func:`climnb.io.outputs.check_outputs`: an output equal to an input, the event table equal to the
output, an output that is a directory, under a file or cannot be written are refused with one
line, so an input is never overwritten; a missing parent folder is created), takes the
exclusive claim on both outputs (:func:`climnb.io.atomic.claims`: a second run into the same
output is refused rather than writing over the first's result), removes what a killed earlier
run of them left, opens the files as they come (CAM5, ERA5, MERRA-2, GRIB; renames and units
given), refuses values of no atmosphere (:mod:`climnb.io.plausible`), labels them
(:func:`climnb.labels.dataset.label_dataset`) and writes both outputs atomically
(:func:`climnb.labels.writer.write_labels`), on ``workers`` processes or a dask.distributed
scheduler. Every error names the input files.

Examples
--------
>>> import tempfile
>>> from pathlib import Path
>>> from climnb.data.synthetic import make_dataset, save_dataset
>>> d = Path(tempfile.mkdtemp())
>>> _ = save_dataset(*make_dataset(n_time=2, seed=0), d / "fields.nc")
>>> text = label_files(LabelRequest(inputs=(d / "fields.nc",), out=d / "labels.nc", progress=False))
>>> text.splitlines()[0].startswith("2 time steps labelled"), (d / "labels.events.csv").exists()
(True, True)
"""

from __future__ import annotations

import contextlib
import logging
import os
from dataclasses import dataclass, field, replace
from pathlib import Path

from climnb.io.atomic import claims, remove_leftovers
from climnb.io.outputs import check_outputs
from climnb.io.paths import expand_paths
from climnb.labels.config import LabelConfig
from climnb.labels.workers import worker_processes

__all__ = ["LabelRequest", "label_files", "MAX_REGRID"]

log = logging.getLogger(__name__)

PathLike = str | os.PathLike

MAX_REGRID = 10.0  # degrees: coarser grids hold no storm (and pyresample fails on them)


@dataclass(frozen=True)
class LabelRequest:
    """What ``climnb label`` labels and where it goes (the options of the command).

    Attributes
    ----------
    inputs : NetCDF files, globs or Zarr stores, joined along time.
    out : the labels (NetCDF, or Zarr for ``*.zarr``).
    events : the event table (CSV); default beside ``out`` (``.events.csv``).
    recipe : ``"default"``, ``"paper"`` or ``"ivt"`` (:meth:`LabelConfig.recipe`).
    storm_tracks : ``"auto"``, ``"on"`` or ``"off"`` (:attr:`TCConfig.tracks`).
    classes : ``"auto"``, ``"ar"``, ``"tc"`` or ``"both"``.
    rename : the input's variable names -> climnb's.
    units : units to take for variables whose attribute is wrong or missing.
    regrid : spacing (degrees) of the regular grid projected inputs are labelled on.
    ar_percentile : the river percentile (None: the recipe's).
    workers : worker processes (or the LocalCluster's, with ``scheduler="local"``).
    scheduler : ``"local"``, ``"slurm"`` or a scheduler's address; None: no dask.distributed.
    progress : show the progress bar.
    """

    inputs: tuple[PathLike, ...]
    out: PathLike
    events: PathLike | None = None
    recipe: str = "default"
    storm_tracks: str = "auto"
    classes: str = "auto"
    rename: dict[str, str] = field(default_factory=dict)
    units: dict[str, str] = field(default_factory=dict)
    regrid: float | None = None
    ar_percentile: float | None = None
    workers: int = 1
    scheduler: str | None = None
    progress: bool = True

    def __post_init__(self):
        if self.workers < 1:
            raise ValueError(f"--workers must be at least 1, got {self.workers}")
        if self.regrid is not None and not 0 < self.regrid <= MAX_REGRID:  # NaN fails it too
            raise ValueError(
                f"--regrid takes the spacing of the regular grid in degrees, more than 0 and "
                f"at most {MAX_REGRID:g} (e.g. 0.25 or 1), got {self.regrid:g}"
            )


def label_files(req: LabelRequest) -> str:
    """Label ``req.inputs`` into ``req.out`` and its event table; returns what ``climnb
    label`` prints (steps, events per class, the notes and the storm checks).

    The worker processes (``req.workers`` above 1, no ``req.scheduler``) start once the
    outputs are claimed, before the labeller is imported and the input opened, which they
    overlap (:func:`climnb.labels.workers.worker_processes`)."""
    files = expand_paths(req.inputs)  # once: the globs as they are now
    out = Path(req.out)
    events_path = Path(req.events) if req.events else out.with_suffix(".events.csv")
    check_outputs({"--out": out, "--events": events_path}, files)
    with claims([out, events_path]), _workers(req):  # one run at a time into these outputs
        return _label(req, files, out, events_path)


def _workers(req: LabelRequest):
    """The worker processes that label (:func:`write_labels` finds them open), or nothing."""
    if req.scheduler or req.workers < 2:
        return contextlib.nullcontext()
    return worker_processes(req.workers)


def _describe(files: list[str]) -> str:
    """The input files for an error message: all of a few, else the first and the last."""
    if len(files) <= 3:
        return ", ".join(files)
    return f"{files[0]} ... {files[-1]} ({len(files)} files)"


def _label(req: LabelRequest, files, out: Path, events_path: Path) -> str:
    # xarray and dask: imported once the worker processes have started
    from climnb.io.files import open_fields
    from climnb.io.netcdf import time_steps
    from climnb.io.plausible import check_plausible_input
    from climnb.labels.dataset import StepError, label_dataset
    from climnb.labels.writer import write_labels

    for path in (out, events_path):  # what a killed earlier run of this output left
        remove_leftovers(path.parent, path.name)
    config = LabelConfig.recipe(req.recipe, ar_percentile=req.ar_percentile)
    config = replace(config, tc=replace(config.tc, tracks=req.storm_tracks))
    renames, units = dict(req.rename), dict(req.units)
    ds = open_fields(files, variables=renames, units=units, canonical=False, regrid=req.regrid)
    check_plausible_input(  # a wrong unit gives values of no atmosphere: refused here
        ds,
        source=_describe(files),
        variables=renames,
        units=units,
        regrid=req.regrid,
        names=("PSL", "TMQ", "IVT"),
    )
    try:  # what the input lacks or holds wrongly is found here: name the input files
        labels, events = label_dataset(
            ds, config, classes=req.classes, variables=renames, units=units, regrid=req.regrid
        )
    except ValueError as err:
        raise ValueError(f"{_describe(files)}: {err}") from None
    if req.scheduler and out.suffix == ".zarr":
        raise ValueError(f"--out {out}: --scheduler writes NetCDF only; give a .nc name")
    # the client first: the NetCDF writer then takes a lock the workers can share
    with _client(req) as client:
        try:
            table = write_labels(
                labels,
                events,
                out,
                events_path=events_path,
                workers=req.workers,
                client=client,
                progress=req.progress,
            )
        except StepError as err:  # found while labelling a step: name the input files
            raise ValueError(f"{_describe(files)}: {err}") from None
    counts = table.class_name.value_counts()
    found = ", ".join(
        f"{name.replace('_', ' ')}s: {counts.get(name, 0)}"
        for name in labels.attrs["classes"].split()
    )
    checks = labels.attrs["storm_checks"]
    return (
        f"{time_steps(labels)} time steps labelled -> {out}\n"
        f"  {found} -> {events_path}\n"
        f"  {labels.attrs['notes']}" + (f"\n  storm checks: {checks}" if checks else "")
    )


def _client(req: LabelRequest):
    """A dask.distributed client for ``req.scheduler`` (a context manager), else ``None``."""
    if not req.scheduler:
        return contextlib.nullcontext()
    from climnb.runtime.scheduler import dask_client

    options = {"n_workers": req.workers} if req.scheduler == "local" else {}
    client = dask_client(req.scheduler, **options)
    log.warning("dask dashboard: %s", client.dashboard_link)
    return client
