"""Tests for wrong results that a user would get and that the rest of the suite let through:
each compares with a value worked out by hand, where the rule decides.

* the IoU of a whole period comes from the counts summed over its steps, not from the mean of
  the steps' IoUs;
* a constant channel (minimum == maximum) normalises to 0, not NaN, in the sample reader and
  in a model bundle;
* ``class_weighting`` changes the weights the training loss uses;
* relative humidity becomes specific humidity with the pressure in Pa;
* then what the mutants of benchmarks/bench_mutation.py showed untested: the split's gaps,
  river and agreement scores, the pressure units, atomic clean-up, the output rule, the
  staged labellers, the frequency's attributes, a comparison of two periods.

The river's minimum length is in tests/test_rule_edges.py, with the other thresholds.
"""

from __future__ import annotations

import numpy as np
import pytest
import xarray as xr

from climnb.labels.scores import iou_by_step

# --- the IoU of a period ---------------------------------------------------------------------


def _two_steps():
    """Two steps of 1 x 8 pixels. Step 0: a storm of 4 pixels found exactly, a river of 2
    pixels missed; step 1: a storm of 1 pixel found one pixel off, a river of 2 pixels found
    exactly. The IoUs per step and over the period, counted by hand:

    class       step 0      step 1      period (summed counts)    mean of steps
    storm       4/4 = 1     0/2 = 0     4/6 = 0.667               0.5
    river       0/2 = 0     2/2 = 1     2/4 = 0.5                 0.5
    background  2/4 = 0.5   4/6         6/10 = 0.6                (0.5 + 4/6) / 2 = 0.583
    """
    ref = [[[1, 1, 1, 1, 2, 2, 0, 0]], [[1, 0, 0, 0, 2, 2, 0, 0]]]
    given = [[[1, 1, 1, 1, 0, 0, 0, 0]], [[0, 1, 0, 0, 2, 2, 0, 0]]]
    dims = ("time", "lat", "lon")
    time = np.array(["2000-01-01T00", "2000-01-01T03"], "datetime64[ns]")
    return (
        xr.DataArray(np.array(ref, np.uint8), dims=dims, coords={"time": time}),
        xr.DataArray(np.array(given, np.uint8), dims=dims, coords={"time": time}),
    )


def test_period_iou_is_from_summed_counts_not_a_mean_of_steps():
    ref, given = _two_steps()
    steps, table = iou_by_step(ref, given)
    np.testing.assert_allclose(steps, [[0.5, 1.0, 0.0], [4 / 6, 0.0, 1.0]])
    table = table.set_index("class")
    np.testing.assert_allclose(table["IoU (period)"], [0.6, 4 / 6, 0.5])
    np.testing.assert_allclose(table["IoU (mean of steps)"], [(0.5 + 4 / 6) / 2, 0.5, 0.5])
    np.testing.assert_allclose(table["IoU (worst step)"], [0.5, 0.0, 0.0])


def test_explorer_table_holds_the_period_iou():
    from climnb.viz.explorer import iou_over_time

    ref, given = _two_steps()
    _, table = iou_over_time(ref, given)
    np.testing.assert_allclose(table.set_index("class")["IoU (period)"], [0.6, 4 / 6, 0.5])


# --- a constant channel ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def constant_channel(toy, tmp_path_factory):
    """Two sample files whose PSL is 101325 Pa everywhere, and their statistics."""
    from climnb.io.samples import write_samples
    from climnb.io.stats import compute_stats

    ds = toy[0].isel(time=slice(0, 2)).copy()
    ds["PSL"] = xr.full_like(ds.PSL, 101325.0)
    files = write_samples(ds, ds.truth, tmp_path_factory.mktemp("constant"))
    return files, compute_stats(files)


def test_reader_normalises_a_constant_channel_to_zero(constant_channel):
    from climnb.io.channels import CHANNEL_NAMES
    from climnb.io.reader import SampleReader

    files, stats = constant_channel
    k = CHANNEL_NAMES.index("PSL")
    assert stats.minval[k] == stats.maxval[k] == 101325.0
    x, _, _ = SampleReader(files, stats).read([0, 1])
    assert np.isfinite(x).all()
    np.testing.assert_array_equal(x[..., k], 0.0)
    other = CHANNEL_NAMES.index("TMQ")  # the other channels still span 0..1
    assert x[..., other].min() >= 0 and x[..., other].max() <= 1 and x[..., other].max() > 0.5
    (only,) = SampleReader(files, stats, channels=["PSL"]).read([1])[0:1]
    np.testing.assert_array_equal(only, 0.0)


def test_bundle_normalises_a_constant_channel_to_zero(tmp_path):
    from climnb.bundle import Bundle

    bundle = Bundle(
        path=tmp_path, channels=("TMQ", "PSL"), minval=np.array([0.0, 101325.0]),
        maxval=np.array([50.0, 101325.0]), n_classes=3, name="t", preset="p", overrides={},
        stride=16, input_shape=(None, None, 2), climnb_version="0",
    )  # fmt: skip
    x = np.array([[[25.0, 101325.0], [np.nan, 101325.0], [50.0, 101000.0]]], np.float32)
    out = bundle.normalise(x.copy())
    np.testing.assert_array_equal(out, [[[0.5, 0.0], [0.0, 0.0], [1.0, 0.0]]])


# --- the class weighting of training -------------------------------------------------------------


@pytest.fixture(scope="module")
def weighting_runs(tmp_path_factory):
    """The first step's loss of two otherwise identical one-step runs, one per scheme, and the
    training split's class counts. No Dice term: it adds the same unweighted loss to both."""
    from _training import toy_config, write_toy_samples

    from climnb.io.sampleset import SampleSet
    from climnb.train.loop import train

    data = write_toy_samples(tmp_path_factory.mktemp("samples"), n_time=12, seed=4)
    losses = {}
    for scheme in ("inverse", "deepcam"):
        out = tmp_path_factory.mktemp(scheme)
        config = toy_config(data, out, class_weighting=scheme, max_steps=1, seed=3, dice_weight=0.0)
        losses[scheme] = float(train(config).history.loss.iloc[0])
    return losses, SampleSet.open(data).class_counts("train")


@pytest.mark.slow
def test_class_weighting_changes_the_loss_the_network_learns_from(weighting_runs):
    """Same data, network and batch: the loss is ``sum_c w_c S_c / N`` with ``S_c`` the summed
    cross entropy of class ``c``'s pixels, the same in both runs. The ratio of the two losses is
    a weighted mean of ``w_inverse_c / w_deepcam_c``, so it lies between their extremes; with
    the scheme ignored (the same weights in both runs) it would be 1."""
    losses, counts = weighting_runs
    f = counts / counts.sum()  # the frequencies the weights are drawn from, by hand:
    inverse = (1 / f) / (1 / f).sum()  # normalised inverse frequency
    deepcam = f**-0.125  # DeepCAM's freq^-1/8, not normalised
    ratio = losses["inverse"] / losses["deepcam"]
    per_class = inverse / deepcam
    assert per_class.min() <= ratio <= per_class.max()
    assert not 0.9 < ratio < 1.1  # far from 1 on this data: the schemes differ by 3x or more
    assert per_class.max() < 0.9


# --- relative to specific humidity --------------------------------------------------------------

# A profile worked out by hand: Bolton's e_s = 611.2 exp(17.67 Tc / (Tc + 243.5)) Pa,
# e = RH / 100 e_s, q = 0.622 e / (p - 0.378 e) with p in Pa.
P_HPA = [1000.0, 850.0, 700.0, 500.0, 300.0]
T_K = [293.15, 283.15, 273.15, 258.15, 233.15]
RH = [80.0, 70.0, 60.0, 40.0, 20.0]
Q_BY_HAND = [11.711e-3, 6.3101e-3, 3.2650e-3, 0.95401e-3, 0.078615e-3]  # kg kg-1
# IVTU with u = 10 m s-1: (1 / g) trapezoid of 10 q over p, 1000-300 hPa
IVTU_BY_HAND = 264.608  # kg m-1 s-1


def test_specific_humidity_of_a_profile_by_hand():
    from climnb.io.levels import specific_humidity

    r = xr.DataArray(RH, dims="level")
    t = xr.DataArray(T_K, dims="level")
    p_pa = xr.DataArray(np.array(P_HPA) * 100.0, dims="level")
    q = specific_humidity(r, t, p_pa)
    np.testing.assert_allclose(q.values, Q_BY_HAND, rtol=2e-4)
    # saturated air at 0 degC: e = e_s = 611.2 Pa exactly
    sat = specific_humidity(xr.DataArray(100.0), xr.DataArray(273.15), 100000.0)
    assert float(sat) == pytest.approx(0.622 * 611.2 / (100000.0 - 0.378 * 611.2), rel=1e-12)


def _on_levels(level: str, values, units: str) -> xr.Dataset:
    shape = (1, len(P_HPA), 2, 3)

    def field(profile, name, unit):
        a = np.broadcast_to(np.asarray(profile)[None, :, None, None], shape).copy()
        return (("time", level, "lat", "lon"), a, {"units": unit, "long_name": name})

    return xr.Dataset(
        {
            "u": field([10.0] * 5, "u", "m s-1"),
            "v": field([0.0] * 5, "v", "m s-1"),
            "r": field(RH, "relative humidity", "%"),
            "t": field(T_K, "temperature", "K"),
        },
        coords={
            "time": np.array(["2000-01-01"], "datetime64[ns]"),
            level: (level, np.asarray(values, float), {"units": units}),
            "lat": [40.0, 42.0],
            "lon": [0.0, 2.0, 4.0],
        },
    )


@pytest.mark.parametrize(
    "level, values, units",
    [("level", P_HPA, "hPa"), ("plev", [p * 100 for p in P_HPA], "Pa")],
    ids=["hPa levels", "Pa levels"],
)
def test_ivt_from_relative_humidity_on_levels(level, values, units):
    from climnb.io.variables import canonicalize

    out, notes = canonicalize(_on_levels(level, values, units))
    np.testing.assert_allclose(out.IVTU.values, IVTU_BY_HAND, rtol=1e-3)
    np.testing.assert_allclose(out.IVTV.values, 0.0, atol=1e-9)
    assert any("q from r=r, t=t" in n for n in notes)


# --- what the mutation benchmark found untested (benchmarks/bench_mutation.py) -----------------

# the split: three-hourly steps, worked out by hand


def _three_hourly(n: int = 20) -> np.ndarray:
    return np.datetime64("2000-01-01T00") + np.arange(n) * np.timedelta64(3, "h")


def test_split_without_times_is_contiguous_blocks_by_position():
    from climnb.io.split import split_steps

    parts = split_steps(None, n=10)  # 8, 1, 1: validation and test rounded, train the rest
    assert [p.tolist() for p in parts] == [list(range(8)), [8], [9]]


@pytest.mark.parametrize(
    "gap_hours, train_last, val",
    [(0.5, 15, [16, 17]), (3.0, 15, [16, 17]), (6.0, 13, [15, 16])],
    ids=["0.5 h", "3 h (the spacing: allowed)", "6 h"],
)
def test_block_split_gaps_by_hand(gap_hours, train_last, val):
    """20 steps 3 h apart: test is the last 2 (18, 19). With a gap of 6 h, validation must end
    6 h before step 18 (at step 16) and train 6 h before validation's first step 15 (at 13)."""
    from climnb.io.split import split_steps

    train, got_val, test = split_steps(_three_hourly(), gap_hours=gap_hours)
    assert test.tolist() == [18, 19] and got_val.tolist() == val
    assert train.tolist() == list(range(train_last + 1))


def test_block_split_without_a_gap():
    from climnb.io.split import split_steps

    train, val, test = split_steps(_three_hourly(), gap_hours=0.0)
    assert (train.tolist(), val.tolist(), test.tolist()) == (list(range(16)), [16, 17], [18, 19])


@pytest.mark.parametrize("gap_hours", [-1.0, float("nan")], ids=["negative", "NaN"])
def test_block_split_refuses_a_bad_gap(gap_hours):
    from climnb.io.split import split_steps

    with pytest.raises(ValueError, match="gap_hours"):
        split_steps(_three_hourly(), gap_hours=gap_hours)


# river objects matched by hand


def _rivers(labelled_cols_of_b: int):
    """One step of 6 x 12 (a regional grid: no seam). The truth has river A (row 1, columns
    0-3) and river B (row 4, columns 0-9); the labels have A whole, the first
    ``labelled_cols_of_b`` columns of B, and a false river (row 1, columns 8-10)."""
    truth = np.zeros((1, 6, 12), np.uint8)
    truth[0, 1, 0:4] = truth[0, 4, 0:10] = 2
    labels = np.zeros_like(truth)
    labels[0, 1, 0:4] = labels[0, 4, 0:labelled_cols_of_b] = labels[0, 1, 8:11] = 2
    return labels, truth, np.arange(12) * 10.0


@pytest.mark.parametrize(
    "cols, recall", [(3, 0.5), (5, 1.0)], ids=["B 3 of 10 pixels", "B 5 of 10 pixels"]
)
def test_river_scores_by_hand(cols, recall):
    """A true river is found when at least half its pixels are labelled (B: 3 of 10, no; 5 of
    10, yes); each of the 3 labelled rivers is right when at least half its pixels are river
    in the truth (A's and B's part: yes, the false one: no)."""
    from climnb.labels.scores import river_scores

    labels, truth, lon = _rivers(cols)
    got = river_scores(labels, truth, lon)
    assert got == {"recall": recall, "precision": 2 / 3, "n_true": 2, "n_found": 3}
    none = river_scores(np.zeros_like(truth), truth, lon)  # nothing found: precision 1 (0/0)
    assert none == {"recall": 0.0, "precision": 1.0, "n_true": 2, "n_found": 0}


def test_agreement_by_hand_and_its_shape_check():
    from climnb.labels.scores import agreement

    labels, truth, lon = _rivers(5)
    ivt = np.full(truth.shape, 300.0)
    got = agreement(labels, truth, ivt, lon)
    # river pixels: ours 4 + 5 + 3 = 12, the reference's 14, both 9
    assert got["iou"] == pytest.approx(9 / 17) and got["iou_strong"] == pytest.approx(9 / 17)
    assert (got["n_reference"], got["n_ours"], got["recall"]) == (2, 3, 1.0)
    assert got["only_ours"] == pytest.approx(3 / 17) and got["only_reference"] == (
        pytest.approx(5 / 17)
    )
    with pytest.raises(ValueError, match=r"must have the same \(time, lat, lon\) shape"):
        agreement(labels, truth, ivt[:, :5], lon)


# the pressure levels' units and the fields IVT is computed from


HPA = ["hPa", "mb", "mbar", "millibar", "millibars", "hectopascal", "hectopascals"]


@pytest.mark.parametrize(
    "units, scale",
    [*((u, 1) for u in HPA), ("Pa", 100), ("pascal", 100), ("", 1), ("", 100)],
    ids=[*HPA, "Pa", "pascal", "no units, hPa values", "no units, Pa values"],
)
def test_ivt_from_levels_in_every_spelling_of_the_units(units, scale):
    from climnb.io.variables import canonicalize

    values = [p * scale for p in P_HPA]
    out, _ = canonicalize(_on_levels("level", values, units))
    np.testing.assert_allclose(out.IVTU.values, IVTU_BY_HAND, rtol=1e-3)


def test_ivt_from_specific_humidity_in_g_per_kg():
    from climnb.io.levels import specific_humidity
    from climnb.io.variables import canonicalize

    ds = _on_levels("level", P_HPA, "hPa")
    p_pa = xr.DataArray(np.array(P_HPA) * 100.0, dims="level")
    q = specific_humidity(ds.r.drop_vars("level"), ds.t.drop_vars("level"), p_pa)
    for factor, units in ((1.0, "kg kg-1"), (1000.0, "g kg-1"), (1000.0, "g/kg")):
        given = ds.drop_vars(["r", "t"]).assign(q=(q * factor).assign_attrs(units=units))
        out, notes = canonicalize(given.assign_coords(level=ds.level))
        np.testing.assert_allclose(out.IVTU.values, IVTU_BY_HAND, rtol=1e-3)
        assert any("q=q" in n for n in notes)


def test_no_ivt_from_levels_without_a_wind_or_when_the_file_has_ivt():
    from climnb.io.variables import canonicalize

    ds = _on_levels("level", P_HPA, "hPa")
    for missing in ("u", "v"):
        out, _ = canonicalize(ds.drop_vars(missing))
        assert "IVTU" not in out and "IVTV" not in out
    ivt = xr.full_like(ds.u.isel(level=0, drop=True), 500.0).assign_attrs(units="kg m-1 s-1")
    out, _ = canonicalize(ds.assign(IVT=ivt))
    assert "IVTU" not in out and float(out.IVT.max()) == 500.0  # the file's own, kept


def test_a_wind_at_a_scalar_level_beside_a_scalar_time():
    """A field whose level was already picked (a scalar ``level`` coordinate) is taken at that
    level; another scalar coordinate (the time) is not a level."""
    from climnb.io.variables import canonicalize

    u = xr.DataArray(
        np.full((2, 3), 7.0),
        dims=("lat", "lon"),
        coords={
            "time": np.datetime64("2000-01-01"),
            "level": xr.DataArray(850.0, attrs={"units": "hPa"}),
            "lat": [40.0, 42.0],
            "lon": [0.0, 2.0, 4.0],
        },
        attrs={"units": "m s-1"},
    )
    out, _ = canonicalize(xr.Dataset({"u": u}))
    assert float(out.U850.max()) == 7.0
    out, _ = canonicalize(xr.Dataset({"u": u.assign_coords(level=500.0)}))
    assert "U850" not in out


# atomic writes and the output rule


def test_atomic_write_makes_missing_folders_and_writes_again(tmp_path):
    from climnb.io.atomic import atomic_path

    target = tmp_path / "a" / "b" / "out.txt"
    for text in ("first", "second"):  # the folders exist the second time
        with atomic_path(target) as tmp:
            tmp.write_text(text)
        assert target.read_text() == text
    assert [p.name for p in target.parent.iterdir()] == ["out.txt"]


def test_a_displaced_output_is_put_back_not_counted_as_removed(tmp_path):
    """A dead run's ``.NAME.PID-X.old`` (the finished output it had moved aside) comes back as
    ``NAME`` when that is missing; with ``NAME`` there, it and a dead temporary folder go."""
    from climnb.io.atomic import remove_leftovers

    dead = _dead_pid()
    old = tmp_path / f".set.{dead}-0badf00d.old"
    (old / "train").mkdir(parents=True)
    (old / "train" / "data.h5").write_text("finished")
    assert remove_leftovers(tmp_path, "set") == []
    assert (tmp_path / "set" / "train" / "data.h5").read_text() == "finished"
    stale, scratch = tmp_path / f".set.{dead}-0badcafe.old", tmp_path / f".set.{dead}-1badcafe.tmp"
    for d in (stale, scratch):
        (d / "train").mkdir(parents=True)
        (d / "train" / "data.h5").write_text("old")
    assert sorted(remove_leftovers(tmp_path, "set")) == sorted([stale, scratch])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["set"]


def _dead_pid() -> int:
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    )
    return int(done.stdout)


def test_folder_outputs_at_the_rule_edges(tmp_path):
    from climnb.io.outputs import OutputError, check_output

    inputs = tmp_path / "in"
    inputs.mkdir()
    (inputs / "fields.nc").write_text("x")
    assert check_output(tmp_path / "set", [inputs / "fields.nc"], kind="folder").name == "set"
    (tmp_path / "a-file").write_text("x")
    with pytest.raises(OutputError, match="a-file exists and is not a directory"):
        check_output(tmp_path / "a-file", kind="folder")
    with pytest.raises(OutputError, match="holds the input"):
        check_output(tmp_path, [inputs / "fields.nc"], kind="folder", overwrite=True)


# the staging draw keeps what the manifest says of each file


def test_staged_copies_keep_each_files_labeller(tmp_path):
    from climnb.data.staging import StagingConfig, stage
    from climnb.io.channels import CHANNEL_NAMES
    from climnb.io.manifest import Manifest
    from climnb.io.samples import write_sample
    from climnb.io.stats import compute_stats, write_stats

    rng = np.random.default_rng(0)
    files = []
    for k in range(4):
        data = rng.random((8, 16, len(CHANNEL_NAMES)), np.float32)
        labels = (rng.random((8, 16)) * 3).astype(np.uint8)
        name = tmp_path / "shared" / "train" / f"data-2000-01-01-0{k}-1_{k % 2}.h5"
        time = np.datetime64("2000-01-01T00") + np.timedelta64(k, "h")
        files.append(write_sample(name, data, labels, time=time, expert={"labeller": k % 2}))
    write_stats(compute_stats(files), tmp_path / "shared" / "stats.h5")
    config = StagingConfig(
        source=str(tmp_path / "shared" / "train"), dest=str(tmp_path / "node{node}"),
        n_nodes=1, ranks_per_node=1, samples_per_rank=4, seed=0, draw="shard",
    )  # fmt: skip
    stage(config)
    staged = Manifest.read(tmp_path / "node0").files
    assert {n: e.labeller for n, e in staged.items()} == {f.name: int(f.stem[-1]) for f in files}


# the statistics' frequency Dataset


def test_frequency_over_all_steps_has_no_group_and_says_its_range():
    from climnb.stats.frequency import frequency

    mask = xr.DataArray(
        np.array([[[0, 1], [2, 0]], [[1, 1], [0, 0]]], np.uint8),
        dims=("time", "lat", "lon"),
        coords={"time": np.array(["2000-01-01", "2000-01-02"], "datetime64[ns]"),
                "lat": [10.0, 20.0], "lon": [0.0, 10.0]},
    )  # fmt: skip
    out = frequency(mask, by="all")
    assert set(out.frequency.dims) == {"class", "lat", "lon"} and out.steps.ndim == 0
    assert set(out.coords) <= {"class", "class_id", "lat", "lon"}
    np.testing.assert_array_equal(out.frequency.attrs["valid_range"], [0.0, 1.0])
    flags = out.class_id.attrs
    assert flags["flag_meanings"] == "tropical_cyclone atmospheric_river"
    np.testing.assert_array_equal(flags["flag_values"], [1, 2])
    storms = out.frequency.sel({"class": "tropical_cyclone"}).values
    np.testing.assert_allclose(storms, [[0.5, 1.0], [0.0, 0.0]])  # by hand: 1 or 2 of 2 steps


def test_compare_on_blocks_made_by_hand():
    """Period A has no river; period B (4 blocks of 2 steps) a river at one point in every
    step, and at another point in its first block only. The permutation splits the 8 pooled
    blocks into sets of 4: only 2 of the 70 splits give a change as large as 1, so p is about
    2/70; one block alone is never significant (every split gives |change| = 1/4, p = 1); the
    bootstrap of identical blocks gives the change itself as its interval."""
    from climnb.stats.change import CompareConfig, compare
    from climnb.stats.masks import class_mask

    a = xr.zeros_like(class_mask(make_dataset_toy()).load())
    b = a.copy()
    b[:, 50, 10] = 2
    b[0:2, 50, 20] = 2
    result = compare(a, b, CompareConfig(block=2, n_resamples=199, seed=0))
    ar = result.maps.sel({"class": "atmospheric_river"})
    every = {v: float(ar[v][50, 10]) for v in ("change", "ci_low", "ci_high", "p_value")}
    assert every["change"] == every["ci_low"] == every["ci_high"] == 1.0
    assert 1 / 200 <= every["p_value"] < 0.1  # 1 + about 199 * 2/70 hits, over 200
    first = {v: float(ar[v][50, 20]) for v in ("change", "ci_low", "ci_high", "p_value")}
    assert first["change"] == 0.25 and first["p_value"] == 1.0
    assert first["ci_low"] == 0.0 and 0.25 <= first["ci_high"] <= 1.0  # k of 4 draws: k / 4
    assert float(ar.change[10, 10]) == 0.0 and float(ar.p_value[10, 10]) == 1.0
    assert CompareConfig().n_resamples == 999  # p-values in steps of 1/1000


def make_dataset_toy():
    from climnb.data.synthetic import make_dataset

    return make_dataset(n_time=8, seed=0)[0]
