"""Bad input to ``climnb stats`` and ``climnb stats compare``, in the table's own form
(:class:`bad_input_cases.Case`): exit status 2, one line naming the file and the problem,
nothing written. Run by ``tests/test_stats_cli.py``; :data:`STATS_CASES` can join
``bad_input_cases.CASES`` (``CASES += STATS_CASES``)."""

from __future__ import annotations

import numpy as np
from bad_input_cases import Case, Ctx

__all__ = ["STATS_CASES"]

STATS_CASES: list[Case] = []


def case(id: str, names: tuple[str, ...] | str, keyword: str):
    names = (names,) if isinstance(names, str) else names

    def register(build):
        STATS_CASES.append(Case(id, build, names, keyword))
        return build

    return register


def _attrs(var, **attrs):
    def change(ds):
        ds[var].attrs = {k: v for k, v in {**ds[var].attrs, **attrs}.items() if v is not None}
        return ds

    return change


def _coarse(ds):
    return ds.isel(lon=slice(0, None, 2))


@case("stats-mask-without-flag-values", "mask.nc", r"flag_values")
def _(c: Ctx):
    f = c.fields("mask.nc", _attrs("truth", flag_values=None, flag_meanings=None))
    return ["stats", f, "--out", c.p("freq.nc")]


@case("stats-mask-unknown-flag-meanings", "mask.nc", r"flag_meanings|cannot read")
def _(c: Ctx):
    f = c.fields("mask.nc", _attrs("truth", flag_meanings="sea land ice"))
    return ["stats", f, "--out", c.p("freq.nc")]


@case("stats-fields-on-another-grid", "coarse.nc", r"grid")
def _(c: Ctx):
    return [
        "stats",
        c.fields(),
        "--fields",
        c.fields("coarse.nc", _coarse),
        "--events",
        c.p("events.csv"),
    ]


@case("stats-region-covers-no-point", "tiny", r"covers no grid point")
def _(c: Ctx):
    return [
        "stats",
        c.fields(),
        "--out",
        c.p("freq.nc"),
        "--landfall",
        c.p("landfall.csv"),
        "--region",
        "tiny=10.1:10.6,20.1:20.6",
    ]


@case("stats-precipitation-units-do-not-convert", ("rain.nc", "PRECT"), r"units")
def _(c: Ctx):
    f = c.fields("rain.nc", _attrs("PRECT", units="K"))
    return ["stats", f, "--precip", c.p("precip.csv")]


@case("stats-fields-lack-the-masks-times", "late.nc", r"time step")
def _(c: Ctx):
    def later(ds):
        return ds.assign_coords(time=ds.time + np.timedelta64(365, "D"))

    return ["stats", c.fields(), "--fields", c.fields("late.nc", later), "--events", "ev.csv"]


@case("stats-nothing-asked", "--out", r"nothing to do")
def _(c: Ctx):
    return ["stats", c.fields()]


@case("stats-compare-grids-differ", "coarse.nc", r"grid")
def _(c: Ctx):
    return ["stats", "compare", c.fields(), c.fields("coarse.nc", _coarse), "--block", "8"]


@case("stats-compare-period-shorter-than-block", "fields.nc", r"shorter than two")
def _(c: Ctx):
    return ["stats", "compare", c.fields(), c.fields("b.nc"), "--block", "year"]


@case("stats-compare-masks-of-different-classes", "rivers.nc", r"different classes")
def _(c: Ctx):
    rivers = c.fields("rivers.nc", _attrs("truth", classes="atmospheric_river"))
    return ["stats", "compare", c.fields(), rivers, "--block", "8", "--csv", c.p("t.csv")]


@case("stats-compare-one-input", "compare", r"two inputs")
def _(c: Ctx):
    return ["stats", "compare", c.fields()]


@case("stats-out-equals-input", "fields.nc", r"input|same|overwrit")
def _(c: Ctx):
    f = c.fields()
    return ["stats", f, "--out", f]
