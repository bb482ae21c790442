"""Tests for wrong results that a user would get and that the rest of the suite let through:
each compares with a value worked out by hand, where the rule decides.

* the IoU of a whole period comes from the counts summed over its steps, not from the mean of
  the steps' IoUs;
* a constant channel (minimum == maximum) normalises to 0, not NaN, in the sample reader and
  in a model bundle;
* ``class_weighting`` changes the weights the training loss uses;
* relative humidity becomes specific humidity with the pressure in Pa;

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
    from climnb.channels import CHANNEL_NAMES
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
