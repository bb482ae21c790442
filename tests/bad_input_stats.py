"""Bad input to ``climnb stats`` and ``climnb stats compare``, in the table's own form
(:class:`bad_input_cases.Case`): exit status 2, one line naming the file and the problem,
nothing written. Run by ``tests/test_stats_cli.py``; :data:`STATS_CASES` can join
``bad_input_cases.CASES`` (``CASES += STATS_CASES``)."""

from __future__ import annotations

import numpy as np
from bad_input_cases import SAME, Case, Ctx

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


# --- outputs against every input, missing values, units, tracks and regions -------------------


@case("stats-events-is-the-fields-file", ("--events", "f.nc"), SAME)
def _(c: Ctx):
    return ["stats", c.fields("m.nc"), "--fields", c.fields("f.nc"), "--events", c.p("f.nc")]


@case("stats-out-is-the-tracks-file", ("--out", "tracks.nc"), SAME)
def _(c: Ctx):
    tracks = _tracks_of(c, c.fields(), "tracks.nc")
    return ["stats", c.fields(), "--tracks", tracks, "--out", tracks]


@case("stats-compare-csv-is-a-fields-file", ("--csv", "fa.nc"), SAME)
def _(c: Ctx):
    a, b = c.fields("a.nc"), c.fields("b.nc")
    fa, fb = c.fields("fa.nc"), c.fields("fb.nc")
    return ["stats", "compare", a, b, "--fields", fa, fb, "--block", "8", "--csv", fa]


@case("stats-tracks-of-another-run", ("--tracks",), r"match no region|not have")
def _(c: Ctx):
    other = c.fields("other.nc", lambda ds: ds.roll(lon=37, roll_coords=False))
    tracks = _tracks_of(c, other, "other_tracks.nc")
    return ["stats", c.fields(), "--tracks", tracks, "--events", c.p("ev.csv")]


@case("stats-precip-nan-above-5-percent", ("rain.nc", "PRECT", "steps"), r"missing.*5 %")
def _(c: Ctx):
    return ["stats", c.fields("rain.nc", _nan("PRECT")), "--precip", c.p("p.csv")]


@case("stats-float-mask-nan-above-5-percent", ("mask.nc", "truth", "steps"), r"missing.*5 %")
def _(c: Ctx):
    return ["stats", c.fields("mask.nc", _nan("truth")), "--out", c.p("freq.nc")]


@case("stats-precip-mm-day-labelled-m-s", ("rain.nc", "PRECT", "--units"), r"plausible")
def _(c: Ctx):
    def mm_day(ds):
        ds["PRECT"] = (ds.PRECT * 86400e3).assign_attrs(units="m s-1")
        return ds

    return ["stats", c.fields("rain.nc", mm_day), "--precip", c.p("p.csv")]


@case("stats-region-longitude-first", ("--region", "gulf"), r"latitude -98.*latitudes first")
def _(c: Ctx):
    return ["stats", c.fields(), "--landfall", c.p("l.csv"), "--region", "gulf=-98:-80,18:31"]


@case("stats-geojson-latitude-longitude-swapped", ("gulf",), r"latitude 98 is outside")
def _(c: Ctx):
    import json

    ring = [[18, -98], [31, -98], [31, -80], [18, -80], [18, -98]]
    feature = {"type": "Feature", "properties": {"name": "gulf"}}
    feature["geometry"] = {"type": "Polygon", "coordinates": [ring]}
    path = c.text("gulf.geojson", json.dumps({"type": "FeatureCollection", "features": [feature]}))
    return ["stats", c.fields(), "--landfall", c.p("l.csv"), "--region", path]


@case("stats-compare-block-negative", "--block", r"whole number")
def _(c: Ctx):
    return ["stats", "compare", c.fields(), c.fields("b.nc"), "--block", "-8"]


@case("stats-compare-block-fraction", "--block", r"whole number")
def _(c: Ctx):
    return ["stats", "compare", c.fields(), c.fields("b.nc"), "--block", "2.5"]


@case("stats-compare-block-week", "--block", r"whole number|'year'")
def _(c: Ctx):
    return ["stats", "compare", c.fields(), c.fields("b.nc"), "--block", "week"]


def _nan(var: str):
    """``var`` with a NaN band over a third of the globe at 10 of the 40 steps (8 %)."""

    def change(ds):
        ds[var] = ds[var].astype("float64")
        ds[var][1:11, :30, :] = np.nan
        return ds

    return change


def _tracks_of(c: Ctx, fields: str, name: str) -> str:
    """Tracks of ``fields`` written by ``climnb tracks`` (before the case's snapshot)."""
    import contextlib
    import io

    from climnb.cli import main

    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        assert main(["tracks", fields, "--out", c.p(name)]) == 0
    return c.p(name)
