"""``climnb stats`` as functions: open the files, check them all, compute, then write.

Every check (flags, grids, classes, periods, regions, units) runs before anything is written,
and each output appears atomically, so a failure leaves nothing behind.

Examples
--------
>>> import tempfile
>>> from pathlib import Path
>>> from climnb.data.synthetic import make_dataset, save_dataset
>>> d = Path(tempfile.mkdtemp())
>>> _ = save_dataset(*make_dataset(n_time=4, seed=0), d / "fields.nc")
>>> text = summarize(StatsRequest(inputs=(d / "fields.nc",), out=d / "freq.nc"))
>>> (d / "freq.nc").exists(), text.splitlines()[0].startswith("frequency of truth")
(True, True)
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd
import xarray as xr

from climnb.io.atomic import atomic_path, claims
from climnb.io.files import expand_paths, open_fields, write
from climnb.io.outputs import check_outputs
from climnb.io.plausible import check_plausible
from climnb.stats.change import CompareConfig, Comparison, compare
from climnb.stats.change_tables import compare_events, compare_precip
from climnb.stats.events import event_steps, event_table, events_to_dataset, landfall_table
from climnb.stats.frequency import frequency, write_frequency
from climnb.stats.masks import check_missing, check_same_grid, class_mask
from climnb.stats.precip import attributed_precipitation, precipitation
from climnb.stats.regions import BUILTIN, Region
from climnb.tracks import read_storm_tracks, read_tracks

__all__ = ["StatsRequest", "summarize", "compare_files", "open_mask"]

log = logging.getLogger(__name__)

PathLike = str | os.PathLike


@dataclass(frozen=True)
class StatsRequest:
    """What ``climnb stats`` computes and where it goes.

    Attributes
    ----------
    inputs : mask files (labels, predictions, truth, any flagged mask), joined along time.
    out : the frequency file (NetCDF, or Zarr for ``*.zarr``); None for none.
    by : ``"all"``, ``"season"`` or ``"month"``.
    variable : the mask's name (default: found).
    tracks : a CF trajectory file of these masks (default: tracked here when events are asked).
    fields : files of the fields the masks were made from (default: the mask files).
    events : the event table, CSV (or NetCDF for ``*.nc``).
    landfall : the landfall table, CSV.
    precip : the attributed-precipitation table, CSV.
    regions : regions of landfall and precipitation (default: California and the US West
        Coast for landfall, the globe and them for precipitation).
    """

    inputs: tuple[PathLike, ...]
    out: PathLike | None = None
    by: str = "all"
    variable: str | None = None
    tracks: PathLike | None = None
    fields: tuple[PathLike, ...] = ()
    events: PathLike | None = None
    landfall: PathLike | None = None
    precip: PathLike | None = None
    regions: tuple[Region, ...] = field(default=())


def open_mask(paths, variable: str | None = None) -> tuple[xr.DataArray, list[Path], xr.Dataset]:
    """The class mask of ``paths`` (checked), the expanded paths and the opened Dataset."""
    files = [Path(p) for p in expand_paths(paths)]
    ds = open_fields(files)
    return class_mask(ds, variable, source=str(files[0])), files, ds


def summarize(req: StatsRequest) -> str:
    """Compute what ``req`` asks and write it; returns a few lines saying what was written."""
    mask, files, ds = open_mask(req.inputs, req.variable)
    outputs = _check_outputs(req, files)
    if not outputs:
        raise ValueError("nothing to do: give --out, --events, --landfall or --precip")
    with claims(outputs.values()):  # one run at a time into these outputs
        return _summarize(req, mask, files, ds)


def _summarize(req: StatsRequest, mask, files, ds) -> str:
    regions = list(req.regions) or [BUILTIN["california"], BUILTIN["us_west_coast"]]
    fields = _fields(req, ds, mask, files)
    lines = [note] if (note := _missing(mask, ds, files)) else []
    freq = frequency(mask, req.by) if req.out else None
    steps = table = landfalls = precip = None
    if req.events or req.landfall:
        obs = read_tracks(req.tracks) if req.tracks else None
        # labels tracked here follow the storm tracks their labeller stitched, as in
        # `climnb tracks`
        storms = read_storm_tracks(files)[0] if obs is None and mask.name == "labels" else None
        steps = event_steps(
            mask, obs, fields=fields, regions=regions, source=str(files[0]), storms=storms
        )
        table = event_table(steps)
        landfalls = landfall_table(steps)
    if req.precip:
        rain = precipitation(fields if fields is not None else ds, source=_fields_name(req, files))
        prec_regions = [BUILTIN["global"], *[r for r in regions if r.name != "global"]]
        precip = attributed_precipitation(mask, rain, regions=prec_regions, source=str(files[0]))
    # everything is computed and checked: now write
    if freq is not None:
        write_frequency(freq, req.out)
        lines.append(_freq_line(mask, freq, req))
    if table is not None and req.events:
        _write_table(table, req.events, events_to_dataset)
        counts = table.class_name.value_counts()
        lines.append(
            f"events: {counts.get('tropical_cyclone', 0)} tropical cyclones, "
            f"{counts.get('atmospheric_river', 0)} atmospheric rivers -> {req.events}"
        )
    if landfalls is not None and req.landfall:
        _write_table(landfalls, req.landfall)
        total = landfalls.groupby(["region", "class_name"]).landfalling_events.sum()
        lines.append(f"landfalls -> {req.landfall}: " + _pairs(total))
    if precip is not None:
        _write_table(precip, req.precip)
        lines.append(f"attributed precipitation ({len(precip)} rows) -> {req.precip}")
        if precip.attrs.get("missing"):
            lines.append(f"  {_fields_name(req, files)}: {precip.attrs['missing']}")
    return "\n".join(lines)


def _check_outputs(req: StatsRequest, files: list[Path]) -> dict[str, Path]:
    """Every output checked against every input (masks, ``--fields``, ``--tracks``) and the
    other outputs (:func:`climnb.io.outputs.check_outputs`), before any work."""
    outputs = {"--out": req.out, "--events": req.events, "--landfall": req.landfall}
    inputs = [*files, *req.fields, *([req.tracks] if req.tracks else [])]
    return check_outputs({**outputs, "--precip": req.precip}, inputs)


def _missing(mask, ds, files) -> str:
    """Refuse a mask with too many missing values (NaN in a float mask); the note of how many
    were left out, naming the file (empty: none, or an integer mask, which has none)."""
    source = ds[mask.name] if mask.name in ds.data_vars else None
    if source is None or source.dtype.kind != "f":
        return ""
    note = check_missing(mask, source=str(files[0]))
    return f"{files[0]}: {note}" if note else ""


def _fields(req, ds, mask, files):
    if not req.fields:
        if req.events or req.landfall:  # intensities from the mask file's own fields
            check_plausible(ds, source=str(files[0]), names=_INTENSITY)
        return ds
    fields = open_fields(expand_paths(req.fields))
    _check_fields(mask, fields, str(files[0]), str(expand_paths(req.fields)[0]))
    if req.events or req.landfall:
        check_plausible(fields, source=str(expand_paths(req.fields)[0]), names=_INTENSITY)
    return fields


_INTENSITY = ("PSL", "IVT", "TMQ")  # the fields events are measured on


def _fields_name(req, files) -> str:
    return str(expand_paths(req.fields)[0]) if req.fields else str(files[0])


def _freq_line(mask, freq, req) -> str:
    mean = freq.frequency.weighted(_coslat(freq)).mean(("lat", "lon"))
    parts = ", ".join(
        f"{c}: {100 * float(v.mean()):.2f} %"
        for c, v in zip(mean["class"].values, mean, strict=True)
    )
    return (
        f"frequency of {mask.name} over {mask.sizes['time']} steps "
        f"({freq.attrs['period_start']} .. {freq.attrs['period_end']}), by {req.by}, "
        f"global mean {parts} -> {req.out}"
    )


def _coslat(ds):
    import numpy as np

    return np.cos(np.radians(ds.lat))


def _pairs(series: pd.Series) -> str:
    return ", ".join(f"{r} {c}: {int(v)}" for (r, c), v in series.items())


def _write_table(table: pd.DataFrame, path: PathLike, to_dataset=None) -> Path:
    path = Path(path)
    with atomic_path(path) as tmp:
        if path.suffix == ".nc" and to_dataset is not None:
            to_dataset(table).to_netcdf(tmp)
        else:
            table.to_csv(tmp, index=False)
    return path


def compare_files(
    a: PathLike | list[PathLike],
    b: PathLike | list[PathLike],
    config: CompareConfig | None = None,
    *,
    regions: list[Region] | None = None,
    variable: str | None = None,
    out: PathLike | None = None,
    csv: PathLike | None = None,
    events: PathLike | None = None,
    precip: PathLike | None = None,
    fields: tuple[PathLike, PathLike] | None = None,
) -> Comparison:
    """``climnb stats compare A B``: compare two mask files and write the maps and tables.

    ``events`` and ``precip`` (CSV, or NetCDF for ``*.nc``) ask for the change of event counts,
    landfalls and intensities (:func:`climnb.stats.change_tables.compare_events`) and of the
    attributed precipitation (:func:`~climnb.stats.change_tables.compare_precip`); they are
    on the returned Comparison's ``events`` and ``precip``. ``fields``: the files of the
    fields of ``a`` and of ``b`` (default: the mask files themselves). Everything is checked
    and computed before anything is written.
    """
    ma, fa, da_ = open_mask(a, variable)
    mb, fb, db = open_mask(b, variable)
    for m, f, d in ((ma, fa, da_), (mb, fb, db)):
        _missing(m, d, f)  # more than a few missing values refused; the rest left out
    _warn_overlap(ma, mb, (str(fa[0]), str(fb[0])))
    asked = {"--out": out, "--csv": csv, "--events": events, "--precip": precip}
    inputs = [*fa, *fb, *(p for f in fields or () for p in _listed(f))]
    with claims(check_outputs(asked, inputs).values()):  # one run at a time into them
        return _compare(ma, mb, fa, fb, da_, db, config, regions, out, csv, events, precip, fields)


def _compare(ma, mb, fa, fb, da_, db, config, regions, out, csv, events, precip, fields):
    names = (str(fa[0]), str(fb[0]))
    field_sets, field_names = (da_, db), names
    if fields is not None:
        field_sets = tuple(open_fields(expand_paths(f)) for f in fields)
        field_names = tuple(str(expand_paths(f)[0]) for f in fields)
        for m, f, n, fn in zip((ma, mb), field_sets, names, field_names, strict=True):
            _check_fields(m, f, n, fn)
    result = compare(ma, mb, config, regions=regions, names=names)
    if events is not None:
        result.events = compare_events(
            ma, mb, config, fields=field_sets, regions=regions, names=names
        )
    if precip is not None:
        rain = [precipitation(f, source=n) for f, n in zip(field_sets, field_names, strict=True)]
        result.precip = compare_precip(
            ma, rain[0], mb, rain[1], config, regions=regions, names=names
        )
    # everything is computed and checked: now write
    if out is not None:
        write(result.maps, Path(out))
    if csv is not None:
        _write_table(result.table, csv)
    for table, path in ((result.events, events), (result.precip, precip)):
        if path is not None:
            _write_table(table, path, _change_dataset)
    return result


def _warn_overlap(a, b, names) -> None:
    """Say so when the two periods share time steps: the test takes them as independent."""
    from climnb.tracks import track_times

    shared = set(track_times(a.time.values)) & set(track_times(b.time.values))
    if shared:
        log.warning(
            "%s and %s share %d of their time steps (%d and %d): the permutation test and the "
            "bootstrap take the periods as independent, so the p-values are too small; compare "
            "periods that do not overlap",
            *names,
            len(shared),
            a.sizes["time"],
            b.sizes["time"],
        )


def _listed(paths) -> list:
    return [paths] if isinstance(paths, (str, os.PathLike)) else list(paths)


def _check_fields(mask, fields, name, fields_name) -> None:
    check_same_grid(mask, fields, (name, fields_name))
    missing = ~mask.time.isin(fields.time.values)
    if bool(missing.any()):
        raise ValueError(
            f"{fields_name}: lacks {int(missing.sum())} of the mask's {mask.sizes['time']} time "
            f"steps (first missing: {mask.time.values[missing.values][0]})"
        )


def _change_dataset(table: pd.DataFrame) -> xr.Dataset:
    """A change table as a NetCDF-ready Dataset along ``row``."""
    ds = xr.Dataset(
        {
            c: ("row", table[c].astype(str).to_numpy() if table[c].dtype == object else table[c])
            for c in table.columns
        }
    )
    ds.attrs = {
        "title": "change between two periods or runs",
        "source": "climnb.stats.change_tables",
        "Conventions": "CF-1.8",
        "test": "permutation of whole blocks (two-sided); CI: block bootstrap; "
        "significant_fdr: Benjamini-Hochberg across the rows at 2 alpha (Wilks 2016)",
    }
    return ds
