"""``climnb stats`` and ``climnb stats compare`` from the shell's side, on toy files: what they
write and print, and how they refuse bad input (the cases of ``tests/bad_input_stats.py``)."""

from __future__ import annotations

import contextlib
import importlib.util
import io

import pandas as pd
import pytest
import xarray as xr
from bad_input_cases import Golden, judge, run_case
from bad_input_stats import STATS_CASES

from climnb.cli import main


def _run(argv: list[str]) -> tuple[int, str]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        rc = main(argv)
    return rc, out.getvalue()


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("stats")
    common = ["--n-time", "48", "--n-tc", "2", "--n-ar", "2", "--ivt"]
    assert _run(["synth", "--out", str(d / "a.nc"), "--seed", "1", *common])[0] == 0
    future = ["--more-rivers", "3", "--storm-intensity", "1.4", "--river-shift", "4"]
    assert _run(["synth", "--out", str(d / "b.nc"), "--seed", "2", *common, *future])[0] == 0
    return d


def test_synth_writes_a_future_with_its_settings(files):
    with xr.open_dataset(files / "b.nc") as b:
        assert b.attrs["future_more_rivers"] == 3
        assert b.attrs["future_river_shift_deg"] == 4.0
    events = pd.read_csv(files / "b.events.csv")
    assert (events[events.class_id == 2].groupby("time").size() == 5).all()


def test_stats_writes_frequency_events_landfall_and_precipitation(files, tmp_path):
    out = {
        k: tmp_path / f"{k}.{ext}"
        for k, ext in (("freq", "nc"), ("events", "csv"), ("landfall", "csv"), ("precip", "csv"))
    }
    rc, text = _run(
        [
            "stats",
            str(files / "a.nc"),
            "--out",
            str(out["freq"]),
            "--by",
            "season",
            "--events",
            str(out["events"]),
            "--landfall",
            str(out["landfall"]),
            "--precip",
            str(out["precip"]),
            "--region",
            "california",
            "--region",
            "pacific=20:50,180:240",
            "--region",
            "srex:WNA",
        ]
    )
    assert rc == 0, text
    assert "frequency of truth over 48 steps" in text and "events:" in text
    with xr.open_dataset(out["freq"]) as f:
        assert f.frequency.attrs["cell_methods"] == "time: mean"
        assert set(f.season.values) == {"DJF", "MAM", "JJA", "SON"}
    events = pd.read_csv(out["events"])
    assert {"max_wind", "category", "max_ivt", "ar_category"} <= set(events.columns)
    truth = pd.read_csv(files / "a.events.csv")
    tc = events[events.class_name == "tropical_cyclone"]
    assert len(tc) == truth[truth.class_id == 1].event_id.nunique()
    assert not (tc.category == "unknown").any()  # the file has winds
    landfall = pd.read_csv(out["landfall"])
    assert set(landfall.region) == {"california", "pacific", "WNA"}
    precip = pd.read_csv(out["precip"])
    assert set(precip.region) == {"global", "california", "pacific", "WNA"}
    assert precip.share.between(0, 1).all()


def test_stats_compare_prints_the_headline_table(files, tmp_path):
    rc, text = _run(
        [
            "stats",
            "compare",
            str(files / "a.nc"),
            str(files / "b.nc"),
            "--block",
            "8",
            "--resamples",
            "199",
            "--region",
            "global",
            "--out",
            str(tmp_path / "change.nc"),
            "--csv",
            str(tmp_path / "change.csv"),
        ]
    )
    assert rc == 0, text
    table = pd.read_csv(tmp_path / "change.csv")
    assert list(table.columns) == [
        "class_name",
        "region",
        "a",
        "b",
        "change",
        "ci_low",
        "ci_high",
        "p_value",
        "significant",
    ]
    row = table.set_index("class_name").loc["atmospheric_river"]
    assert row.change > 0 and bool(row.significant)
    assert "atmospheric_river" in text and "significant" in text and "FDR" in text
    with xr.open_dataset(tmp_path / "change.nc") as maps:
        assert {"change", "p_value", "significant", "ci_low", "ci_high"} <= set(maps.data_vars)
        assert maps.attrs["alpha_fdr"] == pytest.approx(0.1)


@pytest.fixture(scope="module")
def golden(tmp_path_factory):
    d = tmp_path_factory.mktemp("golden")
    assert _run(["synth", "--out", str(d / "fields.nc"), "--n-time", "40", "--seed", "3"])[0] == 0
    return Golden(d / "fields.nc", None, None)


# tests/test_bad_input.py runs these same cases (``CASES += STATS_CASES``), through the same
# run_case and judge, on the same golden fields (synth, 40 steps, seed 3): here only where that
# module is skipped (it needs Keras for its model bundle), not twice; not even collected here
# otherwise, so that no skip stands in the summary for a test that runs
RUN_BY_TEST_BAD_INPUT = importlib.util.find_spec("keras") is not None

if not RUN_BY_TEST_BAD_INPUT:

    @pytest.mark.parametrize("case", STATS_CASES, ids=[c.id for c in STATS_CASES])
    def test_bad_input_is_refused(case, golden, tmp_path_factory):
        outcome = run_case(case, tmp_path_factory.mktemp("c"), golden)
        problems = judge(case, outcome)
        assert not problems, (
            f"climnb {' '.join(outcome.argv)}\n  "
            + "\n  ".join(problems)
            + (f"\nstderr:\n{outcome.stderr}")
        )


def test_stats_compare_writes_the_change_of_events_and_precipitation(files, tmp_path):
    argv = ["stats", "compare", str(files / "a.nc"), str(files / "b.nc"), "--block", "8"]
    argv += ["--resamples", "99", "--region", "global", "--region", "us_west_coast"]
    events, precip = tmp_path / "events.nc", tmp_path / "precip.csv"
    rc, text = _run([*argv, "--events", str(events), "--precip", str(precip)])
    assert rc == 0, text
    assert "events (per year" in text and "share_of_total %" in text
    with xr.open_dataset(events) as ds:
        table = ds.to_dataframe()
    row = table.set_index(["quantity", "class_name", "region"]).loc[
        ("events_per_year", "atmospheric_river", "global")
    ]
    assert row.b > row.a  # 5 rivers per step against 2
    assert {"landfalls_per_year", "mean_max_wind", "mean_max_ivt"} <= set(table.quantity)
    shares = pd.read_csv(precip)
    assert set(shares.region) == {"global", "us_west_coast"}
    assert "significant_fdr" in shares.columns


def test_stats_compare_takes_the_fields_of_each_period(files, tmp_path):
    argv = ["stats", "compare", str(files / "a.nc"), str(files / "b.nc"), "--block", "8"]
    precip = tmp_path / "precip.csv"
    rc, _ = _run(
        [
            *argv,
            "--resamples",
            "99",
            "--precip",
            str(precip),
            "--fields",
            str(files / "a.nc"),
            str(files / "b.nc"),
        ]
    )
    assert rc == 0 and precip.exists()
    # one fields file for two periods is refused, naming the option, and writes nothing
    rc = main([*argv, "--precip", str(tmp_path / "x.csv"), "--fields", str(files / "a.nc")])
    assert rc == 2 and not (tmp_path / "x.csv").exists()


def test_events_of_a_mask_only_file(files, tmp_path):
    """A file holding only the mask (what `climnb label` writes): events without intensities
    (xarray's "'time' is not a valid dimension" before)."""
    with xr.open_dataset(files / "a.nc") as ds:
        ds[["truth"]].to_netcdf(tmp_path / "mask.nc")
    rc, text = _run(["stats", str(tmp_path / "mask.nc"), "--events", str(tmp_path / "ev.csv")])
    assert rc == 0 and "tropical cyclones" in text
    table = pd.read_csv(tmp_path / "ev.csv")
    assert len(table) > 0 and table.max_wind.isna().all()
