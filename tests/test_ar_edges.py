"""The river rules' small parts by hand: which field is the strength, the tropical damping and
the TMQ anomaly as numbers, the storms' surroundings in grid steps, the poleward transport in
each hemisphere, the table of the rivers kept, and a network's mask put through the rules."""

from __future__ import annotations

import numpy as np
import pytest

from climnb.labels.ar import (
    ivt_magnitude,
    river_rules,
    river_strength,
    rule_classes,
    rule_variables,
    storm_surroundings,
    tmq_anomaly,
    transport_rivers,
)
from climnb.labels.components import MEASURE_COLUMNS
from climnb.labels.config import ARConfig

LAT = np.linspace(-90.0, 90.0, 181)  # 1 degree: 111.2 km a row
LON = np.arange(0.0, 360.0, 1.0)


def _full(value, shape=(3, 4)):
    return np.full(shape, float(value))


def test_ivt_from_the_field_its_components_or_the_proxy():
    assert ivt_magnitude({"IVT": _full(7), "IVTU": _full(3), "IVTV": _full(4)})[0, 0] == 7.0
    assert ivt_magnitude({"IVTU": _full(3), "IVTV": _full(4)})[0, 0] == 5.0
    assert ivt_magnitude({"IVTU": _full(3), "TMQ": _full(1)}) is None
    proxy = {"TMQ": _full(20), "U850": _full(6), "V850": _full(8)}
    assert ivt_magnitude(proxy)[0, 0] == 200.0
    assert ivt_magnitude({"TMQ": _full(20), "U850": _full(6)}) is None


def test_strength_is_the_damped_ivt_or_tmq():
    lat = np.array([0.0, 19.0, 38.0])
    fields = {"TMQ": _full(40), "IVT": _full(300)}
    damp = 1 - np.exp(-(lat**2) / (2 * 19.0**2))  # 0, 0.3935, 0.8647
    np.testing.assert_allclose(damp[1], 0.393469, rtol=1e-5)
    np.testing.assert_allclose(river_strength(fields, lat, ARConfig())[:, 0], 300 * damp)
    tmq = river_strength(fields, lat, ARConfig(field="tmq"))
    np.testing.assert_allclose(tmq[:, 0], 40 * damp, rtol=1e-6)
    no_ivt = river_strength({"TMQ": _full(40)}, lat, ARConfig(field="ivt"))
    np.testing.assert_allclose(no_ivt[:, 0], 40 * damp, rtol=1e-6)
    undamped = river_strength(fields, lat, ARConfig(tropics_sigma_deg=0.0))
    np.testing.assert_array_equal(undamped, _full(300))


def test_tmq_anomaly_is_over_the_zonal_median_and_damped():
    lat = np.array([10.0, 40.0])
    tmq = np.array([[1.0, 2.0, 3.0, 10.0], [5.0, 5.0, 6.0, 20.0]])
    damp = 1 - np.exp(-(lat**2) / (2 * 19.0**2))
    want = (tmq - np.array([[2.5], [5.5]])) * damp[:, None]
    np.testing.assert_allclose(tmq_anomaly(tmq, lat, ARConfig()), want)


def test_storm_surroundings_grow_by_whole_grid_steps():
    storm = np.zeros((LAT.size, 60), bool)
    storm[100, 30] = True
    for km, steps in ((0.0, 0), (111.0, 1), (112.0, 2), (500.0, 5)):
        grown = storm_surroundings(storm, LAT, km)
        rows = np.flatnonzero(grown[:, 30])
        assert (rows.min(), rows.max()) == (100 - steps, 100 + steps), km
    assert not storm_surroundings(np.zeros_like(storm), LAT, 500.0).any()

    class Storm:  # the labeller's storms: their pixels' rows and columns
        rows, cols = np.array([100]), np.array([30])

    class Nothing:
        rows = cols = np.array([], int)

    np.testing.assert_array_equal(
        storm_surroundings(storm, LAT, 500.0, storms=[Nothing(), Storm()]),
        storm_surroundings(storm, LAT, 500.0),
    )
    corner = np.zeros_like(storm)
    corner[0, 0] = True

    class AtTheCorner:
        rows, cols = np.array([0]), np.array([0])

    np.testing.assert_array_equal(
        storm_surroundings(corner, LAT, 300.0, storms=[AtTheCorner()]),
        storm_surroundings(corner, LAT, 300.0),
    )


def _band(rows, cols, shape=(LAT.size, LON.size)):
    mask = np.zeros(shape, bool)
    mask[np.ix_(rows, cols)] = True
    return mask


def test_rules_table_numbers_the_rivers_kept_from_one():
    """Three bands 40 degrees north: the short middle one is rejected."""
    mask = _band([130, 131], range(0, 30)) | _band([130, 131], range(60, 70))
    mask |= _band([130, 131], range(100, 140))
    fields = {"IVTV": np.full(mask.shape, 100.0)}
    rivers, table = river_rules(mask, fields, LAT, LON, ARConfig())
    assert list(table.columns) == list(MEASURE_COLUMNS)
    assert table.index.tolist() == [0, 1] and table.label.tolist() == [1, 2]
    assert sorted(np.unique(rivers).tolist()) == [0, 1, 2]
    assert not rivers[:, 60:70].any() and (rivers[130, 100:140] == 2).all()


@pytest.mark.parametrize("hemisphere", [1, -1], ids=["north", "south"])
def test_poleward_transport_in_each_hemisphere(hemisphere):
    row = 90 + hemisphere * 40
    mask = _band([row, row + 1], range(0, 30))
    for v, kept in ((100.0 * hemisphere, True), (-100.0 * hemisphere, False)):
        fields = {"IVTV": np.full(mask.shape, v)}
        rivers, _ = river_rules(mask, fields, LAT, LON, ARConfig())
        assert rivers.any() == kept
        proxy = {"TMQ": np.full(mask.shape, 20.0), "V850": np.full(mask.shape, v / 20)}
        assert river_rules(mask, proxy, LAT, LON, ARConfig())[0].any() == kept
    # the rule switched off keeps an equatorward river
    fields = {"IVTV": np.full(mask.shape, -100.0 * hemisphere)}
    assert river_rules(mask, fields, LAT, LON, ARConfig(ivt_min_poleward=None))[0].any()


def test_which_fields_the_rules_read():
    assert rule_variables(["IVTV", "TMQ", "V850"], ARConfig()) == ("IVTV",)
    assert rule_variables(["TMQ", "V850", "PSL"], ARConfig()) == ("TMQ", "V850")
    assert rule_variables(["PSL"], ARConfig(ivt_min_poleward=None)) == ()
    with pytest.raises(ValueError, match=r"missing TMQ, V850 \(found PSL\)"):
        rule_variables(["PSL"], ARConfig())
    with pytest.raises(ValueError, match=r"missing V850 \(found TMQ\)"):
        rule_variables(["TMQ"], ARConfig())


def test_a_networks_mask_through_the_rules():
    classes = np.zeros((LAT.size, LON.size), np.uint8)
    classes[np.ix_([130, 131], range(0, 30))] = 2  # a river at 40N: kept
    classes[np.ix_([95, 96], range(100, 130))] = 2  # in the tropics (5N): removed
    classes[np.ix_([130, 131], range(200, 230))] = 2  # beside a storm: its pixels go
    classes[np.ix_([128, 129, 130], [231, 232, 233])] = 1
    fields = {"IVTV": np.full(classes.shape, 100.0)}
    fields["IVTV"][0, 0] = np.nan  # missing values: the field's median
    out = rule_classes(classes, fields, LAT, LON, ARConfig())
    assert out.dtype == np.uint8
    assert (out[130, 0:30] == 2).all() and not (out[95:97] == 2).any()
    assert (out[128:131, 231:234] == 1).all()  # storms stay
    assert not (out[130, 226:231] == 2).any() and (out[130, 200:226] == 2).all()  # 5 steps
    assert set(np.unique(out).tolist()) == {0, 1, 2}
    equatorward = {"IVTV": np.full(classes.shape, -100.0)}
    assert not (rule_classes(classes, equatorward, LAT, LON, ARConfig()) == 2).any()
    nothing = {"IVTV": np.full(classes.shape, np.nan)}
    assert (rule_classes(classes, nothing, LAT, LON, ARConfig()) == 2).any()  # 0 reaches 0


def test_transport_rivers_report_their_maximum_ivt_and_wind():
    mask = _band([130, 131], range(0, 30))
    ivt = np.where(mask, 400.0, 100.0)
    ivt[131, 10] = 900.0
    u = np.where(mask, 10.0, 0.0)
    u[130, 5] = 30.0
    fields = {"IVT": ivt, "IVTV": ivt, "U850": u, "V850": np.zeros_like(u)}
    found, table = transport_rivers(fields, LAT, LON, ARConfig(split_ratio=None))
    np.testing.assert_array_equal(found, mask)
    assert table.max_ivt.tolist() == [900.0] and table.max_wind.tolist() == [30.0]
    nothing, empty = transport_rivers({"IVT": np.full(mask.shape, 100.0)}, LAT, LON, ARConfig())
    assert not nothing.any() and empty.empty and {"max_ivt", "max_wind"} <= set(empty.columns)
    tropical = {"IVT": np.where(_band([95, 96], range(0, 30)), 900.0, 0.0)}
    assert not transport_rivers(tropical, LAT, LON, ARConfig(ivt_min_poleward=None))[0].any()
