"""Physical plausibility of fields after their units are read: a wrong ``units`` attribute (or
a wrong ``--units``) gives values no atmosphere has, which the commands refuse rather than
label, count or average.

:data:`RANGES` holds the plausible range of each field in climnb's units; :func:`check_plausible`
looks at the first and the last time step of each field there is (the median of each: a few
stray values, a deep storm's pressure, a dry point's zero, pass) and refuses a field outside
its range with one line naming the variable, its range and ``--units``. ``climnb predict`` has
its own check against the ranges a model saw in training
(:func:`climnb.inference.predict.check_ranges`).

Examples
--------
>>> import numpy as np, xarray as xr
>>> ds = xr.Dataset({"PSL": (("time", "lat", "lon"), np.full((2, 2, 2), 101000.0))})
>>> check_plausible(ds, source="f.nc")
>>> check_plausible(ds / 100, source="f.nc")  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
ValueError: f.nc: PSL (sea-level pressure) has a median of 1010 Pa at step 0, outside ...
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import xarray as xr

__all__ = ["RANGES", "check_plausible", "check_plausible_input"]

_MM_DAY = 1000.0 * 86400.0  # m s-1 -> mm day-1

#: climnb's name -> (low, high, units of the range, what it is, factor from climnb's units to
#: the range's units).
RANGES = {
    "PSL": (85_000.0, 110_000.0, "Pa", "sea-level pressure", 1.0),
    "TMQ": (0.0, 100.0, "kg m-2", "precipitable water", 1.0),
    "IVT": (0.0, 3_000.0, "kg m-1 s-1", "vapour transport", 1.0),
    "PRECT": (0.0, 2_000.0, "mm/day", "precipitation rate", _MM_DAY),
}


def check_plausible(
    ds: xr.Dataset | xr.DataArray, *, source: str, names: Iterable[str] | None = None
) -> None:
    """Refuse a field of ``ds`` (climnb's names and units) whose median at its first or last
    time step lies outside :data:`RANGES`; ``source`` names the input in the message.

    Raises
    ------
    ValueError
        One line: the file, the variable, the median found, the plausible range and the way
        forward (``--units VAR=UNITS`` when the attribute is wrong).
    """
    if isinstance(ds, xr.DataArray):
        ds = ds.to_dataset(name=ds.name or "field")
    names = list(RANGES) if names is None else [n for n in names if n in RANGES]
    for name in names:
        if name not in ds.data_vars:
            continue
        da = ds[name]
        lo, hi, units, what, factor = RANGES[name]
        if "time" in da.dims and da.sizes["time"] == 0:
            continue  # no step to look at: whoever reads the steps says so
        steps = [0, da.sizes["time"] - 1] if "time" in da.dims else [None]
        for t in dict.fromkeys(steps):
            values = np.asarray(da.isel(time=t).values if t is not None else da.values, float)
            values = values[np.isfinite(values)]
            if not values.size:
                continue
            median = float(np.median(values)) * factor
            if lo <= median <= hi:
                continue
            where = f" at step {t}" if t is not None else ""
            raise ValueError(
                f"{source}: {name} ({what}) has a median of {median:.4g} {units}{where}, outside "
                f"the plausible {lo:g}..{hi:g} {units} after reading its units "
                f"({da.attrs.get('climnb_source', name)}): the units are wrong; give the "
                f"file's own with --units {name}=UNITS, or check --rename"
            )


def check_plausible_input(
    ds: xr.Dataset,
    *,
    source: str,
    variables=None,
    units=None,
    regrid: float | None = None,
    names: Iterable[str] | None = None,
) -> None:
    """:func:`check_plausible` on a Dataset as the files give it (their names, grid and
    units: ``open_dataset(..., canonical=False)``): its first and last steps put on climnb's
    names and units the way the command will (``variables``, ``units``, ``regrid`` as given
    to :func:`climnb.io.netcdf.normalize`). What is missing or wrong there is left to the
    command's own reading, which names it with its advice."""
    from climnb.io.netcdf import coord_names, normalize

    time = coord_names(ds).get("time")
    if time in ds.dims and ds.sizes[time] > 0:
        ds = ds.isel({time: sorted({0, ds.sizes[time] - 1})})
    try:
        canonical = normalize(ds, variables=variables, units=units, regrid=regrid)
    except ValueError:
        return
    check_plausible(canonical, source=source, names=names)
