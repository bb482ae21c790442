"""Each option's effect, not only its parsing: the command run with and without it (or with
two values) on toy files, and the output differs as the option's help says. The options that
other modules already show this way are listed in docs/testing.md."""

from __future__ import annotations

import contextlib
import io
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import xarray as xr

from climnb.cli import main
from climnb.tracks import track_events, write_tracks


def _run(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = main([str(a) for a in argv])
    return rc, out.getvalue(), err.getvalue()


@pytest.fixture(scope="module")
def fields(tmp_path_factory) -> Path:
    """Toy fields (96 x 144, 24 three-hourly steps: 69 h), with IVT."""
    path = tmp_path_factory.mktemp("effects") / "fields.nc"
    argv = ["synth", "--out", path, "--n-time", 24, "--seed", 3, "--n-tc", 3, "--n-ar", 3]
    assert _run([*argv, "--ivt"])[0] == 0
    return path


def _labels(fields: Path, out: Path, *options) -> xr.DataArray:
    rc, text, err = _run(["label", fields, "--out", out, "--no-progress", *options])
    assert rc == 0, err
    with xr.open_dataset(out) as ds:
        return ds.labels.load()


# --- climnb -v --------------------------------------------------------------------------------


@pytest.mark.slow  # two label runs in processes of their own
def test_verbose_logs_the_details(tmp_path):
    """In a process of its own: the logging set up by the first command of a process stays."""
    src = tmp_path / "fields.nc"
    assert _run(["synth", "--out", src, "--n-time", 2, "--n-ar", 0])[0] == 0
    logs = {}
    for flags in ((), ("-v",)):
        out = tmp_path / f"labels{len(flags)}.nc"
        argv = [sys.executable, "-m", "climnb", *flags, "label", src, "--out", out, "--no-progress"]
        done = subprocess.run([str(a) for a in argv], capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        logs[flags] = done.stderr
    assert " INFO " in logs[()] and " DEBUG " not in logs[()]
    assert " DEBUG " in logs[("-v",)]


# --- climnb synth -----------------------------------------------------------------------------


def test_synth_counts_like_and_ivt_change_the_fields(tmp_path):
    base = ["synth", "--n-time", 2, "--seed", 0]
    assert _run([*base, "--out", tmp_path / "a.nc", "--n-tc", 1, "--n-ar", 0])[0] == 0
    assert _run([*base, "--out", tmp_path / "b.nc", "--n-tc", 3, "--n-ar", 2, "--ivt"])[0] == 0
    assert _run([*base, "--out", tmp_path / "c.nc", "--like", "era5"])[0] == 0
    assert _run([*base, "--out", tmp_path / "d.nc", "--events", tmp_path / "truth.csv"])[0] == 0
    assert (tmp_path / "truth.csv").is_file() and not (tmp_path / "d.events.csv").exists()
    a, b = pd.read_csv(tmp_path / "a.events.csv"), pd.read_csv(tmp_path / "b.events.csv")
    assert a.groupby("class_id").event_id.nunique().to_dict() == {1: 1}
    assert b.groupby("class_id").event_id.nunique().to_dict() == {1: 3, 2: 2}
    with xr.open_dataset(tmp_path / "a.nc") as fa, xr.open_dataset(tmp_path / "b.nc") as fb:
        assert "IVT" not in fa and {"IVT", "TMQ"} <= set(fb)
    with xr.open_dataset(tmp_path / "c.nc") as fc:  # ERA5's names, dimensions and levels
        assert {"tcwv", "viwvn", "msl", "u"} <= set(fc) and "TMQ" not in fc
        assert {"valid_time", "latitude", "longitude", "pressure_level"} == set(fc.dims)
        assert fc.latitude.values[0] > fc.latitude.values[-1]  # north to south, as ERA5


# --- climnb label -----------------------------------------------------------------------------


def test_label_recipes_draw_other_rivers(fields, tmp_path):
    default = _labels(fields, tmp_path / "default.nc")
    paper = _labels(fields, tmp_path / "paper.nc", "--recipe", "paper")
    ivt = _labels(fields, tmp_path / "ivt.nc", "--recipe", "ivt")
    rivers = {k: int((v == 2).sum()) for k, v in (("d", default), ("p", paper), ("i", ivt))}
    assert rivers["p"] != rivers["d"] and rivers["i"] > 0 and rivers["p"] > 0, rivers
    assert ((paper == 2) != (default == 2)).any() or ((ivt == 2) != (default == 2)).any()


def test_label_ar_percentile_fewer_rivers_above_a_higher_percentile(fields, tmp_path):
    low = _labels(fields, tmp_path / "p90.nc", "--recipe", "paper", "--ar-percentile", 90)
    high = _labels(fields, tmp_path / "p98.nc", "--recipe", "paper", "--ar-percentile", 98)
    assert int((high == 2).sum()) < int((low == 2).sum())


def test_label_storm_tracks_on_keeps_only_long_lived_storms(fields, tmp_path):
    on = _labels(fields, tmp_path / "on.nc", "--storm-tracks", "on")
    off = _labels(fields, tmp_path / "off.nc", "--storm-tracks", "off")
    storms_on, storms_off = int((on == 1).sum()), int((off == 1).sum())
    assert storms_on < storms_off
    assert not ((on == 1) & (off != 1)).any()  # only taken away, never added


# --- climnb stats compare ---------------------------------------------------------------------


def test_stats_compare_alpha_sets_the_test_level(fields, tmp_path):
    other = tmp_path / "b.nc"
    future = ["--more-rivers", 3, "--storm-intensity", 1.5]
    argv = ["synth", "--out", other, "--n-time", 24, "--seed", 4, "--n-tc", 3, "--n-ar", 3]
    assert _run([*argv, "--ivt", *future])[0] == 0
    tables = {}
    for alpha in (0.01, 0.3):
        csv = tmp_path / f"change-{alpha}.csv"
        rc, text, err = _run(
            ["stats", "compare", fields, other, "--block", 4, "--resamples", 99, "--alpha",
             alpha, "--region", "global", "--csv", csv, "--seed", 0]
        )  # fmt: skip
        assert rc == 0, err
        assert f"alpha_FDR = {2 * alpha:g}" in text
        tables[alpha] = pd.read_csv(csv)
    narrow, wide = tables[0.3], tables[0.01]
    assert (wide.ci_high - wide.ci_low > narrow.ci_high - narrow.ci_low).all()
    pd.testing.assert_series_equal(wide.change, narrow.change)


# --- climnb verify ----------------------------------------------------------------------------

TIMES = pd.date_range("2001-09-01", periods=4, freq="6h")
LAT, LON = np.arange(0.0, 40.5, 1.0), np.arange(260.0, 300.5, 1.0)


def _hurdat2(storms) -> str:
    """HURDAT2 text of ``storms``: (name, wind kt, [(time, lat, lon east)])."""
    lines = []
    for k, (name, wind, points) in enumerate(storms, start=1):
        lines.append(f"AL{k:02d}2001, {name:>19s}, {len(points):6d},")
        for t, lat, lon in points:
            lines.append(
                f"{t:%Y%m%d}, {t:%H%M},  , TS, {lat:4.1f}N, {360 - lon:5.1f}W, {wind:3d}, 1000,"
            )
    return "\n".join(lines) + "\n"


@pytest.fixture(scope="module")
def verify_files(tmp_path_factory):
    """Two detected storms: one on ALPHA's path, one 2 degrees (222 km) from BRAVO's; CHARLIE
    (25 kt) and DELTA (only at 18 UTC) go undetected."""
    d = tmp_path_factory.mktemp("verify")
    mask = np.zeros((TIMES.size, LAT.size, LON.size), np.uint8)
    for t in range(TIMES.size):
        mask[t, 10 + t : 12 + t, 20:22] = 1  # centre (10.5 + t N, 280.5 E), moving north
        mask[t, 30:32, 5:7] = 1  # centre (30.5 N, 265.5 E)
    da = xr.DataArray(mask, coords={"time": TIMES, "lat": LAT, "lon": LON},
                      dims=("time", "lat", "lon"))  # fmt: skip
    write_tracks(track_events(da), d / "tracks.nc")
    best = _hurdat2(
        [
            ("ALPHA", 50, [(t, 10.5 + k, 280.5) for k, t in enumerate(TIMES)]),
            ("BRAVO", 40, [(t, 32.5, 265.5) for t in TIMES[:2]]),
            ("CHARLIE", 25, [(t, 5.0, 295.0) for t in TIMES]),
            ("DELTA", 60, [(TIMES[3], 20.0, 295.0)]),
        ]
    )
    (d / "best.txt").write_text(best)
    return d


def _verify(d: Path, tmp_path: Path, *options) -> tuple[pd.DataFrame, pd.DataFrame]:
    storms, tracks = tmp_path / "storms.csv", tmp_path / "tracks.csv"
    rc, text, err = _run(["verify", d / "tracks.nc", "--best-track", d / "best.txt", "--csv",
                          storms, "--tracks-csv", tracks, *options])  # fmt: skip
    assert rc == 0, err
    return pd.read_csv(storms).set_index("name"), pd.read_csv(tracks)


def test_verify_radius_wind_and_period_change_what_counts(verify_files, tmp_path):
    storms, tracks = _verify(verify_files, tmp_path)
    assert storms.detected.to_dict() == {"ALPHA": True, "BRAVO": True, "DELTA": False}
    assert not tracks.false_alarm.any()
    storms, tracks = _verify(verify_files, tmp_path, "--radius-km", 150)
    assert storms.detected.to_dict() == {"ALPHA": True, "BRAVO": False, "DELTA": False}
    assert tracks.false_alarm.sum() == 1
    storms, _ = _verify(verify_files, tmp_path, "--min-wind-kt", 20)
    assert sorted(storms.index) == ["ALPHA", "BRAVO", "CHARLIE", "DELTA"]
    storms, _ = _verify(verify_files, tmp_path, "--min-wind-kt", 45)
    assert sorted(storms.index) == ["ALPHA", "DELTA"]
    storms, _ = _verify(verify_files, tmp_path, "--end", "2001-09-01T12:00")
    assert sorted(storms.index) == ["ALPHA", "BRAVO"]  # DELTA comes later
    storms, _ = _verify(verify_files, tmp_path, "--start", "2001-09-01T12:00")
    assert sorted(storms.index) == ["ALPHA", "DELTA"]  # BRAVO is over by then


# --- climnb stage -----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def samples(toy, tmp_path_factory):
    """8 toy sample files in train/, stats.h5 beside them and another stats file elsewhere."""
    from climnb.io.samples import write_samples
    from climnb.io.stats import compute_stats, write_stats

    root = tmp_path_factory.mktemp("stage")
    files = write_samples(toy[0], toy[0].truth, root / "train")
    write_stats(compute_stats(files), root / "stats.h5")
    write_stats(compute_stats(files[:2]), root / "other-stats.h5")
    return root


def _stage(samples: Path, dest: Path, *options) -> dict:
    import json

    report = dest.parent / f"{dest.name}-report.json"
    argv = ["stage", "--no-mpi", "--no-progress", "--source", samples / "train", "--dest",
            dest / "node{node}", "--nodes", 1, "--ranks-per-node", 2, "--samples-per-rank", 4,
            "--report", report, *options]  # fmt: skip
    rc, _, err = _run(argv)
    assert rc == 0, err
    return json.loads(report.read_text())


def test_stage_draw_stats_and_no_verify(samples, tmp_path):
    from climnb.data.staging import staged_files

    _stage(samples, tmp_path / "rep")
    _stage(samples, tmp_path / "shard", "--draw", "shard")
    ranks = {
        draw: [[p.name for p in staged_files(tmp_path / draw / "node0", r)] for r in (0, 1)]
        for draw in ("rep", "shard")
    }
    dealt = ranks["shard"][0] + ranks["shard"][1]
    assert len(dealt) == len(set(dealt)) == 8  # each file to one rank
    drawn = ranks["rep"][0] + ranks["rep"][1]
    assert len(drawn) == 8 and len(set(drawn)) < 8  # with replacement: some twice
    # --stats: that file, not the one beside the source
    _stage(samples, tmp_path / "stats", "--stats", samples / "other-stats.h5")
    staged = (tmp_path / "stats" / "node0" / "stats.h5").read_bytes()
    assert staged == (samples / "other-stats.h5").read_bytes()
    assert staged != (samples / "stats.h5").read_bytes()
    # a staged file changed in place, same size: checked and restaged, or trusted
    victim = sorted((tmp_path / "rep" / "node0").glob("data-*.h5"))[0]
    for options, rewritten in ((("--no-verify",), 0), ((), 1)):
        with open(victim, "r+b") as f:
            f.seek(5000)
            f.write(b"\xff" * 16)
        report = _stage(samples, tmp_path / "rep", *options)
        assert report["files_written"] == rewritten, options
    assert victim.read_bytes() == (samples / "train" / victim.name).read_bytes()


def test_label_classes_and_events_file(fields, tmp_path):
    storms = _labels(fields, tmp_path / "tc.nc", "--classes", "tc", "--events", tmp_path / "e.csv")
    rivers = _labels(fields, tmp_path / "ar.nc", "--classes", "ar")
    assert (storms == 1).any() and not (storms == 2).any()
    assert (rivers == 2).any() and not (rivers == 1).any()
    events = pd.read_csv(tmp_path / "e.csv")  # where --events says, not beside --out
    assert len(events) and set(events.class_id) == {1} and not (tmp_path / "tc.events.csv").exists()


# --- climnb stats -----------------------------------------------------------------------------


def test_stats_variable_and_tracks_choose_what_is_counted(fields, tmp_path):
    labels = _labels(fields, tmp_path / "labels.nc")
    with xr.open_dataset(fields) as ds:
        both = ds[["truth"]].load().assign(labels=labels.assign_coords(time=ds.time))
    src = tmp_path / "both.nc"
    both.to_netcdf(src)
    freq = {}
    for name in ("truth", "labels"):
        rc, text, err = _run(["stats", src, "--variable", name, "--out", tmp_path / f"{name}.nc"])
        assert rc == 0, err
        assert f"frequency of {name} over 24 steps" in text
        with xr.open_dataset(tmp_path / f"{name}.nc") as f:
            freq[name] = f.frequency.load()
    assert not freq["truth"].equals(freq["labels"])
    obs = track_events(both.truth)
    write_tracks(obs[obs.class_id == 1], tmp_path / "storms.nc")
    cases = [((), {"tropical_cyclone", "atmospheric_river"}),
             (("--tracks", tmp_path / "storms.nc"), {"tropical_cyclone"})]  # fmt: skip
    for extra, classes in cases:
        csv = tmp_path / f"events{len(extra)}.csv"
        rc, _, err = _run(["stats", src, "--variable", "truth", "--events", csv, *extra])
        assert rc == 0, err
        assert set(pd.read_csv(csv).class_name) == classes


# --- climnb demo ------------------------------------------------------------------------------


def _notebook(path: Path, *cells: str, parameters: str | None = None) -> None:
    import nbformat

    nb = nbformat.v4.new_notebook()
    if parameters is not None:
        nb.cells.append(nbformat.v4.new_code_cell(parameters, metadata={"tags": ["parameters"]}))
    nb.cells += [nbformat.v4.new_code_cell(c) for c in cells]
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    nbformat.write(nb, path)


@pytest.mark.slow  # Jupyter kernels
def test_demo_only_epochs_reports_keep_timeout_and_kernel(tmp_path):
    from climnb.demo import WORKFLOW

    nbs, reports = tmp_path / "notebooks", tmp_path / "reports"
    nbs.mkdir()
    _notebook(nbs / "04_train.ipynb", "open('epochs.txt', 'w').write(str(epochs))",
              parameters="epochs = 1")  # fmt: skip
    (nbs / "data" / "toy").mkdir(parents=True)
    (nbs / "data" / "toy" / "earlier.nc").write_text("x")
    base = ["demo", "--notebooks", nbs, "--reports", reports]
    rc, _, err = _run([*base, "--keep", "--epochs", 3])
    assert rc == 0, err
    assert (nbs / "epochs.txt").read_text() == "3" and (nbs / "data" / "toy").exists()
    assert sorted(p.name for p in reports.iterdir()) == ["04_train.html", "04_train.ipynb"]
    assert _run(base)[0] == 0  # a clean run starts from no data, with the workflow's epochs
    assert not (nbs / "data" / "toy").exists()
    assert (nbs / "epochs.txt").read_text() == str(WORKFLOW["04"]["epochs"])
    _notebook(nbs / "01_first.ipynb", "open('ran-01', 'w').close()")
    _notebook(nbs / "05_slow.ipynb", "import time; time.sleep(30)")
    (nbs / "epochs.txt").unlink()
    assert _run([*base, "--only", "01"])[0] == 0
    assert (nbs / "ran-01").exists() and not (nbs / "epochs.txt").exists()
    rc, _, err = _run([*base, "--only", "05", "--timeout", 2])
    assert rc != 0 and ("timed out" in err.lower() or "timeout" in err.lower()), err
    rc, _, err = _run([*base, "--only", "01", "--kernel", "no-such-kernel"])
    assert rc != 0 and "no-such-kernel" in err, err


# --- climnb kernel install --------------------------------------------------------------------


def test_kernel_install_sys_prefix_writes_into_this_environment():
    import json
    import shutil
    import uuid

    name = f"climnb-test-{uuid.uuid4().hex[:8]}"
    folder = Path(sys.prefix) / "share" / "jupyter" / "kernels" / name
    try:
        rc, out, err = _run(["kernel", "install", "--sys-prefix", "--name", name])
        assert rc == 0, err
        spec = json.loads((folder / "kernel.json").read_text())
        assert spec["argv"][0] == sys.executable and f"installed kernel '{name}'" in out
    finally:
        shutil.rmtree(folder, ignore_errors=True)
