"""Where rules decide, at the edge: the period's last step, the storm-match distance, levels
outside the layer or below the ground, transport at exactly the threshold, a level half a
hectopascal off, a rename whose units do not fit, units spelt another way, two classes."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import xarray as xr

from climnb.io.levels import ivt_from_levels
from climnb.labels.scores import agreement, storm_scores
from climnb.stats.frequency import period_attrs


def test_the_period_ends_at_the_last_step_not_the_one_before():
    time = xr.DataArray(pd.date_range("2000-01-01", periods=3, freq="6h"), dims="time")
    attrs = period_attrs(time)
    assert attrs["period_start"] == "2000-01-01T00:00:00"
    assert attrs["period_end"] == attrs["time_coverage_end"] == "2000-01-01T12:00:00"
    assert attrs["period_steps"] == 3


@pytest.mark.parametrize(("km", "hit"), [(280.0, True), (450.0, False)])
def test_a_storm_centre_is_matched_within_300_km_by_default(km, hit):
    true = pd.DataFrame({"time": [0], "lat": [15.0], "lon": [140.0], "radius_km": [100.0]})
    dlat = km / 111.195  # km a degree of latitude on the climnb sphere
    found = pd.DataFrame({"time": [0], "lat": [15.0 + dlat], "lon": [140.0]})
    scores = storm_scores(found, true)
    assert scores["recall"] == scores["precision"] == (1.0 if hit else 0.0)


def _column(levels_hpa, q=0.01, u=10.0):
    level = xr.DataArray(np.array(levels_hpa, float), dims="plev", attrs={"units": "hPa"})
    shape = xr.DataArray(np.ones(len(levels_hpa)), dims="plev", coords={"plev": level})
    return shape * u, shape * 0.0, shape * q


def test_levels_below_the_layers_bottom_are_left_out():
    """1000-300 hPa: a 1050 hPa level would add 50 hPa of transport."""
    u, v, q = _column([1050, 1000, 300])
    ivt = ivt_from_levels(u, v, q, level="plev").IVTU.item()
    assert ivt == pytest.approx(0.01 * 10.0 * 70000.0 / 9.80665, rel=1e-3)


def test_levels_below_the_ground_carry_no_transport():
    """A surface at 850 hPa: 1000-850 hPa counts nothing (0, not any other value)."""
    u, v, q = _column([1000, 850, 300])
    surface = xr.DataArray(85000.0)
    ivt = ivt_from_levels(u, v, q, level="plev", surface_pressure=surface).IVTU.item()
    # trapezoids: 1000-850 half (0 below, flux at 850), 850-300 whole
    flux = 0.01 * 10.0
    expected = (flux / 2 * 15000.0 + flux * 55000.0) / 9.80665
    assert ivt == pytest.approx(expected, rel=1e-3)


def test_transport_exactly_at_the_threshold_counts_as_strong():
    """``iou_strong`` is over pixels with ``ivt >= threshold``: a pixel at exactly 250 is in."""
    labels = np.zeros((1, 4, 8), np.uint8)
    reference = np.zeros((1, 4, 8), bool)
    labels[0, 1, 2:5] = 2
    reference[0, 1, 2:4] = True
    ivt = np.full((1, 4, 8), 100.0)
    ivt[0, 1, 2:4] = 300.0
    ivt[0, 1, 4] = 250.0  # ours only, exactly at the threshold
    lon = np.arange(8) * 45.0
    out = agreement(labels, reference, ivt, lon, threshold=250.0)
    assert out["iou_strong"] == pytest.approx(2 / 3)


@pytest.mark.parametrize(("level", "hit"), [(849.6, True), (849.3, False)])
def test_a_quantity_on_levels_is_taken_within_half_a_hectopascal(level, hit):
    from climnb.io.variables import canonicalize

    ds = xr.Dataset(
        {"u": (("time", "plev"), [[1.0, 2.0]])},
        coords={"plev": ("plev", [level, 500.0], {"units": "hPa"})},
    )
    out, _ = canonicalize(ds)
    assert ("U850" in out) == hit
    if hit:
        assert out.U850.item() == 1.0


def test_a_renamed_variable_whose_units_do_not_fit_names_the_rename():
    from climnb.io.variables import canonicalize

    ds = xr.Dataset({"foo": (("lat", "lon"), np.ones((2, 3)), {"units": "K"})})
    with pytest.raises(ValueError, match=r"--rename foo=PSL: .*is foo the variable meant as PSL"):
        canonicalize(ds, variables={"foo": "PSL"})


def test_units_spelt_another_way_are_the_same_units():
    """``m/s`` and ``m**2`` spellings are the channel's units: kept as they are."""
    from climnb.io.variables import canonicalize

    ds = xr.Dataset({"U850": (("lat", "lon"), np.full((2, 3), 7.0), {"units": "m/s"})})
    out, notes = canonicalize(ds)[:2]
    assert float(out.U850[0, 0]) == 7.0
    assert not any("->" in n for n in notes), notes


def test_two_classes_are_enough_to_weight_one_is_not():
    from climnb.models.losses import class_weights

    w = class_weights([0.75, 0.25])  # a background and one event class
    assert w.shape == (2,) and w[1] > w[0]
    with pytest.raises(ValueError, match="at least two class frequencies"):
        class_weights([1.0])
