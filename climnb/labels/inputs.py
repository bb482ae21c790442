"""What the labeller reads: files as they come, or toy fields with a known truth.

* :func:`fields_to_label` - the fields of a file (or files, a glob, a Zarr store) on the
  canonical grid with the variables a :class:`~climnb.labels.config.LabelConfig` needs, or
  seeded synthetic fields; with the true events where there are some;
* :func:`label_as_they_come` - toy fields written as ERA5, MERRA-2 or CAM5 write them
  (:func:`climnb.data.lookalike.dress`), each file opened as it is and labelled with what it
  supports: the path a user's own file takes, with a truth to compare.

Notebook 01 calls both; ``climnb label`` takes the same path through
:func:`climnb.io.files.open_fields` and :func:`climnb.labels.label_dataset`.

Examples
--------
>>> ds, events = fields_to_label(n_time=2, seed=0)
>>> ds.sizes["time"], sorted(events.class_name.unique())
(2, ['atmospheric_river', 'tropical_cyclone'])
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd
import xarray as xr

from climnb.data.lookalike import dress
from climnb.data.synthetic import make_dataset, read_events
from climnb.io.files import open_fields
from climnb.io.netcdf import normalize
from climnb.labels.ar import ivt_magnitude
from climnb.labels.config import LabelConfig
from climnb.labels.dataset import compute, label_dataset, required_variables

__all__ = ["fields_to_label", "label_as_they_come", "AsTheyCome"]


def fields_to_label(
    input_path: str | os.PathLike | Sequence[str | os.PathLike] | None = None,
    config: LabelConfig | None = None,
    *,
    n_time: int = 6,
    n_lat: int = 96,
    n_lon: int = 144,
    seed: int = 0,
) -> tuple[xr.Dataset, pd.DataFrame | None]:
    """The fields to label on the canonical grid, and their true events where known.

    Parameters
    ----------
    input_path : NetCDF/Zarr/GRIB file(s) or a glob (:func:`climnb.io.files.open_fields`);
        None: synthetic fields of :func:`climnb.data.synthetic.make_dataset`.
    config : what the labels need (:func:`~climnb.labels.dataset.required_variables`);
        default :class:`LabelConfig`.
    n_time, n_lat, n_lon, seed : size and seed of the synthetic fields.

    Returns
    -------
    ds : the fields, normalised (names, units, ascending latitudes, longitudes 0..360).
    events : the synthetic events, or the event list saved beside a synthetic file
        (:func:`climnb.data.synthetic.read_events`); None for a real file.
    """
    required = required_variables(config or LabelConfig())
    if input_path is None:
        ds, events = make_dataset(n_time=n_time, n_lat=n_lat, n_lon=n_lon, seed=seed)
    else:
        ds = open_fields(input_path, required=required)
        first = input_path if isinstance(input_path, (str, os.PathLike)) else input_path[0]
        events = read_events(first)
    return normalize(ds, required=required), events


@dataclass
class AsTheyCome:
    """What :func:`label_as_they_come` found, per source (in the order asked for).

    Attributes
    ----------
    notes : what was labelled and why (the labels' ``notes`` attribute), indexed by source.
    ivt : IVT (kg m-1 s-1) of the first step, on the canonical grid.
    labels : the labels of the first step, on the canonical grid.
    files : the files written and labelled (none when they went to a temporary folder,
        which is removed).
    """

    notes: pd.Series
    ivt: dict[str, xr.DataArray] = field(default_factory=dict)
    labels: dict[str, xr.DataArray] = field(default_factory=dict)
    files: dict[str, Path] = field(default_factory=dict)


def label_as_they_come(
    sources: Sequence[str] = ("era5", "merra2", "cam5"),
    *,
    n_time: int = 2,
    n_lat: int = 96,
    n_lon: int = 144,
    seed: int = 0,
    folder: str | os.PathLike | None = None,
) -> AsTheyCome:
    """Write toy fields as each source writes them, open each file as it is, and label it.

    Parameters
    ----------
    sources : names of :data:`climnb.data.lookalike.SOURCES` (``era5``, ``merra2``, ``cam5``, ...).
    n_time, n_lat, n_lon, seed : size and seed of the synthetic fields (with IVT).
    folder : where the files go (default: a temporary folder, removed before returning).
    """
    fields, _ = make_dataset(n_time=n_time, n_lat=n_lat, n_lon=n_lon, seed=seed, ivt=True)
    found = AsTheyCome(notes=pd.Series(dtype=str, name="what was labelled and why"))
    keep = folder is not None  # a folder of the caller's: its files are listed
    with contextlib.ExitStack() as stack:
        if folder is None:  # removed on return: each call (each run of notebook 01) left one
            folder = stack.enter_context(tempfile.TemporaryDirectory(prefix="climnb-own-data-"))
        for source in sources:
            path = Path(folder) / f"{source}.nc"
            dress(fields, source).drop_vars("truth").to_netcdf(path)
            with open_fields(path, canonical=False) as raw:  # as it comes: names, units, grid
                labels, _ = compute(*label_dataset(raw, grid="canonical"))
                ivt = ivt_magnitude(dict(normalize(raw).data_vars)).isel(time=0).load()
            found.notes[source] = labels.attrs["notes"]
            ivt = ivt.rename("IVT").drop_attrs(deep=False)  # hypot kept the eastward part's
            found.ivt[source] = ivt.assign_attrs(units="kg m-1 s-1")
            found.labels[source] = labels.isel(time=0)
            if keep:
                found.files[source] = path
    return found
