"""Variables as real files name them: CAM5/E3SM, ERA5, MERRA-2, CMIP and generic names, with units.

:data:`QUANTITIES` is the table of accepted names. :func:`canonicalize` renames what it
recognises to climnb's names (CAM5's, plus ``IVT``/``IVTU``/``IVTV`` for vapour transport),
picks 850/500/200/1000 hPa out of variables on a pressure-level coordinate (ERA5 ``u``, ``t``,
``z``; CMIP ``ua``, ``ta``, ``zg``), and converts units to the channel's units:

==========  ================  ============================================================
climnb      units             accepted names (CAM5/E3SM, ERA5, MERRA-2, CMIP, generic)
==========  ================  ============================================================
TMQ         kg m-2            TMQ, tcwv, TQV, IWV, PW, prw, tpw
IVT         kg m-1 s-1        IVT, ivt
IVTU/IVTV   kg m-1 s-1        TUQ/TVQ, viwve/viwvn (p71.162/p72.162), UFLXQV/VFLXQV, uIVT/vIVT
U850/V850   m s-1             U850/V850; u/v, ua/va, U/V at 850 hPa
UBOT/VBOT   m s-1             UBOT/VBOT, u10/v10, U10M/V10M, uas/vas
QREFHT      kg kg-1           QREFHT, QV2M, huss
PS          Pa                PS, sp, ps
PSL         Pa                PSL, msl, SLP, psl
T200/T500   K                 T200/T500; t, ta, T at 200/500 hPa
PRECT       m s-1             PRECT, tp, PRECTOT, PRECTOTCORR, pr
TS          K                 TS, skt, ts
TREFHT      K                 TREFHT, t2m, T2M, tas
Z1000/Z200  m                 Z1000/Z200, H1000; z (geopotential), zg, Z, H at 1000/200 hPa
ZBOT        m                 ZBOT
==========  ================  ============================================================

Units are read from each variable's ``units`` attribute and converted with pint (UDUNITS
spellings through cf-xarray's registry): Pa/hPa, kg m-2/mm of water, m s-1/mm day-1/kg m-2 s-1
(water density 1000 kg m-3), geopotential m2 s-2 divided by g = 9.80665, and precipitation
given as an amount (ERA5 ``tp``, metres over the hour; ``kg m-2`` over a model's step) divided
by the period it accumulated over: ERA5's hour for ``tp`` (however the file samples the hours),
else the file's own time step (one hour for a file of a single step), which the log states. A
variable without ``units`` is taken to be in the channel's units, and the log says so.
Anything else can be mapped by hand: ``variables={"my_pw": "TMQ"}`` (``--rename my_pw=TMQ``).
pint is imported only when a unit string differs from the channel's, so canonical files pay
nothing.

Examples
--------
>>> import numpy as np, xarray as xr
>>> ds = xr.Dataset({"tcwv": (("lat", "lon"), np.full((2, 3), 20.0), {"units": "mm"}),
...                  "msl": (("lat", "lon"), np.full((2, 3), 1013.0), {"units": "hPa"})})
>>> out, notes = canonicalize(ds)
>>> sorted(out.data_vars), float(out.PSL[0, 0]), out.TMQ.attrs["units"]
(['PSL', 'TMQ'], 101300.0, 'kg m-2')
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import xarray as xr

from climnb.io.channels import CHANNELS
from climnb.io.levels import ivt_from_levels, specific_humidity

__all__ = ["Quantity", "QUANTITIES", "LEVEL_NAMES", "canonicalize", "known_names"]

log = logging.getLogger(__name__)

G = 9.80665  # m s-2, to turn geopotential into geopotential height
_WATER = 1000.0  # kg m-3
_ERA5_ACCUMULATION_S = 3600.0  # ERA5's hourly accumulations


@dataclass(frozen=True)
class Quantity:
    """One input quantity: climnb's name and units, and the names files give it.

    Attributes
    ----------
    name, units : climnb's name (CAM5's) and units (UDUNITS).
    aliases : names of variables that hold it directly (levels already selected).
    on_levels : names of variables on a pressure-level coordinate that hold it at ``level``.
    level : the pressure level (hPa) to pick from ``on_levels``.
    long_name : description, for the attributes of the result.
    standard_names : CF ``standard_name`` attributes that identify it, whatever the variable's
        name (on ``level`` when the variable has a pressure-level dimension or coordinate).
    """

    name: str
    units: str
    aliases: tuple[str, ...]
    on_levels: tuple[str, ...] = ()
    level: float | None = None
    long_name: str = ""
    standard_names: tuple[str, ...] = ()


_IVT_LONG = "vertically integrated water vapour transport"
QUANTITIES: tuple[Quantity, ...] = (
    Quantity(
        "TMQ",
        "kg m-2",
        ("TMQ", "tcwv", "TQV", "IWV", "PW", "prw", "tpw", "pwat", "PWAT"),
        standard_names=("atmosphere_mass_content_of_water_vapor",),
    ),
    Quantity("IVT", "kg m-1 s-1", ("IVT", "ivt"), long_name=f"{_IVT_LONG} (magnitude)"),
    Quantity(
        "IVTU",
        "kg m-1 s-1",
        ("IVTU", "TUQ", "viwve", "p71.162", "UFLXQV", "uIVT", "ivtu"),
        long_name=f"eastward {_IVT_LONG}",
    ),
    Quantity(
        "IVTV",
        "kg m-1 s-1",
        ("IVTV", "TVQ", "viwvn", "p72.162", "VFLXQV", "vIVT", "ivtv"),
        long_name=f"northward {_IVT_LONG}",
    ),
    Quantity(
        "U850", "m s-1", ("U850",), ("u", "ua", "U"), 850.0, standard_names=("eastward_wind",)
    ),
    Quantity(
        "V850", "m s-1", ("V850",), ("v", "va", "V"), 850.0, standard_names=("northward_wind",)
    ),
    Quantity(
        "VORT850",
        "s-1",
        ("VORT850", "vo850", "VO850"),
        ("vo", "VO", "vor", "VOR", "rv"),
        850.0,
        "relative vorticity at 850 hPa",
        ("atmosphere_relative_vorticity",),
    ),
    Quantity("UBOT", "m s-1", ("UBOT", "u10", "U10M", "uas")),
    Quantity("VBOT", "m s-1", ("VBOT", "v10", "V10M", "vas")),
    Quantity("QREFHT", "kg kg-1", ("QREFHT", "QV2M", "huss")),
    Quantity("PS", "Pa", ("PS", "sp", "ps"), standard_names=("surface_air_pressure",)),
    Quantity(
        "PSL",
        "Pa",
        ("PSL", "msl", "SLP", "psl", "prmsl", "PRMSL", "MSLP", "mslp"),
        standard_names=("air_pressure_at_mean_sea_level",),
    ),
    Quantity("T200", "K", ("T200",), ("t", "ta", "T"), 200.0),
    Quantity("T500", "K", ("T500",), ("t", "ta", "T"), 500.0),
    Quantity("PRECT", "m s-1", ("PRECT", "tp", "PRECTOT", "PRECTOTCORR", "pr")),
    Quantity("TS", "K", ("TS", "skt", "ts")),
    Quantity("TREFHT", "K", ("TREFHT", "t2m", "T2M", "tas")),
    Quantity("Z1000", "m", ("Z1000", "H1000"), ("z", "zg", "Z", "H"), 1000.0),
    Quantity("Z200", "m", ("Z200",), ("z", "zg", "Z", "H"), 200.0),
    Quantity("ZBOT", "m", ("ZBOT",)),
)
_BY_NAME = {q.name: q for q in QUANTITIES}
_CHANNEL_LONG = {c.name: c.long_name for c in CHANNELS}

#: Names of pressure-level coordinates (besides CF ``axis: Z`` / pressure units).
LEVEL_NAMES = (
    "level",
    "pressure_level",
    "plev",
    "lev",
    "isobaricInhPa",
    "isobaricInPa",
    "pressure",
    "pres",
)
_PA_PER = {"pa": 1.0, "hpa": 100.0, "mbar": 100.0, "millibar": 100.0, "millibars": 100.0}
_PA_PER.update({"mb": 100.0, "hectopascal": 100.0, "hectopascals": 100.0, "pascal": 1.0})
# spellings pint does not parse, and what they mean
_ODD_UNITS = {
    "gpm": "m",
    "m of water equivalent": "m",
    "mm/day": "mm day-1",
    "kg/kg": "1",
    "kg kg**-1": "1",
    "kg kg-1": "1",
    "mb": "hPa",
    "millibars": "hPa",
}


def known_names(name: str) -> tuple[str, ...]:
    """The names under which quantity ``name`` is recognised (for error messages)."""
    q = _BY_NAME.get(name)
    if q is None:
        return (name,)
    levels = tuple(f"{v}@{q.level:g}hPa" for v in q.on_levels)
    return q.aliases + levels


def canonicalize(
    ds: xr.Dataset,
    variables: Mapping[str, str] | None = None,
    units: Mapping[str, str] | None = None,
) -> tuple[xr.Dataset, list[str]]:
    """Rename, pick levels and convert units of the quantities ``ds`` holds.

    Parameters
    ----------
    ds : a Dataset with horizontal dimensions already called ``lat`` and ``lon``.
    variables : extra mapping from the file's names to climnb's (``{"pw": "TMQ"}``); applied
        first, and wins over the table.
    units : units to take instead of a variable's own ``units`` attribute, by the file's
        variable name or climnb's (``{"IVT": "kg m-1 s-1"}``; ``--units IVT=kg m-1 s-1``): for
        a file whose attribute is wrong or missing.

    Returns
    -------
    ds : the Dataset with every recognised quantity under climnb's name in climnb's units
        (attribute ``climnb_source`` says where it came from); variables that were not
        recognised are kept as they are; variables on levels are kept too.
    notes : one line per quantity that was renamed, converted or assumed, also logged.

    Raises
    ------
    ValueError
        If ``variables`` names a variable the file lacks or a target climnb does not know, or
        a unit cannot be converted to the channel's.
    """
    ds, notes = _rename_by_hand(ds, variables or {})
    renamed = {new: old for old, new in (variables or {}).items() if old != new}
    ds, by_quantity = _override_units(ds, units or {}, notes)
    level_dim = _level_dim(ds)
    out, used = {}, set()
    for q in QUANTITIES:
        found = _find(ds, q, level_dim)
        if found is None:
            continue
        name, source, da = found
        if q.name in by_quantity:
            da = da.assign_attrs(units=by_quantity[q.name])
            notes.append(f"{q.name}: units {by_quantity[q.name]!r} as asked")
        try:
            da, note = _to_units(da, q, source)
        except ValueError as err:
            if name not in renamed:
                raise
            raise ValueError(
                f"--rename {renamed[name]}={q.name}: {err}; is {renamed[name]} the variable "
                f"meant as {q.name}?"
            ) from None
        label = f"{q.name} <- {source}" + (f" ({note})" if note else "")
        if source != q.name or note:
            notes.append(label)
        out[q.name] = da.assign_attrs(climnb_source=label)
        used.add(name)
    if not {"IVT", "IVTU", "IVTV"} & set(out) and level_dim is not None:
        out.update(_ivt_from_levels(ds, level_dim, out.get("PS"), notes))
    rest = {k: v for k, v in ds.data_vars.items() if k not in used and k not in out}
    for note in notes:
        log.info("input: %s", note)
    return xr.Dataset({**rest, **out}, coords=ds.coords, attrs=ds.attrs), notes


def _rename_by_hand(ds: xr.Dataset, variables: Mapping[str, str]):
    notes = []
    for old, new in variables.items():
        if old not in ds.data_vars:
            raise ValueError(
                f"cannot rename {old!r} to {new!r}: the input has no variable {old!r}; it has "
                f"{', '.join(map(str, ds.data_vars)) or 'no variables'}"
            )
        if new not in _BY_NAME:
            raise ValueError(
                f"cannot rename {old!r} to {new!r}: climnb knows no quantity {new!r}; it knows "
                f"{', '.join(_BY_NAME)}"
            )
        notes.append(f"renamed {old} -> {new} as asked")
    for old, new in variables.items():  # the file's own NEW would be dropped without a word
        if new in ds.data_vars and new != old and new not in variables:
            raise ValueError(
                f"--rename {old}={new}: the input has a variable {new} already, which this "
                f"would replace; drop this --rename (give the right variable as {new}, or a file "
                f"without that {new})"
            )
    ds = ds.rename({o: n for o, n in variables.items() if o != n})
    return ds, notes


#: Names (and CF standard names) of the fields on pressure levels that IVT is computed from.
_ON_LEVELS = {
    "u": (("u", "ua", "U", "UGRD"), "eastward_wind"),
    "v": (("v", "va", "V", "VGRD"), "northward_wind"),
    "q": (("q", "hus", "Q", "QV", "SPFH"), "specific_humidity"),
    "r": (("r", "hur", "RH", "RELHUM"), "relative_humidity"),
    "t": (("t", "ta", "T", "TMP"), "air_temperature"),
}


def _level_field(ds: xr.Dataset, key: str, level_dim: str) -> xr.DataArray | None:
    names, standard = _ON_LEVELS[key]
    for name, var in ds.data_vars.items():
        if level_dim in var.dims and (name in names or var.attrs.get("standard_name") == standard):
            return var
    return None


def _ivt_from_levels(ds, level_dim: str, ps, notes: list[str]) -> dict:
    """IVTU and IVTV from u, v and q (or r and t) on pressure levels, or nothing."""
    f = {k: _level_field(ds, k, level_dim) for k in _ON_LEVELS}
    if f["u"] is None or f["v"] is None or (f["q"] is None and (f["r"] is None or f["t"] is None)):
        return {}
    if f["q"] is not None:
        q, how = f["q"], f"q={f['q'].name}"
        if str(q.attrs.get("units", "")).replace(" ", "") in ("gkg-1", "g/kg", "gkg**-1"):
            q = q / 1000.0
    else:
        t = (
            f["t"] + 273.15
            if str(f["t"].attrs.get("units", "K")).lower() in ("degc", "c")
            else f["t"]
        )
        p_pa = xr.DataArray(_levels_hpa(ds[level_dim]) * 100.0, dims=level_dim)
        q = specific_humidity(f["r"].drop_vars(level_dim), t.drop_vars(level_dim), p_pa)
        q = q.assign_coords({level_dim: ds[level_dim]})
        how = f"q from r={f['r'].name}, t={f['t'].name} (Bolton 1980)"
    try:
        ivt = ivt_from_levels(f["u"], f["v"], q, level=level_dim, surface_pressure=ps)
    except ValueError as err:
        log.warning("no IVT from levels: %s", err)
        return {}
    cut = ", levels below PS left out" if ps is not None else ""
    note = (
        f"IVTU, IVTV <- {f['u'].name}, {f['v'].name}, {how} on {level_dim}, trapezoid "
        f"1000-300 hPa{cut}"
    )
    notes.append(note)
    attrs = {"units": "kg m-1 s-1", "climnb_source": note}
    return {
        "IVTU": ivt.IVTU.assign_attrs(attrs, long_name=f"eastward {_IVT_LONG}"),
        "IVTV": ivt.IVTV.assign_attrs(attrs, long_name=f"northward {_IVT_LONG}"),
    }


def _override_units(ds: xr.Dataset, units: Mapping[str, str], notes: list[str]):
    """``ds`` with the ``units`` attribute of the variables named (by the file's name) set, and
    the overrides given under climnb's names (applied when the quantity is found)."""
    by_quantity = {}
    for name, value in units.items():
        if name in ds.data_vars:
            ds = ds.assign({name: ds[name].assign_attrs(units=value)})
            notes.append(f"{name}: units {value!r} as asked")
        elif name in _BY_NAME:
            by_quantity[name] = value
        else:
            raise ValueError(
                f"--units {name}={value}: the input has no variable {name!r} and climnb knows "
                f"no quantity {name!r}; it has {', '.join(map(str, ds.data_vars)) or 'nothing'}"
            )
    return ds, by_quantity


def _level_dim(ds: xr.Dataset) -> str | None:
    """The pressure-level dimension of ``ds``, found by name then by CF attributes."""
    named = [d for d in LEVEL_NAMES if d in ds.dims and d in ds.coords]
    if named:
        return named[0]
    for dim in ds.dims:
        coord = ds.coords.get(dim)
        if coord is None or coord.ndim != 1:
            continue
        attrs = coord.attrs
        units = str(attrs.get("units", "")).strip().lower()
        cf = attrs.get("axis") == "Z" or attrs.get("standard_name") == "air_pressure"
        if cf and (units in _PA_PER or not units):
            return str(dim)
    return None


def _levels_hpa(coord: xr.DataArray) -> np.ndarray:
    """The values of a pressure coordinate in hPa (Pa or hPa by its units, else guessed)."""
    units = str(coord.attrs.get("units", "")).strip().lower()
    values = np.atleast_1d(np.asarray(coord.values, dtype=float))
    if units in _PA_PER:
        return values * _PA_PER[units] / 100.0
    guess = 0.01 if np.nanmax(values) > 2000 else 1.0  # Pa (CMIP plev) or hPa (ERA5 level)
    log.info(
        "level coordinate %r has no pressure units; taken as %s",
        coord.name,
        "Pa" if guess == 0.01 else "hPa",
    )
    return values * guess


def _find(ds, q: Quantity, level_dim):
    """``(variable, description, DataArray)`` of quantity ``q`` in ``ds``, or None."""
    by_standard = [  # not a variable that already has another quantity's name
        str(n)
        for n in ds.data_vars  # names; .items() would build a DataArray for each
        if ds.variables[n].attrs.get("standard_name") in q.standard_names
        and _BY_NAME.get(n, q) is q
    ]
    for name in q.aliases + (tuple(by_standard) if q.level is None else ()):
        if name in ds.data_vars and (level_dim is None or level_dim not in ds[name].dims):
            return name, name, ds[name]
    if q.level is None:
        return None
    for name in dict.fromkeys(q.on_levels + tuple(by_standard)):
        if name not in ds.data_vars:
            continue
        if level_dim is not None and level_dim in ds[name].dims:
            return _at_level(ds, q, name, level_dim)
        scalar = _scalar_level(ds[name])
        if scalar is not None and np.isclose(scalar, q.level, atol=0.5):
            return name, f"{name}@{q.level:g}hPa", ds[name]
    return None


def _at_level(ds, q: Quantity, name: str, level_dim: str):
    levels = _levels_hpa(ds[level_dim])
    hit = np.flatnonzero(np.isclose(levels, q.level, atol=0.5))
    if hit.size == 0:
        log.warning(
            "%s: %s has levels %s hPa, none at %g hPa", q.name, name, levels.tolist(), q.level
        )
        return None
    da = ds[name].isel({level_dim: int(hit[0])}, drop=True)
    return name, f"{name}@{q.level:g}hPa", da


def _scalar_level(da: xr.DataArray) -> float | None:
    """The pressure (hPa) of a variable's scalar level coordinate (a level already picked)."""
    for name, coord in da.coords.items():
        if coord.ndim == 0 and (
            name in LEVEL_NAMES or coord.attrs.get("standard_name") == "air_pressure"
        ):
            return float(_levels_hpa(coord)[0])
    return None


def _to_units(da: xr.DataArray, q: Quantity, source: str):
    """``da`` in ``q.units``, and a note saying what was done (empty when nothing was)."""
    attrs = {
        "units": q.units,
        "long_name": q.long_name or _CHANNEL_LONG.get(q.name, da.attrs.get("long_name", q.name)),
    }
    raw = da.attrs.get("units")
    if raw is None or str(raw).strip() == "":
        return da.assign_attrs(attrs), f"no units given: assumed {q.units}"
    units = str(raw).strip()
    if _same(units, q.units):
        return da.assign_attrs(attrs), ""
    scale, offset, how = _conversion(units, q, source, _accumulation(da, source))
    # at least float32, before the product: hPa times 100 overflows float16 (whose largest is
    # 65504), and a converted integer field is not whole numbers any more
    da = da.astype(np.result_type(da.dtype, np.float32))
    out = da * scale + offset if offset else da * scale
    return out.astype(da.dtype).assign_attrs(attrs), f"{units} -> {q.units}{how}"


def _same(units: str, target: str) -> bool:
    spell = units.replace("**", "").replace("^", "").replace(".", " ").replace("/s", " s-1")
    return spell == target or units == target


def _registry():
    """cf-xarray's pint registry (UDUNITS spellings); imported only here (about 1 s)."""
    pint_log = logging.getLogger("pint.util")
    level = pint_log.level
    pint_log.setLevel(logging.ERROR)  # cf-xarray redefines a few units on import, noisily
    try:
        from cf_xarray.units import units
    finally:
        pint_log.setLevel(level)
    return units


def _step_seconds(da: xr.DataArray) -> float | None:
    """The time step of ``da`` in seconds (the median one), ``None`` with fewer than two."""
    if "time" not in da.coords or da["time"].size < 2:
        return None
    values = da["time"].values
    try:
        gaps = [(b - a) for a, b in zip(values[:-1], values[1:], strict=True)]
        seconds = [
            g / np.timedelta64(1, "s") if isinstance(g, np.timedelta64) else g.total_seconds()
            for g in gaps
        ]
    except (TypeError, AttributeError):  # numbers without units
        return None
    step = float(np.median(seconds))
    return step if step > 0 else None


#: Names whose accumulations have a documented period: ERA5's ``tp`` is the amount of the hour
#: ending at the step's time, however the file samples the hours (3-hourly, 6-hourly).
_KNOWN_ACCUMULATION = {"tp": (_ERA5_ACCUMULATION_S, "ERA5's hour")}


def _accumulation(da: xr.DataArray, source: str) -> tuple[float, str]:
    """The period (seconds, and how it was found) over which an amount ``da`` accumulated:
    the documented one of its name (ERA5 ``tp``: one hour), else the file's own time step;
    one hour (ERA5's) for a file of a single step, which says so."""
    known = _KNOWN_ACCUMULATION.get(source.split("@")[0])
    if known is not None:
        return known
    step = _step_seconds(da)
    if step is None:
        return _ERA5_ACCUMULATION_S, "1 h assumed (ERA5's): a single step gives no time step"
    return step, f"the file's time step, {step / 3600:g} h"


def _conversion(
    units: str, q: Quantity, source: str, accumulation: tuple[float, str] | None = None
):
    """``(scale, offset, how)`` such that ``value * scale + offset`` is in ``q.units``; an
    accumulated amount is taken over ``accumulation`` (seconds, and how it was found:
    :func:`_accumulation`)."""
    ureg = _registry()

    spelled = _ODD_UNITS.get(units, units)
    try:
        src = ureg.Quantity(1.0, spelled).units
    except Exception as err:  # pint raises several kinds of parse error
        raise ValueError(
            f"variable {source} ({q.name}) has units {units!r}, which cannot be read; "
            f"expected {q.units}; give the right ones with --units {source.split('@')[0]}=UNITS "
            f"(units={{'{source.split('@')[0]}': ...}}) or rename it"
        ) from err
    g = ureg.Quantity(G, "m s-2")
    water = ureg.Quantity(_WATER, "kg m-3")
    seconds, period = accumulation or (_ERA5_ACCUMULATION_S, "1 h assumed (ERA5's)")
    hour = ureg.Quantity(seconds, "s")
    # physical equivalences tried after a plain conversion: water as mass or depth,
    # geopotential as height, an accumulated amount as a rate over ERA5's hour
    routes = [
        (1.0, ""),
        (1.0 / water, " (water: 1000 kg m-3)"),
        (water, " (water: 1000 kg m-3)"),
        (1.0 / g, " (geopotential / g)"),
        (1.0 / hour, f" (amount over the step: {period})"),
        (water / hour, f" (amount over the step: {period})"),
        (1.0 / (water * hour), f" (amount over the step: {period})"),
    ]
    for factor, how in routes:
        try:
            if how:
                zero = (ureg.Quantity(0.0, src) * factor).to(q.units).magnitude
                one = (ureg.Quantity(1.0, src) * factor).to(q.units).magnitude
            else:  # a plain conversion, offsets allowed (degC -> K)
                zero = ureg.Quantity(0.0, src).to(q.units).magnitude
                one = ureg.Quantity(1.0, src).to(q.units).magnitude
        except Exception:  # DimensionalityError or an offset unit multiplied
            continue
        return float(one - zero), float(zero), how
    raise ValueError(
        f"variable {source} ({q.name}) has units {units!r}, which do not convert to "
        f"{q.units}; if the attribute is wrong, give the right units with --units "
        f"{source.split('@')[0]}=UNITS (units={{'{source.split('@')[0]}': ...}}), or map another "
        f"variable to {q.name}"
    )
